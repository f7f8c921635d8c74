"""The stage's verdicts on real NCCL logs and its choice of backend, without launching anything."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from types import SimpleNamespace

from diagnose.benchmarks.setup import BenchContext, Setup, choose_setup
from diagnose.benchmarks.stage import Stage, nothing_to_measure
from diagnose.config.profile_files import load_profile
from diagnose.core.hosts import Host
from diagnose.core.install_hint import install_command
from diagnose.core.vars import Vars
from diagnose.launchers.base import LaunchOutcome
from tests.support.paths import FACTS

LOGS = FACTS / "nccl_log"
NDR = {"expected_hca_count": 8, "line_rate_gbps": 400, "nvlink_busbw_gbps": 360}


def stage(out: Path, hosts: list[Host]) -> Stage:
    plan = SimpleNamespace(collectives=("all_reduce",), min_bytes=1 << 20, max_bytes=1 << 30, step_factor=2)
    return Stage(BenchContext(hosts, {}, {}, plan, out, "t", lambda c: None, lambda b: None))


def transport_check(case: str, hosts: list[Host], rank_hosts: dict[int, str] | None = None):
    log = LOGS / case / "input.log"
    outcome = LaunchOutcome("done", "", logs={0: log}, rank_hosts=rank_hosts or {})
    bench = stage(LOGS, hosts)
    setup = Setup("nccl", 8, hosts, [])
    return bench.judge_transport(setup, bench.transport(outcome), outcome)


def test_tcp_between_nodes_where_rdma_is_expected_is_a_tcp_fallback_fail() -> None:
    hosts = [Host("node1", vars=Vars(NDR)), Host("node2", vars=Vars(NDR))]
    result = transport_check("socket_fallback_two_nodes", hosts)
    assert result.status == "FAIL"
    assert result.message.startswith("TCP fallback")
    assert "NCCL_IB_DISABLE" in result.message and "/dev/infiniband" in result.message
    assert result.observed["inter_node"] == "NET/Socket"


def test_socket_on_one_node_is_not_a_tcp_fallback() -> None:
    """NCCL says 'Using network Socket' on every single-node run; only the channels count."""
    host = Host("vm", vars=Vars(NDR))
    assert transport_check("h200x4_p2p_single_node", [host]).status == "PASS"
    result = transport_check("h200x4_socket_single_node", [host])
    assert result.status == "WARN"
    assert "P2P and SHM are off" in result.message


def test_infiniband_with_gpudirect_passes_and_without_warns() -> None:
    hosts = [Host("a", vars=Vars(NDR)), Host("b", vars=Vars(NDR))]
    good = transport_check("ib_gdrdma_two_nodes", hosts)
    assert good.status == "PASS" and "NET/IB" in good.message and "GPUDirect RDMA" in good.message
    assert transport_check("ib_without_gdrdma", hosts).status == "WARN"


def test_efa_is_rdma_not_a_fallback() -> None:
    hosts = [Host("a", vars=Vars(NDR)), Host("b", vars=Vars(NDR))]
    result = transport_check("efa_p4d_two_nodes", hosts)
    assert result.status == "PASS" and "NET/OFI" in result.message


def test_backend_and_ranks_come_from_the_gpu_facts() -> None:
    hosts = [Host("g1"), Host("g2"), Host("cpu")]
    facts = {"g1": {"gpu.topology": {"gpu_count": 8}}, "g2": {"gpu.topology": {"gpu_count": 8}}}
    setup = choose_setup(hosts, facts)
    assert (setup.backend, setup.nproc, [h.name for h in setup.hosts]) == ("nccl", 8, ["g1", "g2"])
    assert "left out (no GPU found): cpu" in setup.notes[0]
    cpu_only = choose_setup([Host("c1"), Host("c2")], {})
    assert (cpu_only.backend, cpu_only.nproc) == ("gloo", 1)
    forced = choose_setup([Host("x", vars=Vars({"bench_gpus_per_host": 2}))], {})
    assert (forced.backend, forced.nproc) == ("nccl", 2)


def test_ranks_per_host_are_the_gpus_cuda_sees_and_the_notes_name_the_rest() -> None:
    """Issue 33: with CUDA_VISIBLE_DEVICES=0 on a 4-GPU node four ranks were started and three died."""
    topology = {
        "gpu_count": 4,
        "visible_gpu_count": 1,
        "visible_note": "1 of 4 GPUs visible (CUDA_VISIBLE_DEVICES=0)",
    }
    setup = choose_setup(
        [Host("g1"), Host("g2")], {"g1": {"gpu.topology": topology}, "g2": {"gpu.topology": topology}}
    )
    assert (setup.backend, setup.nproc) == ("nccl", 1)
    assert setup.notes == [
        "g1: 1 of 4 GPUs visible (CUDA_VISIBLE_DEVICES=0)",
        "g2: 1 of 4 GPUs visible (CUDA_VISIBLE_DEVICES=0)",
    ]
    hidden = choose_setup([Host("g1")], {"g1": {"gpu.topology": {**topology, "visible_gpu_count": 0}}})
    assert hidden.backend == "gloo"


def test_hosts_where_torch_does_not_import_are_named_before_any_launch(tmp_path: Path) -> None:
    hosts = [Host("gpu1", vars=Vars(host="gpu1")), Host("gpu2", vars=Vars(host="gpu2"))]
    checks: list = []
    plan = SimpleNamespace(collectives=["all_reduce"], tool="torch", enabled=True)
    facts = {
        "gpu1": {
            "nccl.version": {"torch": "2.11.0+cu130", "torch_error": None, "python": "/usr/bin/python3"}
        },
        "gpu2": {
            "nccl.version": {
                "torch": None,
                "torch_error": "ModuleNotFoundError",
                "python": "/usr/bin/python3",
            }
        },
    }
    ctx = BenchContext(hosts, {}, facts, plan, tmp_path, "t", checks.append, lambda b: None)
    Stage(ctx).run_torch(Setup("gloo", 1, hosts, []), ["all_reduce"])
    torch, result = checks
    assert (torch.id, torch.host, torch.status) == ("host.torch", "gpu2", "ERROR"), "the one cause"
    assert torch.message.startswith(
        "torch cannot be imported by /usr/bin/python3 on gpu2: ModuleNotFoundError"
    )
    assert result.id == "bench.all_reduce" and result.status == "ERROR"
    assert "gpu2 (/usr/bin/python3: ModuleNotFoundError)" in result.message and "gpu1" not in result.message
    assert (
        "Install torch for that interpreter on the host" in result.message
        and "bench_python" in result.message
    )
    assert "pip install" not in result.message, "a remote host's Python is not fixed by installing diagnose"
    # nccl.version probes bench_python where it is set: the launch's own Python, judged the same way.
    hosts[1].vars = Vars({"bench_python": "/opt/venv/bin/python"}, host="gpu2")
    facts["gpu2"]["nccl.version"]["python"] = "/opt/venv/bin/python"
    assert "gpu2 (/opt/venv/bin/python: ModuleNotFoundError)" in (Stage(ctx).torch_missing(hosts) or "")


def test_this_machine_without_torch_is_told_to_install_the_bench_extra_where_diagnose_runs(
    tmp_path: Path,
) -> None:
    """The default target runs `python3` from PATH: when that is diagnose's own interpreter (an activated
    venv), the fix is the bench extra from where diagnose came; when it is another Python, bench_python
    can point at diagnose's own once the extra is there."""
    host = Host("localhost", vars=Vars({"ansible_connection": "local"}, host="localhost"))
    plan = SimpleNamespace(collectives=["all_reduce"], tool="torch", enabled=True)
    for python, expected in (
        (sys.executable, f"bench extra into the environment running it: {install_command()}"),
        ("/usr/bin/python3", f"-e bench_python={shlex.quote(sys.executable)}"),
    ):
        facts = {"localhost": {"nccl.version": {"torch": None, "torch_error": "No module", "python": python}}}
        ctx = BenchContext([host], {}, facts, plan, tmp_path, "t", lambda c: None, lambda b: None)
        message = Stage(ctx).torch_missing([host]) or ""
        assert message.startswith(f"torch cannot be imported on localhost ({python}: No module). ")
        assert expected in message
        assert "'diagnose[bench]'" not in message, "diagnose on the package index is another project"


