"""Playbooks, hardware profiles and the merged variables each host ends up with."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from diagnose.config.playbook import (
    available_playbooks,
    check_unknown_patterns,
    custom_check_paths,
    load_playbook,
    parse_size,
)
from diagnose.config.profile_files import available_profiles, load_profile
from diagnose.config.profiles import PROFILE_VARIABLES, REPLACED, unknown_variable_warnings
from diagnose.core.errors import ConfigError
from diagnose.core.hosts import Host
from diagnose.core.vars import Vars
from diagnose.targets.loading import InventoryFiles, load_inventory
from diagnose.targets.resolve import resolve_hosts
from diagnose.targets.sources import HostContext
from tests.support.paths import REPO

MIB = 1 << 20


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip("\n"))
    return path


def playbook_error(tmp_path: Path, text: str) -> ConfigError:
    path = write(tmp_path / "pb.yaml", text)
    with pytest.raises(ConfigError) as caught:
        load_playbook(str(path))
    assert caught.value.path == str(path)
    assert "\n" not in str(caught.value)
    return caught.value


# ---------------------------------------------------------------------------------------- packaged playbooks


def test_default_is_the_packaged_acceptance_from_any_folder(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    playbook = load_playbook(None)
    assert playbook.name == "acceptance"
    assert playbook.path.name == "acceptance.yaml"
    assert playbook.checks == ("*",)
    assert playbook.benchmarks is not None and playbook.benchmarks.enabled


@pytest.mark.parametrize(
    ("name", "collectives"),
    [
        ("acceptance", ("all_reduce",)),
        ("acceptance-fsdp", ("all_reduce", "reduce_scatter", "all_gather")),
        ("acceptance-moe", ("all_reduce", "reduce_scatter", "all_gather", "all_to_all")),
    ],
)
def test_workload_flavours(name: str, collectives: tuple[str, ...]) -> None:
    plan = load_playbook(name).benchmarks
    assert plan is not None
    assert plan.collectives == collectives
    assert (plan.min_bytes, plan.max_bytes, plan.step_factor) == (MIB, 1024 * MIB, 2)
    assert plan.straggler_isolation is True
    assert plan.timeout_s is None


def test_packaged_playbooks_are_listed() -> None:
    assert {"acceptance", "acceptance-fsdp", "acceptance-moe"} <= set(available_playbooks())


def test_unknown_playbook_name_lists_the_packaged_ones() -> None:
    with pytest.raises(ConfigError, match="unknown playbook 'acceptence'; packaged playbooks: acceptance,"):
        load_playbook("acceptence")


def test_missing_playbook_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="playbook file not found") as caught:
        load_playbook(str(tmp_path / "nope.yaml"))
    assert caught.value.path == str(tmp_path / "nope.yaml")


# -------------------------------------------------------------------------------------------- playbook schema


def test_full_playbook(tmp_path: Path) -> None:
    path = write(
        tmp_path / "site" / "pb.yaml",
        """
        name: site-acceptance
        description: Acceptance with site checks
        profile: h200-8x-ndr400
        checks: ["ib.*", "gpu.topology", "!ib.mtu"]
        custom_checks: ["custom/*.py"]
        vars: {command_timeout_s: 20, expected_mtu: 2048}
        benchmarks:
          enabled: true
          workload: fsdp
          collectives: [all_to_all, broadcast]
          min_bytes: 512K
          max_bytes: 4M
          step_factor: 4
          warmup_iters: 0
          iters: 3
          tool: nccl-tests
          straggler_isolation: false
          timeout_s: 90
        nightly:
          time_budget_s: 600
          keep_runs: null
          keep_days: 7
          busbw_drop_pct: 12.5
        """,
    )
    playbook = load_playbook(path)
    assert playbook.name == "site-acceptance"
    assert playbook.path == path
    assert playbook.description == "Acceptance with site checks"
    assert playbook.profile == "h200-8x-ndr400"
    assert playbook.checks == ("ib.*", "gpu.topology", "!ib.mtu")
    assert playbook.custom_checks == ("custom/*.py",)
    assert dict(playbook.vars) == {"command_timeout_s": 20, "expected_mtu": 2048}
    plan = playbook.benchmarks
    assert plan is not None
    assert plan.collectives == ("all_to_all", "broadcast")  # an explicit list overrides the workload
    assert (plan.min_bytes, plan.max_bytes, plan.step_factor) == (512 * 1024, 4 * MIB, 4)
    assert plan.sizes() == [512 * 1024, 2 * MIB]
    assert (plan.warmup_iters, plan.iters, plan.tool, plan.straggler_isolation) == (0, 3, "nccl-tests", False)
    assert plan.timeout_s == 90.0
    nightly = playbook.nightly
    assert nightly is not None
    assert (nightly.time_budget_s, nightly.keep_runs, nightly.keep_days, nightly.busbw_drop_pct) == (
        600.0,
        None,
        7.0,
        12.5,
    )


def test_minimal_playbook_defaults(tmp_path: Path) -> None:
    playbook = load_playbook(str(write(tmp_path / "mini.yaml", "description: only checks\n")))
    assert playbook.name == "mini"
    assert playbook.profile is None
    assert playbook.checks == ("*",)
    assert playbook.custom_checks == ()
    assert dict(playbook.vars) == {}
    assert playbook.benchmarks is None
    assert playbook.nightly is None


def test_benchmark_defaults_and_disabled_stage(tmp_path: Path) -> None:
    plan = load_playbook(str(write(tmp_path / "pb.yaml", "benchmarks: {enabled: false}\n"))).benchmarks
    assert plan is not None
    assert plan.enabled is False
    assert (plan.workload, plan.collectives, plan.tool) == ("dense", ("all_reduce",), "torch")
    assert (plan.min_bytes, plan.max_bytes, plan.step_factor, plan.warmup_iters, plan.iters) == (
        MIB,
        1024 * MIB,
        2,
        5,
        20,
    )
    assert len(plan.sizes()) == 11


def test_nightly_defaults(tmp_path: Path) -> None:
    nightly = load_playbook(str(write(tmp_path / "pb.yaml", "nightly: {}\n"))).nightly
    assert nightly is not None
    assert (nightly.time_budget_s, nightly.keep_runs, nightly.keep_days, nightly.busbw_drop_pct) == (
        1800.0,
        30,
        90.0,
        10.0,
    )


@pytest.mark.parametrize(
    ("value", "size"),
    [
        (1, 1),
        (4096, 4096),
        ("64", 64),
        ("1K", 1024),
        ("1M", MIB),
        ("8G", 8 << 30),
        ("2m", 2 * MIB),
        ("4MiB", 4 * MIB),
    ],
)
def test_sizes(value: object, size: int) -> None:
    assert parse_size(value) == size


@pytest.mark.parametrize("value", [0, -1, "1X", "M", "1.5M", True, 1.5, "", None])
def test_bad_sizes(value: object) -> None:
    with pytest.raises(ValueError, match="a size must be"):
        parse_size(value)


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        ("name: x\nprofiles: h100\n", 2, "unknown key 'profiles' (allowed: name, description, profile,"),
        (
            "benchmarks:\n  iters: 5\n  warmup: 2\n",
            3,
            "unknown key 'warmup' in benchmarks (allowed: enabled,",
        ),
        ("nightly:\n  keep_run: 3\n", 2, "unknown key 'keep_run' in nightly (allowed: time_budget_s,"),
        ("benchmarks:\n  iters: '20'\n", 2, "benchmarks.iters: must be an integer, got '20'"),
        ("benchmarks:\n  iters: 0\n", 2, "benchmarks.iters: must be at least 1, got 0"),
        ("benchmarks:\n  straggler_isolation: 'yes'\n", 2, "straggler_isolation: must be true or false"),
        ("benchmarks:\n  step_factor: 1\n", 2, "benchmarks.step_factor: must be at least 2"),
        ("benchmarks:\n  workload: dence\n", 2, "workload: must be one of dense, fsdp, moe, got 'dence'"),
        (
            "benchmarks:\n  collectives:\n    - all_reduce\n    - alltoall\n",
            4,
            "unknown collective 'alltoall'",
        ),
        ("benchmarks:\n  collectives: [all_reduce, all_reduce]\n", 2, "collectives: lists all_reduce twice"),
        (
            "benchmarks:\n  min_bytes: 1G\n  max_bytes: 1M\n",
            3,
            "max_bytes: (1048576 bytes) is below min_bytes",
        ),
        ("benchmarks:\n  max_bytes: 1X\n", 2, "benchmarks.max_bytes: a size must be"),
        ("benchmarks:\n  tool: nccl_tests\n", 2, "tool: must be one of torch, nccl-tests"),
        ("benchmarks:\n  timeout_s: 0\n", 2, "benchmarks.timeout_s: must be more than 0"),
        ("benchmarks: [all_reduce]\n", 1, "benchmarks: must be a mapping"),
        ("nightly:\n  busbw_drop_pct: 150\n", 2, "busbw_drop_pct: must be below 100"),
        ("nightly:\n  keep_runs: 0\n", 2, "nightly.keep_runs: must be at least 1"),
        ("checks: '*'\n", 1, "checks: must be a list of strings"),
        ("checks:\n  - ib.*\n  - 3\n", 3, "checks: items must be non-empty strings, got 3"),
        ("profile: 7\n", 1, "profile: must be a string, got 7"),
        (
            "vars:\n  expected_gpu_count: eight\n",
            2,
            "vars: expected_gpu_count must be an integer, got 'eight'",
        ),
        (
            "vars:\n  x: 1\n  diagnose_profile: h100\n",
            3,
            "set the default profile with the top-level 'profile:'",
        ),
        ("name: x\n  bad: indent\n", 2, "invalid YAML"),
        ("- just\n- a list\n", 1, "a playbook must be a YAML mapping"),
    ],
)
def test_playbook_errors_name_the_line(tmp_path: Path, text: str, line: int, message: str) -> None:
    error = playbook_error(tmp_path, text)
    assert message in error.message
    assert error.line == line


def test_custom_checks_resolve_from_the_playbook_folder(tmp_path: Path, monkeypatch) -> None:
    site = tmp_path / "site"
    write(
        site / "custom" / "test_mounts.py",
        "def test_mounts(host):\n    assert host.mount_point('/').exists\n",
    )
    write(site / "custom" / "test_users.py", "def test_users(host):\n    assert host.user('root').exists\n")
    write(site / "custom" / "notes.txt", "not a module\n")
    playbook = load_playbook(str(write(site / "pb.yaml", "custom_checks: ['custom/*.py']\n")))
    monkeypatch.chdir(tmp_path)  # the cwd must not matter
    assert custom_check_paths(playbook) == [
        site / "custom" / "test_mounts.py",
        site / "custom" / "test_users.py",
    ]


def test_custom_checks_glob_matching_nothing_is_an_error(tmp_path: Path) -> None:
    path = write(tmp_path / "pb.yaml", "name: x\ncustom_checks:\n  - custom/*.py\n")
    with pytest.raises(ConfigError, match=r"custom_checks 'custom/\*\.py' matches no file") as caught:
        custom_check_paths(load_playbook(str(path)))
    assert (caught.value.path, caught.value.line) == (str(path), 3)


def test_checks_entry_matching_no_catalog_check(tmp_path: Path) -> None:
    catalog = ["ib.mtu", "ib.port_state", "gpu.topology"]
    good = load_playbook(str(write(tmp_path / "good.yaml", "checks: ['ib.*', '!ib.mtu', gpu.topology]\n")))
    assert check_unknown_patterns(good, catalog) is None
    path = write(tmp_path / "pb.yaml", "checks:\n  - ib.*\n  - '!ib.mtu'\n  - gpu.topolgy\n")
    with pytest.raises(ConfigError, match=r"checks entry 'gpu\.topolgy' matches no check") as caught:
        check_unknown_patterns(load_playbook(str(path)), catalog)
    assert caught.value.line == 4
    with pytest.raises(ConfigError, match=r"checks entry '!ib\.mtux' matches no check"):
        check_unknown_patterns(load_playbook(str(write(path, "checks: ['*', '!ib.mtux']\n"))), catalog)


# --------------------------------------------------------------------------------------------------- profiles


def make_profiles(folder: Path) -> Path:
    write(
        folder / "big-ib.yaml",
        """
        description: 8 GPUs, 8 HCAs at 400 Gb/s
        vars:
          expected_gpu_count: 8
          expected_gpu_model: H100
          expected_nvlink: true
          expected_hca_count: 8
          expected_link_rate_gbps: 400
          expected_mtu: 4096
          expected_link_layer: InfiniBand
          min_port_range: 28000
          line_rate_gbps: 400
          nvlink_busbw_gbps: null
        """,
    )
    write(
        folder / "one-node.yaml",
        """
        description: one machine, no fabric
        vars:
          expected_gpu_count: 4
          expected_hca_count: 0
          expected_mtu: 2048
        """,
    )
    return folder


def test_load_profile(tmp_path: Path) -> None:
    folder = make_profiles(tmp_path / "profiles")
    profile = load_profile("big-ib", [folder])
    assert profile.name == "big-ib"
    assert profile.description == "8 GPUs, 8 HCAs at 400 Gb/s"
    assert profile.path == folder / "big-ib.yaml"
    assert profile.vars["expected_gpu_count"] == 8
    assert profile.vars["expected_nvlink"] is True
    assert profile.vars["expected_link_rate_gbps"] == 400  # an int is a fine float
    assert profile.vars["nvlink_busbw_gbps"] is None  # null: not judged
    assert available_profiles([folder]) == ["big-ib", "one-node"]


def test_profile_by_path(tmp_path: Path) -> None:
    folder = make_profiles(tmp_path / "profiles")
    assert load_profile(str(folder / "one-node.yaml")).vars["expected_hca_count"] == 0


def test_unknown_profile_lists_the_available_ones(tmp_path: Path) -> None:
    folder = make_profiles(tmp_path / "profiles")
    with pytest.raises(
        ConfigError, match=r"unknown profile 'big_ib' \(did you mean big-ib\?\); available: big-ib, one-node"
    ):
        load_profile("big_ib", [folder])


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        ("vars:\n  expected_gpu_count: 8\n  expected_gpus: 8\n", 3, "vars: unknown variable 'expected_gpus'"),
        (
            "vars:\n  gemm_min_fraction: 0.7\n",
            2,
            "vars: variable 'gemm_min_fraction' is no longer read: replaced by gemm_max_below_ref_pct",
        ),
        ("vars:\n  expected_gpu_count: '8'\n", 2, "expected_gpu_count must be an integer, got '8'"),
        ("vars:\n  expected_gpu_count: 8.0\n", 2, "expected_gpu_count must be an integer, got 8.0"),
        ("vars:\n  expected_nvlink: 'yes'\n", 2, "expected_nvlink must be true or false"),
        ("vars:\n  expected_link_rate_gbps: true\n", 2, "expected_link_rate_gbps must be a number, got True"),
        ("vars:\n  expected_gpu_model: 100\n", 2, "expected_gpu_model must be a string, got 100"),
        ("description: x\nvar:\n  expected_mtu: 4096\n", 2, "unknown key 'var'"),
        ("description: [a]\n", 1, "description: must be a string"),
        ("vars: [expected_mtu]\n", 1, "vars: must be a mapping"),
    ],
)
def test_profile_errors_name_the_line(tmp_path: Path, text: str, line: int, message: str) -> None:
    path = write(tmp_path / "profiles" / "bad.yaml", text)
    with pytest.raises(ConfigError) as caught:
        load_profile("bad", [tmp_path / "profiles"])
    assert message in caught.value.message
    assert (caught.value.path, caught.value.line) == (str(path), line)


def test_an_inventory_still_setting_a_retired_gpu_floor_is_told_what_replaced_it() -> None:
    hosts = [
        Host("gpu1", vars=Vars({"gpu_peak_bf16_tflops": 989, "hbm_min_fraction": 0.8})),
        Host("gpu2", vars=Vars({"hbm_min_fraction": 0.8})),
    ]
    warnings = unknown_variable_warnings(hosts)
    assert warnings == [
        "variable 'gpu_peak_bf16_tflops' (set for gpu1) is no longer read: replaced by gpu_ref_bf16_tflops (GPUs "
        "are judged against a measured reference of their model and their peers, not a share of the datasheet "
        "peak; docs/node-health.md)",
        "variable 'hbm_min_fraction' (set for 2 hosts) is no longer read: replaced by hbm_max_below_ref_pct (GPUs "
        "are judged against a measured reference of their model and their peers, not a share of the datasheet "
        "peak; docs/node-health.md)",
    ]
    assert {REPLACED[name] for name in REPLACED} <= set(PROFILE_VARIABLES)
    assert not set(REPLACED) & set(PROFILE_VARIABLES)


def test_profiles_named_by_the_example_inventories_are_packaged() -> None:
    names = set()
    for inventory_file in ("local.yaml", "example-cluster.yaml", "example-cluster.ini"):
        inventory = load_inventory(REPO / "inventory" / inventory_file)
        names.update(inventory.host_vars(host)["diagnose_profile"] for host in inventory.hosts)
    assert names == {"single-node-nvlink", "h100-8x-ndr400"}
    assert names <= set(available_profiles())


# ----------------------------------------------------------------------------------------- resolving the hosts

INVENTORY = """
all:
  vars:
    expected_mtu: 1024          # all
    min_port_range: 1000
  children:
    gpu:
      vars:
        expected_mtu: 2048      # group
        diagnose_profile: big-ib
      children:
        rack1:
          vars:
            expected_link_rate_gbps: 200   # child group
          hosts:
            n1:
            n2:
              expected_mtu: 4096           # host
        rack2:
          hosts:
            n3:
              expected_gpu_count: eight
    cpu:
      hosts:
        c1:
