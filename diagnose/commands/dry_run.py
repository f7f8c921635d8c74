"""What a run would do, shown without doing it: ``diagnose run --list-hosts`` and ``--check``.

Operators check an inventory change before a night of runs the way they do with Ansible: which hosts a
pattern selects and how they are reached, which profile and expected values each host ends up with
after every group_vars/host_vars level and ``-e``, the exact commands each check would run, every
benchmark and extra the playbook switches on with its settings, and how long it will all take. Hosts
that share their variables, and hosts that share their commands, are shown once as a group
(``node[01-04]``): a thousand-node inventory reads as a handful of blocks. Nothing here opens a
connection or writes a file.

``--check`` is a list of sections (:data:`SECTIONS`), each a function of the run request returning its
lines; a new concern adds its own function there.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from typing import Any

from diagnose import history
from diagnose.benchmarks.nccl_tests_argv import BINARIES, Settings, binary_path
from diagnose.benchmarks.straggler import refuse_shared_master
from diagnose.config.extra_vars import parse_extra_vars
from diagnose.config.playbook import PROFILE_VARIABLE, BenchmarkPlan
from diagnose.core.check import Check
from diagnose.core.errors import ConfigError
from diagnose.core.hosts import Host
from diagnose.core.units import counted, duration, human_bytes
from diagnose.engine.estimate import estimate, one_rank, ranks_per_host, total
from diagnose.engine.host_batch import commands_of
from diagnose.engine.profile_hint import NO_PROFILE_MEANING
from diagnose.engine.run import RunRequest
from diagnose.history.durations import past_runs
from diagnose.history.storage import series_key
from diagnose.probes.perftest_settings import settings_from as perftest_settings
from diagnose.probes.registry import EXTRAS, enabled
from diagnose.probes.stress import DEFAULT_MEMTEST_S
from diagnose.probes.training import ProbeSettings
from diagnose.quarantine.plan import quarantine_plan_lines
from diagnose.render.hostlist import summarize
from diagnose.targets.view import PER_HOST_VARS, hidden_names, list_hosts, var_groups

#: Above this many hosts, ``--check`` folds the host list by how hosts are reached.
HOST_LIST_LIMIT = 32


def _reach(row: dict[str, Any], with_address: bool = True) -> str:
    if row["connection"] == "local":
        return "local"
    user = f"{row['user']}@" if row["user"] else ""
    port = f":{row['port']}" if row["port"] else ""
    return f"{row['connection']} {user}{row['address'] if with_address else '<host>'}{port}"


def host_lines(hosts: Sequence[Host]) -> list[str]:
    """One line per host: name, how it is reached, its groups."""
    rows = list_hosts(hosts)
    width = max((len(r["name"]) for r in rows), default=4)
    lines = [f"hosts ({len(rows)}):"]
    for row in rows:
        groups = ",".join(row["groups"]) or "ungrouped"
        lines.append(f"  {row['name']:<{width}}  {_reach(row)}  groups={groups}")
    return lines


def folded_host_lines(hosts: Sequence[Host]) -> list[str]:
    """Hosts folded by how they are reached and their groups (``node[001-512]  ssh ops@<host>``)."""
    if len(hosts) <= HOST_LIST_LIMIT:
        return host_lines(hosts)
    folds: dict[tuple[str, str], list[str]] = {}
    for row in list_hosts(hosts):
        key = (_reach({**row, "port": None}, with_address=False), ",".join(row["groups"]) or "ungrouped")
        folds.setdefault(key, []).append(row["name"])
    lines = [f"hosts ({len(hosts)}, folded by connection and groups; --list-hosts lists each):"]
    lines += [f"  {summarize(names)}  {reach}  groups={groups}" for (reach, groups), names in folds.items()]
    return lines


def _who(names: list[str]) -> str:
    return names[0] if len(names) == 1 else f"{summarize(names)} ({len(names)} hosts)"


def yaml_word(value: object) -> str:
    """A variable's value as the operator writes it in YAML (true, false), and an unset one as "not set":
    Python's None and False are no words of the inventory or the playbook."""
    if value is None:
        return "not set"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def variable_lines(request: RunRequest) -> list[str]:
    """One block per distinct set of merged variables, with its profile."""
    given = set(parse_extra_vars(request.options.extra_vars))
    groups = var_groups(request.hosts, given)
    by_name = {h.name: h for h in request.hosts}
    lines = [f"\nvariables: {counted(len(groups), 'distinct set')}"]
    for names, shown in groups:
        profile = shown.get(PROFILE_VARIABLE)
        lines.append(f"\n{_who(names)}: profile {profile or 'none'}")
        if not profile:
            lines.append(f"  (no profile: {NO_PROFILE_MEANING}; the run suggests one after the host stage)")
        lines += [f"  {key} = {yaml_word(value)}" for key, value in shown.items()]
        own = sorted({k for name in names for k in by_name[name].vars if k in PER_HOST_VARS})
        if len(names) > 1 and own:
            lines.append(f"  ({', '.join(own)}: each host's own, in the host list)")
    return lines + hidden_lines(request.hosts, given)


