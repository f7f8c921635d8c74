"""The shape of a catalog entry: observe (commands) → parse (pure) → judge (pure).

A check file in ``checks/`` builds one :class:`Check` (per host) or :class:`ClusterCheck` (over all hosts'
facts) and names it ``CHECK``. The engine runs the commands, saves their raw output as evidence, and hands
the outputs to ``parse`` and the facts to ``judge``; a check never does I/O itself, so it can be tested on
captured outputs alone.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from diagnose.core.model import CommandOutput, Outcome
from diagnose.core.vars import Vars

Facts = dict[str, Any]


class ParseError(ValueError):
    """Raised by a parser that cannot make sense of its input; the check becomes an ERROR saying why."""


@dataclass(frozen=True)
class Command:
    """One command run on a host.

    ``key`` names the evidence file (``raw/<host>/<key>.txt``) and lets several checks share one run of
    the same command (``ibstat`` feeds ``ib.port_state`` and ``ib.link_rate``). ``tool`` is the program
    whose absence (exit 127) means "tool missing" rather than "fault found". A command with
    ``required=False`` is a fallback source: its failure is left to the parser to weigh. An ``auxiliary``
    command only enriches a verdict its check reaches without it (the GPU index of an Xid found in the
    kernel log): even when it never completes — nvidia-smi hangs on the very GPU that fell off the bus —
    the parser gets what there is, where any other unfinished command makes the check an ERROR. A
    command marked ``last`` runs after every other command of the host's batch: a diagnostic that loads
    the GPUs for minutes (DCGM's) must not be what the passive readings and the census of processes see.
    """

    key: str
    script: str
    tool: str | None = None
    timeout: float = 20.0
    required: bool = True
    auxiliary: bool = False
    last: bool = False


@dataclass(frozen=True)
class Check:
    """A per-host check. See the module docstring for the data path."""

    id: str
    checklist: str
    summary: str
    commands: tuple[Command, ...]
    parse: Callable[[Mapping[str, CommandOutput], Vars], Facts]
    judge: Callable[[Facts, Vars], Outcome]
    remediation: str
    # Returns the reason this host has no such hardware (from the profile, or no profile at all), so a
    # missing tool is a SKIP rather than an ERROR. None means the hardware is expected and a missing tool
    # is an ERROR.
    no_hardware: Callable[[Vars], str | None] | None = None
    # Some commands depend on the host's variables (the benchmark interpreter, say).
    commands_for: Callable[[Vars], tuple[Command, ...]] | None = None
    # Counters that only mean something as a change over the run (NVLink replays, IB symbol errors): the
    # engine runs the commands again after the benchmark stage and calls ``judge_delta(before, after,
    # vars)`` with both snapshots' facts; ``judge`` alone decides when the second snapshot is missing.
    judge_delta: Callable[[Facts, Facts, Vars], Outcome] | None = None
    # What only shows under load (a PCIe link that downshifts at idle): the engine runs the commands every
    # few seconds while the benchmarks run and calls ``judge_under_load(samples, vars)`` with their facts.
    judge_under_load: Callable[[Sequence[Facts], Vars], Outcome] | None = None
    # The id of a check whose finding explains this one's absence of hardware (every ib.* check when
    # ib.devices finds no RDMA device): this check then SKIPs pointing there instead of repeating the
    # cause as its own ERROR or FAIL. The root check says so through ``absence``.
    folded_under: str | None = None
    absence: Callable[[Facts, Vars], str | None] | None = None
    # What the operator does first about a FAIL (one of diagnose.core.model.ACTIONS; docs/actions.md); a
    # WARN takes ``warn_action`` (None: the same as a FAIL, "none" where the warning is advisory), an ERROR
    # (not judged) ``error_action``. A rule refines them from its facts through ``Outcome.action``; a result
    # made outside the rule (an unreachable host) through ``action_for(status, message)`` (None: declared).
    action: str = ""
    warn_action: str | None = None
    error_action: str = "check_config"
    action_for: Callable[[str, str], str | None] | None = None

    def host_commands(self, host_vars: Vars) -> tuple[Command, ...]:
        return self.commands_for(host_vars) if self.commands_for else self.commands

    @property
    def needs(self) -> str:
        tools = sorted({c.tool for c in self.commands if c.tool})
        return ", ".join(tools) if tools else "shell"


@dataclass(frozen=True)
class ClusterCheck:
    """A rule over every reachable host's facts (one version everywhere, one MTU, ...).

    ``uses`` lists the per-host check ids whose facts it reads; ``judge`` receives
    ``{host: {check_id: facts}}`` and each host's variables, and returns outcomes whose ``host`` is None
    for a cluster-wide verdict or names the odd host out.
    """

    id: str
    checklist: str
    summary: str
    uses: tuple[str, ...]
    judge: Callable[[Mapping[str, Mapping[str, Facts]], Mapping[str, Vars]], list[Outcome]]
    remediation: str
    # As for Check: the action of a FAIL, a WARN (None: the same) and an ERROR.
    action: str = ""
    warn_action: str | None = None
    error_action: str = "check_config"
    action_for: Callable[[str, str], str | None] | None = None

    @property
    def needs(self) -> str:
        return "facts of " + ", ".join(self.uses)
