"""What the rule tests of checks/ share: a host's variables under a packaged profile, and the output of a
tool that is not installed."""

from __future__ import annotations

from typing import Any

from diagnose.config.profile_files import load_profile
from diagnose.core.model import CommandOutput
from diagnose.core.vars import Vars

MISSING = CommandOutput(stdout="", stderr="sh: 1: tool: not found", exit_code=127)


def profile(name: str, host: str = "node1", **overrides: Any) -> Vars:
    return Vars({**load_profile(name).vars, "diagnose_profile": name, **overrides}, host=host)