def hidden_lines(hosts: Sequence[Host], given: Collection[str]) -> list[str]:
    """What the variables above leave out, said rather than silent: the names whose values are masked (a
    path to a key is shown, it is no secret) and how many inventory variables diagnose has no use for."""
    masked, left_out = hidden_names(hosts, given)
    lines = []
    if masked:
        lines.append(f"\nhidden: the values of {', '.join(masked)} (REDACTED: their names look secret)")
    if left_out:
        lines.append(
            f"not shown: {counted(left_out, 'other variable')} of the inventory, which diagnose does not "
            "read (-e NAME=... shows one)"
        )
    return lines


def command_lines(request: RunRequest) -> list[str]:
    """Each distinct batch of check commands once, with the hosts that run it and each command's timeout."""
    batches: dict[tuple[tuple[str, str, float], ...], list[str]] = {}
    for host in request.hosts:
        commands = tuple((c.key, c.script, c.timeout) for c in commands_of(request.host_checks, host.vars))
        batches.setdefault(commands, []).append(host.name)
    lines = []
    for commands, names in batches.items():
        lines.append(f"\ncommands on {_who(names)}, in one batch, each under its own timeout:")
        lines += [f"  [{key}] {script}  (timeout {timeout:g} s)" for key, script, timeout in commands]
    return lines


def check_lines(request: RunRequest) -> list[str]:
    checks: Sequence[Check] = request.host_checks
    cluster = [c.id for c in request.cluster_checks]
    lines = [f"\nchecks ({len(checks)} per host): {', '.join(c.id for c in checks)}"]
    if cluster:
        lines.append(f"cluster-wide ({len(cluster)}): {', '.join(cluster)}")
    if request.custom_modules:
        lines.append(f"custom checks (testinfra): {', '.join(str(p) for p in request.custom_modules)}")
    return lines


def _plan(request: RunRequest) -> BenchmarkPlan | None:
    plan = request.playbook.benchmarks
    return plan if plan and plan.enabled and not request.options.skip_benchmarks else None


def sweep_lines(request: RunRequest) -> list[str]:
    """The collective sweep: collectives, sizes, tool, backend, ranks, iterations, and localization."""
    plan = _plan(request)
    if plan is None:
        why = "--skip-benchmarks" if request.options.skip_benchmarks else "the playbook has none"
        return [f"\nbenchmarks: none ({why})"]
    hosts, first = request.hosts, request.hosts[0] if request.hosts else None
    sizes = plan.sizes()
    backend = first.vars.str("bench_backend") if first else None
    ranks = ranks_per_host(first) if first else 1
    lines = [
        f"\nbenchmark sweep: {', '.join(plan.collectives)} with {plan.tool}"
        + (" (--tool)" if request.options.tool else ""),
        f"  sizes: {human_bytes(sizes[0])} to {human_bytes(sizes[-1])}, ×{plan.step_factor} ({len(sizes)} sizes)"
        if sizes
        else "  sizes: none",
        f"  iterations: {plan.warmup_iters} warm-up + {plan.iters} timed per size"
        + (f"; at most {plan.timeout_s:g} s a size" if plan.timeout_s else ""),
        f"  backend: {backend or 'nccl on GPU hosts, gloo on CPU hosts (from the host facts; bench_backend sets it)'}",
        f"  ranks: {counted(len(hosts), 'host')} × {ranks} = {len(hosts) * ranks} (bench_gpus_per_host, else expected_gpu_count)",
    ]
    if plan.tool == "nccl-tests" and first is not None:
        lines.append(f"  nccl-tests: {nccl_tests_line(plan, first, len(hosts))}")
    alone = one_rank(hosts)
    if alone:
        lines.append(f"  SKIP: {alone}")
    if plan.straggler_isolation and len(hosts) > 2:
        lines.append(
            "  localization: if a collective is short, the slow host or link is searched for "
            "(straggler_isolation)"
        )
        try:
            refuse_shared_master(hosts)
        except ConfigError as exc:
            lines.append(f"  localization would not run: {exc}")
    else:
        why = "straggler_isolation off" if not plan.straggler_isolation else "needs more than 2 hosts"
        lines.append(f"  localization: off ({why})")
    return lines


