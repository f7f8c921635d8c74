"""diagnose: accept and watch GPU training clusters over plain SSH."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

__version__ = "0.1.0"

#: Data packages installed under ``diagnose`` (pyproject's package-dir) and the repository folder each is.
DATA_PACKAGES = {
    "checks": "checks",
    "playbooks": "playbooks",
    "reports": "reports",
    "inventories": "inventory",
}


def _bind_source_folders() -> None:
    """Make ``diagnose.checks`` and the other data packages importable from a bare checkout.

    An install maps the repository's top-level folders under the package; a checkout on ``PYTHONPATH`` has
    no such mapping, and the catalog, playbooks, templates and default inventory would not be found.
    """
    root = Path(__file__).resolve().parent.parent
    for name, folder in DATA_PACKAGES.items():
        full = f"{__name__}.{name}"
        if full in sys.modules or importlib.util.find_spec(full) is not None:
            continue
        init = root / folder / "__init__.py"
        if not init.is_file():
            continue
        spec = importlib.util.spec_from_file_location(
            full, init, submodule_search_locations=[str(init.parent)]
        )
        if spec is None or spec.loader is None:
            continue
        module = importlib.util.module_from_spec(spec)
        sys.modules[full] = module
        spec.loader.exec_module(module)


_bind_source_folders()
