"""Test-bed hosts for the machine shapes a healthy run must judge without a false verdict (issue 23).

Each host prints real captured outputs (tests/fixtures/captured/*/SOURCE say where each was captured):

* one GPU: the lent H100 VM as `diagnose run` saw it there (nvidia-smi, topo -m, the GPU query, no NVLink
  peer, no HCA: /dev/infiniband holds only rdma_cm; tests/fixtures/results/h100_one_gpu.json is that run);
* several GPUs without NVLink: the 8x L40S matrix of nccl-tests issue 273 (NODE/SYS, no NV#) on the healthy
  8x H100 node's other outputs, with no HCA, ``nvidia-smi nvlink --status`` as an A10 prints it (nothing)
  and the GPU query's fabric columns N/A, as GPUs outside an NVSwitch fabric report them;
* GPUs without any HCA: hostkit's ``no_dev_infiniband`` (8x H100 NVLink, no /dev/infiniband, no ibstat);
* a CPU-only host: no GPU tool at all;
* a cluster whose hosts differ in GPU count, and a pod with one GPU: the healthy 8x H100 node's outputs cut
  to its first GPUs (:func:`cut_to_gpus`: the same rows and columns of the same captures, nothing else
  changed), as a 4-GPU board or a pod that was allocated one GPU shows them.
"""

from __future__ import annotations

import re
from dataclasses import replace

from diagnose.parsers.gpu_query import FIELD_TIERS, canonical
from tests.support.hostkit import (
    COMPUTE_APPS_ARGS,
    H100_NVLINK_ERRORS,
    H100_NVLINK_STATUS,
    H100_QUERY,
    IDLE_APPS,
    captured,
    healthy_h100,
    no_dev_infiniband,
    query_arguments,
    smi_listing,
)
from tests.support.testbed import HostSpec, Reply

VM_TABLE = "nvidia_smi/h100x1_580_vm.txt"
VM_TOPO = "topo/h100x1_580_vm.txt"
VM_QUERY = "gpu_query/h100x1_580_with_vbios.txt"
VM_MODULES = "gpudirect/modules_h200x4_proc.txt"
H100_TABLE = "nvidia_smi/h100_sxm_8gpu_565.txt"
H100_TOPO = "topo/h100_8gpu_8nic_pix.txt"
L40S_TOPO = "topo/l40s_8gpu_pcie_node_sys.txt"
A10_NVLINK = "nvlink/a10_pcie_status_gpud.txt"
POD_FIXTURES = "k8s_pod"


def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.split(",")]


def query_replies(text: str) -> dict[str, Reply]:
    """The fake nvidia-smi's answer to each tier of the shared GPU query: the capture cut to the tier's
    columns (a driver answers any tier whose fields it knows)."""
    lines = text.splitlines()
    names = [canonical(column) for column in _cells(lines[0])]
    replies = {}
    for fields in FIELD_TIERS:
        wanted = [names.index(canonical(field)) for field in fields if canonical(field) in names]
        if len(wanted) < len(fields):
            continue
        rows = [", ".join(_cells(line)[i] for i in wanted) for line in lines]
        replies[query_arguments(fields)] = Reply(stdout="\n".join(rows) + "\n")
    return replies


def nvidia_smi(
    table: str, topo: str, query: str, nvlink_status: str, nvlink_errors: str = "", listing: str = ""
) -> dict[str, Reply]:
    """A fake nvidia-smi answering the argument strings the checks use, each with a captured output."""
    return {
        "": Reply(stdout=table),
        "topo -m": Reply(stdout=topo),
        **query_replies(query),
        "nvlink --status": Reply(stdout=nvlink_status),
        "nvlink -e": Reply(stdout=nvlink_errors),
        COMPUTE_APPS_ARGS: Reply(stdout=captured(IDLE_APPS)),
        "-L": Reply(stdout=listing),
    }


