"""The KV-transfer benchmark's host variables (:mod:`diagnose.probes.kv_transfer`), checked up front.

Each is checked by the parser that will read it, when the inventory is read, so a bad ``kv_model`` stops
the run (exit 2, naming the file and line) instead of the benchmark an hour later. This module stays light
(no launcher, no torch): every run loads it, whether or not the playbook switches the benchmark on.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from diagnose.config.host_settings import Validator, bounded, parse_bench_env, parsed_by
from diagnose.core.vars import Vars
from diagnose.inference.model import parse_model, parse_tokens
from diagnose.inference.pairs import parse_endpoint, parse_pair


def parse_pair_env(value: Any) -> dict[str, dict[str, str]]:
    """``kv_pair_env``: a mapping of prefill->decode pairs (``GPU2->GPU3``) to their extra environment
    (each a mapping or ``K=V,K=V``); raises ValueError naming the offending pair or variable."""
    if value is None or value == "":
        return {}
    if not isinstance(value, Mapping):
        raise ValueError(
            'kv_pair_env must be a mapping of pairs to environment, e.g. {"GPU2->GPU3": {"NCCL_P2P_DISABLE": "1"}}'
        )
    pairs = {}
    for spec, env in value.items():
        parse_pair(str(spec), "first-host")
        try:
            pairs[str(spec)] = parse_bench_env(env)
        except ValueError as exc:
            raise ValueError(f"kv_pair_env {spec}: {str(exc).replace('bench_env ', '')}") from None
    return pairs


def _gpu_group(values: Vars, name: str) -> str | None:
    for item in values.list(name, []) or []:
        try:
            parse_endpoint(item, "first-host")
        except ValueError as exc:
            return f"{name}: {exc}"
    other = "kv_decode_gpus" if name == "kv_prefill_gpus" else "kv_prefill_gpus"
    mine, theirs = values.list(name, []) or [], values.list(other, []) or []
    if len(mine) != len(theirs):
        return "kv_prefill_gpus and kv_decode_gpus pair GPUs in order: give both, with as many GPUs each"
    return None


SETTINGS: dict[str, Validator] = {
    "kv_model": parsed_by(parse_model),
    "kv_request_tokens": parsed_by(lambda v: parse_tokens(v) if v not in (None, "") else None),
    "kv_prefill_gpus": _gpu_group,
    "kv_decode_gpus": _gpu_group,
    "kv_pair_env": parsed_by(parse_pair_env),
    "kv_repeats": bounded(Vars.int, 1, 100000),
    "kv_staged_max_tokens": bounded(Vars.int, 0),
}
