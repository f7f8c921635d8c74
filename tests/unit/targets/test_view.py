"""Hosts grouped by their shown variables for ``--check`` (diagnose/targets/view.py: var_groups)."""

from __future__ import annotations

from typing import Any

from diagnose.core.hosts import Host
from diagnose.core.vars import Vars
from diagnose.targets.view import var_groups


def host(name: str, **values: Any) -> Host:
    return Host(name=name, vars=Vars(values, host=name))


def test_hosts_with_the_same_variables_form_one_group_whatever_their_addresses() -> None:
    hosts = [
        host("gpu01", ansible_host="10.0.0.1", ansible_port=22, diagnose_profile="h100-8x-ndr400"),
        host("old1", ansible_host="10.0.1.1", diagnose_profile="a100-8x-hdr200"),
        host("gpu02", ansible_host="10.0.0.2", ansible_port=2222, diagnose_profile="h100-8x-ndr400"),
        host("gpu03", ansible_host="10.0.0.3", diagnose_profile="h100-8x-ndr400", bench_gpus_per_host=4),
    ]
    groups = var_groups(hosts)
    assert [names for names, _ in groups] == [["gpu01", "gpu02"], ["old1"], ["gpu03"]]
    assert groups[0][1] == {"diagnose_profile": "h100-8x-ndr400"}, (
        "each host's address stays in the host list"
    )
    assert groups[1][1] == {"ansible_host": "10.0.1.1", "diagnose_profile": "a100-8x-hdr200"}
    assert groups[2][1]["bench_gpus_per_host"] == 4


def test_secrets_stay_masked_and_irrelevant_variables_do_not_split_groups() -> None:
    hosts = [
        host("a", ansible_become_pass="s3cret", rack="r1"),
        host("b", ansible_become_pass="other", rack="r2"),
    ]
    [(names, shown)] = var_groups(hosts)
    assert names == ["a", "b"] and shown == {"ansible_become_pass": "REDACTED"}
