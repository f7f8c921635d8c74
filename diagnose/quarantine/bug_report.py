"""NVIDIA's bug report from every host whose GPU checks FAILed (``collect_bug_report: true``).

NVIDIA support and the vendors' RMA desks ask for ``nvidia-bug-report.log.gz`` first: the driver's state,
``nvidia-smi -q``, the kernel log and PCI config space at the time of the fault. Collected while the run
still holds the host, it is there when the ticket is opened instead of after a reboot has wiped the
evidence. The script is slow (a minute or more on an 8-GPU host) and can hang on the very GPU that failed,
so it is bounded twice: in time (``bug_report_timeout_s``; the host's ``timeout`` stops the script and its
children, and Ctrl-C stops it like every command of the run) and in size (``bug_report_max_bytes``: a larger
log is cut to that size and recorded as truncated). It runs in a folder of its own under /tmp, removed
afterwards whatever happened, and the log comes home as ``raw/<host>/nvidia-bug-report.log.gz``; its
entry in results.json's ``bug_report`` list names that path, the checks that asked for it and how it went.
"""

from __future__ import annotations

import secrets
import shlex
import time
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from diagnose.config.quarantine_settings import (
    BUG_REPORT_MAX_BYTES,
    BUG_REPORT_TIMEOUT,
    COLLECT_BUG_REPORT,
    DEFAULT_BUG_REPORT_MAX_BYTES,
    DEFAULT_BUG_REPORT_TIMEOUT_S,
)
from diagnose.connectors.base import Connection, stop_running_batches
from diagnose.core.check import Command
from diagnose.core.hosts import Host, safe_name

SECTION = "bug_report"
TOOL = "nvidia-bug-report.sh"
LOG_NAME = "nvidia-bug-report.log.gz"
KEY = "nvidia-bug-report"
COLLECTED, TRUNCATED, TIMED_OUT, MISSING, FAILED = "collected", "truncated", "timed_out", "missing", "failed"
#: The part of the script's own output kept in the record (it names what it could not collect).
TAIL_CHARS = 600
FETCH_TIMEOUT_S = 300.0
CLEANUP_TIMEOUT_S = 30.0


def wanted(hosts: Sequence[Host], checks: Iterable[Mapping[str, Any]]) -> dict[str, list[str]]:
    """Host name → the ``gpu.*`` checks that FAILed there, for hosts with ``collect_bug_report`` on (pure)."""
    enabled = {h.name for h in hosts if h.vars.bool(COLLECT_BUG_REPORT, False)}
    found: dict[str, list[str]] = {}
    for row in checks:
        host, check_id = row.get("host"), str(row.get("id"))
        if host in enabled and row.get("status") == "FAIL" and check_id.startswith("gpu."):
            ids = found.setdefault(str(host), [])
            if check_id not in ids:
                ids.append(check_id)
    return found


def workdir(run_id: str) -> str:
    """A folder of its own for one host's report: the run id (only ``[0-9A-Za-z-]``) and a random tail,
    since hosts may share a /tmp (containers on one machine, the test bed's namespaces)."""
    return f"/tmp/diagnose-bug-report-{run_id}-{secrets.token_hex(4)}"


def run_script(folder: str) -> str:
    """Run the script in ``folder``, which it writes ``nvidia-bug-report.log.gz`` into."""
    quoted = shlex.quote(folder)
    log = shlex.quote(f"{folder}/nvidia-bug-report.log")
    return f"mkdir -p -m 700 {quoted} && cd {quoted} && {TOOL} --output-file {log}"


def cut_script(folder: str, limit: int) -> str:
    """Print the log's size; when it is over ``limit`` bytes, leave its first ``limit`` bytes in ``cut``."""
    log = shlex.quote(f"{folder}/{LOG_NAME}")
    cut = shlex.quote(f"{folder}/cut")
    return (
        f'[ -f {log} ] || {{ echo none; exit 0; }}; s=$(wc -c < {log}) || exit 3; echo "$s"; '
        f'if [ "$s" -gt {int(limit)} ]; then head -c {int(limit)} {log} > {cut} || exit 3; fi'
    )