"""


@pytest.fixture
def setup(tmp_path: Path) -> tuple[Path, Path]:
    return write(tmp_path / "inv.yaml", INVENTORY), make_profiles(tmp_path / "profiles")


def playbook_with(tmp_path: Path, text: str):
    return load_playbook(str(write(tmp_path / "pb.yaml", text)))


def test_precedence_profile_playbook_all_group_child_host_extra(tmp_path: Path, setup) -> None:
    inventory, profiles = setup
    playbook = playbook_with(tmp_path, "vars:\n  expected_hca_count: 4\n  expected_mtu: 512\n  site: x\n")
    hosts = {
        h.name: h
        for h in resolve_hosts([InventoryFiles(inventory)], HostContext(playbook, "rack1,c1", {}, [profiles]))
    }
    n1, n2, c1 = hosts["n1"].vars, hosts["n2"].vars, hosts["c1"].vars
    assert n1["expected_gpu_count"] == 8  # profile only
    assert n1["expected_hca_count"] == 4  # playbook vars beat the profile
    assert c1["expected_mtu"] == 1024  # inventory all beats the playbook
    assert n1["expected_mtu"] == 2048  # group beats all
    assert n1["expected_link_rate_gbps"] == 200  # child group beats the profile's 400
    assert n2["expected_mtu"] == 4096  # host beats groups
    assert n1["site"] == "x"  # playbook vars that are not profile variables pass through
    extra = {
        h.name: h
        for h in resolve_hosts(
            [InventoryFiles(inventory)], HostContext(playbook, "rack1", {"expected_mtu": "256"}, [profiles])
        )
    }
    assert {name: h.vars.int("expected_mtu") for name, h in extra.items()} == {"n1": 256, "n2": 256}


def test_profile_is_chosen_per_host(tmp_path: Path, setup) -> None:
    inventory, profiles = setup
    hosts = {
        h.name: h
        for h in resolve_hosts(
            [InventoryFiles(inventory)],
            HostContext(playbook_with(tmp_path, "name: x\n"), "n1,c1", {}, [profiles]),
        )
    }
    assert hosts["n1"].vars["diagnose_profile"] == "big-ib"
    assert hosts["n1"].vars["expected_hca_count"] == 8
    assert hosts["c1"].vars["diagnose_profile"] is None  # no profile anywhere: nothing expected
    assert "expected_hca_count" not in hosts["c1"].vars


def test_playbook_profile_is_the_default_and_inventory_or_extra_vars_override_it(
    tmp_path: Path, setup
) -> None:
    inventory, profiles = setup
    playbook = playbook_with(tmp_path, "profile: one-node\n")
    hosts = {
        h.name: h
        for h in resolve_hosts([InventoryFiles(inventory)], HostContext(playbook, "n1,c1", {}, [profiles]))
    }
    assert hosts["c1"].vars["diagnose_profile"] == "one-node"
    assert hosts["c1"].vars["expected_hca_count"] == 0
    assert hosts["n1"].vars["diagnose_profile"] == "big-ib"  # the inventory's choice beats the playbook's
    overridden = resolve_hosts(
        [InventoryFiles(inventory)], HostContext(playbook, "n1", {"diagnose_profile": "one-node"}, [profiles])
    )
    assert overridden[0].vars["diagnose_profile"] == "one-node"
    assert overridden[0].vars["expected_gpu_count"] == 4


def test_hosts_keep_inventory_order_groups_and_name(tmp_path: Path, setup) -> None:
    inventory, profiles = setup
    hosts = resolve_hosts(
        [InventoryFiles(inventory)],
        HostContext(playbook_with(tmp_path, "name: x\n"), "c1:rack1", {}, [profiles]),
    )
    assert [h.name for h in hosts] == ["n1", "n2", "c1"]
    assert hosts[0].groups == ["all", "gpu", "rack1"]
    assert hosts[0].vars.host == "n1"


def test_unknown_profile_in_inventory_points_at_its_line(tmp_path: Path, setup) -> None:
    inventory, profiles = setup
    inventory.write_text(
        inventory.read_text().replace("diagnose_profile: big-ib", "diagnose_profile: big-ibb")
    )
    with pytest.raises(
        ConfigError,
        match=r"host n1: unknown profile 'big-ibb' \(did you mean big-ib\?\); available: big-ib, one-node",
    ) as caught:
        resolve_hosts(
            [InventoryFiles(inventory)],
            HostContext(playbook_with(tmp_path, "name: x\n"), "n1", {}, [profiles]),
        )
    assert (caught.value.path, caught.value.line) == (str(inventory), 9)


def test_unknown_profile_from_extra_vars(tmp_path: Path, setup) -> None:
    inventory, profiles = setup
    with pytest.raises(ConfigError, match=r"unknown profile 'nope'.*\(set with -e\)") as caught:
        resolve_hosts(
            [InventoryFiles(inventory)],
            HostContext(playbook_with(tmp_path, "name: x\n"), "c1", {"diagnose_profile": "nope"}, [profiles]),
        )
    assert caught.value.path is None


def test_badly_typed_expected_value_stops_the_run_with_its_line(tmp_path: Path, setup) -> None:
    inventory, profiles = setup
    playbook = playbook_with(tmp_path, "name: x\n")
    with pytest.raises(
        ConfigError, match="variable expected_gpu_count for host n3 must be an integer"
    ) as caught:
        resolve_hosts([InventoryFiles(inventory)], HostContext(playbook, "rack2", {}, [profiles]))
    assert (caught.value.path, caught.value.line) == (str(inventory), 21)
    with pytest.raises(ConfigError, match=r"must be an integer, got 'x'.*\(set with -e\)"):
        resolve_hosts(
            [InventoryFiles(inventory)], HostContext(playbook, "n1", {"expected_mtu": "x"}, [profiles])
        )
    # Strings from INI or -e are fine when they read as the kind the variable needs.
    hosts = resolve_hosts(
        [InventoryFiles(inventory)], HostContext(playbook, "rack2", {"expected_gpu_count": "8"}, [profiles])
    )
    assert hosts[0].vars.int("expected_gpu_count") == 8


def test_local_inventory_resolves(tmp_path: Path) -> None:
    profiles = write(tmp_path / "single-node-nvlink.yaml", "vars:\n  expected_hca_count: 0\n").parent
    [host] = resolve_hosts(
        [InventoryFiles(REPO / "inventory" / "local.yaml")],
        HostContext(load_playbook(None), None, {}, [profiles]),
    )
    assert (host.name, host.connection, host.address) == ("localhost", "local", "localhost")
    assert host.vars["diagnose_profile"] == "single-node-nvlink"
    assert host.vars.int("expected_hca_count") == 0


def test_unknown_default_profile_points_at_the_playbook(tmp_path: Path, setup) -> None:
    inventory, profiles = setup
    playbook = playbook_with(tmp_path, "name: x\nprofile: one-nod\n")
    with pytest.raises(ConfigError, match="host c1: unknown profile 'one-nod'") as caught:
        resolve_hosts([InventoryFiles(inventory)], HostContext(playbook, "c1", {}, [profiles]))
    assert (caught.value.path, caught.value.line) == (str(playbook.path), 2)
