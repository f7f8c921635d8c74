"""The benchmark stage: collectives across the reachable, healthy hosts, judged against the profile.

The engine calls :func:`run_benchmark_stage` once, after the host checks, with a :class:`BenchContext`.
The stage picks the backend and ranks per host from the host facts (NCCL, one rank per GPU; gloo on
hosts without GPUs — it proves the plumbing, never the fabric), launches the playbook's sweep through
:mod:`diagnose.launchers.torchrun`, and reports:

* one ``nccl.transport`` check: which transport NCCL really used between and inside the nodes, read from
  the connection lines of every rank's INFO log (NET/Socket between nodes where the profile expects RDMA
  is a FAIL: a TCP fallback);
* per collective, one ``benchmarks`` entry of results.json and a ``bench.<collective>`` check with the
  same verdict: wrong elements fail it, large-message busbw below the normal range for this node count
  fails it, and a run that hung, crashed or lost a host is an ERROR that keeps the rows measured before;
* when a multi-node result falls short, a search over host groups names the slow host(s) or link(s)
  (``bench.straggler``, ``bench.link``, and the ``localization`` record: :mod:`diagnose.benchmarks.straggler`).

The playbook's ``benchmarks.tool`` picks what measures: ``torch`` (diagnose's own program, shipped to the
hosts and started with torchrun) or ``nccl-tests`` (the site's own binaries, started directly on one node
or with an MPI launcher across nodes: :mod:`diagnose.benchmarks.nccl_tests`). Both are judged alike.

Variables (read from the first host unless said otherwise; any inventory level, the playbook's ``vars``
or ``-e``):

* ``bench_gpus_per_host`` ranks per host instead of the GPUs the checks found; ``bench_backend: gloo``
  forces gloo; ``bench_procs_per_host`` gloo ranks per host (default 1);
* ``bench_dtype`` element type (float32, float16, bfloat16, float64, int32; default float32);
* ``bench_env`` more environment for the ranks (a mapping, or ``K=V,K=V``);
* ``bench_startup_timeout_s`` how long the ranks may take to come together (default 300);
* ``bench_python`` (per host) the Python with torch; ``bench_master_addr`` / ``bench_master_port`` the
  rendezvous address and port of torchrun (default: the first host's address, a free port);
* ``bench_tolerance`` and ``expected_busbw_<collective>_gbps``: see :mod:`diagnose.benchmarks.expect`;
* with ``tool: nccl-tests``: ``nccl_tests_dir`` (the folder of the ``*_perf`` binaries, required),
  ``mpirun`` (the launcher across nodes, default ``mpirun``), ``nccl_tests_mpi_args`` (more launcher
  arguments), ``nccl_tests_mpi_host`` (per host: its name in ``mpirun -H``, default its address) and
  ``nccl_tests_fallback: torch`` (measure with torch what nccl-tests cannot run, instead of an ERROR).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from diagnose.benchmarks.early_stop import floors_arg, stopped_of, stopped_sentence
from diagnose.benchmarks.expect import (
    LARGE_BYTES,
    Expectation,
    expected_busbw,
    judge_busbw,
    large_message_busbw,
    nvlink_domain_of,
)
from diagnose.benchmarks.fabric_nics import mnnvl_phrase, nics_phrase, observed_nics, wrong_nics
from diagnose.benchmarks.leftovers import sweep_leftovers
from diagnose.benchmarks.lost import note_lost, without_lost
from diagnose.benchmarks.nccl_tests import NcclTestsBench
from diagnose.benchmarks.setup import (
    CHECKLIST,
    BenchContext,
    PairLaunch,
    Setup,
    choose_setup,
    launch_env,
    startup_timeout_s,
)
from diagnose.benchmarks.straggler import (
    LaunchMeasure,
    localization_record,
    localize_settings,
    refuse_shared_master,
    straggler_checks,
)
from diagnose.benchmarks.torch_prerequisite import TorchPrerequisite
from diagnose.catalog.stage_ids import BENCH_CLEANUP, BENCH_STRAGGLER, NCCL_TRANSPORT, bench_id
from diagnose.config.profiles import no_gpu_reason
from diagnose.core.errors import ConfigError
from diagnose.core.hosts import Host
from diagnose.core.model import CheckResult
from diagnose.core.units import bus_factor, counted, human_bytes
from diagnose.launchers.base import LaunchOutcome, LaunchSpec
from diagnose.launchers.torchrun import launch
from diagnose.localize import localize
from diagnose.parsers.nccl_log import parse_nccl_log, summarize_transport
from diagnose.probes.registry import run_extras
from diagnose.shipped import collective_bench

# A row may take this long on top of moving its bytes at the floor bandwidth before it counts as hung.
ROW_BASE_S = 30.0
# Floor bandwidths (GB/s) for the hang budget: gloo on CPUs, and NCCL when the profile names no figure
# (with a figure, a tenth of the expected busbw: slower than that is broken even if it would finish).
GLOO_FLOOR_GBPS = 0.02
NCCL_FLOOR_GBPS = 1.0

# The row of results.json, and notes a row may carry: ``max_error`` where old nccl-tests printed the
# largest deviation instead of a count, ``wrong_is_lower_bound`` where that deviation means "at least one".
ROW_KEYS = ("bytes", "time_us", "algbw_gbps", "busbw_gbps", "wrong")
ROW_NOTES = ("max_error", "wrong_is_lower_bound")

TCP_FALLBACK_CAUSES = (
    "likely causes: NCCL_IB_DISABLE=1 or NCCL_NET=Socket in the environment or nccl.conf; no "
    "/dev/infiniband inside the container (devices not passed through); rdma-core/libibverbs missing; "
    "every IB port Down; on AWS, the aws-ofi-nccl plugin (libnccl-net.so) not found or FI_PROVIDER wrong; "
    "NCCL_IB_HCA naming no existing device"
)


def wrong_summary(rows: list[dict[str, Any]], wrong: int) -> str:
    """What the wrong rows say: a count of elements, or (old nccl-tests) deviations beyond tolerance."""
    bad = [human_bytes(r["bytes"]) for r in rows if r["wrong"]]
    if not any(r.get("wrong_is_lower_bound") for r in rows):
        return f"{wrong} wrong elements (at {', '.join(bad)})"
    largest = max(r.get("max_error") or 0.0 for r in rows if r["wrong"])
    return (
        f"results beyond nccl-tests' tolerance at {', '.join(bad)} (largest deviation {largest:g}; this "
        "nccl-tests version prints the largest deviation, not a count of wrong elements)"
    )


def nothing_to_measure(setup: Setup) -> str | None:
    """Why the sweep has nothing to measure on these hosts, or None when it has.

    One host without GPUs: a gloo collective there copies memory, it crosses no fabric, and whether torch
    happens to be installed must not decide the verdict. One rank in all (one host, one GPU): a collective
    over a single rank moves no byte between ranks (its busbw is 0 by definition, the (n-1)/n factor) and
    NCCL opens no connection, so neither the bandwidth nor the transport has anything to say.
    """
    if not setup.hosts:
        return None
    first = setup.hosts[0]
    if setup.backend == "gloo" and len(setup.hosts) == 1 and no_gpu_reason(first.vars):
        return f"one host without GPU ({no_gpu_reason(first.vars)}): no fabric to measure"
    if len(setup.hosts) * setup.nproc < 2:
        device = "GPU" if setup.backend == "nccl" else f"{setup.backend} process"
        return (
            f"one rank in all ({first.name}, one {device}): a collective over one rank moves nothing "
            "between ranks and opens no connection, so there is no bandwidth or transport to judge"
        )
    return None


class Stage:
    """The benchmark stage of one run.

    A tool's runner sees it as :class:`~diagnose.benchmarks.setup.StageServices`, never as this class.
    """

    def __init__(self, ctx: BenchContext) -> None:
        self.ctx = ctx
        self.plan = ctx.plan
        self.first = ctx.hosts[0] if ctx.hosts else None
        self.dtype = (self.first.vars.str("bench_dtype", "float32") if self.first else None) or "float32"
        # The benchmark entries of the sweep, by collective, for the extras that judge against them.
        self.records: dict[str, dict[str, Any]] = {}
        # Hosts that stopped answering during the sweep, with why: the extras after it leave them out.
        self.lost: dict[str, str] = {}
        self.torch = TorchPrerequisite(ctx)

    # -- sizing -------------------------------------------------------------------------------------------
    def expected_rows(self, collectives: list[str], sizes: list[int], ranks: int) -> list[tuple[str, int]]:
        elem = collective_bench.DTYPE_BYTES[self.dtype]
        rows = []
        for collective in collectives:
            for size in sizes:
                nbytes = collective_bench.counts(collective, size, elem, ranks)[2]
                if nbytes:
                    rows.append((collective, nbytes))
        return rows

    def row_budget(self, backend: str, nodes: int, nproc: int) -> Callable[[str, int], float]:
        plan = self.plan
        if plan.timeout_s:
            return lambda collective, nbytes: float(plan.timeout_s)
        launches = plan.warmup_iters + plan.iters + 3
        assert self.first is not None
        host_vars = self.first.vars

        def budget(collective: str, nbytes: int) -> float:
            if backend == "gloo":
                floor = GLOO_FLOOR_GBPS
            else:
                expectation = expected_busbw(collective, nodes, nproc, host_vars)
                floor = 0.1 * expectation.expected_gbps if expectation.judged else NCCL_FLOOR_GBPS
                floor = max(floor or NCCL_FLOOR_GBPS, 0.1)
            traffic = nbytes * max(1.0, bus_factor(collective, nodes * nproc))
            return ROW_BASE_S + launches * traffic / (floor * 1e9)

        return budget

    def program_args(
        self, backend: str, collectives: list[str], min_bytes: int, max_bytes: int, floors: str = ""
    ) -> list[str]:
        plan = self.plan
        return [
            "--backend",
            backend,
            "--collectives",
            ",".join(collectives),
            "--min-bytes",
            str(min_bytes),
            "--max-bytes",
            str(max_bytes),
            "--step-factor",
            str(plan.step_factor),
            "--warmup",
            str(plan.warmup_iters),
            "--iters",
            str(plan.iters),
            "--dtype",
            self.dtype,
            "--floors",
            floors,
            "--bound-bytes",
            str(LARGE_BYTES),
        ]

    def launch(
        self,
        setup: Setup,
        hosts: list[Host],
        tag: str,
        collectives: list[str],
        min_bytes: int,
        max_bytes: int,
    ) -> LaunchOutcome:
        assert self.first is not None
        ranks = len(hosts) * setup.nproc
        sizes = collective_bench.sweep(min_bytes, max_bytes, float(self.plan.step_factor))
        spec = LaunchSpec(
            run_id=self.ctx.run_id,
            tag=tag,
            hosts=hosts,
            connections=self.ctx.connections,
            nproc=setup.nproc,
            backend=setup.backend,
            program_args=self.program_args(
                setup.backend,
                collectives,
                min_bytes,
                max_bytes,
                floors_arg(self.first.vars, setup.backend, collectives, len(hosts), setup.nproc),
            ),
            expected_rows=self.expected_rows(collectives, sizes, ranks),
            row_budget_s=self.row_budget(setup.backend, len(hosts), setup.nproc),
            out_dir=self.ctx.out_dir,
            startup_timeout_s=startup_timeout_s(self.first),
            deadline=self.ctx.deadline,
            host_env={h.name: launch_env(h, setup.backend) for h in hosts},
            told=self.ctx.told,
        )
        return launch(spec)

    # -- verdicts -----------------------------------------------------------------------------------------
    def transport(self, outcome: LaunchOutcome) -> dict[str, Any] | None:
        logs = [parse_nccl_log(path.read_text(errors="replace")) for _, path in sorted(outcome.logs.items())]
        if not logs:
            return None
        return summarize_transport(logs, outcome.rank_hosts)

    def judge_transport(
        self, setup: Setup, summary: dict[str, Any] | None, outcome: LaunchOutcome
    ) -> CheckResult:
        nodes = len(setup.hosts)
        evidence = None
        if outcome.logs:
            evidence = str(outcome.logs[min(outcome.logs)].relative_to(self.ctx.out_dir))
        result = CheckResult(NCCL_TRANSPORT, None, CHECKLIST, "PASS", evidence=evidence)
        if setup.backend == "gloo":
            result.status = "SKIP"
            forced = bool(setup.hosts) and setup.hosts[0].vars.str("bench_backend") == "gloo"
            why = "bench_backend is gloo" if forced else "the hosts have no GPU"
            result.message = f"gloo backend ({why}): no NCCL, no transport to read"
            return result
        if summary is None or summary["edges"] == 0:
            result.status = "ERROR"
            result.message = (
                "no NCCL connection lines in the ranks' INFO logs (the run stopped before NCCL connected, or "
                "NCCL_DEBUG_FILE could not be written)"
            )
            return result
        shown = {k: summary[k] for k in ("inter_node", "intra_node", "gdrdma")}
        result.observed = {**shown, "inter_node_all": summary["inter_node_all"], "nccl": summary["version"]}
        rdma = [h for h in setup.hosts if (h.vars.int("expected_hca_count", 0) or 0) > 0]
        result.expected = "NET/IB or NET/OFI between nodes" if rdma and nodes > 1 else None
        inside = ", ".join(summary["intra_node"]) or "nothing reported"
        if nodes == 1:
            result.message = f"one node: no inter-node traffic; inside the node NCCL used {inside}"
            if summary["net_within_host"]:
                result.status = "WARN"
                result.message += (
                    " — ranks on the same host talk over a network transport: P2P and SHM are off "
                    "(NCCL_P2P_DISABLE / NCCL_SHM_DISABLE?)"
                )
            return result
        sockets = summary["inter_node_all"].get("NET/Socket")
        if sockets and rdma:
            result.status = "FAIL"
            result.message = (
                f"TCP fallback: NCCL sent inter-node traffic over NET/Socket (seen on {', '.join(sockets)}) "
                f"where the profile expects RDMA; {TCP_FALLBACK_CAUSES}"
            )
            result.remediation = (
                "Fix the RDMA path on the named hosts, then re-run; check `ibstat`, /dev/infiniband, "
                "`env | grep NCCL_` and the NCCL INFO log's NET/IB or NET/OFI lines."
            )
            return result
        between = summary["inter_node"] or "no transport seen"
        used = observed_nics(summary)
        result.observed["nics_used"] = used
        result.message = f"between nodes NCCL used {between}; inside nodes {inside}{nics_phrase(used)}"
        wrong = wrong_nics(used, setup.hosts, self.ctx.facts)
        if wrong:
            result.status = "FAIL"
            result.message = f"wrong fabric: {'; '.join(wrong)} — {result.message}"
            result.remediation = (
                "Point NCCL at the compute HCAs (NCCL_IB_HCA=mlx5_0,mlx5_1,... or =^mlx5_8 to exclude the "
                "storage one; NCCL_SOCKET_IFNAME for the bootstrap) and check that the compute ports are "
                "Active; if the list of compute HCAs is wrong, set expected_compute_hcas."
            )
            return result
        nvlink, degraded = mnnvl_phrase(summary.get("mnnvl"))
        if nvlink:
            result.observed["mnnvl"] = summary["mnnvl"]
            result.message += nvlink
            result.status = "WARN" if degraded else result.status
        if summary["gdrdma"] is False and rdma:
            result.status = "WARN"
            result.message += "; GPUDirect RDMA was not used (no /GDRDMA on the NET connections)"
        elif summary["gdrdma"]:
            result.message += " with GPUDirect RDMA"
        return result

    def entry(
        self,
        collective: str,
        setup: Setup,
        hosts: list[Host],
        outcome: LaunchOutcome,
        transport: dict[str, Any] | None,
        tool: str = "torch",
    ) -> tuple[dict[str, Any], Expectation]:
        assert self.first is not None
        nodes = len(hosts)
        rows = [
            {k: r[k] for k in (*ROW_KEYS, *ROW_NOTES) if k in r}
            for r in outcome.rows
            if r["collective"] == collective
        ]
        domain = nvlink_domain_of(transport, nodes, nodes * setup.nproc)
        expectation = expected_busbw(collective, nodes, setup.nproc, self.first.vars, domain)
        measured, at_bytes = large_message_busbw(rows)
        if measured is None and rows and setup.backend == "gloo":
            measured, at_bytes = rows[-1]["busbw_gbps"], rows[-1]["bytes"]
        sizes = collective_bench.sweep(self.plan.min_bytes, self.plan.max_bytes, float(self.plan.step_factor))
        wanted = len(self.expected_rows([collective], sizes, nodes * setup.nproc))
        finished = outcome.status == "done" or len(rows) >= wanted
        status, message = judge_busbw(collective, measured, at_bytes, nodes, expectation, setup.backend)
        early = stopped_of(outcome.rows, collective)
        if early is not None:
            finished = True
            status, message = "FAIL", f"{message}; {stopped_sentence(early)}"
        wrong = sum(r["wrong"] or 0 for r in rows)
        if wrong:
            status, message = "FAIL", f"{collective}: {wrong_summary(rows, wrong)}; {message}"
        if not finished:
            stopped = f"{self._stopped_reason(collective, outcome)}" + (
                f"; {counted(len(rows), 'row')} measured before are kept" if rows else ""
            )
            # Wrong elements already measured stay a FAIL: corruption is a verdict, a hang is not.
            status, message = (
                ("FAIL", f"{message}; then {stopped}") if wrong else ("ERROR", f"{collective}: {stopped}")
            )
        if setup.notes:
            message += f" [{'; '.join(setup.notes)}]"
        record = {
            "collective": collective,
            "tool": tool,
            "backend": setup.backend,
            "hosts": [h.name for h in hosts],
            "nodes": nodes,
            "ranks": nodes * setup.nproc,
            "transport": {k: (transport or {}).get(k) for k in ("inter_node", "intra_node", "gdrdma")},
            # Which ceiling the verdict read: the fabric's per node count, or one NVLink domain's.
            "path": "nvlink_domain" if domain else "fabric" if nodes > 1 else "node",
            "nvlink_domain_gpus": domain,
            "rows": rows,
            "expected_busbw_gbps": expectation.expected_gbps if setup.backend == "nccl" else None,
            "normal_range_gbps": [expectation.low_gbps, expectation.high_gbps]
            if expectation.judged and setup.backend == "nccl"
            else None,
            # The smallest size whose busbw the verdict read: the report shades the rows it judged by it.
            "judged_from_bytes": LARGE_BYTES if expectation.judged and setup.backend == "nccl" else None,
            "dtype": self.dtype,
            "status": status,
            "message": message,
        }
        if early is not None:
            record["stopped_early"] = early
        return record, expectation

    @staticmethod
    def _stopped_reason(collective: str, outcome: LaunchOutcome) -> str:
        if outcome.in_progress and outcome.in_progress[0] == collective:
            return outcome.message
        if outcome.status in ("hung", "host_lost", "failed", "deadline"):
            return f"not measured to the end: {outcome.message}"
        return outcome.message or "not measured"

    # -- stage ----------------------------------------------------------------------------------------------
    def run(self) -> None:
        ctx, plan = self.ctx, self.plan
        collectives = [c for c in plan.collectives if c in collective_bench.COLLECTIVES]
        if not ctx.hosts:
            for collective in collectives:
                ctx.emit_check(
                    CheckResult(
                        bench_id(collective),
                        None,
                        CHECKLIST,
                        "ERROR",
                        message=f"{collective} not run: no reachable host passed its checks",
                    )
                )
            return
        sweep_leftovers(ctx)
        setup = choose_setup(ctx.hosts, ctx.facts)
        why = nothing_to_measure(setup)
        if why:
            # The setup's notes (GPUs not in scope, hosts left out) say why so few ranks remain.
            why += f" [{'; '.join(setup.notes)}]" if setup.notes else ""
            for check_id in (NCCL_TRANSPORT, *(bench_id(c) for c in collectives)):
                ctx.emit_check(CheckResult(check_id, None, CHECKLIST, "SKIP", message=f"not measured: {why}"))
        elif collectives:  # a campaign step may run only the extras (stress, fleet, perftest, ...)
            self.run_sweep(setup, collectives)
        run_extras(self, without_lost(setup, self.lost))
        self.torch.report_unjudged()
        sweep_leftovers(ctx, this_run=True)

    def run_sweep(self, setup: Setup, collectives: list[str]) -> None:
        """The collectives, with the playbook's tool (torch, or nccl-tests handing back what it cannot)."""
        judge_transport = True
        if self.plan.tool == "nccl-tests":
            handoff = NcclTestsBench(self, setup).run(collectives)
            if not handoff.collectives:
                return
            collectives, judge_transport = handoff.collectives, not handoff.measured
            setup.notes.append(handoff.note)
        self.run_torch(setup, collectives, judge_transport)

    def torch_missing(self, hosts: list[Host], judged: bool = True) -> str | None:
        """Why torchrun cannot start on ``hosts`` (diagnose.benchmarks.torch_prerequisite), or None."""
        return self.torch.missing(hosts, judged)

    def run_torch(self, setup: Setup, collectives: list[str], judge_transport: bool = True) -> None:
        """One torchrun launch of every collective, its entries, straggler isolation and cleanup checks."""
        ctx, plan = self.ctx, self.plan
        reason = self.torch_missing(setup.hosts)
        if reason is not None:
            for collective in collectives:
                ctx.emit_check(
                    CheckResult(
                        bench_id(collective),
                        None,
                        CHECKLIST,
                        "ERROR",
                        message=f"{collective} not run: {reason}",
                    )
                )
            return
        outcome = self.launch(setup, setup.hosts, "main", collectives, plan.min_bytes, plan.max_bytes)
        if outcome.status == "host_lost":
            note_lost(ctx, self.lost, outcome.failed_hosts, outcome.message)
        transport = self.transport(outcome) if setup.backend == "nccl" else None
        if judge_transport:
            ctx.emit_check(self.judge_transport(setup, transport, outcome))
        short: list[tuple[str, Expectation]] = []
        for collective in collectives:
            record, expectation = self.entry(collective, setup, setup.hosts, outcome, transport)
            if outcome.failed_hosts and record["status"] == "ERROR":
                record["failed_hosts"] = outcome.failed_hosts
            ctx.emit_benchmark(record)
            self.records[collective] = record
            ctx.emit_check(self.as_check(record, expectation, outcome))
            below = record["status"] == "FAIL" and "below the normal range" in record["message"]
            if below and len(setup.hosts) > 2 and setup.backend == "nccl":
                short.append((collective, expectation))
        if short and plan.straggler_isolation:
            self.isolate(setup, short[0][0])
        self.report_cleanup(outcome)

    def report_cleanup(self, outcome: LaunchOutcome) -> None:
        """A WARN when a finished run had to be stopped, an ERROR when its processes survived SIGKILL."""
        ctx = self.ctx
        if outcome.status == "done" and outcome.message:
            ctx.emit_check(CheckResult(BENCH_CLEANUP, None, CHECKLIST, "WARN", message=outcome.message))
        leftovers = {h: n for h, n in outcome.leftovers.items() if n}
        if leftovers:
            listing = ", ".join(f"{h}: {n}" for h, n in leftovers.items())
            ctx.emit_check(
                CheckResult(
                    BENCH_CLEANUP,
                    None,
                    CHECKLIST,
                    "ERROR",
                    observed=leftovers,
                    message=f"benchmark processes survived SIGKILL ({listing})",
                )
            )

    def as_check(
        self, record: dict[str, Any], expectation: Expectation, outcome: LaunchOutcome
    ) -> CheckResult:
        rows = record["rows"]
        measured, _ = large_message_busbw(rows)
        evidence = next(iter(outcome.evidence.values()), None)
        return CheckResult(
            bench_id(record["collective"]),
            None,
            CHECKLIST,
            record["status"],
            observed=measured,
            expected=record["expected_busbw_gbps"],
            message=record["message"],
            evidence=evidence,
            # Over gloo on CPU hosts the sweep shows the ranks exchange data; its bandwidth says nothing of a
            # GPU fabric and is not judged (benchmarks.expect.judge_busbw).
            judged=not (record.get("backend") == "gloo" and record["status"] == "PASS"),
        )

    def isolate(self, setup: Setup, collective: str, launch: PairLaunch | None = None) -> None:
        """Find the slow host(s) or link(s) behind a short ``collective`` (:mod:`diagnose.localize`).

        ``launch`` measures one host group (default: :meth:`launch`, torch); the nccl-tests runner passes
        its own so that groups are measured with the tool that found the shortfall. The search runs
        disjoint groups at once (``localize_concurrency``) within ``localize_budget_s`` and the stage's
        own deadline; its verdicts become ``bench.straggler`` / ``bench.link`` checks and its rounds the
        ``localization`` record of results.json.
        """
        ctx = self.ctx
        assert self.first is not None
        host_vars = self.first.vars
        two = expected_busbw(collective, 2, setup.nproc, host_vars)
        try:
            settings = localize_settings(host_vars)
            if launch is None:  # torchrun meets at bench_master_addr; nccl-tests' mpirun does not
                refuse_shared_master(setup.hosts)
        except ConfigError as exc:
            ctx.emit_check(
                CheckResult(BENCH_STRAGGLER, None, CHECKLIST, "ERROR", message=f"localization not run: {exc}")
            )
            return
        if ctx.deadline is not None:
            left = ctx.deadline - time.monotonic()
            if left <= 0:
                ctx.emit_check(
                    CheckResult(
                        BENCH_STRAGGLER,
                        None,
                        CHECKLIST,
                        "WARN",
                        message=f"localization of {collective} not run: the run's time budget is spent",
                    )
                )
                return
            settings = replace(settings, budget_s=min(settings.budget_s, left))
        trigger = self._trigger(collective, setup)
        measure = LaunchMeasure(launch or self.launch, setup, collective, self.plan.max_bytes)
        names = [h.name for h in setup.hosts]
        with ctx.told.stage(f"straggler search for {collective}", names):
            finding = localize(names, measure, settings, shortfall=trigger.get("shortfall"))
        for check in straggler_checks(finding, collective, two):
            ctx.emit_check(check)
        ctx.emit_record(
            "localization",
            localization_record(finding, settings, collective, setup, trigger, measure.launches, two),
        )

    def _trigger(self, collective: str, setup: Setup) -> dict[str, Any]:
        """The full run that set the search off: its busbw, its normal range and how far short it fell."""
        record = self.records.get(collective) or {}
        measured, at_bytes = large_message_busbw(record.get("rows") or [])
        expected = record.get("expected_busbw_gbps")
        shortfall = measured / expected if measured is not None and expected else None
        return {
            "nodes": len(setup.hosts),
            "busbw_gbps": measured,
            "bytes": at_bytes,
            "expected_busbw_gbps": expected,
            "normal_range_gbps": record.get("normal_range_gbps"),
            "shortfall": None if shortfall is None else round(shortfall, 4),
        }


def run_benchmark_stage(ctx: BenchContext) -> None:
    """Run the playbook's benchmarks on ``ctx.hosts`` and emit checks and benchmark entries as they come."""
    if not getattr(ctx.plan, "enabled", True):
        return
    Stage(ctx).run()
