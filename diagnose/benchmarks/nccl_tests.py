"""nccl-tests instead of torch: ``<collective>_perf`` on one host, or under ``mpirun`` across several.

Sites that have built nccl-tests trust its numbers. With ``benchmarks.tool: nccl-tests`` the stage measures
with those binaries instead of its own program and judges the result the same way
(:mod:`diagnose.benchmarks.expect`); the entries say ``"tool": "nccl-tests"``.

Variables (read from the first host, so set them for ``all``, in the playbook's ``vars`` or with ``-e``;
``nccl_tests_mpi_host`` is per host):

* ``nccl_tests_dir``: the folder holding all_reduce_perf, reduce_scatter_perf, all_gather_perf,
  alltoall_perf, broadcast_perf and sendrecv_perf (nccl-tests' ``build/``), the same path on every host;
* ``mpirun``: the launcher across nodes, a path or a name on the first host's PATH (default ``mpirun``).
  Open MPI's options are used (``-np``, ``-H host:slots``, ``-x VAR``); reaching the other hosts is the
  launcher's business, set up by the site as for any MPI job;
* ``nccl_tests_mpi_args``: more launcher arguments, as shell words or a YAML list
  (``--allow-run-as-root -x LD_LIBRARY_PATH``);
* ``nccl_tests_mpi_host``: the name ``-H`` gives this host (default: its address, ``ansible_host``);
* ``nccl_tests_fallback``: ``torch`` measures with torch what nccl-tests cannot run; unset, such a
  collective is an ERROR.

How a run goes:

1. one cheap command per host checks that the binaries exist and are executable and, across nodes, that
   the launcher is found; the first host also names the NCCL_* variables of its login environment, which
   ``mpirun -x`` forwards (ranks started by mpirun get its environment, not their host's login). Each
   host that falls short is a ``bench.nccl_tests`` ERROR (WARN with the torch fallback) saying what is missing there;
2. per collective, one job on the first host (:mod:`diagnose.launchers.mpirun`): the binary itself
   with ``-g <gpus>`` on one node, ``mpirun -np <nodes × gpus> -H ... <binary> ... -g 1`` across nodes,
   NCCL's INFO log on. It is followed, stopped and cleaned up like a torchrun job
   (:mod:`diagnose.launchers.base`): the table is read row by row as it grows (:class:`TableFollower`), so
   a hang is named by size, the rows before it are kept, and every process carrying the launch's token is
   killed on every host of the job;
3. its output, table and INFO lines together, is the evidence ``raw/<first host>/nccl-tests-<collective>.log``:
   rows come from the nccl-tests parser, the transport from the NCCL log parser.

Rows keep nccl-tests' out-of-place time and bandwidths (the columns its users read). Wrong results count
over both placements: a corrupted in-place result is as broken as an out-of-place one. Current nccl-tests
count wrong elements (``#wrong``). Older ones print the largest deviation from the expected value
(``error``); a deviation within nccl-tests' own tolerance for the type is rounding (wrong 0), one beyond
it means at least one element is wrong (wrong 1, marked ``wrong_is_lower_bound``).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from diagnose.benchmarks.expect import Expectation, expected_busbw
from diagnose.benchmarks.nccl_tests_argv import (
    BINARIES,
    PREFLIGHT_TIMEOUT_S,
    HostCheck,
    Settings,
    blocked_collectives,
    command_argv,
    preflight_script,
    read_preflight,
    sweep_args,
)
from diagnose.benchmarks.setup import CHECKLIST, Setup, StageServices, launch_env, startup_timeout_s
from diagnose.catalog.stage_ids import BENCH_NCCL_TESTS, bench_id
from diagnose.core.check import ParseError
from diagnose.core.hosts import Host
from diagnose.core.model import CheckResult, CommandOutput
from diagnose.core.redact import redact_assignments
from diagnose.core.units import counted
from diagnose.launchers.base import LaunchOutcome, LaunchSpec, run_launch
from diagnose.launchers.mpirun import NCCL_LINE, MpirunLaunch
from diagnose.parsers.nccl_tests import parse_nccl_tests
from diagnose.shipped import collective_bench

#: The largest deviation old nccl-tests accept per type column (DeltaMaxValue in its common.cu);
#: integer types, and any type not listed, must be exact.
TOLERANCE = {
    "float": 1e-5,
    "float32": 1e-5,
    "half": 1e-2,
    "float16": 1e-2,
    "bfloat16": 1e-2,
    "double": 1e-12,
    "float64": 1e-12,
}
CHECK_ID = BENCH_NCCL_TESTS


# ------------------------------------------------------------------------------------------ the results


def tolerance_of(type_name: str | None) -> float:
    return TOLERANCE.get((type_name or "").lower(), 0.0)


def result_row(row: Mapping[str, Any]) -> dict[str, Any]:
    """One parsed nccl-tests row as a results.json row (see the module docstring for ``wrong``)."""
    result: dict[str, Any] = {
        "bytes": row["bytes"],
        "time_us": row["time_us"],
        "algbw_gbps": row["algbw_gbps"],
        "busbw_gbps": row["busbw_gbps"],
        "wrong": None,
    }
    placements = [row, row["in_place"]] if "in_place" in row else [row]
    if "error" not in row:
        counts = [p["wrong"] for p in placements if p.get("wrong") is not None]
        result["wrong"] = sum(counts) if counts else None
        return result
    deviations = [p["error"] for p in placements if p.get("error") is not None]
    flagged = any(p.get("error_flagged") for p in placements)
    if not deviations and not flagged:
        return result  # validation was off: nothing is known
    largest = max(deviations, default=None)
    beyond = flagged or (largest is not None and largest > tolerance_of(row.get("type")))
    result["wrong"] = 1 if beyond else 0
    result["max_error"] = largest
    if beyond:
        result["wrong_is_lower_bound"] = True
    return result


class TableFollower:
    """Turns nccl-tests output, fed as it arrives, into the launcher's progress records.

    The table is short, so every feed re-reads it whole with the nccl-tests parser (one parser, however
    the header looks), leaving NCCL's INFO lines out first: they are most of the output. The header is the
    ``start`` (the communicators are up), the first row also marks the warm-up as done, the ``Avg bus
    bandwidth`` line is the ``done``. Rows of 0 bytes (sizes below one element per rank) measure nothing
    and are dropped, as the torch program never makes them.
    """

    def __init__(self, collective: str) -> None:
        self.collective = collective
        self._lines: list[str] = []
        self._seen = 0
        self._started = False
        self._finished = False

    def feed(self, lines: Iterable[str]) -> list[dict[str, Any]]:
        fresh = [line for line in lines if not NCCL_LINE.search(line)]
        if not fresh:
            return []
        self._lines.extend(fresh)
        try:
            facts = parse_nccl_tests("\n".join(self._lines))
        except ParseError:
            return []
        records: list[dict[str, Any]] = []
        if not self._started:
            self._started = True
            records.append({"event": "start", "tool": "nccl-tests", "ranks": facts["ranks"]})
        for row in facts["rows"][self._seen :]:
            if self._seen == 0:
                records.append({"event": "warm", "collective": self.collective})
            self._seen += 1
            if row["bytes"]:
                records.append({"event": "row", "collective": self.collective, **result_row(row)})
        if not self._finished and any("Avg bus bandwidth" in line for line in fresh):
            self._finished = True
            records.append({"event": "done"})
        return records


# ----------------------------------------------------------------------------------------------- the run


@dataclass
class Handoff:
    """What is left for torch: the collectives (with ``nccl_tests_fallback: torch``) and the note their
    entries carry; ``measured`` says whether nccl-tests ran anything (and so judged the transport)."""

    collectives: list[str]
    note: str
    measured: bool


class NcclTestsBench:
    """The nccl-tests side of one benchmark stage; :meth:`run` emits its checks and entries.

    ``stage`` is the benchmark stage seen through :class:`~diagnose.benchmarks.setup.StageServices`: entries,
    verdicts and pair runs are the stage's own, so nccl-tests and torch results are judged alike.
    """

    def __init__(self, stage: StageServices, setup: Setup) -> None:
        assert stage.first is not None
        self.stage = stage
        self.ctx = stage.ctx
        self.plan = stage.ctx.plan
        self.setup = setup
        self.first = stage.first
        self.settings = Settings.of(self.first.vars)
        self.env_names: list[str] = []
        self.commands: dict[tuple[str, tuple[str, ...]], str] = {}

    # -- what can run -----------------------------------------------------------------------------------
    def preflight(self, collectives: list[str]) -> dict[str, str]:
        """Check every host; emit an ERROR per host that falls short; why each collective cannot run."""
        settings, hosts = self.settings, self.setup.hosts
        assert settings.directory is not None
        launcher = settings.mpirun if len(hosts) > 1 else None
        binaries = [BINARIES[c] for c in collectives]

        def check(host: Host) -> CommandOutput:
            script = preflight_script(settings.directory or "", binaries, launcher, host is hosts[0])
            try:
                return self.ctx.connections[host.name].run(script, timeout=PREFLIGHT_TIMEOUT_S)
            except Exception as exc:  # a broken connection is this host's problem, not the run's
                return CommandOutput(error=f"{type(exc).__name__}: {exc}")

        with ThreadPoolExecutor(max_workers=max(1, min(32, len(hosts)))) as pool:
            outputs = dict(zip([h.name for h in hosts], pool.map(check, hosts), strict=True))
        checks = {name: read_preflight(output) for name, output in outputs.items()}
        self.env_names = checks[hosts[0].name].env_names
        for name, found in checks.items():
            problems = self._problems(found, launcher)
            if problems:
                self._emit_problem(name, problems, found)
        return blocked_collectives(checks, collectives, launcher)

    def _problems(self, found: HostCheck, launcher: str | None) -> list[str]:
        if found.error:
            return [f"could not check for nccl-tests: {found.error}"]
        problems = [
            f"{binary} is {state} in {self.settings.directory}" for binary, state in found.binaries.items()
        ]
        if launcher is not None and not found.launcher_found:
            problems.append(f"the launcher {launcher} was not found (variable mpirun)")
        return problems

    def _emit_problem(
        self, host: str | None, problems: list[str], found: HostCheck | None = None, then: str | None = None
    ) -> None:
        where = f" on {host}" if host else ""
        if then is None:
            then = (
                "; measured with torch instead (nccl_tests_fallback: torch)"
                if self.settings.fallback
                else "; the collectives that need it are not measured"
            )
        self.ctx.emit_check(
            CheckResult(
                CHECK_ID,
                host,
                CHECKLIST,
                # With a fallback the site asked for, the collectives are still measured: works, not as
                # recommended. Without one they go unmeasured, so the run cannot be judged.
                "WARN" if self.settings.fallback else "ERROR",
                observed={"missing": dict(found.binaries), "launcher_found": found.launcher_found}
                if found is not None and not found.error
                else None,
                expected=f"nccl-tests binaries executable in {self.settings.directory}"
                if self.settings.directory
                else None,
                message=f"nccl-tests cannot run{where}: {'; '.join(problems)}{then}",
                remediation=(
                    "Build nccl-tests (with MPI=1 for several nodes) into the same folder on every host and "
                    "point nccl_tests_dir at it, make the launcher findable (variable mpirun), or set "
                    "nccl_tests_fallback: torch to measure with torch meanwhile."
                ),
            )
        )

    # -- one launch -------------------------------------------------------------------------------------
    def launch(
        self,
        setup: Setup,
        hosts: list[Host],
        tag: str,
        collectives: list[str],
        min_bytes: int,
        max_bytes: int,
    ) -> LaunchOutcome:
        """One nccl-tests job of one collective on ``hosts``; the same signature as the stage's launch."""
        stage, plan, ctx = self.stage, self.plan, self.ctx
        (collective,) = collectives
        ranks = len(hosts) * setup.nproc
        sweep = sweep_args(min_bytes, max_bytes, plan.step_factor, plan.warmup_iters, plan.iters, stage.dtype)
        env = launch_env(self.first, setup.backend)
        argv = command_argv(self.settings, collective, hosts, setup.nproc, sweep, env, self.env_names)
        command = shlex.join(argv)
        self.commands[(collective, tuple(h.name for h in hosts))] = shlex.join(redact_assignments(argv))
        sizes = collective_bench.sweep(min_bytes, max_bytes, float(plan.step_factor))
        budget = stage.row_budget(setup.backend, len(hosts), setup.nproc)
        spec = LaunchSpec(
            run_id=ctx.run_id,
            tag=f"nccl-tests-{collective}" if tag == "main" else tag,
            hosts=[hosts[0]],
            connections=ctx.connections,
            nproc=setup.nproc,
            backend=setup.backend,
            program_args=[],
            expected_rows=stage.expected_rows([collective], sizes, ranks),
            # Each size runs twice (out-of-place, in-place): twice the torch program's budget, unless the
            # playbook fixed the budget itself.
            row_budget_s=budget if plan.timeout_s else (lambda c, n: 2 * budget(c, n)),
            out_dir=ctx.out_dir,
            startup_timeout_s=startup_timeout_s(self.first),
            deadline=ctx.deadline,
            env=env,
            told=ctx.told,
        )
        suffix = "" if tag == "main" else "." + re.sub(r"[^A-Za-z0-9._-]", "_", tag)
        evidence = f"nccl-tests-{collective}{suffix}.log"
        job = MpirunLaunch(
            spec,
            command,
            runner="mpirun" if len(hosts) > 1 else BINARIES[collective],
            others=hosts[1:],
            evidence=evidence,
            decode=TableFollower(collective).feed,
        )
        return run_launch(job)

    # -- the stage --------------------------------------------------------------------------------------
    def run(self, collectives: list[str]) -> Handoff:
        """Measure ``collectives`` with nccl-tests where it can run; hand the rest to torch if allowed."""
        setup, settings = self.setup, self.settings
        if settings.problem:
            self._emit_problem(None, [settings.problem], then="; the variable is ignored")
        if setup.backend != "nccl":
            reason = "no GPU was found on the hosts and nccl-tests needs GPUs (bench_gpus_per_host overrides)"
            self._emit_problem(None, [reason])
            blocked = dict.fromkeys(collectives, reason)
        elif settings.directory is None:
            reason = "the variable nccl_tests_dir (the folder of the *_perf binaries) is not set"
            self._emit_problem(None, [reason])
            blocked = dict.fromkeys(collectives, reason)
        else:
            blocked = self.preflight(collectives)
        fallback = [c for c in collectives if c in blocked] if settings.fallback == "torch" else []
        outcomes: list[LaunchOutcome] = []
        short: list[str] = []
        for collective in collectives:
            if collective in fallback:
                continue
            if collective in blocked:
                self._emit_unmeasured(collective, f"nccl-tests cannot run: {blocked[collective]}")
                continue
            outcome = self.launch(
                setup, setup.hosts, "main", [collective], self.plan.min_bytes, self.plan.max_bytes
            )
            outcomes.append(outcome)
            record, expectation = self._entry(collective, outcome)
            self.ctx.emit_benchmark(record)
            self.ctx.emit_check(self.stage.as_check(record, expectation, outcome))
            self.stage.report_cleanup(outcome)
            if record["status"] == "FAIL" and "below the normal range" in record["message"]:
                short.append(collective)
        if outcomes:
            self._judge_transport(outcomes)
        if short and len(setup.hosts) > 2 and self.plan.straggler_isolation:
            self.stage.isolate(setup, short[0], self.launch)
        note = ""
        if fallback:
            reasons = "; ".join(dict.fromkeys(blocked[c] for c in fallback))
            note = f"measured with torch: nccl-tests cannot run ({reasons}); nccl_tests_fallback: torch"
        return Handoff(fallback, note, bool(outcomes))

    def _entry(self, collective: str, outcome: LaunchOutcome) -> tuple[dict[str, Any], Expectation]:
        setup = self.setup
        transport = self.stage.transport(outcome)
        record, expectation = self.stage.entry(
            collective, setup, setup.hosts, outcome, transport, tool="nccl-tests"
        )
        record["command"] = self.commands.get((collective, tuple(h.name for h in setup.hosts)))
        log = outcome.logs.get(0)
        summary = None
        if log is not None and log.exists():
            try:
                summary = parse_nccl_tests(log.read_text(errors="replace"))
            except ParseError:
                summary = None
        rows = record["rows"]
        flagged = summary["out_of_bounds"] if summary else None
        if flagged and not any(r["wrong"] for r in rows):
            # nccl-tests counted values out of bounds that no row shows (a size cut off, a format quirk):
            # its own verdict stands.
            record["status"] = "FAIL"
            record["message"] = (
                f"{collective}: nccl-tests reported {counted(flagged, 'out-of-bounds value')} (Out of bounds values : "
                f"{flagged} FAILED); {record['message']}"
            )
        elif rows and all(r["wrong"] is None for r in rows):
            record["message"] += "; results not validated (nccl-tests printed no #wrong or error values)"
        elif any("max_error" in r for r in rows) and not any(r["wrong"] for r in rows):
            largest = max(r.get("max_error") or 0.0 for r in rows)
            record["message"] += (
                f"; validated: largest deviation {largest:g}, within nccl-tests' tolerance (this nccl-tests "
                "version prints a deviation, not a count of wrong elements)"
            )
        return record, expectation

    def _emit_unmeasured(self, collective: str, why: str) -> None:
        setup = self.setup
        nodes = len(setup.hosts)
        expectation = expected_busbw(collective, nodes, setup.nproc, self.first.vars)
        record = {
            "collective": collective,
            "tool": "nccl-tests",
            "backend": setup.backend,
            "hosts": [h.name for h in setup.hosts],
            "nodes": nodes,
            "ranks": nodes * setup.nproc,
            "transport": {"inter_node": None, "intra_node": None, "gdrdma": None},
            "rows": [],
            "expected_busbw_gbps": expectation.expected_gbps if setup.backend == "nccl" else None,
            "status": "ERROR",
            "message": f"{collective} not measured: {why}",
        }
        self.ctx.emit_benchmark(record)
        self.ctx.emit_check(
            CheckResult(
                bench_id(collective),
                None,
                CHECKLIST,
                "ERROR",
                observed=None,
                expected=record["expected_busbw_gbps"],
                message=record["message"],
            )
        )

    def _judge_transport(self, outcomes: list[LaunchOutcome]) -> None:
        """One nccl.transport check over the logs of every nccl-tests job of the stage."""
        logs = {index: path for index, path in enumerate(p for o in outcomes for p in o.logs.values())}
        combined = LaunchOutcome("done", "", logs=logs)
        summary = self.stage.transport(combined)
        self.ctx.emit_check(self.stage.judge_transport(self.setup, summary, combined))
