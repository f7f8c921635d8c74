"""ansible_ssh_common_args / ansible_ssh_extra_args as diagnose reads them: honoured, no-op, or refused."""

from __future__ import annotations

import pytest

from diagnose.config.host_settings import first_problem
from diagnose.connectors.ssh_args import (
    Hop,
    SSHArgs,
    SSHArgsError,
    expand_proxy_command,
    host_ssh_args,
    parse_jump_spec,
    parse_ssh_args,
)
from diagnose.core.vars import Vars


@pytest.mark.parametrize(
    ("text", "hops"),
    [
        ("-o ProxyJump=user@bastion:2222", (Hop("bastion", "user", 2222),)),
        ("-o ProxyJump=bastion", (Hop("bastion"),)),
        ("-J bastion", (Hop("bastion"),)),
        ("-Jops@gw", (Hop("gw", "ops"),)),
        ("-o 'ProxyJump a,b:23'", (Hop("a"), Hop("b", None, 23))),
        ("-o ProxyJump=ssh://root@10.0.0.1:2200", (Hop("10.0.0.1", "root", 2200),)),
        ("-oProxyJump=[fd00::1]:22", (Hop("fd00::1", None, 22),)),
        ("-o proxyjump=BASTION", (Hop("BASTION"),)),  # option names are case-insensitive, as in OpenSSH
    ],
)
def test_proxy_jump_forms(text: str, hops: tuple[Hop, ...]) -> None:
    assert parse_ssh_args(text).proxy_jump == hops


def test_hop_prints_back_as_a_spec() -> None:
    assert [str(h) for h in parse_jump_spec("u@a:1,b,[::1]:2")] == ["u@a:1", "b", "[::1]:2"]


def test_proxy_command_is_kept_whole_and_expanded_like_openssh() -> None:
    args = parse_ssh_args('-o ProxyCommand="ssh -W %h:%p -q bastion"')
    assert args.proxy_command == "ssh -W %h:%p -q bastion"
    assert args.has_proxy and not args.proxy_jump
    expanded = expand_proxy_command(args.proxy_command, "10.1.1.5", 2222, "root", "node5")
    assert expanded == "ssh -W 10.1.1.5:2222 -q bastion"
    assert expand_proxy_command("nc %n %% %r", "h", 22, "ops", "alias") == "nc alias % ops"


def test_none_turns_a_configured_proxy_off() -> None:
    for text in ("-o ProxyJump=none", "-o ProxyCommand=none"):
        args = parse_ssh_args(text)
        assert args.no_proxy and not args.has_proxy


def test_honoured_options_are_read() -> None:
    args = parse_ssh_args(
        "-i ~/.ssh/k1 -o IdentityFile=/k2 -p 2200 -l ops -o ConnectTimeout=7 "
        "-o ServerAliveInterval=30 -o UserKnownHostsFile='/a /b' -o StrictHostKeyChecking=accept-new -C"
    )
    assert args.identity_files == ("~/.ssh/k1", "/k2")
    assert (args.port, args.user, args.connect_timeout, args.server_alive_interval) == (2200, "ops", 7, 30)
    assert args.known_hosts_files == ("/a", "/b")
    assert args.strict_host_key_checking is False and args.compression is True
    assert parse_ssh_args("-o StrictHostKeyChecking=yes").strict_host_key_checking is True


def test_first_value_wins_as_in_openssh() -> None:
    assert parse_ssh_args("-p 1 -p 2 -o Port=3").port == 1
    assert parse_ssh_args("-J a -J b").proxy_jump == (Hop("a"),)


def test_multiplexing_and_quiet_options_are_accepted_as_no_ops() -> None:
    text = (
        "-o ControlMaster=auto -o ControlPersist=60s -o ControlPath=/tmp/ansible-%r@%h:%p "
        "-o ServerAliveCountMax=3 -o BatchMode=yes -o LogLevel=ERROR -o IdentitiesOnly=yes -q"
    )
    args = parse_ssh_args(text)
    assert args == SSHArgs(no_ops=args.no_ops)  # nothing else changed
    assert "ControlMaster=auto" in args.no_ops and "-q" in args.no_ops and len(args.no_ops) == 8


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("-A", "-A"),
        ("-t", "-t"),
        ("-F /etc/ssh/other_config", "-F"),
        ("-o ForwardAgent=yes", "ForwardAgent"),
        ("-o KexAlgorithms=+diffie-hellman-group1-sha1", "KexAlgorithms"),
        ("-o IdentitiesOnly=no", "IdentitiesOnly"),
        ("-o TCPKeepAlive=no", "TCPKeepAlive"),
        ("-o StrictHostKeyChecking=maybe", "StrictHostKeyChecking"),
        ("-o ProxyJump=a -o ProxyCommand='nc %h %p'", "ProxyCommand"),
        ("-o ProxyCommand='nc %h %p %d'", "%d"),
        ("-o ProxyJump='a;reboot'", "a;reboot"),
        ("-o ProxyJump=a:99999", "99999"),
        ("-J", "-J"),
        ("-o ConnectTimeout=soon", "ConnectTimeout"),
        ("bastion", "bastion"),
        ("-o 'ProxyJump=a", "split"),
        ("-o Port", "Key=Value"),
    ],
)
def test_what_cannot_be_honoured_is_refused_naming_it(text: str, named: str) -> None:
    with pytest.raises(SSHArgsError) as caught:
        parse_ssh_args(text)
    assert named in str(caught.value)


def test_the_two_variables_merge_and_may_not_disagree_on_the_proxy() -> None:
    merged = host_ssh_args(
        {"ansible_ssh_common_args": "-J bastion -i /k1", "ansible_ssh_extra_args": "-i /k2 -p 2"}
    )
    assert merged.proxy_jump == (Hop("bastion"),) and merged.identity_files == ("/k1", "/k2")
    assert merged.port == 2
    with pytest.raises(SSHArgsError, match="ansible_ssh_common_args and ansible_ssh_extra_args"):
        host_ssh_args({"ansible_ssh_common_args": "-J a", "ansible_ssh_extra_args": "-o ProxyCommand=x"})


@pytest.mark.parametrize("name", ["ansible_ssh_common_args", "ansible_ssh_extra_args"])
def test_host_settings_refuse_a_bad_option_naming_the_variable(name: str) -> None:
    problem = first_problem(Vars({name: "-o ControlMaster=auto -o ForwardAgent=yes"}, "node1"))
    assert problem is not None
    variable, message = problem
    assert variable == name and message.startswith(f"host node1: {name}: ") and "ForwardAgent" in message
    assert first_problem(Vars({name: "-o ProxyJump=root@gw:2222 -o ControlPersist=60s"}, "node1")) is None
