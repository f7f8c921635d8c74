"""The values that flow from checks to results.json (schema 1, see docs/contracts.md)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields
from typing import Any, TypeVar

T = TypeVar("T")

STATUSES = ("PASS", "WARN", "FAIL", "ERROR", "SKIP")
#: How a PASS that judged no figure (``judged: false``) is counted and shown: apart from the passes.
SHOWN = "SHOWN"
# Worst first: used to order failures and to fold many results into one verdict.
SEVERITY = {"FAIL": 4, "ERROR": 3, "WARN": 2, "PASS": 1, "SKIP": 0}
# What an operator does first about a result that is not PASS (docs/actions.md), least drastic first: where
# several findings meet in one result, the later word covers the earlier ones (a reboot resets the GPUs too).
ACTIONS = (
    "none",
    "check_config",
    "check_user_app",
    "check_cooling",
    "drain_at_next_window",
    "reset_gpu",
    "reboot",
    "reseat_or_replace_cable",
    "replace_hca",
    "rma_gpu",
    "contact_support",
)


def check_action(action: str | None) -> None:
    """Refuse a word outside :data:`ACTIONS`: dashboards and drain scripts match on these eleven."""
    if action is not None and action not in ACTIONS:
        raise ValueError(f"unknown action {action!r} (one of {', '.join(ACTIONS)})")


def strongest(actions: list[str]) -> str:
    """The action that covers all of ``actions`` (the last in :data:`ACTIONS` order), ``none`` if empty."""
    return max(actions, key=ACTIONS.index, default="none")


@dataclass
class Outcome:
    """What a rule decides about one host (or the cluster, with ``host=None``)."""

    status: str
    message: str
    observed: Any = None
    expected: Any = None
    remediation: str | None = None
    host: str | None = None
    # The rule's own choice among ACTIONS, from its facts (the Xid's number); None: the check's declared one.
    action: str | None = None

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"unknown status {self.status!r}")
        check_action(self.action)


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
    # One of ACTIONS on every result that is not PASS (the results store fills it in where the emitter did
    # not); absent from a PASS row of results.json (docs/contracts.md, "Actions").
    action: str | None = None
    # False on a PASS that shows a function worked and judges no figure (ranks exchanged data over gloo; a
    # fleet of two CPU hosts without a floor): counted apart, never as PASS (docs/contracts.md, "Verdict and
    # coverage"); absent from results.json where True.
    judged: bool = True

    def to_dict(self) -> dict[str, Any]:
        # Shallow on purpose: dataclasses.asdict deep-copies every observed value, which showed up as the
        # largest cost of the host stage's main thread at 64 hosts.
        row = {f.name: getattr(self, f.name) for f in fields(self)}
        if row["action"] is None:
            del row["action"]
        if row["judged"]:
            del row["judged"]
        return row


@dataclass
class CommandOutput:
    """The raw result of one command on one host, as the connection layer hands it back."""

    stdout: str = ""
    stderr: str = ""
    exit_code: int | None = None
    timed_out: bool = False
    duration_s: float = 0.0
    error: str | None = None  # set when the command could not be run at all (connection lost, ...)
    # What parse() gave, by parser: the checks that read one output (six read the GPU query) share one parse.
    _parsed: dict[Callable[[str], Any], Any] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    def parsed(self, parse: Callable[[str], T]) -> T:
        """``parse(self.stdout)``, worked out once for all the checks of a host that read this output (a
        parser that raises is asked again, and raises again). The result is shared: read it, never change it."""
        try:
            return self._parsed[parse]
        except KeyError:
            result = self._parsed[parse] = parse(self.stdout)
            return result

    @property
    def ok(self) -> bool:
        return self.error is None and not self.timed_out and self.exit_code == 0

    @property
    def not_found(self) -> bool:
        """The shell could not find the program (exit 127), the usual sign of a missing tool."""
        return self.exit_code == 127

    @property
    def ended(self) -> str:
        """How the command ended, in words for a message: ``exit 3``, ``timed out``, the reason it could not
        run, or, where the connection closed before the shell reported a status, ``ended without an exit
        status`` (a bare ``exit {exit_code}`` printed ``exit None`` there)."""
        if self.error:
            return self.error
        if self.timed_out:
            return "timed out"
        if self.exit_code is None:
            return "ended without an exit status"
        return f"exit {self.exit_code}"


@dataclass
class HostRecord:
    """One row of results.json ``hosts``."""

    name: str
    address: str
    reachable: bool = False
    error: str | None = None
    environment: dict[str, Any] = field(default_factory=dict)
    # The parts and versions measured on (diagnose.campaign.identity): serials, GUIDs, firmware, driver, NCCL.
    identity: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def worst(statuses: list[str]) -> str:
    """The most severe status of a list, PASS when it is empty."""
    return max(statuses, key=lambda s: SEVERITY[s], default="PASS")
