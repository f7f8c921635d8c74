"""Real public inventories read by diagnose and by Ansible itself must give the same hosts and variables.

Each fixture under tests/fixtures/inventories/<name>/ is copied from a public repository (its SOURCE file
names repository, path and commit). ansible-core is installed into its own virtual environment
(tests/.venv-ansible/, ignored by git; never a project dependency), ``ansible-inventory --list`` prints
every host's merged variables (Ansible's ``hostvars``), and diagnose's ``resolve_hosts`` must agree: the
same hosts, the same groups per host, and for each host the same variables with the same values.

Jinja in values: ``ansible-inventory --list`` prints templated values raw (kubespray's and the Slurm
appliance's group_vars are full of ``{{ ... }}``), and diagnose never templates, so the raw strings are
compared. A variable Ansible did template at list time would have to be left out of the comparison by
name in ``TEMPLATED_AT_LIST_TIME``; with ansible-core 2.19 that set is empty, and the test checks that
every value holding ``{{`` came back raw, so the day that changes this test says so.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from diagnose.config.playbook import parse_playbook
from diagnose.targets.loading import InventoryFiles, load_inventories
from diagnose.targets.model import ALL
from diagnose.targets.resolve import resolve_hosts
from diagnose.targets.sources import HostContext
from tests.support.cli import diagnose
from tests.support.paths import FIXTURES
from tests.support.prerequisites import unavailable

pytestmark = pytest.mark.integration

INVENTORIES = FIXTURES / "inventories"
VENV = Path(__file__).resolve().parent.parent / ".venv-ansible"

# name: (inventory sources in -i order, playbook folder or None), relative to INVENTORIES
CASES: dict[str, tuple[list[str], str | None]] = {
    "ansible-docs-ini": (["ansible-docs/hosts"], None),
    "ansible-docs-yaml": (["ansible-docs-yaml/hosts.yml"], None),
    "ansible-docs-repeated-i": (["ansible-docs-multi/staging", "ansible-docs-multi/production"], None),
    "ansible-docs-repeated-i-reversed": (
        ["ansible-docs-multi/production", "ansible-docs-multi/staging"],
        None,
    ),
    "ansible-docs-folder": (["ansible-docs-multi/inventory"], "ansible-docs-multi/playbooks"),
    "kubespray-sample": (["kubespray/inventory.ini"], None),
    "deepops-config-example": (["deepops/inventory"], None),
    "slurm-appliance-site": (["slurm-appliance/common/inventory", "slurm-appliance/site/inventory"], None),
}
TEMPLATED_AT_LIST_TIME: dict[str, set[str]] = {}


@pytest.fixture(scope="module")
def ansible_inventory() -> Path:
    """ansible-inventory from the test's own virtual environment, created on first use. Where it cannot
    be installed the test fails under CI (parity must never pass by skipping) and skips elsewhere."""
    binary = VENV / "bin" / "ansible-inventory"
    if not binary.exists():
        try:
            subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True, capture_output=True)
            subprocess.run(
                [str(VENV / "bin" / "pip"), "install", "-q", "ansible-core"],
                check=True,
                capture_output=True,
                timeout=600,
            )
        except (OSError, subprocess.SubprocessError) as err:
            detail = getattr(err, "stderr", b"") or b""
            reason = (
                f"cannot install ansible-core into {VENV}: {err} {detail.decode(errors='replace')[-300:]}"
            )
            unavailable("ansible-inventory", reason)
    return binary


def _ansible_view(binary: Path, sources: list[Path], playbook_dir: Path | None, cwd: Path) -> dict[str, Any]:
    """Run ``ansible-inventory --list`` from an empty folder (so no ansible.cfg or group_vars/ of the
    working directory joins in), failing on any source Ansible cannot parse."""
    command = [str(binary), "--list"]
    for source in sources:
        command += ["-i", str(source)]
    if playbook_dir is not None:
        command += ["--playbook-dir", str(playbook_dir)]
    env = {
        "PATH": f"{binary.parent}:/usr/bin:/bin",
        "HOME": str(cwd),
        "ANSIBLE_HOME": str(cwd / ".ansible"),
        "ANSIBLE_LOCAL_TEMP": str(cwd / "tmp"),
        "ANSIBLE_INVENTORY_UNPARSED_FAILED": "true",
        "ANSIBLE_INVENTORY_ANY_UNPARSED_IS_FAILED": "true",
        "LC_ALL": "C.UTF-8",
    }
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"ansible-inventory failed: {done.stderr[-2000:]}"
    return json.loads(done.stdout)


def _ansible_groups(listing: dict[str, Any]) -> dict[str, set[str]]:
    """host -> every group it is in (with ancestors, without ``all``), from the --list structure."""
    parents: dict[str, set[str]] = {}
    direct: dict[str, set[str]] = {}
    for group, body in listing.items():
        if group == "_meta":
            continue
        for child in body.get("children", []):
            parents.setdefault(child, set()).add(group)
        for host in body.get("hosts", []):
            direct.setdefault(host, set()).add(group)
    result = {}
    for host, groups in direct.items():
        found, pending = set(), list(groups)
        while pending:
            group = pending.pop()
            if group not in found:
                found.add(group)
                pending.extend(parents.get(group, ()))
        result[host] = found - {ALL}
    return result


def _raw_templates(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value] if "{{" in value or "{%" in value else []
    if isinstance(value, dict):
        return [s for v in value.values() for s in _raw_templates(v)]
    if isinstance(value, list):
        return [s for v in value for s in _raw_templates(v)]
    return []


@pytest.mark.parametrize("case", sorted(CASES))
def test_diagnose_reads_inventory_as_ansible_does(case: str, ansible_inventory: Path, tmp_path: Path) -> None:
    names, playbook_name = CASES[case]
    sources = [INVENTORIES / n for n in names]
    playbook_dir = INVENTORIES / playbook_name if playbook_name else None
    listing = _ansible_view(ansible_inventory, sources, playbook_dir, tmp_path)
    ansible_hostvars: dict[str, dict[str, Any]] = listing["_meta"]["hostvars"]
    ansible_groups = _ansible_groups(listing)

    # resolve_hosts, as a run would call it: no playbook vars, no profile, no -e, every host
    playbook = parse_playbook("name: parity\n", (playbook_dir or tmp_path) / "parity.yaml")
    hosts = resolve_hosts([InventoryFiles(sources)], HostContext(playbook))
    assert sorted(h.name for h in hosts) == sorted(ansible_groups)

    inventory = load_inventories(sources, playbook_dir)
    skipped = TEMPLATED_AT_LIST_TIME.get(case, set())
    for host in hosts:
        expected = {k: v for k, v in ansible_hostvars.get(host.name, {}).items() if k not in skipped}
        ours = {k: v for k, v in host.vars.items() if k not in skipped and k != "diagnose_profile"}
        assert host.vars["diagnose_profile"] == expected.get("diagnose_profile")
        expected.pop("diagnose_profile", None)
        assert ours == expected, f"{case}: variables of {host.name} differ"
        assert set(inventory.groups_of(host.name)) - {ALL} == ansible_groups[host.name]
    # The operator's view: `diagnose run --list-hosts` over the same sources selects the same hosts.
    sources_argv = [word for source in sources for word in ("-i", str(source))]
    playbook_file = tmp_path / "parity.yaml"
    playbook_file.write_text("name: parity\ndescription: hosts only\nchecks: [host.reachable]\n")
    listed = diagnose("run", *sources_argv, "--playbook", str(playbook_file), "--list-hosts", cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    shown = [line.split()[0] for line in listed.stdout.splitlines()[1:]]
    assert sorted(shown) == sorted(ansible_groups), f"{case}: --list-hosts"
    # Ansible left every template raw (so comparing raw strings above was comparing like with like).
    templated = [s for v in ansible_hostvars.values() for s in _raw_templates(v)]
    if case.startswith(("kubespray", "slurm", "deepops")):
        assert templated, f"{case}: expected raw Jinja templates in Ansible's output"


def test_every_fixture_names_its_source() -> None:
    for names, _ in CASES.values():
        top = INVENTORIES / names[0].split("/")[0]
        text = (top / "SOURCE").read_text()
        assert "repository:" in text and "commit:" in text, top


LIMIT_PATTERNS = [
    "webservers[0]",
    "webservers[-1]",
    "webservers[1:3]",  # the end is included
    "webservers[20:]",
    "usa[-1]",  # indexes the group's hosts as Ansible orders them: own hosts, then child groups' hosts
    "usa[1:2]",
    "southeast:!raleigh[0]",
    "all:!nothere",  # an exclusion matching nothing is ignored, not an error
    "www*:&webservers:!www0*",
    "~(one|two)\\.example\\.com",
]


def _ansible_hosts(binary: Path, source: Path, pattern: str, cwd: Path) -> set[str]:
    done = subprocess.run(
        [str(binary.parent / "ansible"), "-i", str(source), pattern, "--list-hosts"],
        cwd=cwd,
        env={"PATH": f"{binary.parent}:/usr/bin:/bin", "HOME": str(cwd), "LC_ALL": "C.UTF-8"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    lines = [line.strip() for line in done.stdout.splitlines()]
    return {line for line in lines if line and not line.startswith("hosts (")}


@pytest.mark.parametrize("pattern", LIMIT_PATTERNS)
def test_limit_selects_the_hosts_ansible_selects(
    pattern: str, ansible_inventory: Path, tmp_path: Path
) -> None:
    source = INVENTORIES / "ansible-docs" / "hosts"
    expected = _ansible_hosts(ansible_inventory, source, pattern, tmp_path)
    assert expected, pattern
    assert set(load_inventories([source]).select(pattern)) == expected
