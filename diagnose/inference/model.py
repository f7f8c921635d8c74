"""The paged KV cache of one request: how many blocks, how many bytes, for a model description.

A serving stack keeps the KV cache in fixed-size blocks of ``block_tokens`` tokens; a request of N tokens
occupies ceil(N / block_tokens) blocks scattered over the pool, and those whole blocks are what the prefill
worker hands to the decode worker. One token costs K and V for every layer and KV head:
``2 × layers × kv_heads × head_dim × element size`` bytes — 320 KiB for the default 70B-class GQA shape
(80 layers, 8 KV heads, head dim 128, bf16), so a 32k-token request moves 10 GiB.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

#: Bytes per element of the KV cache dtypes serving stacks use.
DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4, "float8": 1, "fp8": 1, "int8": 1}
_DTYPE_ALIASES = {"bf16": "bfloat16", "fp16": "float16", "half": "float16", "fp32": "float32"}
_FIELDS = ("layers", "kv_heads", "head_dim", "block_tokens")
_TOKENS = re.compile(r"(?P<n>\d+)\s*(?P<unit>[kK]?)\Z")
#: Request lengths measured by default on GPUs, and on CPU test hosts (gloo over TCP: seconds, not minutes).
DEFAULT_TOKENS = (1024, 4096, 16384, 32768)
GLOO_TOKENS = (16, 64)


@dataclass(frozen=True)
class KVModel:
    """The KV-cache shape of a model: what one token and one block weigh."""

    layers: int = 80
    kv_heads: int = 8
    head_dim: int = 128
    block_tokens: int = 16
    dtype: str = "bfloat16"

    @property
    def bytes_per_token(self) -> int:
        return 2 * self.layers * self.kv_heads * self.head_dim * DTYPE_BYTES[self.dtype]

    @property
    def block_bytes(self) -> int:
        """One block: ``block_tokens`` tokens of every layer's K and V, moved as one message."""
        return self.block_tokens * self.bytes_per_token

    def blocks(self, tokens: int) -> int:
        return math.ceil(tokens / self.block_tokens)

    def request_bytes(self, tokens: int) -> int:
        """Bytes moved for a request: whole blocks, as the stack moves them (the last one may be part-full)."""
        return self.blocks(tokens) * self.block_bytes

    def describe(self) -> str:
        return (
            f"{self.layers} layers × {self.kv_heads} KV heads × head dim {self.head_dim}, {self.dtype}, "
            f"{self.block_tokens} tokens/block"
        )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def parse_model(value: Any) -> KVModel:
    """``kv_model`` as a mapping (YAML) or ``layers=80,kv_heads=8,...`` (INI, ``-e``); unset fields keep
    the 70B-class default. Raises ValueError naming the offending field."""
    if value is None or value == "":
        return KVModel()
    if isinstance(value, Mapping):
        items = {str(k): v for k, v in value.items()}
    else:
        items = {}
        for piece in str(value).split(","):
            if not piece.strip():
                continue
            key, sep, val = piece.partition("=")
            if not sep:
                raise ValueError(f"kv_model entry {piece.strip()!r} is not key=value")
            items[key.strip()] = val.strip()
    unknown = sorted(set(items) - {*_FIELDS, "dtype"})
    if unknown:
        raise ValueError(
            f"kv_model: unknown {'field' if len(unknown) == 1 else 'fields'} {', '.join(unknown)} (known: {', '.join(_FIELDS)}, dtype)"
        )
    fields: dict[str, Any] = {}
    for name in _FIELDS:
        if name not in items:
            continue
        raw = items[name]
        if isinstance(raw, bool) or not str(raw).strip().isdigit() or int(str(raw)) < 1:
            raise ValueError(f"kv_model: {name} must be a whole number from 1, got {raw!r}")
        fields[name] = int(str(raw))
    if "dtype" in items:
        dtype = str(items["dtype"]).strip().lower()
        dtype = _DTYPE_ALIASES.get(dtype, dtype)
        if dtype not in DTYPE_BYTES:
            raise ValueError(f"kv_model: dtype {items['dtype']!r} is not one of {', '.join(DTYPE_BYTES)}")
        fields["dtype"] = dtype
    return KVModel(**fields)


def parse_tokens(value: Any) -> list[int]:
    """Request lengths: ``1k,4k,16k,32k`` (k = 1024 tokens), plain numbers, or a YAML list of either."""
    pieces = value if isinstance(value, list | tuple) else str(value).split(",")
    lengths = []
    for piece in pieces:
        text = str(piece).strip()
        if not text:
            continue
        match = _TOKENS.match(text)
        if match is None or int(match["n"]) == 0:
            raise ValueError(f"kv_request_tokens: {text!r} is not a token count such as 4096 or 4k")
        lengths.append(int(match["n"]) * (1024 if match["unit"] else 1))
    if not lengths:
        raise ValueError("kv_request_tokens names no request length")
    return sorted(set(lengths))
