"""The values that flow from checks to results.json (schema 1, see docs/contracts.md)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any

STATUSES = ("PASS", "WARN", "FAIL", "ERROR", "SKIP")
# Worst first: used to order failures and to fold many results into one verdict.
SEVERITY = {"FAIL": 4, "ERROR": 3, "WARN": 2, "PASS": 1, "SKIP": 0}


@dataclass
class Outcome:
    """What a rule decides about one host (or the cluster, with ``host=None``)."""

    status: str
    message: str
    observed: Any = None
    expected: Any = None
    remediation: str | None = None
    host: str | None = None

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"unknown status {self.status!r}")


@dataclass
class CheckResult:
    """One row of results.json ``checks``."""

    id: str
    host: str | None
    checklist: str
    status: str
    observed: Any = None
    expected: Any = None
    message: str = ""
    remediation: str | None = None
    evidence: str | None = None

    def to_dict(self) -> dict[str, Any]:
        # Shallow on purpose: dataclasses.asdict deep-copies every observed value, which showed up as the
        # largest cost of the host stage's main thread at 64 hosts.
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass
class CommandOutput:
    """The raw result of one command on one host, as the connection layer hands it back."""

    stdout: str = ""
    stderr: str = ""
    exit_code: int | None = None
    timed_out: bool = False
    duration_s: float = 0.0
    error: str | None = None  # set when the command could not be run at all (connection lost, ...)

    @property
    def ok(self) -> bool:
        return self.error is None and not self.timed_out and self.exit_code == 0

    @property
    def not_found(self) -> bool:
        """The shell could not find the program (exit 127), the usual sign of a missing tool."""
        return self.exit_code == 127


@dataclass
class HostRecord:
    """One row of results.json ``hosts``."""

    name: str
    address: str
    reachable: bool = False
    error: str | None = None
    environment: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def worst(statuses: list[str]) -> str:
    """The most severe status of a list, PASS when it is empty."""
    return max(statuses, key=lambda s: SEVERITY[s], default="PASS")
