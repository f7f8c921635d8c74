"""``--limit @FILE``: Ansible's retry-file form, its comments, its errors and a file of every host of a big fleet."""

from __future__ import annotations

from pathlib import Path

import pytest

from diagnose.core.errors import ConfigError
from diagnose.targets.loading import load_inventory
from diagnose.targets.model import Inventory
from tests.support.paths import FIXTURES

# bastion, login1, node01..node06; groups gpu > rack1 (node01-03), rack2 (node04-05) > rack2_spares (node06),
# zz_maint (bastion, node03), aa_burnin (bastion, node06).
NESTED = FIXTURES / "inventories" / "nested.yaml"


@pytest.fixture
def nested() -> Inventory:
    return load_inventory(NESTED)


@pytest.fixture
def in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The current folder is ``tmp_path``: a bare ``@x.retry`` is read from there."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_file_of_hosts_groups_and_globs_selects_their_union_in_inventory_order(nested, in_tmp) -> None:
    (in_tmp / "x.retry").write_text("node05\nrack1\nlogin*\n")
    assert nested.select("@x.retry") == ["login1", "node01", "node02", "node03", "node05"]


def test_blank_lines_comments_and_surrounding_spaces_are_skipped(nested, in_tmp) -> None:
    (in_tmp / "x.retry").write_text("# failed in the night run\n\n  node04  \n   # node05\n\t\nbastion")
    assert nested.select("@x.retry") == ["bastion", "node04"]


def test_file_terms_combine_with_other_terms(nested, in_tmp) -> None:
    (in_tmp / "spares.retry").write_text("node06\nnode05\n")
    (in_tmp / "rack.retry").write_text("rack2\n")
    assert nested.select("gpu:!@spares.retry") == ["node01", "node02", "node03", "node04"]
    assert nested.select("gpu,!@spares.retry,!node01") == ["node02", "node03", "node04"]
    assert nested.select("aa_burnin:&@rack.retry") == ["node06"]
    assert nested.select("@spares.retry,bastion") == ["bastion", "node05", "node06"]


def test_an_exclusion_file_line_matching_nothing_is_ignored_as_any_exclusion(nested, in_tmp) -> None:
    (in_tmp / "gone.retry").write_text("node06\ngpu99\n")
    assert nested.select("rack2:!@gone.retry") == ["node04", "node05"]


def test_path_is_relative_to_the_current_folder_and_tilde_is_expanded(
    nested, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "failed.retry").write_text("node02\n")
    monkeypatch.chdir(tmp_path / "runs")
    assert nested.select("@failed.retry") == ["node02"]
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.chdir(FIXTURES)
    assert nested.select("@~/runs/failed.retry") == ["node02"]


@pytest.mark.parametrize(
    ("pattern", "text", "line", "message"),
    [
        ("@x.retry", "node01\n# a comment\ngpu9\n", 3, "'gpu9' matched no hosts"),
        ("gpu:&@x.retry", "\n~node0[12]\nnodes99\n", 3, "'nodes99' matched no hosts"),
        ("@x.retry", "node01\n~[\n", 2, "bad regular expression '~[': unterminated character set"),
        ("!@x.retry", "node01\nrack1[7]\n", 2, "'rack1[7]' is past the last of its hosts"),
        ("@x.retry", "!node01\n", 1, "'!node01' matched no hosts"),  # a line holds no & or ! of its own
    ],
)
def test_a_bad_line_names_the_file_and_its_line(
    nested, in_tmp, pattern: str, text: str, line: int, message: str
) -> None:
    (in_tmp / "x.retry").write_text(text)
    with pytest.raises(ConfigError) as caught:
        nested.select(pattern)
    assert (caught.value.path, caught.value.line) == ("x.retry", line)
    assert str(caught.value).startswith(f"x.retry:{line}: {message}")


def test_a_missing_file_is_named_as_typed(nested, in_tmp) -> None:
    with pytest.raises(ConfigError) as caught:
        nested.select("gpu:!@x.retry")
    assert str(caught.value) == "--limit @x.retry: no such file"


def test_a_folder_is_not_a_limit_file(nested, in_tmp) -> None:
    (in_tmp / "runs").mkdir()
    with pytest.raises(ConfigError, match=r"^--limit @runs: cannot read it: Is a directory$"):
        nested.select("@runs")


@pytest.mark.parametrize("text", ["", "\n\n", "# nothing failed\n  \n"])
def test_a_file_naming_no_host_is_an_error_not_every_host_or_none(nested, in_tmp, text: str) -> None:
    (in_tmp / "x.retry").write_text(text)
    with pytest.raises(ConfigError, match=r"^--limit @x\.retry: the file names no hosts"):
        nested.select("@x.retry")


def test_retry_file_of_every_host_of_a_large_inventory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """16,384 lines against 16,384 hosts: each line is a set lookup (a glob scan per line would take minutes)."""
    racks = "".join(
        f"        rack{r:02d}:\n          hosts:\n            gpu[{r * 1024:05d}:{r * 1024 + 1023:05d}]:\n"
        for r in range(16)
    )
    inventory_file = tmp_path / "fleet.yaml"
    inventory_file.write_text(f"all:\n  children:\n    gpu:\n      children:\n{racks}")
    fleet = load_inventory(inventory_file)
    assert len(fleet.hosts) == 16_384
    every = [f"gpu{n:05d}" for n in range(16_384)]
    (tmp_path / "all.retry").write_text("\n".join(reversed(every)) + "\n")
    wanted = [host for n, host in enumerate(every) if n % 3 != 1]
    lines = [*wanted, "# and a group, through the glob scan", "rack15"]
    (tmp_path / "some.retry").write_text("\n".join(lines) + "\n")
    monkeypatch.chdir(tmp_path)
    assert fleet.select("@all.retry") == fleet.hosts
    chosen = set(wanted) | set(fleet.group_members("rack15"))
    expected = [host for host in fleet.hosts if host in chosen]
    assert len(expected) == 10_923 + 341
    assert fleet.select("@some.retry") == expected
    assert fleet.select("all:!@some.retry") == [host for host in fleet.hosts if host not in chosen]
