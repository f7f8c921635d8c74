"""One order for a host's SSH login (diagnose.connectors.ssh_login): the ansible_* variables, then the
options of ansible_ssh_common_args / ansible_ssh_extra_args, then ~/.ssh/config; and the two clients that
log in, the ssh connector and the custom checks' ssh_config, taking the same values from it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from diagnose.connectors.ssh import SSHConnection
from diagnose.connectors.ssh_args import Hop, SSHArgsError, parse_ssh_args
from diagnose.connectors.ssh_login import FROM_SSH_CONFIG, FROM_VARIABLES, Proxy, choose_proxy, ssh_login
from diagnose.core.hosts import Host
from diagnose.core.vars import Vars
from diagnose.engine.custom import write_ssh_config

OPTIONS = (
    "-l optuser -p 2200 -i /opt/key -o ConnectTimeout=7 -o StrictHostKeyChecking=no "
    "-o UserKnownHostsFile=/opt/known"
)


def test_variables_come_before_the_options() -> None:
    login = ssh_login(
        Vars(
            {
                "ansible_ssh_common_args": OPTIONS,
                "ansible_user": "ops",
                "ansible_port": "2222",
                "ansible_ssh_private_key_file": "~/var_key",
                "ansible_ssh_timeout": "3",
                "ansible_host_key_checking": "true",
                "diagnose_known_hosts_file": "/var/known",
            }
        )
    )
    assert (login.user, login.port, login.connect_timeout, login.host_key_checking) == (
        "ops",
        2222,
        3.0,
        True,
    )
    assert login.key_files == (os.path.expanduser("~/var_key"), "/opt/key")
    assert login.known_hosts_files == ("/var/known", "/opt/known")


def test_options_fill_in_what_the_variables_leave_unset() -> None:
    login = ssh_login(Vars({"ansible_ssh_extra_args": OPTIONS}), known_hosts="/run/known")
    assert (login.user, login.port, login.connect_timeout, login.host_key_checking) == (
        "optuser",
        2200,
        7.0,
        False,
    )
    assert login.key_files == ("/opt/key",)
    assert login.known_hosts_files == ("/run/known", "/opt/known")  # the run's option, then the options'


def test_older_spellings_and_the_connect_timeout_variable() -> None:
    login = ssh_login(
        Vars({"ansible_ssh_user": "old", "ansible_ssh_port": 23, "diagnose_connect_timeout": 9})
    )
    assert (login.user, login.port, login.connect_timeout, login.host_key_checking) == ("old", 23, 9.0, None)


def test_proxy_from_the_variables_then_from_ssh_config() -> None:
    config = {"proxyjump": "gw", "proxycommand": "nc %h %p"}
    via_vars = choose_proxy(parse_ssh_args("-J ops@bastion:2222"), config, ("node1",))
    assert via_vars == Proxy((Hop("bastion", "ops", 2222),), source=FROM_VARIABLES)
    assert choose_proxy(parse_ssh_args("-o ProxyJump=none"), config, ("node1",)).off
    assert choose_proxy(parse_ssh_args(""), config, ("node1",)) == Proxy((Hop("gw"),), source=FROM_SSH_CONFIG)
    command = choose_proxy(parse_ssh_args(""), {"proxycommand": "nc %h %p"}, ("node1",))
    assert command == Proxy(command="nc %h %p", source=FROM_SSH_CONFIG)
    assert choose_proxy(parse_ssh_args(""), {"proxyjump": "None"}, ("node1",)) == Proxy()


def test_a_jump_host_is_not_its_own_jump_host() -> None:
    """``Host *`` with a ProxyJump matches the jump host too: reaching it is direct."""
    assert choose_proxy(parse_ssh_args(""), {"proxyjump": "gw"}, ("gw", "10.0.0.1")) == Proxy()


def test_an_unreadable_proxy_jump_in_ssh_config_is_refused() -> None:
    with pytest.raises(SSHArgsError):
        choose_proxy(parse_ssh_args(""), {"proxyjump": "a@@b"}, ("node1",))


def test_the_connector_and_the_custom_checks_log_in_alike(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.ssh/config of this machine's user
    values = {"ansible_host": "10.0.0.9", "ansible_ssh_common_args": OPTIONS, "ansible_port": 2022}
    host = Host("node9", vars=Vars(values, host="node9"))
    connection = SSHConnection(host)
    assert (connection.login.user, connection.port, connection.connect_timeout) == ("optuser", 2022, 7.0)
    assert (connection.key_files, connection.accept_unknown) == (["/opt/key"], True)
    write_ssh_config([host], tmp_path / "ssh_config")
    text = (tmp_path / "ssh_config").read_text()
    for line in ("Port 2022", "User optuser", 'IdentityFile "/opt/key"', "ConnectTimeout 7"):
        assert f"  {line}\n" in text
    assert '  UserKnownHostsFile "/opt/known" ~/.ssh/known_hosts\n' in text
    assert "  StrictHostKeyChecking accept-new\n" in text
