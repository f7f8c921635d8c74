"""The per-NIC benchmark's plan: rails from the H100 node's captured facts, pairs and rounds, steps, ports
and the script each host runs (diagnose.probes.perftest_plan), and its settings."""

from __future__ import annotations

import json

import pytest

from diagnose.core.hosts import Host
from diagnose.core.vars import Vars
from diagnose.parsers.ibstat import parse_ibstat
from diagnose.probes.perftest_plan import (
    HostRails,
    PortBlocks,
    block_size,
    check_steps,
    first_rounds,
    host_script,
    pair_steps,
    rails_of,
    schedule,
    step_port,
)
from diagnose.probes.perftest_settings import SETTINGS, Settings, parse_ports, settings_from
from tests.support.paths import FACTS
from tests.support.perftest import h100_facts

PROFILE = {"expected_hca_count": 8, "expected_link_layer": "InfiniBand"}


def host(name: str, **extra: object) -> Host:
    return Host(name, vars=Vars({**PROFILE, "ansible_host": f"10.0.0.{name[-1]}", **extra}, name))


def rails(name: str, **extra: object) -> HostRails:
    found = rails_of(host(name, **extra), h100_facts())
    assert isinstance(found, HostRails), found
    return found


def test_rails_are_the_active_infiniband_ports_in_name_order_with_their_rate_and_gpu() -> None:
    found = rails("n1")
    assert [n.hca for n in found.nics] == [
        "mlx5_0",
        "mlx5_1",
        "mlx5_4",
        "mlx5_5",
        "mlx5_6",
        "mlx5_7",
        "mlx5_8",
        "mlx5_9",
    ]
    assert "mlx5_bond_0" not in [n.hca for n in found.nics]  # the Ethernet bond is not the InfiniBand fabric
    assert {n.rate_gbps for n in found.nics} == {400}
    # topo -m of the H100 node puts GPU i beside NIC mlx5_i (PIX): their GPUs; mlx5_8/9 have none there.
    assert [n.gpu for n in found.nics] == [0, 1, 4, 5, 6, 7, None, None]
    assert found.gpudirect and found.address == "10.0.0.1"


def test_expected_compute_hcas_picks_the_rails_and_perftest_address_the_server_address() -> None:
    found = rails("n2", expected_compute_hcas=["mlx5_[4-5]"], perftest_address="192.168.0.2")
    assert [(n.rail, n.hca) for n in found.nics] == [(0, "mlx5_4"), (1, "mlx5_5")]
    assert found.source == "expected_compute_hcas" and found.address == "192.168.0.2"


def test_a_host_without_fabric_or_ibstat_facts_says_why() -> None:
    assert "no fabric" in str(rails_of(host("n1", expected_hca_count=0), h100_facts()))
    assert "no ibstat facts" in str(rails_of(host("n1"), {}))


def test_rounds_keep_every_host_busy_once() -> None:
    assert first_rounds(["a", "b", "c", "d"]) == [[("a", "b"), ("c", "d")]]
    assert first_rounds(["a", "b", "c"]) == [[("a", "b")], [("c", "a")]]
    rounds = schedule([("a", "c"), ("a", "d"), ("b", "e"), ("b", "c")])
    assert rounds == [[("a", "c"), ("b", "e")], [("a", "d"), ("b", "c")]]
    for chosen in rounds:
        busy = [h for pair in chosen for h in pair]
        assert len(busy) == len(set(busy))


def test_a_pair_writes_each_rail_alone_both_ways_then_all_at_once_then_latency() -> None:
    steps = pair_steps("a", "b", 2, latency=True)
    assert [(s.mode, s.writer, s.rails) for s in steps] == [
        ("single", "a", (0,)),
        ("single", "b", (0,)),
        ("single", "a", (1,)),
        ("single", "b", (1,)),
        ("together", "a", (0, 1)),
        ("together", "b", (0, 1)),
        ("single", "a", (0,)),
        ("single", "a", (1,)),
    ]
    assert [s.kind for s in steps][-2:] == ["lat", "lat"]
    assert [(s.writer, s.rails) for s in check_steps("a", "c", [3])] == [("a", (3,)), ("c", (3,))]


