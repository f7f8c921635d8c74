"""Test-bed hosts for issue 24's host checks: a process left on a GPU, and DCGM's diagnostics.

hostkit's ``healthy_h100`` answers gpu.processes' query with the idle capture of the lent H100 (the header
alone) and has no ``dcgmi``, as the lent machines have none (gpu.dcgm then SKIPs). Each builder here
changes one thing of a healthy node:

* ``foreign_process``: the compute-apps answer gains the row captured on the lent H100 while a second
  python3 ran a matmul loop (pid 461, 1002 MiB), moved to GPU 3 of the H100 node (its bus id from
  hostkit's GPU query: composed, the one field changed).
* ``memory_holder``: the GPU query with board serials (hostkit's ``serial_query``: the query's first tier asks
  for them beside the memory) gains the memory columns an idle 8x H100 80GB prints (memory.total
  81559 MiB, memory.used 0 MiB: microsoft/VirtualClient's query-gpu-8xH100.csv, driver 535.161.07), and
  GPU ``gpu`` shows in use the share of its memory that an idle process outside both hosts held on the lent
  H200 (123,407 of 143,771 MiB: tests/fixtures/gpu_runs/h200x2-holders-2026-11-28), utilization 0 %, with
  no process listed (composed: the two fields added, one changed).
* ``with_dcgmi``: a ``dcgmi`` answering ``diag -r <level> -j`` with the document of a
  tests/fixtures/captured/dcgm_diag file (see its SOURCE) without the frame lines gpu.dcgm's own command
  prints around it, and with that file's exit status; ``dcgm_pass``, ``dcgm_fail`` (GPU 3 fails the
  diagnostic test with faulty memory) and ``dcgm_hang`` (dcgmi prints nothing and never returns) use it.
"""

from __future__ import annotations

import re
from dataclasses import replace

from diagnose.parsers.gpu_query import parse_gpu_query
from tests.support.hostkit import (
    COMPUTE_APPS_ARGS,
    H100_QUERY,
    IDLE_APPS,
    captured,
    healthy_h100,
    serial_query,
    with_query,
)
from tests.support.testbed import HostSpec, Reply

HOG_APPS = "compute_apps/h100x1_580_matmul_hog.txt"
LENT_BUS_ID = "00000000:00:06.0"
DCGM_PASS = "dcgm_diag/h100x8_level3_pass.txt"
DCGM_FAIL = "dcgm_diag/h100x8_level3_diagnostic_fail_gpu3.txt"
_FRAME = re.compile(r"^# (level \d+ budget \d+|rc \d+)\n", re.MULTILINE)
_RC = re.compile(r"^# rc (\d+)$", re.MULTILINE)


def gpu_bus_id(index: int) -> str:
    """The bus id of one GPU of the healthy H100 node, as its GPU query prints it."""
    return next(r["pci.bus_id"] for r in parse_gpu_query(captured(H100_QUERY)) if r["index"] == str(index))


def foreign_process(name: str, gpu: int = 3) -> HostSpec:
    """A healthy node with the lent H100's matmul process on GPU ``gpu``."""
    spec = healthy_h100(name)
    script = spec.tools["nvidia-smi"]
    assert isinstance(script, str), "the node's nvidia-smi is a script of captured outputs"
    idle = captured(IDLE_APPS).rstrip("\n")
    busy = captured(HOG_APPS).rstrip("\n").replace(LENT_BUS_ID, gpu_bus_id(gpu))
    branch = f"'{COMPUTE_APPS_ARGS}')\n    cat <<'DIAGNOSE_CAPTURED_OUTPUT_END'\n"
    assert script.count(branch + idle + "\n") == 1, "the compute-apps branch of the fake nvidia-smi"
    return replace(spec, tools={**spec.tools, "nvidia-smi": script.replace(branch + idle, branch + busy)})


#: An idle H100 80GB's memory (VirtualClient's 8x H100 query) and the share the lent H200's holder held.
H100_MEMORY_MIB = 81559
HELD_MIB = round(H100_MEMORY_MIB * 123407 / 143771)


def memory_holder(name: str, gpu: int = 3) -> HostSpec:
    """A healthy node whose GPU ``gpu`` has ``HELD_MIB`` in use by a process no listing shows."""
    serials = [f"165372406{5580 + i}" for i in range(8)]
    header, *rows = serial_query(serials).rstrip("\n").splitlines()
    lines = [f"{header}, memory.used [MiB], memory.total [MiB]"]
    for row in rows:
        used = HELD_MIB if row.split(",")[0].strip() == str(gpu) else 0
        lines.append(f"{row}, {used}, {H100_MEMORY_MIB}")
    return with_query(healthy_h100(name), "\n".join(lines) + "\n")


def dcgmi_reply(fixture: str) -> Reply:
    """What dcgmi printed in a dcgm_diag fixture: the text between gpu.dcgm's frame lines, and its exit."""
    text = captured(fixture)
    rc = _RC.search(text)
    return Reply(stdout=_FRAME.sub("", text).strip("\n") + "\n", rc=int(rc.group(1)) if rc else 0)


def with_dcgmi(spec: HostSpec, level: int, reply: Reply) -> HostSpec:
    return replace(spec, tools={**spec.tools, "dcgmi": {f"diag -r {level} -j": reply}})


def dcgm_pass(name: str, level: int = 3) -> HostSpec:
    return with_dcgmi(healthy_h100(name), level, dcgmi_reply(DCGM_PASS))


def dcgm_fail(name: str, level: int = 3) -> HostSpec:
    return with_dcgmi(healthy_h100(name), level, dcgmi_reply(DCGM_FAIL))


def dcgm_hang(name: str, level: int = 3) -> HostSpec:
    return with_dcgmi(healthy_h100(name), level, Reply(hang=True))
