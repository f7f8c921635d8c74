"""Test hosts and facts for the per-NIC perftest benchmark (diagnose.probes.perftest).

The hosts are the healthy 8x H100 NDR node of tests/support/hostkit.py with the perftest stand-in
(tests/support/perftest_standin.py) as ``ib_write_bw`` and ``ib_write_lat``, and a knob file saying which
of its NICs or cables is slow. ``h100_facts`` gives the host facts a run's checks would give for that
node, parsed from the same captured outputs, for stage runs that skip the host checks. ``Fabric`` is a
modelled fabric for the campaign's driver (unit tests and report tests without hosts).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from diagnose.checks import gpu_gpudirect, gpu_topology
from diagnose.core.check import Facts
from diagnose.core.model import CommandOutput
from diagnose.core.vars import Vars
from diagnose.localize.model import edge
from diagnose.parsers.ibstat import parse_ibstat
from diagnose.probes.perftest_campaign import Launch
from diagnose.probes.perftest_plan import HostRails, Nic
from diagnose.probes.perftest_readings import Reading
from tests.support.hostkit import captured, healthy_h100
from tests.support.testbed import HostSpec

STANDIN = Path(__file__).with_name("perftest_standin.py")
KNOBS = "/etc/diagnose-perftest.json"
#: The capture the stand-in prints is an HDR 200 port's; the bed's ports are NDR 400.
NDR_SCALE = 2.0


def standin_tools() -> dict[str, str]:
    """``ib_write_bw`` and ``ib_write_lat`` as the stand-in, run by the tests' own Python."""
    return {
        tool: f'#!/bin/sh\nexec {sys.executable} {STANDIN} {kind} "$@"\n'
        for tool, kind in (("ib_write_bw", "bw"), ("ib_write_lat", "lat"))
    }


def perftest_host(
    name: str,
    slow: dict[str, float] | None = None,
    links: dict[str, dict[str, float]] | None = None,
    hang: bool = False,
    tools: bool = True,
) -> HostSpec:
    """The healthy H100 node with the stand-in; ``slow`` {hca: factor}, ``links`` {peer: {hca: factor}},
    ``hang`` its servers never answer, ``tools`` False: no perftest installed."""
    spec = healthy_h100(name)
    knobs = {"name": name, "scale": NDR_SCALE, "slow": slow or {}, "links": links or {}, "hang": hang}
    added: dict[str, Any] = standin_tools() if tools else {"ib_write_bw": None, "ib_write_lat": None}
    return replace(spec, tools={**spec.tools, **added}, files={**spec.files, KNOBS: json.dumps(knobs)})


def h100_facts(host_vars: Vars | None = None) -> dict[str, Facts]:
    """ib.link_rate, gpu.topology and gpu.gpudirect facts of the healthy H100 node's captures."""
    host_vars = host_vars or Vars({})
    smi = CommandOutput(stdout=captured("nvidia_smi/h100_sxm_8gpu_565.txt"), exit_code=0)
    topo = CommandOutput(stdout=captured("topo/h100_8gpu_8nic_pix.txt"), exit_code=0)
    modules = CommandOutput(stdout=captured("gpudirect/modules_gpu_operator_peermem.txt"), exit_code=0)
    version = CommandOutput(stdout="", exit_code=1)
    uname = CommandOutput(stdout=captured("gpudirect/uname_h200x4.txt"), exit_code=0)
    return {
        "ib.link_rate": parse_ibstat(captured("ibstat/h100_cx7_ndr400_8hca_bond.txt")),
        "gpu.topology": gpu_topology.parse({"nvidia_smi": smi, "topo": topo}, host_vars),
        "gpu.gpudirect": gpu_gpudirect.parse(
            {"modules": modules, "nvidia_version": version, "uname": uname}, host_vars
        ),
    }


#: What a healthy NDR pair writes on the bed (the HDR capture's 8 MiB figure, scaled to 400).
HEALTHY_GBPS = 391.2


class Fabric:
    """Per NIC and per cable a factor on the healthy figure; ``latency_us`` the p99 of every rail pair."""

    def __init__(
        self,
        nic: dict[tuple[str, int], float] | None = None,
        link: dict[tuple[str, str, int], float] | None = None,
        together: float = 1.0,
        latency_us: float = 2.03,
        failing: set[str] | None = None,
    ) -> None:
        self.nic = nic or {}
        self.link = {(*edge(a, b), r): f for (a, b, r), f in (link or {}).items()}
        self.together = together
        self.latency_us = latency_us
        self.failing = failing or set()
        self.rounds: list[list[tuple[str, str]]] = []

    def __call__(self, number: int, launches: Sequence[Launch]) -> list[Reading]:
        self.rounds.append([(a, b) for a, b, _ in launches])
        readings = []
        for _, _, steps in launches:
            for step in steps:
                for rail in step.rails:
                    reading = Reading(number, step, rail, f"mlx5_{rail}", f"mlx5_{rail}", 400.0, "host→host")
                    pace = min(
                        self.nic.get((step.writer, rail), 1.0),
                        self.nic.get((step.server, rail), 1.0),
                        self.link.get((*edge(step.writer, step.server), rail), 1.0),
                    )
                    if self.failing & {step.writer, step.server}:
                        reading.error = "Couldn't connect to 10.0.0.9:18515"
                    elif step.kind == "bw":
                        share = self.together if step.mode == "together" else 1.0
                        reading.gbps = round(HEALTHY_GBPS * pace * share, 2)
                    else:
                        reading.latency = {
                            "typical_us": 1.87,
                            "avg_us": 1.88,
                            "p99_us": self.latency_us,
                            "p999_us": 5.4,
                        }
                    readings.append(reading)
        return readings


def rails_for(names: Sequence[str], count: int = 2) -> dict[str, HostRails]:
    return {
        n: HostRails(
            n, f"10.0.0.{i}", tuple(Nic(n, r, f"mlx5_{r}", 1, 400, r) for r in range(count)), True, "test"
        )
        for i, n in enumerate(names)
    }