def test_the_torch_remedy_names_the_build_that_fits_the_hosts_gpus(tmp_path: Path) -> None:
    """A machine without an NVIDIA GPU is told to install the CPU wheel (the default CUDA build was 5.6 GB
    and 51 s there); one with a GPU, the bench extra's default build. Remote hosts likewise by their facts."""
    local = Host("localhost", vars=Vars({"ansible_connection": "local"}, host="localhost"))
    remote = Host("cpu1", vars=Vars(host="cpu1"))
    plan = SimpleNamespace(collectives=["all_reduce"], tool="torch", enabled=True)
    cpu = "-m pip install torch --index-url https://download.pytorch.org/whl/cpu"

    def message(host: Host, gpu: bool) -> str:
        probe = {"torch": None, "torch_error": "No module", "python": sys.executable, "nvidia_gpu": gpu}
        ctx = BenchContext(
            [host], {}, {host.name: {"nccl.version": probe}}, plan, tmp_path, "t", print, print
        )
        return Stage(ctx).torch_missing([host]) or ""

    assert f"{shlex.quote(sys.executable)} {cpu}" in message(local, False)
    assert "[bench]" not in message(local, False)
    assert install_command() in message(local, True) and "whl/cpu" not in message(local, True)
    assert cpu in message(remote, False) and "no NVIDIA GPU" in message(remote, False)
    assert "pip" not in message(remote, True)


