"""The simulated hosts of bench/whole_run.py answer the real batch script in the framing its shell prints."""

from __future__ import annotations

from diagnose.connectors import connect
from diagnose.core.check import Command
from diagnose.core.hosts import Host
from diagnose.core.model import CommandOutput
from diagnose.core.vars import Vars
from tests.support.paths import CAPTURED
from tests.support.simhost import Replies, SimulatedHost, simulated_hosts


def replies() -> Replies:
    return Replies(
        {
            "ibstat": CommandOutput(
                stdout=(CAPTURED / "ibstat" / "cx6_hdr_initializing.txt").read_text(), exit_code=0
            ),
            "port_range": CommandOutput(stdout="32768\t60999\n", exit_code=0),
            "lsmod": CommandOutput(stdout="", stderr="lsmod: not found\n", exit_code=127),
        },
        connect_s=(0.0,),
        batch_s=(0.0,),
    )


def test_every_command_of_a_batch_gets_its_captured_output_through_the_real_framing() -> None:
    commands = [
        Command("ibstat", "ibstat"),
        Command("port_range", "cat /proc/sys/net/ipv4/ip_local_port_range"),
        Command("lsmod", "lsmod | grep -q peermem"),
        Command("dmesg", "dmesg --level=err"),
    ]
    with simulated_hosts(replies()):
        connection = connect(Host("node1", vars=Vars({})))
        assert isinstance(connection, SimulatedHost)
        connection.open()
        outputs = connection.run_batch(commands)
    expected = replies().outputs
    for key in ("ibstat", "port_range", "lsmod"):
        got = outputs[key]
        assert (got.stdout, got.stderr, got.exit_code) == (
            expected[key].stdout,
            expected[key].stderr,
            expected[key].exit_code,
        )
        assert got.error is None and not got.timed_out
    # a command nobody captured answers as a missing tool, never as a pass
    assert outputs["dmesg"].exit_code == 127 and "not captured" in outputs["dmesg"].stderr


def test_the_registry_is_restored_after_the_block() -> None:
    with simulated_hosts(replies()):
        pass
    assert not isinstance(connect(Host("node1", vars=Vars({}))), SimulatedHost)