def test_the_host_scripts_serve_and_write_the_same_ports_with_gpu_buffers() -> None:
    pair = {"n1": rails("n1"), "n2": rails("n2", expected_compute_hcas=["mlx5_0", "mlx5_1"])}
    steps = pair_steps("n1", "n2", 2, latency=False)
    settings = Settings(duration_s=3, message_bytes=1 << 20)
    writer, server = (
        host_script("n1", steps, pair, 20000, settings),
        host_script("n2", steps, pair, 20000, settings),
    )
    line = "ib_write_bw -d mlx5_1 -i 1 -p 20001 -F -s 1048576 -D 3 --use_cuda=1"
    assert 'write "$d/s2-r1.txt" timeout -k 2 ' in writer and f"{line} 10.0.0.2 &" in writer
    assert f"{line} &" in server and 'serve "$d/s2-r1.txt"' in server
    # Steps alternate halves of the block: step 3 (the reverse way) listens on the other half.
    assert step_port(20000, steps[3], 1, 2) == 20003
    assert writer.count("wait") == len(steps) and 'echo done >>"$d/progress"' in writer
    host_memory = host_script("n1", steps, pair, 20000, Settings(gpudirect=False))
    assert "--use_cuda" not in host_memory


def test_port_blocks_are_shared_only_between_different_addresses() -> None:
    blocks = PortBlocks(18515, 18530, block_size(4))
    assert blocks.count == 2
    first = blocks.take(["127.0.0.1"])
    second = blocks.take(["127.0.0.1"])
    assert (first, second) == (18515, 18523)
    assert blocks.take(["127.0.0.1"]) is None
    assert blocks.take(["10.0.0.1", "10.0.0.2"]) == 18515  # other addresses: the same ports are free
    blocks.give_back(["127.0.0.1"], first)
    assert blocks.take(["127.0.0.1"]) == 18515


def test_settings_from_variables_and_their_checks() -> None:
    settings = settings_from(
        Vars({"perftest_message_bytes": "8M", "perftest_duration_s": 10, "perftest_ports": "20000-20100"})
    )
    assert (settings.message_bytes, settings.duration_s, settings.ports) == (8 << 20, 10, (20000, 20100))
    assert settings.fraction == 0.9 and settings.gpudirect
    assert parse_ports(None) == (18515, 19514)
    with pytest.raises(ValueError, match="perftest_ports"):
        parse_ports("80-90")
    bad = Vars(
        {"min_nic_bw_fraction": 1.5, "perftest_address": "$(reboot)", "perftest_gpudirect": "maybe"}, "n1"
    )
    problems = {
        name: SETTINGS[name](bad, name)
        for name in ("min_nic_bw_fraction", "perftest_address", "perftest_gpudirect")
    }
    assert all(problems.values()), problems


def test_an_hgx_b300s_management_connectx7_ports_are_no_rails() -> None:
    """The composed XDR case of tests/facts/ibstat (eight ConnectX-8 at 800, four NVLSM ConnectX-7 at 100):
    under the b300 profile's CA types only the eight ConnectX-8 are measured, so no 100 Gb/s management
    port is held to an 800 Gb/s line rate."""
    case = json.loads((FACTS / "ibstat" / "b300_cx8_xdr800_nvlsm_cx7_active.json").read_text())
    facts = {"ib.port_state": parse_ibstat("\n".join(case["output"]))}
    b300 = {"expected_link_layer": "InfiniBand", "expected_hca_count": 8, "ansible_host": "10.0.0.3"}
    typed = Host("b1", vars=Vars({**b300, "expected_compute_hca_types": ["MT4131"]}, "b1"))
    found = rails_of(typed, facts)
    assert isinstance(found, HostRails), found
    assert [n.hca for n in found.nics] == [f"mlx5_{i}" for i in (0, 1, 6, 7, 8, 9, 10, 11)]
    assert {n.rate_gbps for n in found.nics} == {800} and "CA type MT4131" in found.source
    untyped = rails_of(Host("b1", vars=Vars(b300, "b1")), facts)
    assert isinstance(untyped, HostRails) and len(untyped.nics) == 12
