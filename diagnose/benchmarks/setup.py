"""What the benchmark stage and the runner of each measuring tool share, so neither imports the other.

The stage (:mod:`diagnose.benchmarks.stage`) hands a tool's runner (:mod:`diagnose.benchmarks.nccl_tests`)
the :class:`Setup` it chose and itself, seen through :class:`StageServices`: the sizing, the verdicts and
the emitters a runner needs to judge its own results exactly as the stage judges torch's. A runner for
another tool imports this module, never the stage.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from diagnose.benchmarks.expect import Expectation
from diagnose.config.host_settings import parse_bench_env
from diagnose.core.check import Facts
from diagnose.core.hosts import Host
from diagnose.core.model import CheckResult
from diagnose.launchers.base import LaunchOutcome
from diagnose.launchers.progress import Teller

if TYPE_CHECKING:
    from diagnose.connectors import Connection

#: The section of the acceptance checklist every benchmark check belongs to.
CHECKLIST = "3"
DEFAULT_STARTUP_S = 300.0


@dataclass
class BenchContext:
    """Everything the stage needs from the engine.

    ``hosts`` are the reachable, healthy hosts in inventory order (the first is the rendezvous host);
    ``connections`` their open connections by host name; ``facts`` the host stage's facts
    ``{host: {check_id: facts}}`` (``gpu.topology`` gives ``gpu_count``); ``plan`` the playbook's
    benchmark plan (any object with enabled, workload, collectives, min_bytes, max_bytes, step_factor,
    warmup_iters, iters, tool, straggler_isolation, timeout_s); ``deadline`` a ``time.monotonic()``
    limit for the whole stage, or None; ``told`` hears which stage, host and step runs now (every launch's
    ``LaunchSpec.told``).
    """

    hosts: list[Host]
    connections: dict[str, Connection]
    facts: dict[str, dict[str, Facts]]
    plan: Any
    out_dir: Path
    run_id: str
    emit_check: Callable[[CheckResult], None]
    emit_benchmark: Callable[[dict[str, Any]], None]
    deadline: float | None = None
    # Appends an entry to a top-level list of results.json (see ResultsStore.add_record).
    emit_record: Callable[[str, dict[str, Any]], None] = lambda section, entry: None
    told: Teller = field(default_factory=Teller)
    # Puts a result in place of the earlier one of the same check and host (ResultsStore.replace_check): a host
    # lost during the sweep turns its host.reachable into the one cause of what it no longer answers.
    replace_check: Callable[[CheckResult], None] | None = None


@dataclass
class Setup:
    """Backend, ranks per host and the hosts a launch uses, with why any host was left out."""

    backend: str
    nproc: int
    hosts: list[Host]
    notes: list[str]


def choose_setup(hosts: list[Host], facts: Mapping[str, Mapping[str, Facts]]) -> Setup:
    """NCCL with one rank per GPU where the checks found GPUs (``bench_gpus_per_host`` overrides), else gloo.

    A GPU counts only where CUDA sees it (``visible_gpu_count``: ``CUDA_VISIBLE_DEVICES`` honoured), since
    the ranks inherit the host's environment and a rank on a GPU it cannot see dies; the GPUs left out are
    named in the notes, so every benchmark verdict says what it did not cover.
    """
    notes: list[str] = []
    gpus: dict[str, int] = {}
    for host in hosts:
        override = host.vars.int("bench_gpus_per_host", None)
        topology = facts.get(host.name, {}).get("gpu.topology") or {}
        found = topology.get("visible_gpu_count", topology.get("gpu_count")) or 0
        gpus[host.name] = override if override is not None else int(found)
        if override is None and topology.get("visible_note"):
            notes.append(f"{host.name}: {topology['visible_note']}")
    forced = hosts[0].vars.str("bench_backend") if hosts else None
    with_gpus = [h for h in hosts if gpus[h.name] > 0]
    if forced != "gloo" and with_gpus:
        left_out = [h.name for h in hosts if gpus[h.name] == 0]
        if left_out:
            notes.append(f"left out (no GPU found): {', '.join(left_out)}")
        counts = {gpus[h.name] for h in with_gpus}
        nproc = min(counts)
        if len(counts) > 1:
            more = ", ".join(f"{h.name} ({gpus[h.name]})" for h in with_gpus if gpus[h.name] > nproc)
            notes.append(
                f"GPU counts differ between hosts ({sorted(counts)}); {nproc} ranks per host, so the GPUs "
                f"beyond the first {nproc} of {more} are not in this sweep"
            )
        return Setup("nccl", nproc, with_gpus, notes)
    procs = hosts[0].vars.int("bench_procs_per_host", 1) if hosts else 1
    return Setup("gloo", max(1, procs or 1), list(hosts), notes)


def launch_env(host: Host, backend: str) -> dict[str, str]:
    """NCCL's INFO log for the transport check, plus the playbook's or inventory's ``bench_env``.

    Nothing is ever unset: NCCL_NVLS_ENABLE=0 and its kin in the host's login environment reach the
    ranks as they are.
    """
    env: dict[str, str] = {}
    if backend == "nccl":
        env.update({"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,NET,GRAPH"})
    env.update(parse_bench_env(host.vars.get("bench_env")))  # validated when the inventory was read
    return env


def startup_timeout_s(first: Host) -> float:
    """How long the ranks of any tool may take to come together (``bench_startup_timeout_s``)."""
    return first.vars.float("bench_startup_timeout_s", DEFAULT_STARTUP_S) or DEFAULT_STARTUP_S


#: Measures one collective on some hosts: (setup, hosts, tag, collectives, min_bytes, max_bytes).
PairLaunch = Callable[[Setup, list[Host], str, list[str], int, int], LaunchOutcome]


class StageServices(Protocol):
    """What a tool's runner uses of the benchmark stage, so that its results are sized, judged, emitted
    and bisected exactly like torch's; :class:`diagnose.benchmarks.stage.Stage` provides it."""

    ctx: BenchContext
    first: Host | None
    dtype: str

    def expected_rows(self, collectives: list[str], sizes: list[int], ranks: int) -> list[tuple[str, int]]:
        """The (collective, bytes) rows a sweep measures, in order: what a hang is named by."""
        ...

    def row_budget(self, backend: str, nodes: int, nproc: int) -> Callable[[str, int], float]:
        """Seconds the next row may take before the run counts as hung."""
        ...

    def transport(self, outcome: LaunchOutcome) -> dict[str, Any] | None:
        """The transports NCCL used, read from the launch's INFO logs."""
        ...

    def judge_transport(
        self, setup: Setup, summary: dict[str, Any] | None, outcome: LaunchOutcome
    ) -> CheckResult:
        """The ``nccl.transport`` check."""
        ...

    def entry(
        self,
        collective: str,
        setup: Setup,
        hosts: list[Host],
        outcome: LaunchOutcome,
        transport: dict[str, Any] | None,
        tool: str = "torch",
    ) -> tuple[dict[str, Any], Expectation]:
        """One collective's ``benchmarks`` entry of results.json, with the expectation it was judged by."""
        ...

    def as_check(
        self, record: dict[str, Any], expectation: Expectation, outcome: LaunchOutcome
    ) -> CheckResult:
        """The ``bench.<collective>`` check of an entry."""
        ...

    def report_cleanup(self, outcome: LaunchOutcome) -> None:
        """Emit ``bench.cleanup`` when a launch had to be stopped or left processes behind."""
        ...

    def isolate(self, setup: Setup, collective: str, launch: PairLaunch | None = None) -> None:
        """Localize the slow host(s) or link(s) with groups measured by ``launch``."""
        ...