def collect(
    host: Host, connection: Connection, checks: list[str], out_dir: Path, run_id: str
) -> dict[str, Any]:
    """Run, bound, fetch and clean up on one host; the record of how it went."""
    timeout = (
        host.vars.float(BUG_REPORT_TIMEOUT, DEFAULT_BUG_REPORT_TIMEOUT_S) or DEFAULT_BUG_REPORT_TIMEOUT_S
    )
    limit = host.vars.int(BUG_REPORT_MAX_BYTES, DEFAULT_BUG_REPORT_MAX_BYTES) or DEFAULT_BUG_REPORT_MAX_BYTES
    folder = workdir(run_id)
    entry: dict[str, Any] = {"host": host.name, "checks": checks, "evidence": None, "timeout_s": timeout}
    started = time.monotonic()
    try:
        ran = connection.run_batch([Command(KEY, run_script(folder), tool=TOOL, timeout=timeout)])[KEY]
        entry["seconds"] = round(time.monotonic() - started, 1)
        said = (ran.stderr.strip() or ran.stdout.strip())[-TAIL_CHARS:]
        if ran.not_found:
            entry.update(
                state=MISSING, detail=f"{TOOL} is not installed on the host (it ships with the driver)"
            )
            return entry
        if ran.timed_out or (ran.error and "stopped answering" in ran.error):
            entry.update(state=TIMED_OUT, detail=f"stopped after {timeout:g} s (bug_report_timeout_s)")
        elif not ran.ok:
            entry.update(state=FAILED, detail=ran.error or f"exit code {ran.exit_code}: {said}")
        _fetch(host, connection, folder, limit, out_dir, entry)
    finally:
        connection.run(f"rm -rf -- {shlex.quote(folder)}", CLEANUP_TIMEOUT_S)
    return entry


def _fetch(
    host: Host, connection: Connection, folder: str, limit: int, out_dir: Path, entry: dict[str, Any]
) -> None:
    """Bring the log home (its first ``limit`` bytes when larger), whether or not the script finished:
    a report cut by the timeout still holds what it wrote."""
    sized = connection.run(cut_script(folder, limit), CLEANUP_TIMEOUT_S)
    size = sized.stdout.strip().splitlines()[-1] if sized.ok and sized.stdout.strip() else ""
    if not size.isdigit():
        entry.setdefault("state", FAILED)
        entry.setdefault(
            "detail",
            f"no {LOG_NAME} was written"
            if size == "none"
            else f"could not read its size: {sized.error or sized.stderr.strip()[:200]}",
        )
        return
    total = int(size)
    source = f"{folder}/cut" if total > limit else f"{folder}/{LOG_NAME}"
    local_dir = out_dir / "raw" / safe_name(host.name)
    local_dir.mkdir(parents=True, exist_ok=True)
    try:
        fetched = connection.get_file(source, local_dir / LOG_NAME, limit, FETCH_TIMEOUT_S)
    except OSError as exc:
        entry.setdefault("state", FAILED)
        entry.setdefault("detail", str(exc))
        return
    entry.update(
        evidence=f"raw/{safe_name(host.name)}/{LOG_NAME}", bytes=fetched, size=total, truncated=total > limit
    )
    if total > limit:
        entry.setdefault("state", TRUNCATED)
        entry["detail"] = (
            f"{entry['detail']}; " if entry.get("detail") else ""
        ) + f"the log has {total} bytes: its first {limit} kept (bug_report_max_bytes)"
    entry.setdefault("state", COLLECTED)


def collect_all(
    hosts: Sequence[Host],
    connections: Mapping[str, Connection | None],
    checks: Iterable[Mapping[str, Any]],
    out_dir: Path,
    run_id: str,
) -> list[dict[str, Any]]:
    """One record per host that asked for a report, in inventory order, collected in parallel."""
    asked = wanted(hosts, checks)
    chosen = [h for h in hosts if h.name in asked]
    if not chosen:
        return []

    def one(host: Host) -> dict[str, Any]:
        connection = connections.get(host.name)
        if connection is None:
            return {"host": host.name, "checks": asked[host.name], "evidence": None, "state": FAILED,
                    "detail": "the host's connection is closed"}  # fmt: skip
        return collect(host, connection, asked[host.name], out_dir, run_id)

    pool = ThreadPoolExecutor(max_workers=min(16, len(chosen)))
    try:
        return list(pool.map(one, chosen))
    except KeyboardInterrupt:
        # Ctrl-C: the scripts are stopped now (their whole sessions), so the workers return at once and
        # remove their folders instead of waiting out bug_report_timeout_s.
        stop_running_batches()
        pool.shutdown(wait=True, cancel_futures=True)  # a host not started yet is not started now
        raise
    finally:
        pool.shutdown(wait=True)
