"""The cluster's own reference as variables of every later run, beneath what the inventory sets.

A campaign keeps, once enough healthy hosts measured them, the medians of GEMM and HBM per GPU model, busbw per
collective and node count, and perftest per NIC line rate (diagnose.campaign.ledger). Later runs of the
campaign are judged by them through the variables the judges already read (``gpu_ref_*``,
``expected_busbw_<collective>_gbps``) at the level just above the profile: any inventory level or ``-e``
that sets its own figure wins. ``expectation_sources`` tells each judge where a figure came from, so its
message names the campaign, the run and the date rather than "set in the inventory".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from diagnose.core.hosts import Host
from diagnose.core.vars import SOURCES_VARIABLE
from diagnose.probes.stress_skus import OVERRIDES
from diagnose.targets.sources import HostSource


def reference_vars(name: str, rows: Sequence[Mapping[str, Any]]) -> tuple[dict[str, Any], dict[str, str]]:
    """(variables, the words naming each one's source) from the campaign's reference rows. A metric
    measured on several GPU models sets nothing: one ``gpu_ref_*`` cannot hold two models' figures."""
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    by_metric: dict[str, list[Mapping[str, Any]]] = {}
    measured: dict[str, list[str]] = {}
    for row in rows:
        kind, _, rest = str(row["key"]).partition("|")
        if kind == "busbw":
            collective, _, nodes = rest.partition("|")
            variable = f"expected_busbw_{collective}_gbps"
            values.setdefault(variable, {})[int(nodes)] = float(row["value"])
            measured.setdefault(variable, []).append(
                f"{nodes} nodes: run {row['run_id']}, {str(row['at'])[:10]}"
            )
        elif kind in OVERRIDES:
            by_metric.setdefault(kind, []).append(row)
    for variable, runs in measured.items():
        sources[variable] = f"campaign {name}'s reference ({'; '.join(runs)})"
    for metric, found in by_metric.items():
        if len(found) != 1 or OVERRIDES[metric] in values:
            continue
        row = found[0]
        variable = OVERRIDES[metric]
        values[variable] = float(row["value"])
        model = str(row["key"]).partition("|")[2]
        sources[variable] = (
            f"campaign {name}'s reference for {model} (run {row['run_id']}, {str(row['at'])[:10]}, "
            f"{row['hosts']} hosts)"
        )
    return values, sources


class CampaignReference(HostSource):
    """The campaign's figures beneath every inventory level (above the profile), named as the campaign's."""

    def __init__(self, name: str, rows: Sequence[Mapping[str, Any]]) -> None:
        self.values, self.sources = reference_vars(name, rows)
        self.note = None

    def vars_below(self, name: str) -> Mapping[str, Any]:
        if not self.values:
            return {}
        return {**self.values, SOURCES_VARIABLE: dict(self.sources)}

    def complete(self, hosts: list[Host]) -> list[Host]:
        """Keep a source's words only where the host still has the campaign's figure: an inventory or
        ``-e`` value over it is the operator's own, named as such by the judges."""
        if not self.values:
            return hosts
        for host in hosts:
            kept = {v: w for v, w in self.sources.items() if host.vars.get(v) == self.values[v]}
            host.vars = host.vars.with_values(**{SOURCES_VARIABLE: kept})
        return hosts
