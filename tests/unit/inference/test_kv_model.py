"""KV-cache geometry: bytes per token, blocks per request, and the kv_model / kv_request_tokens values."""

from __future__ import annotations

import re

import pytest

from diagnose.core.units import tokens_label
from diagnose.inference.model import KVModel, parse_model, parse_tokens


def test_the_default_is_a_70b_class_gqa_cache() -> None:
    model = KVModel()
    # K and V × 80 layers × 8 KV heads × head dim 128 × 2 bytes (bf16) = 320 KiB per token.
    assert model.bytes_per_token == 2 * 80 * 8 * 128 * 2 == 320 << 10
    assert model.block_bytes == 5 << 20  # 16 tokens per block
    assert model.blocks(32 * 1024) == 2048 and model.request_bytes(32 * 1024) == 10 << 30
    # A request that does not fill its last block still moves it whole.
    assert model.blocks(1000) == 63 and model.request_bytes(1000) == 63 * (5 << 20)


def test_a_model_from_yaml_or_from_key_value_text() -> None:
    small = parse_model({"layers": 32, "kv_heads": 8, "head_dim": 128, "dtype": "fp16"})
    assert small == KVModel(layers=32, kv_heads=8, head_dim=128, block_tokens=16, dtype="float16")
    assert parse_model("layers=61,kv_heads=1,head_dim=576,block_tokens=64,dtype=bf16").bytes_per_token == (
        2 * 61 * 1 * 576 * 2
    )
    assert parse_model(None) == parse_model("") == KVModel()


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ({"layer": 32}, "unknown field layer"),
        ({"layers": 0}, "layers must be a whole number from 1"),
        ("layers=eighty", "layers must be a whole number"),
        ({"dtype": "float64"}, "dtype 'float64' is not one of"),
        ("layers", "is not key=value"),
    ],
)
def test_a_bad_model_is_refused_naming_the_field(value: object, words: str) -> None:
    with pytest.raises(ValueError, match=re.escape(words)):
        parse_model(value)


def test_request_lengths() -> None:
    assert parse_tokens("1k,4k,16k,32k") == [1024, 4096, 16384, 32768]
    assert parse_tokens(["32K", 512, "512"]) == [512, 32768]
    assert [tokens_label(n) for n in (512, 1024, 1536, 32768)] == ["512", "1k", "1536", "32k"]
    for bad in ("", "0", "1m", "4k,x"):
        with pytest.raises(ValueError):
            parse_tokens(bad)
