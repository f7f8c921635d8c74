"""The nightly and node-check playbooks watch an NVL72 rack's NVLink domain, at no cost on other hosts.

A tray whose fabric registration is lost overnight, or whose IMEX peer is gone, breaks every multi-node
NVLink job of its rack while each GPU still looks healthy; only gpu.nvlink_domain, gpu.imex and the rack
rule see it. They ask a host for nothing unless its profile expects a multi-node NVLink domain.
"""

from __future__ import annotations

import pytest

from diagnose.checks import gpu_imex, gpu_nvlink_domain
from diagnose.config.playbook import load_playbook
from tests.support.rulekit import profile


@pytest.mark.parametrize("name", ["nightly", "nightly-moe", "node-check"])
def test_the_health_playbooks_run_the_nvlink_domain_checks(name: str) -> None:
    checks = load_playbook(name).checks
    assert {"gpu.nvlink_domain", "gpu.imex"} <= set(checks)
    # node-check judges one node where it runs: the rack rule needs every tray, so only the nightly has it.
    assert ("nvlink.rack" in checks) == name.startswith("nightly")


@pytest.mark.parametrize("name", ["h100-8x-ndr400", "b200-8x-ndr400", "b300-8x-xdr800", "single-node-nvlink"])
def test_hosts_in_no_nvlink_domain_are_asked_nothing(name: str) -> None:
    vars_ = profile(name)
    assert gpu_nvlink_domain.CHECK.host_commands(vars_) == ()
    assert gpu_imex.CHECK.host_commands(vars_) == ()


@pytest.mark.parametrize("name", ["gb200-nvl72", "gb300-nvl72"])
def test_nvl72_trays_are_asked_for_their_fabric_and_imex(name: str) -> None:
    vars_ = profile(name)
    assert [c.key for c in gpu_nvlink_domain.CHECK.host_commands(vars_)] == ["nvidia_smi_qx"]
    assert gpu_imex.CHECK.host_commands(vars_)