def nccl_tests_line(plan: BenchmarkPlan, first: Host, hosts: int) -> str:
    """Which binaries run and how they start, or why they cannot: the operator sees a missing
    nccl_tests_dir before the run rather than as an ERROR per collective after the host checks."""
    settings = Settings.of(first.vars)
    if settings.directory is None:
        fallback = (
            "torch measures instead (nccl_tests_fallback)" if settings.fallback else "each would be an ERROR"
        )
        return f"nccl_tests_dir is not set, so no binary can run: {fallback}"
    binaries = ", ".join(binary_path(settings.directory, c) for c in plan.collectives if c in BINARIES)
    how = f"under {settings.mpirun} across the {hosts} hosts" if hosts > 1 else "on the one host"
    return f"{binaries or 'no binary for these collectives'}, {how}"


def _extra_settings(key: str, hosts: Sequence[Host], plan: BenchmarkPlan) -> str:
    """The settings one extra after the sweep runs with, from the first host (as the extras read them)."""
    v = hosts[0].vars
    alone = one_rank(hosts)
    if key in ("training_probe", "kv_transfer") and alone:
        return f"SKIP: {alone}"
    if key == "fleet_probes":
        names = ("fleet_mad_k", "fleet_min_rel_dev_pct", "min_host_copy_gbps", "min_peer_copy_gbps")
        chosen = ", ".join(f"{n} {v.get(n)}" for n in names if v.get(n) is not None)
        return f"busbw, host↔GPU and peer copies per host against the fleet median ({chosen or 'defaults'})"
    if key == "training_probe":
        probe = ProbeSettings.from_vars(v)
        gpu, cpu = probe.resolved("nccl"), probe.resolved("gloo")
        caps = ", ".join(f"{c:g}" for c in probe.bucket_caps)
        return (
            f"DDP bucket sizes {caps} MB; {gpu['params_m']:g} M params, {gpu['steps']} steps on GPU "
            f"({cpu['params_m']:g} M, {cpu['steps']} on CPU)"
        )
    if key == "kv_transfer":
        names = ("kv_model", "kv_request_tokens", "kv_prefill_gpus", "kv_decode_gpus", "kv_repeats")
        return ", ".join(f"{n} {v.get(n)}" for n in names if v.get(n) is not None) or "program defaults"
    if key == "perftest":
        if len(hosts) < 2:
            return "SKIP: a NIC is measured against a partner on another host, and there is one host"
        s = perftest_settings(v)
        return (
            f"{counted(len(hosts) // 2, 'pair')} a round over {counted(v.int('expected_hca_count') or 1, 'rail')}, "
            f"{human_bytes(s.message_bytes)} writes for {s.duration_s} s per direction, "
            f"ports {s.ports[0]}-{s.ports[1]}, budget {s.budget_s:g} s"
            + (", latency (ib_write_lat) too" if plan.perftest_latency else "")
        )
    if key == "stress":
        memtest = v.float("memtest_seconds", DEFAULT_MEMTEST_S)
        return (
            f"GEMM, HBM, memtest {memtest:g} s, bitwise checks, burn-in {v.float('burnin_minutes', 0.0):g} min "
            f"(gemm_max_below_ref_pct {yaml_word(v.get('gemm_max_below_ref_pct'))}, "
            f"hbm_max_below_ref_pct {yaml_word(v.get('hbm_max_below_ref_pct'))} under the measured references)"
        )
    return "on"


def extra_lines(request: RunRequest) -> list[str]:
    """Every benchmark after the sweep that is on, with its settings; the ones that are off, named."""
    plan = _plan(request)
    if plan is None or not request.hosts:
        return []
    on = enabled(plan)
    lines = ["\nafter the sweep:" if on else "\nafter the sweep: nothing"]
    lines += [f"  {e.plan_key}: {_extra_settings(e.plan_key, request.hosts, plan)}" for e in on]
    off = [e.plan_key for e in EXTRAS if e not in on]
    if off:
        lines.append(f"  off: {', '.join(off)}")
    return lines


