"""The training probe's variables: refused at inventory time when wrong, turned into the program's arguments
when right; its sizing helpers agree with the model the program builds."""

from __future__ import annotations

import pytest

from diagnose.benchmarks.setup import Setup
from diagnose.config.host_settings import first_problem
from diagnose.core.hosts import Host
from diagnose.core.vars import Vars
from diagnose.probes.registry import HOST_SETTINGS
from diagnose.probes.training import ProbeSettings, phase_budget, skip_reason
from diagnose.shipped.train_probe import (
    GPU_DEFAULTS,
    gradient_bytes,
    model_shape,
    parameter_count,
    parse_args,
)


@pytest.mark.parametrize(
    ("name", "value", "words"),
    [
        ("train_probe_bucket_caps", "25,abc", "must list bucket sizes in MB"),
        ("train_probe_bucket_caps", "100,-4", "'-4' is not a positive number"),
        ("train_probe_bucket_caps", "inf", "'inf' is not a positive number"),
        ("train_probe_steps", 80, "between 1 and 50"),
        ("train_probe_steps", "five", "must be an integer"),
        ("train_probe_params_m", 0, "between 0.01 and 100000"),
        ("train_probe_batch", 0, "between 1 and 4096"),
    ],
)
def test_a_bad_probe_setting_stops_the_run_naming_it(name: str, value: object, words: str) -> None:
    problem = first_problem(Vars({name: value}, "node1"), HOST_SETTINGS)
    assert problem is not None
    assert problem[0] == name and words in problem[1] and "node1" in problem[1]


def test_good_settings_pass_and_become_program_arguments() -> None:
    values = {
        "train_probe_bucket_caps": ["100", "25", "400", "100"],
        "train_probe_steps": "4",
        "train_probe_params_m": 50,
        "train_probe_batch": 2,
    }
    assert first_problem(Vars(values, "node1"), HOST_SETTINGS) is None
    settings = ProbeSettings.from_vars(Vars(values))
    assert settings.bucket_caps == [25.0, 100.0, 400.0], "the default first, each size once"
    args = settings.program_args("nccl")
    assert args == [
        "--backend", "nccl", "--bucket-cap-mb", "25,100,400", "--params-m", "50", "--batch", "2", "--steps", "4",
    ]  # fmt: skip
    parsed = parse_args(args)
    assert (parsed.bucket_caps, parsed.params_m, parsed.batch, parsed.steps) == (
        [25.0, 100.0, 400.0],
        50,
        2,
        4,
    )


def test_without_settings_the_program_uses_its_device_defaults() -> None:
    settings = ProbeSettings.from_vars(Vars({}))
    assert settings.program_args("gloo") == ["--backend", "gloo", "--bucket-cap-mb", "25"]
    assert parse_args(settings.program_args("nccl")).params_m == GPU_DEFAULTS["params_m"]
    assert settings.resolved("nccl") == {"params_m": 480.0, "steps": 5, "warmup": 11}


def test_the_gpu_default_is_a_few_wide_blocks_with_about_two_gigabytes_of_gradients() -> None:
    shape = model_shape(GPU_DEFAULTS["params_m"])
    assert (shape.hidden, shape.heads, shape.layers, shape.vocab) == (4096, 32, 2, 8192)
    assert parameter_count(shape) == 469_884_928  # what the program reported on the H200 (fixtures README)
    assert gradient_bytes(shape) == 1_879_539_712


def test_the_hang_budget_grows_with_the_steps_and_the_gradients() -> None:
    resolved = ProbeSettings().resolved("nccl")
    budget = phase_budget("nccl", 2_000_000_000, resolved, None)
    warm, profile = budget("train_warmup", 1), budget("train_profile", 1)
    assert warm == pytest.approx(120 + 11 * (4.0 + 10))
    assert profile == pytest.approx(120 + 6 * (4.0 + 10))
    assert phase_budget("gloo", 8_000_000, resolved, 15)("train_profile", 1) == 15.0


def test_one_gpu_less_host_or_one_rank_is_skipped_with_the_reason() -> None:
    cpu = Host("solo", vars=Vars({"expected_gpu_count": 0, "diagnose_profile": "cpu"}, "solo"))
    assert "one host without GPU" in (skip_reason(Setup("gloo", 1, [cpu], [])) or "")
    gpu = Host("gpu1", vars=Vars({}, "gpu1"))
    assert "one rank" in (skip_reason(Setup("nccl", 1, [gpu], [])) or "")
    assert skip_reason(Setup("nccl", 2, [gpu], [])) is None
    assert skip_reason(Setup("gloo", 1, [cpu, Host("b", vars=Vars({}, "b"))], [])) is None
