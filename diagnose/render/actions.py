"""The ``action`` of a result (what an operator does about it) in the words a reader understands.

results.json records the action as a word a script can key on (``reseat_or_replace_cable``); the terminal,
the report's findings and its table of what to do per host show these words instead. This is the one
place the two meet, so a cause line and a report cell never word the same action differently. Older
results.json files have no ``action``: every function here takes that (and any value a newer version may
write) without failing.
"""

from __future__ import annotations

from typing import Any

#: Each action word of docs/contracts.md with what the operator does, as an instruction.
ACTION_WORDS: dict[str, str] = {
    "none": "nothing to do",
    "check_config": "fix the configuration",
    "check_user_app": "check the application or job settings",
    "check_cooling": "check the cooling",
    "drain_at_next_window": "drain at the next maintenance window",
    "reset_gpu": "reset the GPU",
    "reboot": "reboot the host",
    "reseat_or_replace_cable": "reseat or replace the cable",
    "replace_hca": "replace the network adapter (HCA)",
    "rma_gpu": "replace the GPU (RMA)",
    "contact_support": "contact the vendor's support",
}


def action_of(result: dict[str, Any]) -> str | None:
    """The action word a result records, or None where it records none (older files, PASS, SKIP)."""
    action = result.get("action")
    return action if isinstance(action, str) and action else None


def action_text(action: str | None) -> str | None:
    """The action as an instruction; an unknown word is shown as written, with spaces for underscores."""
    if action is None:
        return None
    return ACTION_WORDS.get(action, action.replace("_", " "))


def needs_doing(action: str | None) -> bool:
    """Whether the action asks the operator for something (``none`` does not)."""
    return action is not None and action != "none"
