"""The command line answers a user's slip in one line with the fix (issue 36, item 12): a misspelled option
with the closest of the sub-command's own, a bad value with the option and what it wants, a misspelled
profile with the closest packaged one; `-v` shows each command a host runs; `history --last` counts runs
(`--limit` selects hosts in `run`, so history's old `--limit` is a deprecated alias that says so). Real
parser, real run on this machine, real history database (tests/support/nightly.py's nights)."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator

import pytest

from diagnose.cli import main
from tests.support.nightly import make_results, night, record
from tests.support.paths import REPO


def _usage_error(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    """The one stderr line of a usage error (exit 2, nothing on stdout)."""
    with pytest.raises(SystemExit) as caught:
        main(argv)
    assert caught.value.code == 2
    out, err = capsys.readouterr()
    assert out == "" and "usage:" not in err
    assert len(err.splitlines()) == 1, err
    return err.strip()


def test_a_misspelled_option_gets_the_closest_of_the_sub_commands_own(capsys) -> None:
    line = _usage_error(capsys, ["run", "--inventroy", "cluster.yaml"])
    assert line.startswith("diagnose run: unknown option --inventroy; did you mean --inventory?"), line
    line = _usage_error(capsys, ["history", "--colective=all_reduce"])
    assert "unknown option --colective; did you mean --collective?" in line, line


def test_a_bad_value_names_the_option_and_what_it_wants(capsys) -> None:
    line = _usage_error(capsys, ["run", "-T", "abc"])
    assert line.startswith("diagnose run: -T/--timeout: wants a number of seconds above 0, not 'abc'"), line
    line = _usage_error(capsys, ["run", "-T", "0"])
    assert "-T/--timeout: wants a number of seconds above 0, not '0'" in line


def test_a_misspelled_profile_gets_the_closest_packaged_one(capsys, tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["run", "--check", "-e", "diagnose_profile=h100-8x-ndr40"]) == 2
    err = capsys.readouterr().err
    assert "unknown profile 'h100-8x-ndr40' (did you mean h100-8x-ndr400?)" in err, err


@pytest.fixture
def commands_log() -> Iterator[None]:
    """-v attaches a handler to diagnose's loggers: take it off again after the test."""
    loggers = [logging.getLogger("diagnose.commands")]
    before = [(list(lg.handlers), lg.level) for lg in loggers]
    yield
    for logger, (handlers, level) in zip(loggers, before, strict=True):
        logger.handlers[:], logger.level = handlers, level


def test_verbose_shows_each_command_each_host_ran(capsys, tmp_path, monkeypatch, commands_log) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pb.yaml").write_text('name: one-check\nchecks: ["host.os"]\n')
    argv = ["run", "--playbook", str(tmp_path / "pb.yaml"), "--skip-benchmarks", "--format", "json"]
    assert main([*argv, "-o", str(tmp_path / "quiet")]) in (0, 1)
    assert "`cat /etc/os-release`" not in capsys.readouterr().err, "without -v the commands are not shown"
    assert main([*argv, "-o", str(tmp_path / "loud"), "-v"]) in (0, 1)
    err = capsys.readouterr().err
    shown = [line for line in err.splitlines() if "os_release: `" in line]
    assert shown and "exit 0 after" in shown[0], err
    # The progress lines' stamp: UTC, ISO 8601, before the program's name.
    assert re.match(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ diagnose: ", shown[0]), shown
    assert "localhost" in shown[0], shown


def test_history_last_counts_runs_and_limit_says_it_is_deprecated(capsys, tmp_path) -> None:
    db = tmp_path / "history.sqlite3"
    for day in range(3):
        record(db, make_results(f"r{day}", night(day)), tmp_path)
    assert main(["history", "--history", str(db), "--last", "2"]) == 0
    out, err = capsys.readouterr()
    assert err == "" and "r2" in out and "r1" in out and "r0" not in out, out
    assert main(["history", "--history", str(db), "--limit", "1"]) == 0
    out, err = capsys.readouterr()
    assert "history --limit is deprecated; use --last N" in err
    assert "r2" in out and "r1" not in out, out
    with pytest.raises(SystemExit):
        main(["history", "--help"])
    helptext = capsys.readouterr().out
    assert "--last N" in helptext and "--limit" not in helptext


def _words(text: str) -> str:
    return " ".join(text.split())


def test_format_writes_exactly_the_listed_reports_and_says_so(capsys, tmp_path, monkeypatch) -> None:
    """Issue 36, item 4: `--format junit,prom` replaces the defaults (results.json stays); help and README
    say it that way, where the README read as if the two were added to the HTML and PDF."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pb.yaml").write_text('name: one-check\nchecks: ["host.os"]\n')
    out = tmp_path / "out"
    argv = ["run", "--playbook", str(tmp_path / "pb.yaml"), "--skip-benchmarks", "-o", str(out)]
    assert main([*argv, "--format", "junit,prom"]) in (0, 1)
    written = capsys.readouterr().out
    written_files = {p.name for p in out.iterdir() if p.is_file()}  # the retry file is always written
    assert written_files == {"results.json", "junit.xml", "diagnose.prom", "failed.retry"}
    assert str(out / "junit.xml") in written and "report.html" not in written

    with pytest.raises(SystemExit):
        main(["run", "--help"])
    helptext = _words(capsys.readouterr().out)
    assert "the reports to write, exactly these" in helptext and "results.json is always written" in helptext
    readme = _words((REPO / "README.md").read_text(encoding="utf-8"))
    assert "`--format` names exactly the reports written, results.json always among them" in readme
    assert "`--format junit,prom` writes those two and no HTML or PDF" in readme


def test_a_bad_busbw_table_is_refused_before_any_host_naming_file_and_line(capsys, tmp_path) -> None:
    """`2:4.5` in YAML is the sexagesimal 124.5, so `{2:4.5}` reads as {124.5: None}: on a lent GPU machine
    that stopped the run inside the benchmark stage with a traceback. It is a configuration error at the
    start, one line naming the variable and where it was set."""
    inventory = tmp_path / "cluster.yaml"
    inventory.write_text(
        "all:\n  hosts:\n    localhost:\n      ansible_connection: local\n"
        "  vars:\n    expected_busbw_all_reduce_gbps: {2:4.5}\n"
    )
    assert main(["run", "-i", str(inventory), "-o", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "cluster.yaml" in err and "expected_busbw_all_reduce_gbps" in err, err
    assert "must map node counts to GB/s (YAML {1: 340, 2: 4.2}, or 1:340,2:4.2), got {124.5: None}" in err
    assert "Traceback" not in err and not (tmp_path / "out").exists()
