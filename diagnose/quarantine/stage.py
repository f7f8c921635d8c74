"""The run's last acting stage, after every measurement: bug reports, then the nodes' quarantine.

Both read the verdicts as recorded, so a GPU that failed only under the stress load still gets its bug
report and its node still counts as failing. The engine calls :func:`act_on_nodes` once, with the hosts,
their open connections and the results store.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from diagnose.core.hosts import Host
from diagnose.quarantine import bug_report
from diagnose.quarantine.cap import SECTION
from diagnose.quarantine.kubernetes import CordonStage


def _extend(store: Any, section: str, entries: list[dict[str, Any]]) -> None:
    """All of a section's entries in one rewrite of results.json (a large cluster has thousands)."""
    if entries:
        store.extra.setdefault(section, []).extend(entries)
        store.flush(force=True)


def act_on_nodes(
    hosts: Sequence[Host],
    states: Mapping[str, Any],
    out_dir: Path,
    store: Any,
    run_id: str,
    k8s_cordon: bool,
) -> None:
    """``states``: the host stage's per-host state (``connection`` open or None); ``store``: the run's
    ResultsStore. Nothing happens unless a host sets ``collect_bug_report`` or ``k8s_cordon`` is on."""
    checks = store.document()["checks"]
    connections = {name: getattr(state, "connection", None) for name, state in states.items()}
    _extend(store, bug_report.SECTION, bug_report.collect_all(hosts, connections, checks, out_dir, run_id))
    if not k8s_cordon:
        return
    cordons = CordonStage(hosts, run_id)
    finding = cordons.act(checks)
    _extend(store, SECTION, cordons.records)
    if finding is not None:
        store.add_checks([finding])