def _cut_table(text: str, gpus: int) -> str:
    """The summary table with the blocks of GPUs 0..gpus-1 only (each block ends at its +---+ line)."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("|===")) + 1
    end = next(i for i in range(start, len(lines)) if not lines[i].strip())
    blocks, current = [], []
    for line in lines[start:end]:
        current.append(line)
        if line.startswith("+"):
            blocks.append(current)
            current = []
    kept = [line for block in blocks[:gpus] for line in block]
    return "\n".join([*lines[:start], *kept, *lines[end:]]) + "\n"


def _cut_topo(text: str, gpus: int) -> str:
    """topo -m without the rows and columns of GPUs from ``gpus`` on (NIC rows, affinity and legend kept)."""
    lines = text.splitlines()
    header = lines[0].split()
    names = [c for c in header if re.fullmatch(r"GPU\d+|NIC\d+", c)]
    dropped = {i for i, name in enumerate(names) if name.startswith("GPU") and int(name[3:]) >= gpus}
    out = [
        "\t"
        + "\t".join(n for i, n in enumerate(names) if i not in dropped)
        + "\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID"
    ]
    for line in lines[1:]:
        cells = line.split()
        if not cells or cells[0] not in names:
            out.append(line)
            continue
        if cells[0].startswith("GPU") and int(cells[0][3:]) >= gpus:
            continue
        relations = cells[1 : 1 + len(names)]
        rest = cells[1 + len(names) :]
        kept = [r for i, r in enumerate(relations) if i not in dropped]
        out.append("\t".join([cells[0], *kept, *rest]))
    return "\n".join(out) + "\n"


def _cut_query(text: str, gpus: int) -> str:
    lines = text.splitlines()
    return "\n".join([lines[0], *(line for line in lines[1:] if int(_cells(line)[0]) < gpus)]) + "\n"


def _cut_nvlink(text: str, gpus: int) -> str:
    blocks = re.split(r"(?m)^(?=GPU \d+: )", text)
    return "".join(b for b in blocks if b and int(b.split(":")[0].split()[1]) < gpus)


def cut_to_gpus(name: str, gpus: int) -> HostSpec:
    """The healthy 8x H100 NDR node as a board (or a pod) that holds only its first ``gpus`` GPUs."""
    status = _cut_nvlink(captured(H100_NVLINK_STATUS), gpus)
    smi = nvidia_smi(
        _cut_table(captured(H100_TABLE), gpus),
        _cut_topo(captured(H100_TOPO), gpus),
        _cut_query(captured(H100_QUERY), gpus),
        status,
        _cut_nvlink(captured(H100_NVLINK_ERRORS), gpus),
        smi_listing(status),
    )
    spec = healthy_h100(name)
    return replace(spec, tools={**spec.tools, "nvidia-smi": smi})


def _fabric_not_applicable(query: str) -> str:
    """The GPU query with fabric.state/status N/A on every GPU, as GPUs outside an NVSwitch fabric print them
    (the lent H100's own query, gpu_query/h100x1_580_with_vbios.txt, shows N/A, N/A)."""
    lines = query.splitlines()
    names = [canonical(column) for column in _cells(lines[0])]
    at = [names.index("fabric.state"), names.index("fabric.status")]
    rows = []
    for line in lines[1:]:
        cells = _cells(line)
        for i in at:
            cells[i] = "N/A"
        rows.append(", ".join(cells))
    return "\n".join([lines[0], *rows]) + "\n"


def pcie_node(name: str) -> HostSpec:
    """Eight GPUs joined by PCIe only (the L40S matrix), no NVLink, no HCA."""
    spec = no_dev_infiniband(name)
    status = captured(A10_NVLINK)
    smi = nvidia_smi(
        captured(H100_TABLE),
        captured(L40S_TOPO),
        _fabric_not_applicable(captured(H100_QUERY)),
        status,
        "",
        smi_listing(captured(H100_NVLINK_STATUS)),
    )
    return replace(spec, tools={**spec.tools, "nvidia-smi": smi})


def pod_view(spec: HostSpec) -> HostSpec:
    """What a container shows of its node: the /dev/shm emptyDir and the SR-IOV net1 address of
    captured/k8s_pod (the healthy pod's), on top of the host's tools."""
    tools = {
        **spec.tools,
        "df": {
            **spec.tools["df"],  # type: ignore[dict-item]
            "-P -k /dev/shm": Reply(stdout=captured(f"{POD_FIXTURES}/df_shm_16g_emptydir.txt")),
        },
        "ip": {"-o addr show": Reply(stdout=captured(f"{POD_FIXTURES}/ip_o_addr_net1.txt"))},
    }
    return replace(spec, tools=tools)


def one_gpu_vm(name: str) -> HostSpec:
    """The lent H100 VM: one H100 80GB HBM3 without NVLink peer (its nvidia-smi, topo -m and GPU query;
    ``nvlink --status`` and ``-e`` printed nothing there), /dev/infiniband holding only rdma_cm and no RDMA
    tool, no lspci, no mlxlink, nvidia and nvidia_uvm loaded and no peermem (the lent machines' module list).
    Kernel log, platform files and packages are the healthy node's: none of them is about the GPU count."""
    spec = healthy_h100(name)
    smi = nvidia_smi(captured(VM_TABLE), captured(VM_TOPO), captured(VM_QUERY), "")
    absent = dict.fromkeys(("ibstat", "ibv_devinfo", "mlxlink", "lspci"))
    lsmod = Reply(stdout=captured(VM_MODULES))
    tools = {**spec.tools, **absent, "nvidia-smi": smi, "lsmod": lsmod}
    return replace(spec, tools=tools, infiniband=["rdma_cm"], sysfs_infiniband={})


def cpu_host(name: str) -> HostSpec:
    """No GPU, no HCA, no GPU tool: a CI runner or a laptop."""
    return HostSpec(name)