def history_lines(request: RunRequest) -> list[str]:
    nightly, db = request.playbook.nightly, request.history_db
    lines = []
    if db is not None:
        lines.append(f"\nhistory: recorded in {db}; regressions and trends judged against earlier runs")
    if nightly is not None:
        keep = ", ".join(
            part
            for part in (
                f"{nightly.keep_runs} runs" if nightly.keep_runs else "",
                f"{nightly.keep_days:g} days" if nightly.keep_days else "",
            )
            if part
        )
        lines.append(
            f"nightly: time budget {duration(nightly.time_budget_s)}, busbw drop > {nightly.busbw_drop_pct:g} % "
            f"is a regression, keeps {keep or 'every run'}, one lock per history"
        )
    return lines


def estimate_lines(request: RunRequest) -> list[str]:
    """Per stage the typical duration and its bound, and the total: an estimate, with its basis."""
    stages = estimate(
        request.hosts, request.host_checks, request.playbook.benchmarks, request.options.forks,
        request.options.skip_benchmarks, request.playbook.nightly, request.formats,
    )  # fmt: skip
    width = max(len(s.stage) for s in stages)
    lines = [
        "\nestimated duration (an estimate from the model: typical figures measured on real runs of other "
        "machines, bounds from timeouts and budgets):",
        f"  {'stage':<{width}}  {'typical':>12}  {'bound':>14}  basis",
    ]
    for s in stages:
        upper = f"≤ {duration(s.upper_s)}" if s.upper_s is not None else "none"
        typical = f"~{duration(s.typical_s)}" if s.typical_s else "—"
        extra = "" if s.counted else " (not in the total)"
        lines.append(f"  {s.stage:<{width}}  {typical:>12}  {upper:>14}  {s.basis}{extra}")
    typical, upper = total(stages)
    unbounded = [s.stage for s in stages if s.counted and s.upper_s is None]
    bound = f"≤ {duration(upper)}" if upper is not None else "none"
    why = f"no set time bounds {', '.join(unbounded)}" if unbounded else ""
    lines.append(f"  {'total':<{width}}  {'~' + duration(typical):>12}  {bound:>14}  {why}".rstrip())
    return lines + past_run_lines(request, typical)


def series_of(request: RunRequest) -> tuple[str, str]:
    """The history series the run would record into, keyed as :meth:`diagnose.engine.run.Run` keys it."""
    options = request.options
    inventory = str(request.inventory) if request.inventory else "inventory/local.yaml"
    if len(options.inventories) > 1:
        inventory = ", ".join(options.inventories)
    if request.slurm is not None:
        inventory = ", ".join([request.slurm.label, *options.inventories])
    return series_key({"inventory": inventory, "playbook": request.playbook.name, "limit": options.limit})


def past_run_lines(request: RunRequest, model_s: float) -> list[str]:
    """The estimate from this machine's own earlier runs of the series, where the history has some: they
    carry its load and its hosts, which the model cannot. Which figure to book by is said, and why."""
    db = request.history_db or history.default_db_path()
    past = past_runs(db, series_of(request), benchmarks=_plan(request) is not None)
    if past is None:
        return [f"\nno earlier run of this inventory and playbook in {db}: the model's figures stand alone"]
    runs, low, high = len(past.seconds), min(past.seconds), max(past.seconds)
    spread = duration(low) if runs == 1 else f"{duration(low)} to {duration(high)}"
    lines = [
        f"\nfrom this machine's history ({db}): the last {counted(runs, 'run')} of this inventory and "
        f"playbook took {spread}"
    ]
    if past.stages:
        each = ", ".join(f"{stage} {duration(s)}" for stage, s in past.stages.items())
        lines.append(f"  by stage, median of the {counted(past.staged, 'run')} that recorded them: {each}")
    lines.append(
        f"  expect ~{duration(past.median_s)} (the median of those runs, made on this machine under its own "
        f"load); the model above says ~{duration(model_s)}"
    )
    return lines


#: The sections of ``--check``, in order. A new concern adds one function here.
SECTIONS: list[Callable[[RunRequest], list[str]]] = [
    lambda request: folded_host_lines(request.hosts),
    variable_lines,
    command_lines,
    check_lines,
    sweep_lines,
    extra_lines,
    history_lines,
    quarantine_plan_lines,
    estimate_lines,
]


def plan_lines(request: RunRequest) -> list[str]:
    """The whole plan, section by section."""
    return [line for section in SECTIONS for line in section(request)]


def dry_run_lines(request: RunRequest, show_commands: bool) -> list[str]:
    """``--check`` (``show_commands``): the whole plan; ``--list-hosts``: the hosts only."""
    if not show_commands:
        return host_lines(request.hosts)
    return plan_lines(request)
