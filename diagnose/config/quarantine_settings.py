"""The variables that bound what a run may do to nodes: the quarantine cap and NVIDIA's bug report.

Like every host setting they are checked when the inventory is read (a bad value is exit 2 naming the file
and line), whether or not the run will act on nodes: a typo in ``max_quarantine_pct`` must not wait for
the night a third of the cluster fails. Set them in the playbook's ``vars`` or at any inventory level.
"""

from __future__ import annotations

from diagnose.config.host_settings import Validator, bounded
from diagnose.core.vars import Vars

MAX_QUARANTINE = "max_quarantine"
MAX_QUARANTINE_PCT = "max_quarantine_pct"
#: Taken out at most: this share of the selected nodes (and at least one node, unless the share is 0).
DEFAULT_QUARANTINE_PCT = 10.0
COLLECT_BUG_REPORT = "collect_bug_report"
BUG_REPORT_TIMEOUT = "bug_report_timeout_s"
BUG_REPORT_MAX_BYTES = "bug_report_max_bytes"
#: nvidia-bug-report.sh takes one to a few minutes on an 8-GPU host; a hung driver call must not hold
#: the run longer than this.
DEFAULT_BUG_REPORT_TIMEOUT_S = 300.0
#: Its log is typically 1 to 10 MB compressed on an 8-GPU host; more than this is cut and said so.
DEFAULT_BUG_REPORT_MAX_BYTES = 64 * 1024 * 1024


def _boolean(values: Vars, name: str) -> str | None:
    values.bool(name)  # raises ConfigError with its own words for a value that is not a boolean
    return None


SETTINGS: dict[str, Validator] = {
    MAX_QUARANTINE: bounded(Vars.int, 0),
    MAX_QUARANTINE_PCT: bounded(Vars.float, 0, 100),
    COLLECT_BUG_REPORT: _boolean,
    BUG_REPORT_TIMEOUT: bounded(Vars.float, 1, 3600),
    BUG_REPORT_MAX_BYTES: bounded(Vars.int, 1024),
}
