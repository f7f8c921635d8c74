"""Test hosts and facts for the per-NIC perftest benchmark (diagnose.probes.perftest).

The hosts are the healthy 8x H100 NDR node of tests/support/hostkit.py with the perftest stand-in
(tests/support/perftest_standin.py) as ``ib_write_bw`` and ``ib_write_lat``, and a knob file saying which
of its NICs or cables is slow. ``h100_facts`` gives the host facts a run's checks would give for that
node, parsed from the same captured outputs, for stage runs that skip the host checks.
"""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from diagnose.checks import gpu_gpudirect, gpu_topology
from diagnose.core.check import Facts
from diagnose.core.model import CommandOutput
from diagnose.core.vars import Vars
from diagnose.parsers.ibstat import parse_ibstat
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
