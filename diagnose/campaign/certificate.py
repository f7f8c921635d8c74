"""The certificate's content: the as-built record of a campaign, from its ledger alone. Pure.

certificate.json is this dict with its digest (the SHA-256 of the canonical JSON of everything else), so a
copy handed to a customer can be checked against the one the operator signed; certificate.html and .pdf
render it (diagnose.render.certificate).
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime
from typing import Any

from diagnose.campaign import phases as ph
from diagnose.campaign.ledger import Ledger
from diagnose.campaign.standing import Standing

_UNITS = {"gemm": "TFLOP/s", "hbm": "GB/s", "busbw": "GB/s", "perftest": "Gb/s"}


def _what(key: str) -> tuple[str, str]:
    """(words, unit) of a reference key: ``gemm.bf16|NVIDIA H200``, ``busbw|all_reduce|4``, ``perftest|400``."""
    kind, _, rest = key.partition("|")
    if kind == "busbw":
        collective, _, nodes = rest.partition("|")
        return f"{collective} busbw on {nodes} nodes", _UNITS["busbw"]
    if kind == "perftest":
        return f"ib_write_bw per NIC at {rest} Gb/s line rate", _UNITS["perftest"]
    family, _, dtype = kind.partition(".")
    label = "GEMM" if family == "gemm" else "HBM"
    return f"{label} {dtype}, {rest}", _UNITS.get(family, "")


def _days(first: str | None, last: str | None) -> float | None:
    try:
        return round(
            (datetime.fromisoformat(str(last)) - datetime.fromisoformat(str(first))).total_seconds() / 86400,
            2,
        )
    except ValueError:
        return None


def build(ledger: Ledger, state: Standing, issued: str, operator: str) -> dict[str, Any]:
    """certificate.json's content, digest included."""
    hosts = []
    gpus = 0
    for host in state.hosts:
        identity = ledger.identities.get(host.host) or {}
        gpus += len(identity.get("gpus") or {}) if host.state == "accepted" else 0
        rows = ledger.rows.get(host.host, {})
        hosts.append(
            {
                "name": host.host,
                "status": host.state,
                "evidence": {
                    phase: {
                        "run_id": r.run_id,
                        "at": r.at,
                        "verdict": r.verdict,
                        "nodes": r.detail.get("nodes"),
                    }
                    for phase, r in rows.items()
                    if r.voided is None
                },
                "missing": list(host.missing),
                "cause": host.cause,
                "action": host.action,
                "burnin_gpu_hours": round(sum((ledger.burnin.get(host.host) or {}).values()), 3),
                "identity": identity,
            }
        )
    cluster: dict[str, Any] = {}
    for c in state.cluster:
        row = c.row
        cluster[c.phase] = {
            "verdict": row.verdict if row else None,
            "run_id": row.run_id if row else None,
            "at": row.at if row else None,
            "nodes": len(row.hosts) if row else None,
            "detail": row.detail if row and c.satisfied else c.why,
            "satisfied": c.satisfied,
        }
    excluded = [
        {"host": h, **(marks.get("excluded") or {})}
        for h, marks in sorted(ledger.hosts.items())
        if marks.get("excluded")
    ]
    reference = []
    for row in ledger.reference:
        what, unit = _what(str(row["key"]))
        reference.append({**row, "what": what, "unit": unit})
    done = [c for c in state.cluster if c.satisfied]
    note = (
        "every host accepted; " + ", ".join(f"{ph.WORDS[c.phase]} passed" for c in done)
        if state.verdict == "ACCEPTED"
        else "; ".join(
            [f"{state.counts[s]} {s}" for s in ("pending", "failed", "repaired") if state.counts[s]]
            + [f"{ph.WORDS[c.phase]} not done ({c.why})" for c in state.cluster if not c.satisfied]
        )
    )
    certificate: dict[str, Any] = {
        "schema": 1,
        "issued": issued,
        "operator": operator,
        "campaign": {
            "name": ledger.name,
            "created": ledger.created,
            "first_run": ledger.first_run,
            "last_run": ledger.last_run,
            "days": _days(ledger.first_run, ledger.last_run),
            "playbook": ledger.playbook,
            "inventory": ledger.inventory,
            "runs": ledger.runs,
        },
        "verdict": state.verdict,
        "verdict_note": note,
        "counts": dict(state.counts),
        "gpus": gpus,
        "burnin_gpu_hours": round(sum(sum(g.values()) for g in ledger.burnin.values()), 3),
        "needs": state.needs.to_dict(),
        "phase_words": dict(ph.WORDS),
        "hosts": hosts,
        "cluster": cluster,
        "reference": reference,
        "excluded": excluded,
        "history": [
            {"at": e.at, "host": e.host, "kind": e.kind, "run_id": e.run_id, "text": e.text}
            for e in ledger.events
        ],
        "runs": ledger.run_list,
    }
    certificate["digest"] = digest(certificate)
    return certificate


def digest(certificate: dict[str, Any]) -> str:
    """SHA-256 of the canonical JSON of the certificate without its ``digest``."""
    body = {k: v for k, v in certificate.items() if k != "digest"}
    text = json.dumps(body, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()
