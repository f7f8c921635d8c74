"""What the engine tells its caller while a run goes on: hosts done, and trouble that is no check's result.

The engine never prints: the command line shows a progress bar on a terminal and keeps cron mail to one
line, node-check keeps slurmd's log to one line, and tests and site scripts want silence. Each caller hands
the stages a :class:`Reporter`; this base class says nothing, a caller overrides what it shows.
"""

from __future__ import annotations


class Reporter:
    """Silent by default; every method is a notice, none may raise into the run."""

    def hosts_started(self, total: int) -> None:
        """The host stage begins on ``total`` hosts."""

    def host_done(self, name: str) -> None:
        """One host's checks are judged and in the results."""

    def hosts_finished(self) -> None:
        """The host stage is over (every host done, or the time budget ran out)."""

    def problem(self, message: str) -> None:
        """Something the operator should hear that no result records: a connection that would not close,
        a second snapshot that failed, work the time budget could not stop."""
