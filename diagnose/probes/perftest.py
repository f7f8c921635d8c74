"""Per-NIC RDMA bandwidth with perftest: the one slow NIC an eight-rail all-reduce averages away.

An extra of the benchmark stage (``benchmarks.perftest: true``, and ``benchmarks.perftest_latency: true``
for ``ib_write_lat``; :mod:`diagnose.probes.registry`). Over the hosts' own connections:

1. each host's rails come from its facts (:func:`diagnose.probes.perftest_plan.rails_of`); a host without
   ``ib_write_bw`` on its PATH (or in ``perftest_path``) is a SKIP naming the ``perftest`` package;
2. round one pairs neighbours; per pair, one launch (:mod:`diagnose.launchers.perftest`) writes every rail
   alone both ways, then all rails at once both ways, then (optionally) the latency of every rail; all
   pairs of a round run at once, each host busy once;
3. every rail's pairs are judged against the line rate and the rail's median; the ends of a slow pair are
   measured again with two healthy partners each, in rounds of their own
   (:mod:`diagnose.probes.perftest_localize`), which tells a slow NIC from a slow link;
4. :mod:`diagnose.probes.perftest_judge` turns it into ``ib.write_bw`` / ``ib.latency`` checks and
   results.json ``fabric`` records (readings, NICs, links, rails, latencies, rails together, summary).

The whole stage keeps to ``perftest_budget_s`` (and the run's own deadline): a round that cannot end in
time is not started, and what it would have measured is said. Variables: see
:mod:`diagnose.probes.perftest_settings`.
"""

from __future__ import annotations

import shlex
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from diagnose.benchmarks.setup import Setup
from diagnose.catalog.stage_ids import IB_LATENCY, IB_WRITE_BW
from diagnose.core.check import ParseError
from diagnose.core.hosts import Host
from diagnose.core.model import CheckResult
from diagnose.launchers.base import LaunchOutcome, LaunchSpec, launch_in_parallel
from diagnose.launchers.perftest import launch_pair
from diagnose.parsers.perftest import parse_bw, parse_lat
from diagnose.probes import fleet_judge
from diagnose.probes.perftest_campaign import Campaign, Launch, Outcome
from diagnose.probes.perftest_judge import CHECKLIST
from diagnose.probes.perftest_plan import (
    BW_TOOL,
    LAT_TOOL,
    PACKAGE,
    RC_MARK,
    HostRails,
    PortBlocks,
    Step,
    block_size,
    host_script,
    memory_of,
    output_name,
    rails_of,
)
from diagnose.probes.perftest_readings import Reading
from diagnose.probes.perftest_settings import Settings, settings_from

SECTION = "fabric"
#: Pair launches running at once (each holds a thread that polls its two hosts).
MAX_PARALLEL_PAIRS = 512


def _strip_rc(text: str) -> tuple[str, int | None]:
    """The tool's output without the script's exit-status line, and that status."""
    rc = None
    kept = []
    for line in text.splitlines():
        if line.startswith(RC_MARK):
            value = line[len(RC_MARK) :].strip()
            rc = int(value) if value.lstrip("-").isdigit() else None
        else:
            kept.append(line)
    return "\n".join(kept) + "\n", rc


def _facts(text: str | None, kind: str) -> tuple[dict[str, Any] | None, str | None]:
    """(facts, why not) of one side's output."""
    if text is None:
        return None, "no output came back"
    body, rc = _strip_rc(text)
    try:
        facts = parse_bw(body) if kind == "bw" else parse_lat(body)
    except ParseError as exc:
        return None, str(exc) if rc in (0, None) else f"exit {rc}: {exc}"
    if facts["rows"]:
        return facts, None
    errors = "; ".join(facts["errors"][:2]) or "no result table"
    if rc == 124:
        return None, f"killed by its timeout ({errors})"
    return None, errors if rc in (0, None) else f"exit {rc}: {errors}"


