"""The engine's side of node health, on a real local shell: the second snapshot after the benchmarks,
the samples taken under load, the join of moved IB counters to slow collectives, folding under ib.devices,
and which NICs carried the collectives.

The checks are the catalog's own, with their command swapped for ``cat`` of a captured output that the
test changes between the snapshots, as a cable flapping during the benchmarks changes sysfs.
"""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import replace
from pathlib import Path

from diagnose.benchmarks.fabric_nics import compute_nics, is_compute, nics_phrase, wrong_nics
from diagnose.checks import (
    gpu_pcie,
    host_reachable,
    ib_counters,
    ib_devices,
    ib_link_rate,
    ib_mtu,
    ib_port_state,
)
from diagnose.config.profile_files import load_profile
from diagnose.core.check import Check, Command
from diagnose.core.hosts import Host
from diagnose.core.model import CommandOutput
from diagnose.core.vars import Vars
from diagnose.engine.evaluate import evaluate_check, fold_into_root_causes
from diagnose.engine.results import ResultsStore
from diagnose.engine.sampling import LoadSampler
from diagnose.engine.stages import (
    HostState,
    assess_host,
    note_counters_on_slow_collectives,
    run_after_snapshot_stage,
)
from tests.support.paths import CAPTURED


def local_host(profile: str = "h100-8x-ndr400", **extra: object) -> Host:
    values = {
        **load_profile(profile).vars,
        "diagnose_profile": profile,
        "ansible_connection": "local",
        **extra,
    }
    return Host("local", vars=Vars(values, host="local"))


def reading(check: Check, key: str, path: Path) -> Check:
    """The check with its one command reading ``path`` instead of the hardware."""
    return replace(check, commands=(Command(key, f"cat {path}", timeout=10),), commands_for=None)


def store_in(tmp_path: Path) -> ResultsStore:
    return ResultsStore(tmp_path / "results.json", {"id": "t", "argv": []})


def by_id(store: ResultsStore) -> dict[str, dict]:
    return {c["id"]: c for c in store.document()["checks"]}


def first_counter_snapshot(tmp_path: Path) -> tuple[Path, list[Check], HostState, ResultsStore]:
    """The host stage over GPUd's healthy H100 counters, read from a file the test may change next."""
    sysfs = tmp_path / "counters.txt"
    shutil.copy(CAPTURED / "ib_counters" / "h100_gpud_sysfs_testdata.txt", sysfs)
    checks = [host_reachable.CHECK, reading(ib_counters.CHECK, "ib_counters", sysfs)]
    state = assess_host(local_host(), checks, tmp_path, False, None)
    store = store_in(tmp_path)
    store.add_checks(state.results)
    return sysfs, checks, state, store


def test_a_link_flap_during_the_run_fails_on_the_second_snapshot(tmp_path: Path) -> None:
    sysfs, checks, state, store = first_counter_snapshot(tmp_path)
    assert by_id(store)["ib.counters"]["status"] in ("PASS", "WARN")

    shutil.copy(CAPTURED / "ib_counters" / "h100_gpud_sysfs_after_flap_mlx5_4.txt", sysfs)
    run_after_snapshot_stage({"local": state}, checks, tmp_path, store, forks=2)
    result = by_id(store)["ib.counters"]
    assert result["status"] == "FAIL", result["message"]
    assert "mlx5_4" in result["message"] and "link_downed" in result["message"]
    assert len([c for c in store.document()["checks"] if c["id"] == "ib.counters"]) == 1, (
        "replaced, not added"
    )
    assert (tmp_path / "raw" / "local" / "ib_counters.after.txt").read_text() == sysfs.read_text()

    store.add_benchmark(
        {"collective": "all_reduce", "status": "FAIL", "message": "all_reduce: 12 GB/s below 289."}
    )
    store.add_benchmark({"collective": "all_gather", "status": "PASS", "message": "fine."})
    note_counters_on_slow_collectives(store)
    slow, fine = store.document()["benchmarks"]
    assert "IB error counters moved during the benchmarks on local (mlx5_4" in slow["message"]
    assert fine["message"] == "fine."
    state.connection.close()


def test_nothing_moved_is_no_failure_and_a_saturated_counter_is_named(tmp_path: Path) -> None:
    """GPUd's H100 capture has mlx5_1's link_downed stuck at 255, the most the 8-bit counter holds."""
    _, checks, state, store = first_counter_snapshot(tmp_path)
    run_after_snapshot_stage({"local": state}, checks, tmp_path, store, forks=2)
    result = by_id(store)["ib.counters"]
    assert result["status"] == "WARN", result["message"]
    assert "mlx5_1 port 1: link_downed is saturated at 255" in result["message"]


def test_a_missing_second_snapshot_keeps_the_first_verdict_and_says_so(tmp_path: Path) -> None:
    sysfs, checks, state, store = first_counter_snapshot(tmp_path)
    first = by_id(store)["ib.counters"]
    sysfs.unlink()
    os.mkfifo(sysfs)  # the second read never answers: a wedged HCA driver
    state.host.vars = Vars({**state.host.vars, "command_timeout_s": 1}, host="local")
    run_after_snapshot_stage({"local": state}, checks, tmp_path, store, forks=2)
    result = by_id(store)["ib.counters"]
    assert result["status"] == first["status"]
    assert "no snapshot after the run" in result["message"]


