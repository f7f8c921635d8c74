"""ib.consistency — one active MTU and one link rate on every host of the fabric.

A host whose ports negotiated a smaller MTU or a lower rate than its peers makes every collective run at
its pace; the per-host checks catch a value that differs from the profile, this rule catches the host that
differs from the others even when no profile value is set. The odd host is named in its own result.
"""

from __future__ import annotations

from collections.abc import Mapping

from diagnose.core.check import ClusterCheck, Facts
from diagnose.core.consistency import describe_split, split_hosts
from diagnose.core.model import Outcome
from diagnose.core.vars import Vars
from diagnose.parsers.rdma import is_active, normalise_kind, profile_rails


def _values(
    facts: Mapping[str, Mapping[str, Facts]], host_vars: Mapping[str, Vars], check_id: str, field: str
) -> dict[str, str]:
    """host -> the distinct values of ``field`` over its Active fabric ports (``4096`` or ``2048/4096``)."""
    values = {}
    for host, by_check in facts.items():
        ports = (by_check.get(check_id) or {}).get("ports")
        if ports is None:
            continue
        vars_ = host_vars.get(host, Vars())
        if vars_.int("expected_hca_count") == 0:
            continue
        kind = normalise_kind(vars_.str("expected_link_layer"))
        rails, _ = profile_rails(ports, kind, vars_)
        seen = sorted({p.get(field) for p in rails if is_active(p) and p.get(field) is not None})
        if seen:
            values[host] = "/".join(f"{v:g}" if isinstance(v, float) else str(v) for v in seen)
    return values


def judge(facts: Mapping[str, Mapping[str, Facts]], host_vars: Mapping[str, Vars]) -> list[Outcome]:
    checks = (("active MTU", "ib.mtu", "active_mtu", ""), ("link rate", "ib.link_rate", "rate", " Gb/s"))
    outcomes: list[Outcome] = []
    summaries = []
    compared = 0
    for what, check_id, field, unit in checks:
        values = _values(facts, host_vars, check_id, field)
        compared = max(compared, len(values))
        split = split_hosts(values)
        if split is None:
            if values:
                summaries.append(f"{what} {next(iter(values.values()))}{unit} on all {len(values)} hosts")
            continue
        summaries.append(describe_split(what, split))
        for host, value in split.odd_hosts.items():
            norm = (
                f"{split.majority}{unit} like the other hosts"
                if split.majority
                else "one value on every host"
            )
            outcomes.append(
                Outcome(
                    "FAIL",
                    f"{host} has {what} {value}{unit}, the others {split.majority}{unit}"
                    if split.majority
                    else f"{host} has {what} {value}{unit}; the hosts disagree with no majority",
                    observed=f"{value}{unit}",
                    expected=norm,
                    host=host,
                )
            )
    if compared < 2:
        message = "fewer than two hosts have Active fabric ports: nothing to compare"
        return [Outcome("SKIP", message, None, "one MTU and one rate on every host")]
    status = "FAIL" if outcomes else "PASS"
    return [
        Outcome(status, "; ".join(summaries), "; ".join(summaries), "one MTU and one rate on every host"),
        *outcomes,
    ]


CHECK = ClusterCheck(
    id="ib.consistency",
    checklist="1",
    summary="the same active MTU and link rate on every host (cluster-wide)",
    uses=("ib.mtu", "ib.link_rate"),
    judge=judge,
    remediation="Bring the odd host's ports to the fabric's MTU and rate (subnet manager partition MTU or "
    "interface MTU; cable, transceiver and switch port for the rate).",
    action="check_config",
)