def test_an_aarch64_trays_torch_remedy_names_pytorchs_cuda_index(tmp_path: Path) -> None:
    """A Grace tray (uname -m aarch64 in nccl.version's facts): the package index's torch is the CPU build
    there, so the remedy names PyTorch's CUDA index instead of the plain install it gives an x86 host."""
    tray = Host("tray1", vars=Vars(host="tray1"))
    plan = SimpleNamespace(collectives=["all_reduce"], tool="torch", enabled=True)
    probe = {"torch": None, "torch_error": "No module", "python": "/usr/bin/python3", "nvidia_gpu": True}
    for machine, cuda in (("aarch64", True), ("x86_64", False), (None, False)):
        facts = {"tray1": {"nccl.version": {**probe, "machine": machine}}}
        ctx = BenchContext([tray], {}, facts, plan, tmp_path, "t", print, print)
        message = Stage(ctx).torch_missing([tray]) or ""
        assert (
            "/usr/bin/python3 -m pip install torch --index-url https://download.pytorch.org/whl/cu130"
            in message
        ) is cuda


def test_one_gpu_in_all_skips_the_sweep_and_the_transport_without_launching(tmp_path: Path) -> None:
    """The lent H100 VM's shape: one host, one GPU. A one-rank all_reduce moves nothing (busbw 0 by the
    (n-1)/n factor) and NCCL opens no connection: both are SKIP with that reason, and nothing is launched
    (a launch would need the hosts' connections, which this context does not have)."""
    host = Host("localhost", vars=Vars({"nvlink_busbw_gbps": 340}, host="localhost"))
    checks: list = []
    plan = SimpleNamespace(
        collectives=("all_reduce", "all_gather"), fleet_probes=False, training_probe=False, kv_transfer=False
    )
    facts = {"localhost": {"gpu.topology": {"gpu_count": 1}}}
    ctx = BenchContext([host], {}, facts, plan, tmp_path, "t", checks.append, lambda b: None)
    Stage(ctx).run()
    assert [(c.id, c.status) for c in checks] == [
        ("nccl.transport", "SKIP"),
        ("bench.all_reduce", "SKIP"),
        ("bench.all_gather", "SKIP"),
    ]
    for check in checks:
        assert check.message.startswith("not measured: one rank in all (localhost, one GPU)"), check.message
        assert "moves nothing between ranks and opens no connection" in check.message


def test_one_gpu_on_each_of_two_hosts_is_measured() -> None:
    hosts = [Host("a"), Host("b")]
    assert nothing_to_measure(Setup("nccl", 1, hosts, [])) is None
    assert nothing_to_measure(Setup("nccl", 2, hosts[:1], [])) is None
    assert "one rank in all (a, one gloo process)" in (
        nothing_to_measure(Setup("gloo", 1, hosts[:1], [])) or ""
    )


def test_one_host_with_more_gpus_than_the_others_runs_as_many_ranks_as_the_smallest_and_says_so() -> None:
    hosts = [Host("node-a"), Host("node-b"), Host("node-c")]
    facts = {
        name: {"gpu.topology": {"gpu_count": n}} for name, n in (("node-a", 4), ("node-b", 4), ("node-c", 8))
    }
    setup = choose_setup(hosts, facts)
    assert (setup.backend, setup.nproc, len(setup.hosts)) == ("nccl", 4, 3)
    assert setup.notes == [
        "GPU counts differ between hosts ([4, 8]); 4 ranks per host, so the GPUs beyond the first 4 of "
        "node-c (8) are not in this sweep"
    ]
    assert nothing_to_measure(setup) is None


def test_a_sweep_inside_one_nvlink_domain_is_judged_and_recorded_as_that_domain(tmp_path: Path) -> None:
    """Two GB200 trays whose NCCL log says every rank is in one NVLink domain: the verdict reads the domain's
    figure (not a two-node fabric's, which the GB200 profile leaves to the fleet) and the entry says which."""
    log = (LOGS / "gb200_mnnvl_one_tray" / "input.log").read_text()
    two_trays = log.replace("nvlDomainSize 4", "nvlDomainSize 8").replace("nNodes 1", "nNodes 2")
    (tmp_path / "rank0.log").write_text(two_trays)
    gb200 = dict(load_profile("gb200-nvl72").vars)
    hosts = [Host(f"tray{i}", vars=Vars(gb200, host=f"tray{i}")) for i in (1, 2)]
    bench = stage(tmp_path, hosts)
    outcome = LaunchOutcome("done", "", logs={0: tmp_path / "rank0.log"})
    rows = [
        {
            "collective": "all_reduce",
            "bytes": 1 << 30,
            "time_us": 3000.0,
            "algbw_gbps": 357.9,
            "busbw_gbps": 626.3,
            "wrong": 0,
        },
    ]
    outcome.rows = rows
    record = bench.entry("all_reduce", Setup("nccl", 4, hosts, []), hosts, outcome, bench.transport(outcome))[
        0
    ]
    assert (record["path"], record["nvlink_domain_gpus"]) == ("nvlink_domain", 8)
    assert record["status"] == "PASS", record["message"]
    assert "NVLink domain of 8 GPUs on 2 trays" in record["message"]
    assert record["normal_range_gbps"] == [578.0, 782.0]
    plain = bench.entry("all_reduce", Setup("nccl", 4, hosts, []), hosts, outcome, None)[0]
    assert (plain["path"], plain["status"]) == ("fabric", "WARN"), "without NCCL's word it is the fabric's"
