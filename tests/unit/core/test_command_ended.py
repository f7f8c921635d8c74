"""How a command ended, as messages say it (issue 36, item 9): a command the connection lost before its shell
reported a status has no exit code, and the launchers' and connectors' messages printed ``exit None``."""

from __future__ import annotations

from diagnose.core.model import CommandOutput


def test_every_way_a_command_ends_is_said_in_words() -> None:
    assert CommandOutput(exit_code=3).ended == "exit 3"
    assert CommandOutput(timed_out=True).ended == "timed out"
    assert CommandOutput(error="connection lost").ended == "connection lost"
    lost = CommandOutput(exit_code=None)
    assert lost.ended == "ended without an exit status"
    assert "None" not in f"could not start torchrun on n1: {(lost.error or lost.stderr or lost.ended)}"
