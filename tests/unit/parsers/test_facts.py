"""Every host-fact parser against real captured outputs, one case file per output (pyinfra style).

A case is ``tests/facts/<parser>/<case>.json``, run by :func:`tests.support.facts.check_case`: adding an odd
firmware's output is adding a file, not code.
"""

from __future__ import annotations

from diagnose.parsers.gpudirect import parse_driver_version_file, parse_kernel_release, parse_modules
from diagnose.parsers.ibstat import parse_ibstat
from diagnose.parsers.ibv_devinfo import parse_dev_infiniband, parse_ibv_devinfo
from diagnose.parsers.nccl_env import parse_nccl_env
from diagnose.parsers.nccl_version import parse_nccl_libs, parse_torch_probe
from diagnose.parsers.nvidia_presence import parse_nvidia_presence
from diagnose.parsers.nvidia_smi import parse_smi_summary, parse_topo
from diagnose.parsers.os_release import parse_os_release
from diagnose.parsers.visible_gpus import parse_smi_list, parse_visibility_env
from tests.support.facts import Parse, differences, fact_suite, source_problem

PARSERS: dict[str, Parse] = {
    "ibstat": lambda text, rc: parse_ibstat(text),
    "ibv_devinfo": lambda text, rc: parse_ibv_devinfo(text),
    "dev_infiniband": parse_dev_infiniband,
    "smi_summary": lambda text, rc: parse_smi_summary(text),
    "topo": lambda text, rc: parse_topo(text),
    "modules": lambda text, rc: parse_modules(text),
    "nvidia_version": parse_driver_version_file,
    "kernel_release": lambda text, rc: parse_kernel_release(text),
    "torch_probe": parse_torch_probe,
    "nccl_libs": lambda text, rc: parse_nccl_libs(text),
    "nccl_env": lambda text, rc: parse_nccl_env(text),
    "os_release": lambda text, rc: parse_os_release(text),
    "smi_list": lambda text, rc: parse_smi_list(text),
    "visibility_env": lambda text, rc: parse_visibility_env(text),
    "nvidia_presence": lambda text, rc: parse_nvidia_presence(text),
}


test_case, test_every_parser_has_cases, test_every_fixture_is_used_and_sourced = fact_suite(PARSERS)


def test_a_source_that_only_describes_its_output_is_refused() -> None:
    """The runner's own rule, shown on the shapes it must refuse: a description, or a captured fixture whose
    source is not its folder's SOURCE."""
    assert source_problem({"source": "nvidia-smi when the kernel module and the library differ"})
    assert source_problem({"source": "see tests/fixtures/captured/ibstat/SOURCE", "fixture": "topo/x.txt"})
    assert source_problem({"source": "composed from tests/fixtures/captured/ibstat/none.txt: gone"})
    assert source_problem({"source": "machine: lent nvidia-h100-x1, 2026-11-25: numa_balancing"}) is None
    assert (
        source_problem({"source": "linux-rdma/rdma-core:libibverbs/examples/devinfo.c: its message"}) is None
    )
    assert source_problem({"source": "machine: development container, 2026-11-27: ls -1 /dev/infiniband"})
    assert source_problem({"source": "command: `ls -1 /dev/infiniband` on Debian 12, 2026-11-28"}), (
        "no version"
    )
    assert (
        source_problem(
            {"source": "command: `ls -1 /dev/infiniband` (coreutils 9.1-1) on Debian 12, 2026-11-28"}
        )
        is None
    )


def test_stated_facts_are_strict_on_what_they_state() -> None:
    stated = [{"index": "1", "pcie.link.width.current": "8"}]
    assert differences(stated, [{"index": "1", "pcie.link.width.current": "8", "name": "H200"}]) == []
    assert differences(stated, [{"index": "1", "pcie.link.width.current": "16"}])
    assert differences(stated, [{"index": "1"}])
    assert differences(stated, [*stated, *stated])
    assert differences({}, {"extra": 1}) and differences([], [1])
    assert differences({"on": True}, {"on": 1})


def test_a_long_list_is_stated_by_counts_and_the_odd_one_out() -> None:
    """Eight ports, seven Active, mlx5_3 Down: each form fails when the answer departs from it."""
    ports = [{"device": f"mlx5_{i}", "state": "Down" if i == 3 else "Active", "rate": 400} for i in range(8)]
    stated = {
        "#": 8,
        "*": {"rate": 400},
        "#state=Active": 7,
        "device=mlx5_3": {"state": "Down"},
        "0": {"rate": 400},
    }
    assert differences(stated, ports) == []
    assert differences({"#": 7}, ports)
    assert differences({"*": {"state": "Active"}}, ports)
    assert differences({"#state=Active": 8}, ports)
    assert differences({"device=mlx5_3": {"state": "Active"}}, ports)
    assert differences({"state=Active": {}}, ports), "a pick must name exactly one item"
    assert differences({"device=mlx5_9": {}}, ports)
    assert differences({"9": {}}, ports)
    row = {"GPU0": "X", "GPU1": "NV18", "NIC0": "PIX", "NIC1": "SYS"}
    assert differences({"#": 4, "#=NV18": 1, "NIC0": "PIX"}, row) == []
    assert differences({"#=SYS": 2}, row) and differences({"NIC2": "SYS"}, row)
    assert differences({"#active=false": 1}, [{"active": False}, {"active": 0}]) == []
