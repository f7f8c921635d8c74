"""A target host as the inventory describes it, with its merged variables."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from diagnose.core.vars import Vars


@dataclass
class Host:
    """One inventory host.

    ``vars`` holds every variable after precedence is applied (profile < all < group < host < ``-e``);
    the ``ansible_*`` connection variables are read from it by the connection layer.
    """

    name: str
    groups: list[str] = field(default_factory=list)
    vars: Vars = field(default_factory=Vars)

    @property
    def address(self) -> str:
        return str(self.vars.get("ansible_host") or self.name)

    @property
    def connection(self) -> str:
        return str(self.vars.get("ansible_connection") or "ssh")

    @property
    def python(self) -> str:
        return str(self.vars.get("ansible_python_interpreter") or "python3")


def safe_name(name: str) -> str:
    """A host, command or inventory name usable as one path component, whatever the inventory holds: every
    writer under ``raw/<host>/`` (the host stage, launches, bug reports) names the host's folder with it, so
    a host's evidence lands in one folder and no name (``..``, ``a/b``) leaves the run's."""
    cleaned = re.sub(r"[^A-Za-z0-9._-]", "_", name).strip(".") or "_"
    return cleaned[:120]
