"""What `pip install .` puts in a wheel is pyproject's explicit package list: a new room left out of it works
from the checkout and fails at import after a real install (the README's command 1). This holds the list
to the folders."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def listed_packages() -> set[str]:
    text = (ROOT / "pyproject.toml").read_text()
    block = re.search(r"^\[tool\.setuptools\]\npackages = \[(.*?)^\]", text, re.M | re.S)
    assert block is not None, "pyproject.toml has no [tool.setuptools] packages list"
    return set(re.findall(r'"([\w.]+)"', block.group(1)))


def test_every_package_folder_of_diagnose_is_installed() -> None:
    folders = {
        ".".join(init.parent.relative_to(ROOT).parts)
        for init in (ROOT / "diagnose").rglob("__init__.py")
        if "__pycache__" not in init.parts
    }
    missing = folders - listed_packages()
    assert not missing, f"pyproject.toml [tool.setuptools] packages leaves out {sorted(missing)}"


def test_every_data_folder_is_installed_under_the_package() -> None:
    text = (ROOT / "pyproject.toml").read_text()
    for name, folder in {"checks": "checks", "playbooks": "playbooks", "reports": "reports"}.items():
        assert f'"diagnose.{name}"' in text and f'"diagnose.{name}" = "{folder}"' in text
    assert '"diagnose.inventories" = "inventory"' in text
    assert "diagnose.checks" in listed_packages() and "diagnose.inventories" in listed_packages()
