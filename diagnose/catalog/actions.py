"""Which action a result carries: what the operator does first about it (docs/actions.md).

Every id a run can record declares its actions where it is defined: a catalog check on its ``Check``
(``checks/``), a stage's id on its ``StageId`` (:mod:`diagnose.catalog.stage_ids`). A rule may choose
another from its facts (``Outcome.action``: the Xid's number says reboot rather than reset); what it
chose wins. This module only looks the declared word up, so the results store can give every row that is
not PASS its action whichever stage emitted it.
"""

from __future__ import annotations

from functools import cache
from typing import Protocol

from diagnose.catalog.loading import load_catalog
from diagnose.catalog.stage_ids import HISTORY_PREFIX, HISTORY_REGRESSION, HISTORY_UNSTABLE, STAGE_IDS
from diagnose.core.model import check_action

#: What each action asks of the operator, as ``diagnose checks`` and the reports say it.
MEANING: dict[str, str] = {
    "none": "nothing to do now (advisory, or not applicable)",
    "check_config": "fix a setting, a package or the connection (host, driver, NCCL, Kubernetes, the inventory)",
    "check_user_app": "look at the job: its code, its launch or its data path, not the hardware",
    "check_cooling": "look at the airflow, fans and inlet temperature of the named part's node or rack",
    "drain_at_next_window": "the named part is getting worse: drain its node at the next maintenance window "
    "and replace or repair the part before it stops a job",
    "reset_gpu": "drain the GPU's jobs and reset it (nvidia-smi -r), then run the checks again",
    "reboot": "drain the node and reboot it (power-cycle through the BMC if it does not answer)",
    "reseat_or_replace_cable": "reseat the cable or transceiver of the named port or link, replace it if "
    "that does not help",
    "replace_hca": "replace the network adapter (HCA) that is missing or failed",
    "rma_gpu": "take the GPU out of service and return it to the vendor (RMA)",
    "contact_support": "nothing the operator controls explains it: collect the evidence "
    "(nvidia-bug-report.sh, the run folder) for the vendor or diagnose's maintainers",
}

# The messages of results that could not be judged because of diagnose itself (an internal error): no
# setting of the operator's explains them. The host stage marks its parser and rule failures itself.
_OUR_FAULT = ("internal error",)


class Declares(Protocol):
    """Anything that declares actions: a catalog check, a cluster rule, a stage's id."""

    action: str
    warn_action: str | None
    error_action: str


def declared(entry: Declares, status: str, message: str = "") -> str | None:
    """The action ``entry`` declares for a result of ``status``: None on PASS, ``none`` on SKIP."""
    if status == "PASS":
        return None
    if status == "SKIP":
        return "none"
    hook = getattr(entry, "action_for", None)
    chosen = hook(status, message) if hook is not None else None
    if chosen is not None:
        return chosen
    if status == "ERROR" or status not in ("FAIL", "WARN"):
        return "contact_support" if message.startswith(_OUR_FAULT) else entry.error_action
    if status == "WARN" and entry.warn_action is not None:
        return entry.warn_action
    return entry.action or "contact_support"


@cache
def _declarers() -> tuple[dict[str, Declares], list[tuple[str, Declares]]]:
    """Exact ids, then id families by prefix (``bench.<collective>`` → ``bench.``), longest first."""
    exact: dict[str, Declares] = {}
    families: list[tuple[str, Declares]] = []
    for stage in STAGE_IDS:
        if "<" in stage.id:
            families.append((stage.id.split("<", 1)[0], stage))
        else:
            exact[stage.id] = stage
    for entry in load_catalog():
        exact[entry.id] = entry
    families.sort(key=lambda family: -len(family[0]))
    return exact, families


def declarer_of(check_id: str) -> Declares | None:
    """The catalog check or stage id that ``check_id`` belongs to, None for an id no table names."""
    exact, families = _declarers()
    if check_id in exact:
        return exact[check_id]
    return next((entry for prefix, entry in families if check_id.startswith(prefix)), None)


def action_of(check_id: str, status: str, message: str = "", chosen: str | None = None) -> str | None:
    """The action a result records: None on PASS; what its emitter chose, else what its id declares.

    An id no table names (a newer emitter, a hand-made file) gets ``contact_support``: this version of
    diagnose has no advice for it.
    """
    if status == "PASS":
        return None
    if chosen is not None and status != "SKIP":
        check_action(chosen)
        return chosen
    entry = declarer_of(check_id)
    if entry is None:
        return "none" if status == "SKIP" else "contact_support"
    return _of_the_history(check_id, status, message) or declared(entry, status, message)


def followed_id(check_id: str, status: str, message: str) -> str | None:
    """The check a history finding is about, when it is about one: a check that went PASS→FAIL since the
    last good run, or keeps flipping, opens its message with that check's id ("gpu.xid on node7 went
    PASS→FAIL ..."). None for the other regressions (busbw, versions, a host gone) and other ids."""
    if check_id not in (HISTORY_REGRESSION, HISTORY_UNSTABLE) or status not in ("FAIL", "WARN"):
        return None
    named = message.split(" ", 1)[0]
    return None if named.startswith(HISTORY_PREFIX) or declarer_of(named) is None else named


def _of_the_history(check_id: str, status: str, message: str) -> str | None:
    """A history finding about a check takes that check's FAIL action: the regression is the same fault
    seen over time (the results store passes the action this run recorded for it, where there is one)."""
    named = followed_id(check_id, status, message)
    entry = declarer_of(named) if named else None
    return entry.action or None if entry is not None else None
