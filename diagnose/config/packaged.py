"""Where diagnose's own playbooks and profiles lie, and how a name on the command line is told from a path.

``--playbook acceptance`` and ``diagnose_profile: h100-8x-ndr400`` name files shipped in the package;
``--playbook ./site.yaml`` names the operator's own. Both readers decide the same way.
"""

from __future__ import annotations

from importlib.resources import files
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from importlib.resources.abc import Traversable

PLAYBOOK_PACKAGE = "diagnose.playbooks"


def packaged(package_dir: str = "") -> Traversable:
    """The packaged playbooks folder, or a folder inside it (``profiles``)."""
    root = files(PLAYBOOK_PACKAGE)
    return root / package_dir if package_dir else root


def yaml_names(folder: Traversable) -> list[str]:
    """The names of the ``.yaml`` files of a folder, without the suffix, sorted; none if it is no folder."""
    if not folder.is_dir():
        return []
    return sorted(item.name.rsplit(".", 1)[0] for item in folder.iterdir() if item.name.endswith(".yaml"))


def looks_like_path(name: str) -> bool:
    """Whether a playbook or profile name is a file path rather than the name of a packaged one."""
    return "/" in name or "\\" in name or name.endswith((".yaml", ".yml")) or name.startswith((".", "~"))
