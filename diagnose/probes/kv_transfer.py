"""KV-cache transfer between prefill and decode GPUs (checklist section 5), after the collective sweep.

Switched on by ``kv_transfer: true`` in a playbook's ``benchmarks`` section (:mod:`diagnose.probes.registry`).
The pairs come from the ``gpu.topology`` facts (:mod:`diagnose.inference.pairs`): one per kind of GPU–GPU path
on the first host, neighbouring host pairs across nodes, the deployment's placement pairs, and pairs given
their own environment. Each pair is **its own torchrun launch** of :mod:`diagnose.shipped.kv_probe` with
two ranks (two on one host, or one on each of two hosts): NCCL reads its environment once per process, so
only a launch of its own can give one pair ``NCCL_P2P_DISABLE=1`` (a planted fault, or a site's setting)
while the others keep theirs; its NCCL log then speaks for that pair alone, and a pair that hangs is
stopped without losing the others. Launches run one after the other: they would share GPUs and ports.

Emits one ``inference`` record per pair (rows of p50/p99/max latency and GB/s per request length and
method, the link class, the transport NCCL chose) and the checks ``infer.kv_transfer``,
``infer.placement`` and ``infer.staging`` (:mod:`diagnose.inference.judge`), checklist section 5.

Variables (first host; any inventory level, the playbook's ``vars`` or ``-e``):

* ``kv_model``: the KV-cache shape, ``{layers, kv_heads, head_dim, block_tokens, dtype}`` (default 80, 8,
  128, 16, bfloat16: a 70B-class GQA model); ``kv_request_tokens``: request lengths (default
  ``1k,4k,16k,32k`` on GPUs, ``16,64`` over gloo); ``kv_repeats``: timed repetitions per row where they
  fit a few seconds (default 100 on GPUs, 20 over gloo; never fewer than 20, resp. 5);
  ``kv_staged_max_tokens``: longest request also moved through host memory (default 1024: the staged
  path moves a few GB/s, and its bandwidth is already flat there);
* ``kv_prefill_gpus`` / ``kv_decode_gpus``: the deployment's GPU groups (``GPU0,GPU1`` or
  ``node1:GPU0,...``), paired in order; ``kv_pair_env``: ``{"GPU2->GPU3": {NCCL_P2P_DISABLE: "1"}}``;
* thresholds: ``kv_min_link_fraction``, ``kv_p99_p50_max``, ``kv_nvlink_gbps`` (default
  ``nvlink_busbw_gbps``), ``kv_pcie_gbps``, ``kv_block_overhead_max_us``, ``kv_plain_min_fraction`` and
  ``kv_copy_min_fraction`` (a packed transfer's parts against their references:
  :mod:`diagnose.inference.parts`), and ``line_rate_gbps``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from diagnose.benchmarks.early_stop import between_nodes_sizes, probe_samples, probe_sizes
from diagnose.benchmarks.setup import Setup, launch_env, startup_timeout_s
from diagnose.catalog.stage_ids import INFER_KV_TRANSFER, INFER_PLACEMENT, INFER_STAGING, KV_TRANSFER
from diagnose.config.profiles import no_fabric_reason, no_gpu_reason
from diagnose.core.hosts import Host
from diagnose.core.model import CheckResult
from diagnose.core.redact import MASK, is_secret_name
from diagnose.core.units import counted
from diagnose.core.vars import Vars
from diagnose.inference.judge import (
    Limits,
    Verdict,
    judge_placement,
    judge_staging,
    judge_transfer,
    transport_between,
)
from diagnose.inference.model import DEFAULT_TOKENS, GLOO_TOKENS, KVModel, parse_model, parse_tokens
from diagnose.inference.pairs import Pair, plan_pairs
from diagnose.launchers.base import LaunchOutcome, LaunchSpec
from diagnose.launchers.torchrun import launch
from diagnose.parsers.nccl_log import parse_nccl_log
from diagnose.probes.kv_settings import parse_pair_env
from diagnose.shipped import kv_probe

CHECKLIST = "5"
SECTION = "inference"
CHECK_IDS = KV_TRANSFER
# A row may take this long on top of its repetitions at the floor bandwidth before the launch counts as hung.
ROW_BASE_S = 60.0
FLOOR_GBPS = {"nccl": 0.5, "gloo": 0.01}


@dataclass(frozen=True)
class Sizing:
    """How long each row is measured, per backend: GPUs time 100 repetitions where they fit, gloo fewer."""

    repeats: int
    min_samples: int
    row_budget_s: float
    warmup: int


SIZING = {"nccl": Sizing(100, 20, 3.0, 2), "gloo": Sizing(20, 5, 0.5, 1)}


@dataclass
class Settings:
    """What the playbook asks of the benchmark (read once from the first host's variables)."""

    model: KVModel
    tokens: list[int]
    sizing: Sizing
    staged_max_tokens: int
    prefill: list[str] = field(default_factory=list)
    decode: list[str] = field(default_factory=list)
    pair_env: dict[str, dict[str, str]] = field(default_factory=dict)

    @classmethod
    def read(cls, values: Vars, backend: str) -> Settings:
        sizing = SIZING[backend]
        repeats = values.int("kv_repeats")
        if repeats:
            sizing = Sizing(repeats, min(sizing.min_samples, repeats), sizing.row_budget_s, sizing.warmup)
        default_tokens = GLOO_TOKENS if backend == "gloo" else DEFAULT_TOKENS
        tokens = values.get("kv_request_tokens")
        return cls(
            model=parse_model(values.get("kv_model")),
            tokens=parse_tokens(tokens) if tokens not in (None, "") else list(default_tokens),
            sizing=sizing,
            staged_max_tokens=values.int("kv_staged_max_tokens", 1024) or 0,
            prefill=values.list("kv_prefill_gpus", []) or [],
            decode=values.list("kv_decode_gpus", []) or [],
            pair_env=parse_pair_env(values.get("kv_pair_env")),
        )


def limits(values: Vars) -> Limits:
    """The profile's thresholds for the verdicts (defaults in :class:`diagnose.inference.judge.Limits`)."""
    default = Limits()
    return Limits(
        min_link_fraction=values.float("kv_min_link_fraction", default.min_link_fraction) or 0.0,
        p99_p50_max=values.float("kv_p99_p50_max", default.p99_p50_max) or default.p99_p50_max,
        nvlink_gbps=values.float("kv_nvlink_gbps") or values.float("nvlink_busbw_gbps"),
        pcie_gbps=values.float("kv_pcie_gbps", default.pcie_gbps) or default.pcie_gbps,
        line_rate_gbps=values.float("line_rate_gbps"),
        block_overhead_max_us=values.float("kv_block_overhead_max_us", default.block_overhead_max_us)
        or default.block_overhead_max_us,
        plain_min_fraction=values.float("kv_plain_min_fraction", default.plain_min_fraction) or 0.0,
        copy_min_fraction=values.float("kv_copy_min_fraction", default.copy_min_fraction) or 0.0,
    )


def program_args(backend: str, pair: Pair, settings: Settings) -> list[str]:
    sizing, model = settings.sizing, settings.model
    gpus = list(pair.cuda_devices())
    return [
        "--backend",
        backend,
        "--gpus",
        ",".join(map(str, gpus)),
        "--tokens",
        ",".join(map(str, settings.tokens)),
        "--block-tokens",
        str(model.block_tokens),
        "--block-bytes",
        str(model.block_bytes),
        "--staged-max-tokens",
        str(settings.staged_max_tokens),
        "--warmup",
        str(sizing.warmup),
        "--repeats",
        str(sizing.repeats),
        "--min-samples",
        str(sizing.min_samples),
        "--row-budget-s",
        str(sizing.row_budget_s),
    ]


def expected_rows(settings: Settings) -> list[tuple[str, int]]:
    """The (name, bytes) rows of one pair's launch, in the order the program measures them."""
    methods = list(kv_probe.METHODS)
    return [
        (f"kv_{method}", settings.model.request_bytes(tokens))
        for method, tokens in kv_probe.rows(settings.tokens, methods, settings.staged_max_tokens)
    ]


def row_budget(backend: str, settings: Settings) -> Callable[[str, int], float]:
    """Seconds a row may take before the launch counts as hung: its timed repetitions (bounded by the
    program's own budget), plus warm-up, estimate and check transfers at the floor bandwidth (a packed
    repetition sends the request twice: its message and the plain send/recv beside it)."""
    sizing = settings.sizing
    floor = FLOOR_GBPS[backend] * 1e9

    def budget(name: str, nbytes: int) -> float:
        transfers = (sizing.warmup + 2 + sizing.min_samples) * (2 if name == "kv_packed" else 1)
        return ROW_BASE_S + sizing.row_budget_s + transfers * nbytes / floor

    return budget


def _safe_env(env: dict[str, str]) -> dict[str, str]:
    return {k: MASK if is_secret_name(k) else v for k, v in env.items()}


class KVBench:
    """The pairs of one run: launch each, keep its record, judge them together."""

    def __init__(self, stage: Any, setup: Setup) -> None:
        self.stage = stage
        self.ctx = stage.ctx
        self.setup = setup
        self.first: Host = setup.hosts[0]
        self.settings = Settings.read(self.first.vars, setup.backend)
        # A transport the sweep stopped early on: fewer samples per row (the program's own row budget rules)
        # and no request too long to move a few times in the budget.
        samples, samples_note = probe_samples(stage.records, self.settings.sizing.min_samples)
        self.settings.sizing = replace(self.settings.sizing, min_samples=samples)
        model, tokens = self.settings.model, self.settings.tokens
        sizes, sizes_note = probe_sizes(stage.records, [model.request_bytes(t) for t in tokens])
        self.settings.tokens = [t for t in tokens if model.request_bytes(t) in sizes]
        kept, between_note = between_nodes_sizes(
            stage.records, [model.request_bytes(t) for t in self.settings.tokens]
        )
        self.between_settings = replace(
            self.settings, tokens=[t for t in self.settings.tokens if model.request_bytes(t) in kept]
        )
        notes = (samples_note, sizes_note, between_note)
        self.budget_note = "; ".join(n for n in notes if n) or None
        self.by_name = {h.name: h for h in setup.hosts}

    def launch(self, index: int, pair: Pair) -> LaunchOutcome:
        backend = self.setup.backend
        settings = self.between_settings if pair.inter_node else self.settings
        hosts = [self.by_name[pair.prefill.host]]
        if pair.inter_node:
            hosts.append(self.by_name[pair.decode.host])
        host_env = {}
        for host in hosts:
            env = launch_env(host, backend)
            if backend == "nccl":
                env.setdefault("CUDA_DEVICE_ORDER", "PCI_BUS_ID")  # GPU indices as nvidia-smi numbers them
            host_env[host.name] = {**env, **pair.env}
        spec = LaunchSpec(
            run_id=self.ctx.run_id,
            tag=f"kv{index}",
            hosts=hosts,
            connections=self.ctx.connections,
            nproc=1 if pair.inter_node else 2,
            backend=backend,
            program_args=program_args(backend, pair, settings),
            expected_rows=expected_rows(settings),
            row_budget_s=row_budget(backend, settings),
            out_dir=self.ctx.out_dir,
            startup_timeout_s=startup_timeout_s(self.first),
            deadline=self.ctx.deadline,
            host_env=host_env,
            program=Path(kv_probe.__file__),
            told=self.ctx.told,
        )
        return launch(spec)

    def record(self, index: int, pair: Pair, outcome: LaunchOutcome | None) -> dict[str, Any]:
        """The ``inference`` entry of one pair: what was measured and through what."""
        model = self.settings.model
        rows = [
            {k: v for k, v in r.items() if k not in ("event", "collective")}
            for r in (outcome.rows if outcome else [])
        ]
        kinds: list[str] = []
        gdrdma = None
        if outcome is not None and outcome.logs:
            logs = [
                parse_nccl_log(path.read_text(errors="replace")) for _, path in sorted(outcome.logs.items())
            ]
            kinds, gdrdma = transport_between(logs)
        evidence = None
        if outcome is not None and outcome.evidence:
            evidence = next(iter(outcome.evidence.values()))
        return {
            "kind": "kv_transfer",
            "pair": pair.label,
            "index": index,
            "prefill": {"host": pair.prefill.host, "gpu": pair.prefill.gpu},
            "decode": {"host": pair.decode.host, "gpu": pair.decode.gpu},
            "scope": "inter-node" if pair.inter_node else "intra-node",
            "link": pair.link,
            "fastest": pair.fastest,
            "rails": list(pair.rails),
            "roles": pair.roles,
            "env": _safe_env(pair.env),
            "backend": self.setup.backend,
            "model": model.to_dict(),
            "bytes_per_token": model.bytes_per_token,
            "transport": kinds,
            "gdrdma": gdrdma,
            "rows": rows,
            "outcome": outcome.status if outcome else "deadline",
            "message": (outcome.message if outcome else "the run's time budget ran out before this pair"),
            "evidence": evidence,
        }

    def run(self) -> None:
        settings = self.settings
        pairs, notes = plan_pairs(
            [h.name for h in self.setup.hosts],
            self.setup.backend,
            self.setup.nproc,
            self.ctx.facts,
            settings.prefill,
            settings.decode,
            settings.pair_env,
        )
        if not pairs:
            self.emit_all("SKIP", "no pair to measure: " + ("; ".join(notes) or "one rank"))
            return
        records = []
        for index, pair in enumerate(pairs):
            late = self.ctx.deadline is not None and time.monotonic() > self.ctx.deadline
            outcome = None if late else self.launch(index, pair)
            record = self.record(index, pair, outcome)
            self.ctx.emit_record(SECTION, record)
            records.append(record)
        backend = self.setup.backend
        summary = f"{counted(len(pairs), 'pair')}, {settings.model.describe()}"
        if self.budget_note:
            summary += f"; {self.budget_note}"
        if notes:
            summary += f"; {'; '.join(notes)}"
        verdicts = {
            INFER_KV_TRANSFER: judge_transfer(records, limits(self.first.vars), backend),
            INFER_PLACEMENT: judge_placement(records, backend),
            INFER_STAGING: judge_staging(records, backend, no_fabric_reason(self.first.vars)),
        }
        evidence = next((r["evidence"] for r in records if r["evidence"]), None)
        for check_id, verdict in verdicts.items():
            self.emit(check_id, verdict, summary, evidence)

    def emit(self, check_id: str, verdict: Verdict, summary: str, evidence: str | None) -> None:
        self.ctx.emit_check(
            CheckResult(
                check_id,
                None,
                CHECKLIST,
                verdict.status,
                observed=verdict.observed,
                expected=verdict.expected,
                message=f"{verdict.message} [{summary}]",
                remediation=REMEDIATION.get(check_id) if verdict.status in ("FAIL", "WARN") else None,
                evidence=evidence,
                judged=verdict.judged,
            )
        )

    def emit_all(self, status: str, message: str) -> None:
        for check_id in CHECK_IDS:
            self.ctx.emit_check(CheckResult(check_id, None, CHECKLIST, status, message=message))


REMEDIATION = {
    INFER_KV_TRANSFER: (
        "Compare the slow pair's link with `nvidia-smi topo -m` and `nvidia-smi nvlink --status`; a tail "
        "(p99 far above p50) points at contention on the pair's GPUs or NICs during the run."
    ),
    INFER_PLACEMENT: (
        "Put each prefill worker's decode partner on an NV# GPU of the same node (or, across nodes, on the "
        "GPU whose NIC is on the same rail), and pin the serving ranks to those GPUs."
    ),
    INFER_STAGING: (
        "Remove NCCL_P2P_DISABLE / NCCL_P2P_LEVEL limits and NCCL_SHM-only settings from the pair's "
        "environment and /etc/nccl.conf; across nodes, load nvidia_peermem (or use DMA-BUF) so the NIC "
        "reads GPU memory directly; check that the KV connector is configured for device-to-device transfer."
    ),
}


def run(stage: Any, setup: Setup) -> None:
    """The KV-transfer benchmark after the sweep (see the module docstring)."""
    ctx = stage.ctx
    if not setup.hosts:
        for check_id in CHECK_IDS:
            ctx.emit_check(CheckResult(check_id, None, CHECKLIST, "ERROR", message="no host to measure on"))
        return
    if setup.backend == "gloo" and len(setup.hosts) == 1:
        reason = no_gpu_reason(setup.hosts[0].vars) or "no GPU found"
        for check_id in CHECK_IDS:
            ctx.emit_check(
                CheckResult(
                    check_id,
                    None,
                    CHECKLIST,
                    "SKIP",
                    message=f"not measured: one host without GPU ({reason}): no KV path between two devices",
                )
            )
        return
    missing = stage.torch_missing(setup.hosts)
    if missing is not None:
        for check_id in CHECK_IDS:
            ctx.emit_check(
                CheckResult(check_id, None, CHECKLIST, "ERROR", message=f"not measured: {missing}")
            )
        return
    KVBench(stage, setup).run()