class PerftestStage:
    """One stage of the per-NIC benchmark over the benchmark stage's hosts."""

    def __init__(self, stage: Any, latency: bool) -> None:
        self.ctx = stage.ctx
        assert stage.first is not None
        self.settings: Settings = settings_from(stage.first.vars)
        self.thresholds = fleet_judge.Thresholds(
            mad_k=stage.first.vars.float("fleet_mad_k", fleet_judge.DEFAULT_MAD_K)
            or fleet_judge.DEFAULT_MAD_K,
            min_rel_dev_pct=stage.first.vars.float(
                "fleet_min_rel_dev_pct", fleet_judge.DEFAULT_MIN_REL_DEV_PCT
            )
            or 0.0,
        )
        self.latency = latency
        budget_end = time.monotonic() + self.settings.budget_s
        self.deadline = budget_end if self.ctx.deadline is None else min(budget_end, self.ctx.deadline)
        self.hosts: dict[str, Host] = {h.name: h for h in self.ctx.hosts}
        self.rails: dict[str, HostRails] = {}
        self._ports: PortBlocks | None = None
        self._free = threading.Condition()

    # -- before measuring ------------------------------------------------------------------------------
    def skip(self, check_id: str, host: str | None, why: str) -> None:
        self.ctx.emit_check(CheckResult(check_id, host, CHECKLIST[check_id], "SKIP", message=why))

    def missing_tools(self, names: Sequence[str]) -> dict[str, str]:
        """Hosts without the tools, with what is missing; probed on all hosts at once."""
        tools = [BW_TOOL, LAT_TOOL] if self.latency else [BW_TOOL]
        path = self.settings.path
        probes = " ".join(
            f"[ -x {shlex.quote(f'{path}/{t}')} ] || echo {t};"
            if path
            else f"command -v {t} >/dev/null 2>&1 || echo {t};"
            for t in tools
        )

        def probe(name: str) -> str:
            result = self.ctx.connections[name].run(probes, timeout=30)
            if result.error or result.timed_out:
                return f"could not look for perftest ({result.error or 'timed out'})"
            return ", ".join(result.stdout.split())

        with ThreadPoolExecutor(max_workers=max(1, min(64, len(names)))) as pool:
            found = dict(zip(names, pool.map(probe, names), strict=True))
        return {name: why for name, why in found.items() if why}

    def ready_hosts(self) -> list[str]:
        """The hosts that can take part, after a SKIP for every one that cannot (and why)."""
        ids = [IB_WRITE_BW, IB_LATENCY] if self.latency else [IB_WRITE_BW]
        candidates = []
        for host in self.ctx.hosts:
            rails = rails_of(host, self.ctx.facts.get(host.name, {}))
            if isinstance(rails, str):
                for check_id in ids:
                    self.skip(check_id, host.name, f"not measured on {host.name}: {rails}")
                continue
            self.rails[host.name] = rails
            candidates.append(host.name)
        missing = self.missing_tools(candidates) if candidates else {}
        for name, what in missing.items():
            where = f"in perftest_path {self.settings.path}" if self.settings.path else "on the login PATH"
            for check_id in ids:
                self.skip(
                    check_id,
                    name,
                    f"not measured on {name}: {what} not found {where}; install the {PACKAGE} package "
                    f"(apt-get install {PACKAGE} / dnf install {PACKAGE}), or point perftest_path at its folder",
                )
        return [n for n in candidates if n not in missing]

    # -- measuring ---------------------------------------------------------------------------------------
    def measure_round(self, number: int, launches: Sequence[Launch]) -> list[Reading]:
        """Every pair of one round at once (the campaign's RoundMeasure)."""
        pairs = launch_in_parallel(
            lambda job: self.measure_pair(number, job[0], *job[1]),
            list(enumerate(launches)),
            MAX_PARALLEL_PAIRS,
        )
        return [reading for readings in pairs for reading in readings]

    def _take_ports(self, addresses: list[str], size: int) -> int:
        with self._free:
            if self._ports is None or self._ports.size < size:
                low, high = self.settings.ports
                self._ports = PortBlocks(low, high, size)
            while (first := self._ports.take(addresses)) is None:
                self._free.wait()
            return first

    def _give_ports(self, addresses: list[str], first: int) -> None:
        with self._free:
            assert self._ports is not None
            self._ports.give_back(addresses, first)
            self._free.notify_all()

    def measure_pair(self, number: int, index: int, a: str, b: str, steps: list[Step]) -> list[Reading]:
        """One pair's launch and what it read."""
        addresses = sorted({self.rails[a].address, self.rails[b].address})
        first = self._take_ports(addresses, block_size(max(len(self.rails[a].nics), len(self.rails[b].nics))))
        try:
            scripts = {h: host_script(h, steps, self.rails, first, self.settings) for h in (a, b)}
            spec = LaunchSpec(
                run_id=self.ctx.run_id,
                tag=f"perftest-{number}-{index}",
                hosts=[self.hosts[a], self.hosts[b]],
                connections=self.ctx.connections,
                nproc=1,
                backend="perftest",
                program_args=[],
                expected_rows=[],
                row_budget_s=lambda collective, nbytes: self.settings.step_budget_s,
                out_dir=self.ctx.out_dir,
                deadline=self.deadline,
                told=self.ctx.told,
            )
            outcome = launch_pair(spec, scripts, [s.describe() for s in steps], self.settings.step_budget_s)
        finally:
            self._give_ports(addresses, first)
        return self.read(number, steps, outcome)

    def read(self, number: int, steps: Sequence[Step], outcome: LaunchOutcome) -> list[Reading]:
        readings = []
        for step in steps:
            writer, server = self.rails[step.writer], self.rails[step.server]
            for rail in step.rails:
                mine, theirs = writer.nics[rail], server.nics[rail]
                rates = [r for r in (mine.rate_gbps, theirs.rate_gbps) if r]
                reading = Reading(
                    round=number,
                    step=step,
                    rail=rail,
                    writer_hca=mine.hca,
                    server_hca=theirs.hca,
                    line_gbps=float(min(rates)) if rates else None,
                    memory=f"{memory_of(writer, mine, self.settings)}→{memory_of(server, theirs, self.settings)}",
                )
                self._fill(reading, outcome)
                readings.append(reading)
        return readings

    def _fill(self, reading: Reading, outcome: LaunchOutcome) -> None:
        """The reading's figure from the writer's output (else the server's), or why there is none."""
        name = output_name(reading.step, reading.rail)
        why = []
        for host in (reading.step.writer, reading.step.server):
            path = outcome.evidence.get(f"{host}:{name}")
            if path:
                reading.evidence.append(path)
            text = (self.ctx.out_dir / path).read_text(errors="replace") if path else None
            facts, problem = _facts(text, reading.step.kind)
            if facts is not None and reading.gbps is None and reading.latency is None:
                if reading.step.kind == "bw":
                    reading.gbps = facts["average_gbps"]
                else:
                    reading.latency = {k: facts[k] for k in ("typical_us", "avg_us", "p99_us", "p999_us")}
            elif problem:
                why.append(f"{host}: {problem}")
        if reading.gbps is None and reading.latency is None:
            stopped = f"the launch {outcome.status}: {outcome.message}" if outcome.status != "done" else ""
            reading.error = "; ".join([*why, *([stopped] if stopped else [])]) or "no reading"

    # -- the stage ----------------------------------------------------------------------------------------
    def run(self) -> None:
        ids = [IB_WRITE_BW, IB_LATENCY] if self.latency else [IB_WRITE_BW]
        names = self.ready_hosts()
        if len(names) < 2:
            why = (
                f"{'one host' if names else 'no host'} with rails and perftest: ib_write_bw needs a partner host "
                "per rail"
            )
            for check_id in ids:
                self.skip(check_id, None, f"not measured: {why}")
            return
        low, high = self.settings.ports
        needed = block_size(max(len(self.rails[n].nics) for n in names))
        if high - low + 1 < needed:
            for check_id in ids:
                self.ctx.emit_check(
                    CheckResult(
                        check_id,
                        None,
                        CHECKLIST[check_id],
                        "ERROR",
                        message=f"not measured: perftest_ports {low}-{high} holds {high - low + 1} ports, and a "
                        f"pair of hosts with {needed // 2} rails needs {needed} (two per rail)",
                    )
                )
            return
        campaign = Campaign(
            self.rails,
            self.settings,
            self.thresholds,
            self.measure_round,
            latency=self.latency,
            deadline=self.deadline,
        )
        outcome = campaign.run(names)
        for reading in outcome.readings:
            self.ctx.emit_record(SECTION, reading.to_dict())
        for record in outcome.conclusion.records:
            self.ctx.emit_record(SECTION, record)
        self.ctx.emit_record(SECTION, self.summary(names, outcome))
        for check in outcome.conclusion.checks:
            self.ctx.emit_check(check)

    def summary(self, names: Sequence[str], outcome: Outcome) -> dict[str, Any]:
        s = self.settings
        direct = [n for n in names if s.gpudirect and self.rails[n].gpudirect]
        return {
            "kind": "summary",
            "hosts": list(names),
            "rails": {n: [nic.hca for nic in self.rails[n].nics] for n in names},
            "rails_from": sorted({self.rails[n].source for n in names}),
            "gpudirect_hosts": direct,
            "message_bytes": s.message_bytes,
            "duration_s": s.duration_s,
            "min_nic_bw_fraction": s.fraction,
            "latency": self.latency,
            "max_ib_latency_p99_us": s.latency_p99_us if self.latency else None,
            "rounds": outcome.rounds,
            "launches": outcome.launches,
            "seconds": round(outcome.seconds, 1),
            "budget_s": s.budget_s,
            "not_measured": list(outcome.not_measured),
        }


def run(stage: Any, setup: Setup) -> None:
    """The extra's entry point (:mod:`diagnose.probes.registry`): every NIC of every host, by rail."""
    del setup  # NICs are measured on every healthy host, with or without GPUs
    if not stage.ctx.hosts:
        return
    PerftestStage(stage, latency=bool(getattr(stage.plan, "perftest_latency", False))).run()
