"""The probes after a sweep that stopped early: smaller sizes and fewer samples, each with its reason."""

from __future__ import annotations

from diagnose.benchmarks.early_stop import BROKEN_SAMPLES, probe_bytes, probe_samples

# The stopped_early note the real 4× H200 NET/Socket sweep gives (tests/fixtures/results/h200x4_two_halves_socket).
SOCKET = {"after_bytes": 256 << 20, "busbw_gbps": 5.768, "plateau_gbps": 5.48, "floor_gbps": 289.0}
RECORDS = {"all_reduce": {"stopped_early": {**SOCKET, "skipped_bytes": [512 << 20, 1 << 30]}}}
HEALTHY = {"all_reduce": {"rows": [], "status": "PASS"}}


def test_a_healthy_sweep_leaves_the_probes_as_planned() -> None:
    assert probe_bytes(HEALTHY, 1 << 30) == (1 << 30, None)
    assert probe_samples(HEALTHY, 20) == (20, None)


def test_after_a_stopped_sweep_the_fleet_busbw_moves_its_last_size() -> None:
    size, note = probe_bytes(RECORDS, 1 << 30)
    assert size == 256 << 20
    assert note == (
        "measured at 256 MiB, not 1 GiB: the sweep's all_reduce stopped early there "
        "(5.77 GB/s against the floor 289 GB/s)"
    )
    assert probe_bytes(RECORDS, 128 << 20) == (128 << 20, None), "never larger than planned"


def test_after_a_stopped_sweep_a_probe_keeps_a_few_samples() -> None:
    samples, note = probe_samples(RECORDS, 20)
    assert samples == BROKEN_SAMPLES == 3
    assert note is not None and note.startswith("at least 3 samples per row, not 20: the sweep's all_reduce")
    assert probe_samples(RECORDS, 2) == (2, None)