def test_pcie_generation_is_judged_on_samples_taken_under_load(tmp_path: Path) -> None:
    query = tmp_path / "query.txt"
    shutil.copy(CAPTURED / "gpu_query" / "pcie_gen1_idle.txt", query)
    check = reading(gpu_pcie.CHECK, "gpu_query", query)
    checks = [host_reachable.CHECK, check]
    host = local_host("single-node-nvlink", expected_gpu_count=None)
    state = assess_host(host, checks, tmp_path, False, None)
    store = store_in(tmp_path)
    store.add_checks(state.results)
    idle = by_id(store)["gpu.pcie"]
    assert idle["status"] == "PASS" and "idle" in idle["message"], idle["message"]

    assert state.connection is not None
    with LoadSampler([host], {"local": state.connection}, [check], interval_s=0.1) as sampler:
        shutil.copy(CAPTURED / "gpu_query" / "pcie_gen4_under_load_gpu0.txt", query)
        deadline = time.monotonic() + 10
        while len(sampler.samples["local"].get("gpu.pcie", [])) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
    assert sampler.samples["local"]["gpu.pcie"], "the sampler took samples while the benchmarks ran"
    shutil.copy(CAPTURED / "gpu_query" / "pcie_gen1_idle.txt", query)  # idle again when the run ends
    run_after_snapshot_stage(
        {"local": state}, checks, tmp_path, store, forks=2, samples={"local": sampler.samples["local"]}
    )
    loaded = by_id(store)["gpu.pcie"]
    assert loaded["status"] in ("WARN", "FAIL"), loaded["message"]
    assert "load" in loaded["message"]
    state.connection.close()


def _outputs(**texts: tuple[str, int]) -> dict[str, CommandOutput]:
    return {key: CommandOutput(stdout=text, exit_code=rc) for key, (text, rc) in texts.items()}


def test_no_rdma_device_folds_every_ib_check_under_ib_devices() -> None:
    host_vars = Vars({**load_profile("h100-8x-ndr400").vars, "diagnose_profile": "h100-8x-ndr400"}, host="n1")
    missing = ("sh: 1: tool: not found", 127)
    outputs = _outputs(
        dev_infiniband=("ls: cannot access '/dev/infiniband': No such file or directory", 2),
        ibv_devinfo=missing,
        ibstat=missing,
        ib_counters=((CAPTURED / "ib_counters" / "h200x2_no_rdma_device.txt").read_text(), 0),
    )
    checks = [ib_devices.CHECK, ib_port_state.CHECK, ib_link_rate.CHECK, ib_mtu.CHECK, ib_counters.CHECK]
    results, facts = [], {}
    for check in checks:
        result, parsed = evaluate_check(check, outputs, host_vars, None)
        results.append(result)
        if parsed is not None:
            facts[check.id] = parsed
    assert [r.status for r in results][:4] == ["FAIL", "ERROR", "ERROR", "ERROR"]
    fold_into_root_causes(results, facts, checks, host_vars)
    statuses = {r.id: (r.status, r.message) for r in results}
    assert statuses["ib.devices"][0] == "FAIL"
    for check_id in ("ib.port_state", "ib.link_rate", "ib.mtu", "ib.counters"):
        status, message = statuses[check_id]
        assert status == "SKIP" and "see ib.devices" in message and "no RDMA device on n1" in message


def test_with_hcas_present_nothing_is_folded() -> None:
    host_vars = Vars({**load_profile("h100-8x-ndr400").vars}, host="n1")
    facts = {"ib.devices": {"dev": {"present": True, "uverbs": ["uverbs0"], "entries": []}, "devices": []}}
    result, _ = evaluate_check(
        ib_port_state.CHECK, _outputs(ibstat=("sh: ibstat: not found", 127)), host_vars, None
    )
    fold_into_root_causes([result], facts, [ib_devices.CHECK, ib_port_state.CHECK], host_vars)
    assert result.status == "ERROR"


# ------------------------------------------------------------------------------------ the right fabric

TOPOLOGY = {
    "gpu.topology": {"nearest_nic": {f"GPU{i}": {"relation": "PIX", "nic": f"mlx5_{i}"} for i in range(8)}}
}


def test_compute_nics_come_from_the_profile_or_from_the_gpu_local_nics() -> None:
    assert compute_nics(Host("a", vars=Vars({"expected_compute_hcas": "mlx5_[0-7]"})), {}) == (
        ["mlx5_[0-7]"],
        "expected_compute_hcas",
    )
    patterns, source = compute_nics(Host("a", vars=Vars({})), TOPOLOGY) or ([], "")
    assert patterns == [f"mlx5_{i}" for i in range(8)] and "topo -m" in source
    assert compute_nics(Host("a", vars=Vars({})), {}) is None
    assert is_compute("mlx5_3:1", patterns) and not is_compute("mlx5_8:1", patterns)


def test_traffic_over_the_storage_hca_is_named() -> None:
    hosts = [Host("a", vars=Vars({})), Host("b", vars=Vars({}))]
    used = {"a": ["mlx5_0:1", "mlx5_1:1"], "b": ["mlx5_0:1", "mlx5_8:1"]}
    problems = wrong_nics(used, hosts, {"a": TOPOLOGY, "b": TOPOLOGY})
    assert len(problems) == 1 and problems[0].startswith("b sent inter-node traffic over mlx5_8:1")
    assert wrong_nics({"a": ["mlx5_0:1"]}, hosts, {"a": TOPOLOGY}) == []
    assert nics_phrase({"a": ["mlx5_0:1"], "b": ["mlx5_0:1"]}) == "; NICs used: mlx5_0:1 on every node"
