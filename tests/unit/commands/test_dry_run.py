"""The host list of ``--check`` (diagnose/commands/dry_run.py): a line per host up to 32, folded above."""

from __future__ import annotations

from diagnose.commands.dry_run import HOST_LIST_LIMIT, folded_host_lines, host_lines
from diagnose.core.hosts import Host
from diagnose.core.vars import Vars


def host(name: str, group: str, **values: object) -> Host:
    return Host(name=name, groups=["all", group], vars=Vars({"ansible_user": "ops", **values}, host=name))


def test_a_small_inventory_keeps_a_line_per_host() -> None:
    hosts = [host(f"gpu{i:02d}", "h100", ansible_host=f"10.0.0.{i}") for i in range(1, 5)]
    assert folded_host_lines(hosts) == host_lines(hosts)
    assert host_lines(hosts)[1] == "  gpu01  ssh ops@10.0.0.1  groups=h100"


def test_a_large_inventory_is_folded_by_connection_and_groups() -> None:
    hosts = [host(f"gpu{i:03d}", "h100", ansible_host=f"10.0.{i // 250}.{i % 250}") for i in range(1, 513)]
    hosts += [host("old1", "a100"), host("old2", "a100", ansible_port=2222)]
    assert len(hosts) > HOST_LIST_LIMIT
    assert folded_host_lines(hosts) == [
        "hosts (514, folded by connection and groups; --list-hosts lists each):",
        "  gpu[001-512]  ssh ops@<host>  groups=h100",
        "  old[1-2]  ssh ops@<host>  groups=a100",
    ]
