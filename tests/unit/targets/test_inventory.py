"""Ansible inventories as operators write them: both formats, ranges, precedence, --limit, -e, errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from diagnose.config.extra_vars import parse_extra_vars
from diagnose.config.playbook import load_playbook, parse_playbook
from diagnose.core.errors import ConfigError
from diagnose.core.hosts import Host
from diagnose.core.vars import Vars
from diagnose.targets.ini_source import ini_value
from diagnose.targets.loading import InventoryFiles, load_inventories, load_inventory
from diagnose.targets.ranges import expand_host_pattern
from diagnose.targets.resolve import resolve_hosts
from diagnose.targets.sources import HostContext
from diagnose.targets.view import list_hosts, relevant_vars
from tests.support.paths import FIXTURES, REPO

INVENTORIES = FIXTURES / "inventories"
NESTED_HOSTS = ["bastion", "login1", "node01", "node02", "node03", "node04", "node05", "node06"]


@pytest.fixture(params=["nested.yaml", "nested.ini"])
def nested(request: pytest.FixtureRequest):
    return load_inventory(INVENTORIES / request.param)


# ------------------------------------------------------------------------------------------ parsing, precedence


def test_nested_hosts_in_inventory_order(nested) -> None:
    assert nested.hosts == NESTED_HOSTS


def test_groups_include_ancestors_and_all(nested) -> None:
    assert nested.groups_of("node06") == ["all", "aa_burnin", "gpu", "rack2", "rack2_spares"]
    assert nested.groups_of("node01") == ["all", "gpu", "rack1"]


def test_only_hosts_without_a_group_are_ungrouped(nested) -> None:
    assert nested.groups_of("login1") == ["all", "ungrouped"]
    assert nested.groups["ungrouped"].hosts == ["login1"]


def test_all_vars_reach_every_host(nested) -> None:
    assert {nested.host_vars(h)["site"] for h in nested.hosts} == {"ams"}
    assert nested.host_vars("login1")["level"] == "all"


def test_child_group_beats_parent_and_host_beats_groups(nested) -> None:
    assert nested.host_vars("node01")["level"] == "rack1"
    assert nested.host_vars("node04")["level"] == "rack2"
    assert nested.host_vars("node06")["level"] == "spares"  # three levels down
    assert nested.host_vars("node02")["level"] == "host"


def test_parent_vars_inherited_by_every_descendant(nested) -> None:
    assert [nested.host_vars(h).get("diagnose_profile") for h in NESTED_HOSTS] == [None, None] + [
        "h100-8x-ndr400"
    ] * 6
    assert nested.host_vars("node03")["rack_only"] == "r1"
    assert "rack_only" not in nested.host_vars("node04")


def test_same_depth_groups_resolve_by_name_not_file_order(nested) -> None:
    # aa_burnin is written after zz_maint, yet zz_maint wins: Ansible sorts by (depth, name).
    assert nested.host_vars("bastion")["level"] == "maint"
    # A deeper group beats a shallower one whatever the names.
    assert nested.host_vars("node03")["level"] == "rack1"


def test_port_after_host_name_sets_ansible_port(nested) -> None:
    assert nested.host_vars("node04")["ansible_port"] == 2222
    assert "ansible_port" not in nested.host_vars("node03")


def test_yaml_and_ini_forms_read_the_same() -> None:
    yaml_form = load_inventory(INVENTORIES / "nested.yaml")
    ini_form = load_inventory(INVENTORIES / "nested.ini")
    assert yaml_form.hosts == ini_form.hosts
    for host in yaml_form.hosts:
        assert yaml_form.groups_of(host) == ini_form.groups_of(host)
        assert yaml_form.host_vars(host) == ini_form.host_vars(host)


def test_example_cluster_yaml_and_ini_are_the_same_cluster() -> None:
    yaml_form = load_inventory(REPO / "inventory" / "example-cluster.yaml")
    ini_form = load_inventory(REPO / "inventory" / "example-cluster.ini")
    assert yaml_form.hosts == [f"node{n:02d}" for n in range(1, 17)]
    assert ini_form.hosts == yaml_form.hosts
    for host in yaml_form.hosts:
        assert ini_form.groups_of(host) == yaml_form.groups_of(host)
        assert ini_form.host_vars(host) == yaml_form.host_vars(host)
    assert yaml_form.select("rack2") == [f"node{n:02d}" for n in range(9, 17)]
    assert yaml_form.host_vars("node16") == {
        "ansible_user": "ubuntu",
        "ansible_ssh_private_key_file": "~/.ssh/cluster_ed25519",
        "diagnose_profile": "h100-8x-ndr400",
        "expected_hca_count": 7,
    }
    assert "expected_hca_count" not in yaml_form.host_vars("node15")


def test_local_inventory_is_this_machine_without_ssh() -> None:
    local = load_inventory(REPO / "inventory" / "local.yaml")
    assert local.hosts == ["localhost"]
    assert local.host_vars("localhost") == {
        "ansible_connection": "local",
        "diagnose_profile": "single-node-nvlink",
    }


def test_ini_values_follow_ansible_literal_rules() -> None:
    inventory = load_inventory(INVENTORIES / "hosts")
    node1, node2 = inventory.host_vars("node1"), inventory.host_vars("node2")
    assert node1 == {"ansible_port": 2222, "ansible_user": "ops"}
    assert Vars(node1).int("ansible_port") == 2222
    assert node2["note"] == "two words"
    assert node2["gpus"] == 8
    assert node2["flag"] is True  # a Python literal
    assert node2["text"] == "true"  # not a Python literal: stays text, Vars.bool reads it
    assert Vars(node2).bool("text") is True


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("2222", 2222),
        ("1.5", 1.5),
        ("'quoted value'", "quoted value"),
        ("[1, 2]", [1, 2]),
        ("(1, 2)", [1, 2]),
        ("None", None),
        ("False", False),
        ("h100-8x-ndr400", "h100-8x-ndr400"),
        ("~/.ssh/key", "~/.ssh/key"),
        ("10.0.0.1", "10.0.0.1"),
        ("1j", "1j"),
    ],
)
def test_ini_value(text: str, value: object) -> None:
    assert ini_value(text) == value


def test_hosts_before_any_section_join_their_groups_and_leave_ungrouped() -> None:
    inventory = load_inventory(INVENTORIES / "hosts")
    assert inventory.hosts == ["node1", "node2"]
    assert inventory.groups_of("node1") == ["all", "gpu"]
    assert inventory.groups["ungrouped"].hosts == []


@pytest.mark.parametrize("name", ["hosts", "legacy.cfg", "yaml-without-extension"])
def test_format_is_detected(name: str) -> None:
    inventory = load_inventory(INVENTORIES / name)
    expected = ["solo"] if name.startswith("yaml") else ["node1", "node2"]
    assert inventory.hosts == expected


# ------------------------------------------------------------------------------------------------- host ranges


@pytest.mark.parametrize(
    ("pattern", "hosts"),
    [
        ("node[01:03]", ["node01", "node02", "node03"]),
        ("node[8:11]", ["node8", "node9", "node10", "node11"]),
        ("node[098:101]", ["node098", "node099", "node100", "node101"]),
        ("node[1:10:3]", ["node1", "node4", "node7", "node10"]),
        ("node[01:09:4].dc1", ["node01.dc1", "node05.dc1", "node09.dc1"]),
        ("rack[a:d]", ["racka", "rackb", "rackc", "rackd"]),
        ("rack[a:f:2]", ["racka", "rackc", "racke"]),
        ("r[1:2]n[a:b]", ["r1na", "r1nb", "r2na", "r2nb"]),
        ("plain.example.com", ["plain.example.com"]),
        (
            "mail[:3].example.com",
            ["mail0.example.com", "mail1.example.com", "mail2.example.com", "mail3.example.com"],
        ),
    ],
)
def test_host_ranges(pattern: str, hosts: list[str]) -> None:
    assert expand_host_pattern(pattern) == hosts


@pytest.mark.parametrize(
    ("pattern", "reason"),
    [
        ("node[5:1]", "must count upwards"),
        ("node[01:100]", "pads begin to 2 digits"),
        ("node[1:5:0]", "step"),
        ("node[1:x]", "two numbers or two single letters"),
        ("node[1]", "[begin:end]"),
        ("node[1:2", "unbalanced bracket"),
        ("rack[f:a]", "must count upwards"),
        ("node[1:]", "must give its end value"),
    ],
)
def test_bad_host_ranges(pattern: str, reason: str) -> None:
    with pytest.raises(ValueError, match=reason.replace("[", r"\[")):
        expand_host_pattern(pattern)


def test_ranges_expand_in_both_formats(nested) -> None:
    assert nested.select("rack1") == ["node01", "node02", "node03"]


# ----------------------------------------------------------------------------------------------------- --limit


@pytest.mark.parametrize(
    ("pattern", "hosts"),
    [
        (None, NESTED_HOSTS),
        ("all", NESTED_HOSTS),
        ("*", NESTED_HOSTS),
        ("rack2", ["node04", "node05", "node06"]),  # a group includes its children's hosts
        ("node05", ["node05"]),
        ("node0*", ["node01", "node02", "node03", "node04", "node05", "node06"]),
        ("rack*", ["node01", "node02", "node03", "node04", "node05", "node06"]),  # globs match groups too
        ("node05,bastion", ["bastion", "node05"]),  # inventory order, not pattern order
        ("rack1:rack2_spares", ["node01", "node02", "node03", "node06"]),
        ("gpu:!rack2", ["node01", "node02", "node03"]),
        ("gpu,!node02,!node06", ["node01", "node03", "node04", "node05"]),
        ("gpu:!nodes99", ["node01", "node02", "node03", "node04", "node05", "node06"]),  # as Ansible: ignored
        ("gpu:&aa_burnin", ["node06"]),
        ("&zz_maint", ["bastion", "node03"]),
        ("!gpu", ["bastion", "login1"]),
        ("~node0[12]", ["node01", "node02"]),
        ("ungrouped", ["login1"]),
    ],
)
def test_limit_patterns(nested, pattern: str | None, hosts: list[str]) -> None:
    assert nested.select(pattern) == hosts


@pytest.mark.parametrize(
    ("pattern", "message"),
    [
        ("nodes99", "'nodes99' matched no hosts"),
        ("gpu,nodes99", "'nodes99' matched no hosts"),  # a typo in a union is not silently dropped
        ("gpu:&nodes99", "'nodes99' matched no hosts"),  # an intersection with nothing stays an error
        ("rack1:&rack2", "matched no hosts"),
        ("gpu:!gpu", "matched no hosts"),
        ("~[", "bad regular expression"),
    ],
)
def test_limit_errors(nested, pattern: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("[", r"\[")) as caught:
        nested.select(pattern)
    assert caught.value.path is None
    assert str(caught.value).startswith("--limit ")


# ---------------------------------------------------------------------------------------------------- -e vars


def test_extra_vars_key_value_pairs_with_quotes() -> None:
    assert parse_extra_vars(["a=1 b='two words'", "c=x=y"]) == {"a": "1", "b": "two words", "c": "x=y"}


def test_extra_vars_later_wins() -> None:
    assert parse_extra_vars(["a=1", "a=2 b=3"]) == {"a": "2", "b": "3"}


def test_extra_vars_json_and_yaml_mappings() -> None:
    assert parse_extra_vars(['{"expected_gpu_count": 4, "flag": true}']) == {
        "expected_gpu_count": 4,
        "flag": True,
    }
    assert parse_extra_vars(["{expected_mtu: 4096, ifaces: [ib0, ib1]}"]) == {
        "expected_mtu": 4096,
        "ifaces": ["ib0", "ib1"],
    }


def test_extra_vars_from_file(tmp_path: Path) -> None:
    file = tmp_path / "overrides.yaml"
    file.write_text("expected_link_rate_gbps: 200\ndiagnose_profile: a100-8x-hdr200\n")
    assert parse_extra_vars([f"@{file}", "expected_mtu=2048"]) == {
        "expected_link_rate_gbps": 200,
        "diagnose_profile": "a100-8x-hdr200",
        "expected_mtu": "2048",
    }


@pytest.mark.parametrize(
    ("arg", "message"),
    [
        ("expected_mtu", "expected key=value, got 'expected_mtu'"),
        ("a=1 b", "expected key=value, got 'b'"),
        ("=5", "'' is not a valid variable name"),
        ("1x=5", "'1x' is not a valid variable name"),
        ("a='open", "no closing quotation"),
        ("{a: [1}", "invalid YAML"),
        ("", "sets nothing"),
        ("@/nonexistent/vars.yaml", "file not found"),
    ],
)
def test_extra_vars_errors_name_the_argument(arg: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as caught:
        parse_extra_vars(["ok=1", arg])
    text = str(caught.value)
    assert "\n" not in text
    assert repr(arg) in text or "/nonexistent/vars.yaml" in text


def test_extra_vars_file_must_be_a_mapping(tmp_path: Path) -> None:
    file = tmp_path / "list.yaml"
    file.write_text("- a\n- b\n")
    with pytest.raises(ConfigError, match="must hold a mapping"):
        parse_extra_vars([f"@{file}"])


# ------------------------------------------------------------------------------------------------------ errors


@pytest.mark.parametrize(
    ("name", "line", "message"),
    [
        ("bad-yaml-syntax.yaml", 9, "invalid YAML: while parsing a flow sequence started at line 8"),
        ("bad-host-var.ini", 3, "expected key=value host variable after 'node2', got 'ansible_user'"),
        ("bad-quote.ini", 3, "no closing quotation"),
        ("bad-section.ini", 4, "section [gpu:hostvars] has unknown type 'hostvars'"),
        ("bad-range.yaml", 6, "host range 'node[5:1]' must count upwards"),
        ("bad-range.ini", 5, "host range 'cpu[01:100]' pads begin to 2 digits"),
        ("cycle.yaml", 9, "group 'outer' is its own ancestor"),
        ("cycle.ini", 8, "group 'outer' is its own ancestor"),
        ("bad-group-key.yaml", 4, "group 'gpu' has unknown key 'host'"),
        ("undefined-child.ini", 6, "[cluster:children] lists undefined group 'gpus'"),
        ("duplicate-key.yaml", 5, "duplicate key 'ansible_port' (first at line 4)"),
        ("not-a-mapping.yaml", 1, "a YAML inventory must be a mapping of groups"),
        ("empty.yaml", None, "inventory has no hosts"),
        ("empty.ini", None, "inventory has no hosts"),
    ],
)
def test_errors_name_file_and_line(name: str, line: int | None, message: str) -> None:
    path = INVENTORIES / name
    with pytest.raises(ConfigError) as caught:
        load_inventory(path)
    error = caught.value
    assert error.line == line
    assert message in error.message
    where = f"{path}:{line}" if line else str(path)
    assert str(error) == f"{where}: {error.message}"
    assert "\n" not in str(error)


def test_unreadable_inventory(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="inventory file not found") as caught:
        load_inventory(tmp_path / "missing.yaml")
    assert caught.value.path == str(tmp_path / "missing.yaml")
    with pytest.raises(
        ConfigError, match="inventory has no hosts"
    ):  # a folder is a source; this one is empty
        load_inventory(tmp_path)


def test_group_cannot_contain_all(tmp_path: Path) -> None:
    path = tmp_path / "inv.ini"
    path.write_text("[gpu]\nnode1\n\n[gpu:children]\nall\n")
    with pytest.raises(ConfigError, match="cannot contain 'all'") as caught:
        load_inventory(path)
    assert caught.value.line == 5


def test_vars_section_for_undeclared_group(tmp_path: Path) -> None:
    path = tmp_path / "inv.ini"
    path.write_text("[gpu]\nnode1\n\n[gpus:vars]\nx=1\n")
    with pytest.raises(ConfigError, match=r"section \[gpus:vars\] is for undefined group 'gpus'") as caught:
        load_inventory(path)
    assert caught.value.line == 4


def test_var_line_points_at_the_winning_definition() -> None:
    inventory = load_inventory(INVENTORIES / "nested.yaml")
    assert inventory.var_line("node02", "level") == 23  # host var
    assert inventory.var_line("node01", "level") == 18  # rack1's vars
    assert inventory.var_line("login1", "site") == 5  # all's vars
    assert inventory.var_line("login1", "nothing") is None


# ------------------------------------------------------------------------ group_vars/, host_vars/, sources


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@pytest.fixture
def layered(tmp_path: Path) -> tuple[Path, Path]:
    """An inventory file and a playbook folder that set ``v`` (and a marker per level) at every level."""
    inv = tmp_path / "inv"
    write(
        inv / "hosts",
        "[rack]\nn1 v=inv_host\nn2\n\n[gpu:children]\nrack\n\n"
        "[all:vars]\nv=inv_all\n\n[gpu:vars]\nv=inv_gpu\n\n[rack:vars]\nv=inv_rack\nrack_only=inv_rack\n",
    )
    write(inv / "group_vars" / "all.yml", "v: gv_all\nall_only: gv_all\n")
    write(inv / "group_vars" / "gpu.yml", "v: gv_gpu\n")
    write(inv / "host_vars" / "n2.yml", "v: hv_n2\n")
    playbooks = tmp_path / "playbooks"
    write(playbooks / "group_vars" / "gpu.yml", "v: pb_gpu\n")
    write(playbooks / "host_vars" / "n2.yml", "v: pb_n2\n")
    return inv / "hosts", playbooks


def test_group_vars_files_beat_the_inventory_files_group_vars(layered) -> None:
    hosts_file, _ = layered
    inventory = load_inventory(hosts_file)
    n1, n2 = inventory.host_vars("n1"), inventory.host_vars("n2")
    # Ansible's order: inventory-file groups (all < gpu < rack) < group_vars/all < group_vars/gpu < host
    assert [layer.values.get("v") for layer in inventory.layers("n2")] == [
        "inv_all",
        "inv_gpu",
        "inv_rack",
        "gv_all",
        "gv_gpu",
        None,
        "hv_n2",
    ]
    assert n1["v"] == "inv_host"  # the inventory file's host vars beat every group level
    assert n2["v"] == "hv_n2"  # host_vars/ beats the inventory file's host vars (none here) and groups
    assert n1["rack_only"] == "inv_rack" and n1["all_only"] == "gv_all"
    assert inventory.var_origin("n2", "v") == (hosts_file.parent / "host_vars" / "n2.yml", 1)
    assert inventory.var_origin("n1", "rack_only") == (hosts_file, 16)


def test_group_vars_all_file_beats_a_child_group_in_the_inventory_file(tmp_path: Path) -> None:
    hosts_file = write(tmp_path / "hosts", "[gpu]\nn1\n\n[gpu:vars]\nv=inv_gpu\n")
    write(tmp_path / "group_vars" / "all", "v: gv_all\n")
    assert load_inventory(hosts_file).host_vars("n1")["v"] == "gv_all"  # as ansible-inventory reports


def test_playbook_folder_beats_inventory_folder(layered) -> None:
    hosts_file, playbooks = layered
    inventory = load_inventory(hosts_file, playbooks)
    assert [layer.values.get("v") for layer in inventory.layers("n2")][3:] == [
        "gv_all",
        "gv_gpu",  # group_vars/gpu beside the inventory
        "pb_gpu",  # ... then beside the playbook
        None,
        "hv_n2",
        "pb_n2",
    ]
    assert inventory.host_vars("n2")["v"] == "pb_n2"
    assert inventory.host_vars("n1")["v"] == "inv_host"  # any host level beats every group level


def test_resolve_hosts_reads_host_vars_address_and_group_vars_profile(tmp_path: Path) -> None:
    hosts_file = write(tmp_path / "inv" / "hosts.yml", "gpu:\n  hosts:\n    n1:\n    n2:\n")
    write(tmp_path / "inv" / "host_vars" / "n1", "ansible_host: 10.0.0.5\nansible_user: ops\n")
    write(tmp_path / "inv" / "group_vars" / "gpu" / "profile.yml", "diagnose_profile: h100-8x-ndr400\n")
    hosts = resolve_hosts([InventoryFiles(hosts_file)], HostContext(load_playbook(None)))
    assert hosts[0].address == "10.0.0.5" and hosts[1].address == "n2"
    assert {h.vars["diagnose_profile"] for h in hosts} == {"h100-8x-ndr400"}
    assert hosts[0].vars["expected_gpu_count"] == 8  # the profile chosen in group_vars/ applied


def test_playbook_file_folder_counts_packaged_playbook_folder_does_not(tmp_path: Path) -> None:
    hosts_file = write(tmp_path / "inv" / "hosts", "n1\n")
    write(tmp_path / "pb" / "group_vars" / "all.yml", "site: from_playbook_folder\n")
    playbook = parse_playbook("name: x\n", tmp_path / "pb" / "run.yaml")
    [host] = resolve_hosts([InventoryFiles(hosts_file)], HostContext(playbook))
    assert host.vars["site"] == "from_playbook_folder"
    [host] = resolve_hosts([InventoryFiles(hosts_file)], HostContext(load_playbook("acceptance")))
    assert "site" not in host.vars


def test_vars_folder_files_merge_in_sorted_order_skipping_backups(tmp_path: Path) -> None:
    hosts_file = write(tmp_path / "hosts", "[gpu]\nn1\n")
    folder = tmp_path / "group_vars" / "gpu"
    write(folder / "10-base.yml", "a: base\nb: base\nc: base\n")
    write(folder / "20-site", "b: site\n")  # no extension: read
    write(folder / "30-nested" / "x.yaml", "c: nested\n")  # sub-folders are read in turn
    write(folder / "40-notes.txt", "a: [broken\n")  # other extensions: skipped
    write(folder / "50-old.yml~", "a: backup\n")
    write(folder / ".hidden.yml", "a: hidden\n")
    write(folder / "60-empty.yml", "# nothing\n")
    assert load_inventory(hosts_file).host_vars("n1") == {"a": "base", "b": "site", "c": "nested"}


def test_vars_file_without_extension_wins_over_the_others(tmp_path: Path) -> None:
    hosts_file = write(tmp_path / "hosts", "[gpu]\nn1\n")
    write(tmp_path / "group_vars" / "gpu", "v: bare\n")
    write(tmp_path / "group_vars" / "gpu.yml", "v: yml\nw: [broken\n")  # never read: Ansible stops at one
    write(tmp_path / "host_vars" / "n1.json", '{"j": 1}')
    assert load_inventory(hosts_file).host_vars("n1") == {"v": "bare", "j": 1}


def test_inventory_folder_reads_every_source_in_order_and_skips_ignored_files(tmp_path: Path) -> None:
    folder = tmp_path / "prod"
    write(folder / "01-nodes.yml", "all:\n  vars:\n    v: 1\ngpu:\n  hosts:\n    n1:\n")
    write(folder / "02-more", "[gpu]\nn2\n\n[all:vars]\nv=2\n")
    write(folder / "sub" / "03-login.ini", "[login]\nl1\n[gpu:children]\nlogin\n")  # gpu from 01 counts
    write(folder / "group_vars" / "gpu.yml", "g: 1\n")
    for ignored in ("x.orig", "hosts.ini~", "site.retry", "cache.pyc", "README.md", "ansible.cfg", ".git"):
        write(folder / ignored, "[broken\n")
    inventory = load_inventory(folder)
    assert inventory.hosts == ["n1", "n2", "l1"]
    assert inventory.host_vars("n2") == {"v": 2, "g": 1}
    assert inventory.select("gpu") == ["n1", "n2", "l1"]


def test_repeated_sources_merge_later_wins(tmp_path: Path) -> None:
    staging = write(tmp_path / "staging" / "hosts", "[db]\ndb1 role=staging\n\n[all:vars]\nmyvar=1\n")
    production = write(tmp_path / "production" / "hosts", "[db]\ndb1 role=prod\ndb2\n\n[all:vars]\nmyvar=2\n")
    write(tmp_path / "staging" / "group_vars" / "db.yml", "gv: staging\n")
    write(tmp_path / "production" / "group_vars" / "db.yml", "gv: production\n")
    forward = load_inventories([staging, production])
    assert forward.hosts == ["db1", "db2"]
    assert forward.host_vars("db1") == {"myvar": 2, "role": "prod", "gv": "production"}
    backward = load_inventories([production, staging])
    assert backward.host_vars("db1") == {"myvar": 1, "role": "staging", "gv": "staging"}
    assert backward.host_vars("db2") == {"myvar": 1, "gv": "staging"}
    assert [
        h.name
        for h in resolve_hosts(
            [InventoryFiles([staging, production])], HostContext(load_playbook(None), "db2")
        )
    ] == ["db2"]


def test_ini_children_may_name_a_group_of_an_earlier_source(tmp_path: Path) -> None:
    first = write(tmp_path / "a.yml", "gpu:\n  hosts:\n    n1:\n")
    second = write(tmp_path / "b.ini", "[cluster:children]\ngpu\n\n[gpu:vars]\nx=1\n")
    inventory = load_inventories([first, second])
    assert inventory.select("cluster") == ["n1"] and inventory.host_vars("n1") == {"x": 1}
    with pytest.raises(ConfigError, match="undefined group 'gpu'"):
        load_inventories([second, first])  # as in Ansible: the group must come from an earlier source


def test_group_priority_orders_same_depth_groups(tmp_path: Path) -> None:
    hosts_file = write(
        tmp_path / "hosts.yml",
        "a_group:\n  hosts:\n    h:\n  vars:\n    testvar: a\n    ansible_group_priority: 10\n"
        "b_group:\n  hosts:\n    h:\n  vars:\n    testvar: b\n",
    )
    inventory = load_inventory(hosts_file)
    assert inventory.host_vars("h") == {"testvar": "a"}  # the priority is not a variable itself
    assert inventory.groups_of("h") == ["all", "b_group", "a_group"]


def test_group_priority_in_group_vars_is_only_a_variable(tmp_path: Path) -> None:
    hosts_file = write(tmp_path / "hosts", "[a_group]\nh\n[b_group]\nh\n")
    write(tmp_path / "group_vars" / "a_group.yml", "testvar: a\nansible_group_priority: 10\n")
    write(tmp_path / "group_vars" / "b_group.yml", "testvar: b\n")
    assert load_inventory(hosts_file).host_vars("h") == {"testvar": "b", "ansible_group_priority": 10}


def test_group_priority_must_be_an_integer(tmp_path: Path) -> None:
    hosts_file = write(tmp_path / "hosts", "[gpu]\nn1\n\n[gpu:vars]\nansible_group_priority=high\n")
    with pytest.raises(ConfigError, match="ansible_group_priority must be an integer") as caught:
        load_inventory(hosts_file)
    assert (caught.value.path, caught.value.line) == (str(hosts_file), 5)


@pytest.mark.parametrize(
    ("pattern", "hosts"),
    [
        ("gpu[0]", ["node01"]),
        ("gpu[-1]", ["node06"]),
        ("rack2[1:2]", ["node05", "node06"]),  # the end is included
        ("gpu[4:]", ["node05", "node06"]),
        ("gpu[1:3]:!node03", ["node02", "node04"]),
        ("gpu:!rack1[0]", ["node02", "node03", "node04", "node05", "node06"]),
        ("~node0[12]", ["node01", "node02"]),  # a regex is never subscripted
    ],
)
def test_limit_subscripts(nested, pattern: str, hosts: list[str]) -> None:
    assert nested.select(pattern) == hosts


def test_limit_subscript_past_the_end_is_an_error(nested) -> None:
    with pytest.raises(ConfigError, match=r"'rack1\[7\]' is past the last of its hosts"):
        nested.select("rack1[7]")


def test_limit_subscript_indexes_the_groups_own_listing_order(tmp_path: Path) -> None:
    hosts_file = write(tmp_path / "hosts", "[other]\nb\na\n[gpu]\na\nb\n")
    inventory = load_inventory(hosts_file)
    assert inventory.select("gpu[0]") == ["a"] and inventory.select("other[0]") == ["b"]


# ------------------------------------------------------------------------------------------ errors in vars files


@pytest.mark.parametrize(
    ("relative", "text", "line", "message"),
    [
        ("group_vars/gpu.yml", "a: 1\nb: [2\nc: 3\n", 3, "invalid YAML"),
        ("group_vars/gpu/20-site.yml", "a: 1\na: 2\n", 2, "duplicate key 'a' (first at line 1)"),
        ("host_vars/n1", "- a\n- b\n", 1, "must hold a mapping of variables, got a list"),
        ("group_vars/all.yml", "$ANSIBLE_VAULT;1.1;AES256\n6162\n", 1, "encrypted with ansible-vault"),
        ("group_vars/all.yml", "a: 1\npw: !vault |\n  $ANSIBLE_VAULT;1.1;AES256\n", 2, "(!vault)"),
    ],
)
def test_errors_in_vars_files_name_their_file_and_line(
    tmp_path: Path, relative: str, text: str, line: int, message: str
) -> None:
    hosts_file = write(tmp_path / "hosts", "[gpu]\nn1\n")
    bad = write(tmp_path / relative, text)
    with pytest.raises(ConfigError) as caught:
        resolve_hosts([InventoryFiles(hosts_file)], HostContext(load_playbook(None)))
    assert (caught.value.path, caught.value.line) == (str(bad), line)
    assert message in caught.value.message
    assert str(caught.value).startswith(f"{bad}:{line}: ") and "\n" not in str(caught.value)


def test_bad_value_in_host_vars_names_that_file(tmp_path: Path) -> None:
    hosts_file = write(tmp_path / "hosts", "[gpu]\nn1 ansible_port=22\n")
    bad = write(tmp_path / "host_vars" / "n1.yml", "# port\nansible_port: ssh\n")
    with pytest.raises(ConfigError, match="ansible_port") as caught:
        resolve_hosts([InventoryFiles(hosts_file)], HostContext(load_playbook(None)))
    assert (caught.value.path, caught.value.line) == (str(bad), 2)


# ------------------------------------------------------------------------------------------ showing the targets


def test_list_hosts_rows() -> None:
    hosts = [
        Host("n1", ["all", "rack1", "gpu"], Vars({"ansible_host": "10.0.0.1", "ansible_port": "2222"})),
        Host("login", ["all", "ungrouped"], Vars({"ansible_connection": "local", "ansible_ssh_user": "ops"})),
    ]
    assert list_hosts(hosts) == [
        {
            "name": "n1",
            "groups": ["gpu", "rack1"],
            "address": "10.0.0.1",
            "port": 2222,
            "user": None,
            "connection": "ssh",
        },
        {
            "name": "login",
            "groups": ["ungrouped"],
            "address": "login",
            "port": None,
            "user": "ops",
            "connection": "local",
        },
    ]


def test_relevant_vars_keeps_what_a_run_uses_and_masks_secrets() -> None:
    host = Host(
        "n1",
        vars=Vars(
            {
                "ansible_host": "10.0.0.1",
                "ansible_become_pass": "hunter2",
                "diagnose_profile": "h100-8x-ndr400",
                "expected_gpu_count": 8,
                "bench_env": {"NCCL_DEBUG": "INFO"},
                "command_timeout_s": 30,
                "kube_version": "v1.31",
                "api_token": "abc",
            }
        ),
    )
    assert relevant_vars(host) == {
        "ansible_become_pass": "REDACTED",
        "ansible_host": "10.0.0.1",
        "bench_env": {"NCCL_DEBUG": "INFO"},
        "command_timeout_s": 30,
        "diagnose_profile": "h100-8x-ndr400",
        "expected_gpu_count": 8,
    }
