"""The KV-transfer benchmark's variables: checked when the inventory is read, then read by the extra."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from diagnose.benchmarks.setup import BenchContext, Setup
from diagnose.benchmarks.stage import Stage
from diagnose.config.host_settings import first_problem
from diagnose.config.profile_files import load_profile
from diagnose.core.hosts import Host
from diagnose.core.model import CheckResult
from diagnose.core.vars import Vars
from diagnose.inference.model import KVModel
from diagnose.inference.pairs import Endpoint, Pair
from diagnose.probes import kv_transfer
from diagnose.probes.kv_settings import parse_pair_env
from diagnose.probes.kv_transfer import Settings, expected_rows, limits, program_args
from diagnose.probes.registry import HOST_SETTINGS


@pytest.mark.parametrize(
    ("values", "problem"),
    [
        ({"kv_model": {"layers": 0}}, "kv_model: layers must be a whole number from 1, got 0"),
        (
            {"kv_request_tokens": "1k,lots"},
            "kv_request_tokens: 'lots' is not a token count such as 4096 or 4k",
        ),
        ({"kv_prefill_gpus": "GPU0,GPU1", "kv_decode_gpus": "GPU2"}, "pair GPUs in order"),
        ({"kv_prefill_gpus": "GPU0", "kv_decode_gpus": "card2"}, "kv_decode_gpus: 'card2' is not a GPU"),
        ({"kv_pair_env": "GPU0->GPU1:NCCL_P2P_DISABLE=1"}, "kv_pair_env must be a mapping"),
        ({"kv_pair_env": {"GPU0-GPU1": {"A": "1"}}}, "must be written prefill->decode"),
        (
            {"kv_pair_env": {"GPU0->GPU1": {"NOT A NAME": "1"}}},
            "name 'NOT A NAME' is not a valid environment",
        ),
        ({"kv_repeats": 0}, "kv_repeats must be between 1 and 100000"),
    ],
)
def test_bad_values_stop_the_run_before_any_host_is_touched(values: dict, problem: str) -> None:
    found = first_problem(Vars(values, "node1"), HOST_SETTINGS)
    assert found is not None and problem in found[1]


def test_good_values_pass_and_are_read_per_backend() -> None:
    values = Vars(
        {
            "kv_model": "layers=32,kv_heads=8,head_dim=128",
            "kv_request_tokens": "2k,8k",
            "kv_prefill_gpus": ["GPU0", "GPU1"],
            "kv_decode_gpus": "GPU4,GPU5",
            "kv_pair_env": {"GPU2->GPU3": "NCCL_P2P_DISABLE=1,NCCL_SHM_DISABLE=0"},
            "kv_repeats": "50",
        },
        "node1",
    )
    assert first_problem(values, HOST_SETTINGS) is None
    settings = Settings.read(values, "nccl")
    assert settings.model == KVModel(layers=32) and settings.tokens == [2048, 8192]
    assert (settings.sizing.repeats, settings.sizing.min_samples) == (50, 20)
    assert settings.prefill == ["GPU0", "GPU1"] and settings.decode == ["GPU4", "GPU5"]
    assert settings.pair_env == {"GPU2->GPU3": {"NCCL_P2P_DISABLE": "1", "NCCL_SHM_DISABLE": "0"}}
    defaults = Settings.read(Vars({}), "gloo")
    assert (
        defaults.tokens == [16, 64] and defaults.sizing.repeats == 20 and defaults.staged_max_tokens == 1024
    )
    assert Settings.read(Vars({}), "nccl").tokens == [1024, 4096, 16384, 32768]
    assert parse_pair_env(None) == {}


def test_the_launch_arguments_and_rows_follow_the_settings() -> None:
    settings = Settings.read(Vars({"kv_request_tokens": "1k,4k"}), "nccl")
    pair = Pair(Endpoint("n1", 3), Endpoint("n1", 1), "NV18")
    args = program_args("nccl", pair, settings)
    assert args[args.index("--gpus") + 1] == "3,1" and args[args.index("--block-bytes") + 1] == str(5 << 20)
    assert expected_rows(settings) == [
        ("kv_block", 320 << 20),
        ("kv_packed", 320 << 20),
        ("kv_staged", 320 << 20),
        ("kv_block", 1280 << 20),
        ("kv_packed", 1280 << 20),
    ]


def test_thresholds_come_from_the_profile() -> None:
    h200 = limits(Vars(load_profile("h200-8x-ndr400").vars))
    assert (h200.nvlink_gbps, h200.line_rate_gbps, h200.min_link_fraction, h200.p99_p50_max) == (
        360,
        400,
        0.5,
        1.5,
    )
    tuned = limits(Vars({"nvlink_busbw_gbps": 340, "kv_nvlink_gbps": 390, "kv_pcie_gbps": 50}))
    assert (tuned.nvlink_gbps, tuned.pcie_gbps) == (390, 50)


def test_one_host_without_gpu_skips_with_the_reason(tmp_path: Path) -> None:
    checks: list[CheckResult] = []
    host = Host("cpu1", vars=Vars({"expected_gpu_count": 0}, "cpu1"))
    plan = SimpleNamespace(kv_transfer=True)
    context = BenchContext([host], {}, {}, plan, tmp_path, "run", checks.append, lambda entry: None)
    kv_transfer.run(Stage(context), Setup("gloo", 1, [host], []))
    assert [(c.id, c.status, c.checklist) for c in checks] == [
        ("infer.kv_transfer", "SKIP", "5"),
        ("infer.placement", "SKIP", "5"),
        ("infer.staging", "SKIP", "5"),
    ]
    assert "one host without GPU" in checks[0].message and "expected_gpu_count 0" in checks[0].message
