"""``failed.retry``: the hosts a run found failing, in Ansible's retry-file form, for ``--limit @FILE``.

Ansible writes such a file after a play so that ``--limit @site.retry`` runs again on exactly the hosts that
failed; every run writes one beside its results.json for the same retest after a repair.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from diagnose.engine.results import write_text_atomic
from diagnose.render.tally import status_of

RETRY_FILE = "failed.retry"
#: The statuses that put a host in the file: WARN works and SKIP was not measured, so neither needs a retest.
FAILING = ("FAIL", "ERROR")


def failed_hosts(document: dict[str, Any]) -> list[str]:
    """The hosts of a results.json document that failed, in its ``hosts`` order.

    A host failed when it was unreachable, when one of its own check rows is FAIL or ERROR (a status this
    version does not know counts as ERROR, as in the report), when a benchmark names it in
    ``failed_hosts``, or when a FAIL or ERROR cause names it in ``hosts``: the root of failures seen
    elsewhere is what a retest after the repair must reach. Cluster-wide rows name no host and add none.
    """
    hosts = document.get("hosts") or []
    named = {host.get("name") for host in hosts if not host.get("reachable")}
    named.update(row.get("host") for row in document.get("checks") or [] if status_of(row) in FAILING)
    for bench in document.get("benchmarks") or []:
        named.update(bench.get("failed_hosts") or [])
    for cause in document.get("causes") or []:
        if status_of(cause) in FAILING:
            named.update(cause.get("hosts") or [])
    return [host["name"] for host in hosts if host.get("name") in named]


def write_retry_file(out_dir: Path, document: dict[str, Any]) -> Path:
    """Write ``out_dir/failed.retry``: one failed host a line, and an empty file when none failed.

    Ansible writes none when nothing failed; an empty file here instead tells a script reading the run
    folder that the run judged its hosts and none failed, where a missing one means it never got that far.
    """
    path = out_dir / RETRY_FILE
    write_text_atomic(path, "".join(f"{host}\n" for host in failed_hosts(document)))
    return path
