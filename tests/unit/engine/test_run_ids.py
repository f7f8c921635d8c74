"""Run ids and run folders, made in one place for run, trace, node-check and retention; the engine tells its
caller's Reporter instead of printing."""

from __future__ import annotations

import re
from datetime import datetime, timezone
from pathlib import Path

import pytest

from diagnose.core.hosts import Host
from diagnose.core.vars import Vars
from diagnose.engine import stages
from diagnose.engine.reporter import Reporter
from diagnose.engine.run_ids import (
    dated_folder_time,
    dated_run_dir,
    make_run_dir,
    new_run_id,
    run_header,
)

MOMENT = datetime(2026, 11, 21, 2, 0, 0, tzinfo=timezone.utc)


def test_two_ids_of_one_second_differ_and_sort_by_time() -> None:
    ids = {new_run_id(MOMENT) for _ in range(20)}
    assert len(ids) > 1
    assert all(re.fullmatch(r"20261121T020000Z-[0-9a-f]{4}", i) for i in ids)


def test_the_default_folder_is_named_after_the_id_and_the_source(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    folder = make_run_dir("20261121T020000Z-ab12", Path("/etc/diagnose/prod cluster.yaml"), None)
    assert folder == Path("diagnose-runs/20261121T020000Z-ab12-prod_cluster") and folder.is_dir()
    assert make_run_dir("20261121T020000Z-cd34", None, None).name == "20261121T020000Z-cd34-local"
    with pytest.raises(FileExistsError):  # a default folder is never shared
        make_run_dir("20261121T020000Z-ab12", Path("prod cluster.yaml"), None)


def test_out_is_reused_and_runs_dir_gets_a_dated_folder(tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert make_run_dir("x", None, str(out)) == out == make_run_dir("y", None, str(out))
    dated = make_run_dir("x", None, str(out), runs_dir=str(tmp_path / "nightly"))
    assert dated.parent == tmp_path / "nightly" and dated_folder_time(dated) is not None


def test_the_time_of_a_dated_folder_is_read_back_from_its_name(tmp_path: Path) -> None:
    folder = dated_run_dir(tmp_path, MOMENT)
    assert dated_folder_time(folder) == MOMENT
    assert dated_folder_time(tmp_path / "my-run") is None


def test_the_header_names_the_playbook_by_name() -> None:
    header = run_header("r1", MOMENT, None, "trace", None, ["diagnose", "trace"])
    assert header["playbook"] == "trace" and header["inventory"] == "inventory/local.yaml"
    assert header["started"] == "2026-11-21T02:00:00+00:00" and header["finished"] is None


class Recorder(Reporter):
    def __init__(self) -> None:
        self.problems: list[str] = []

    def problem(self, message: str) -> None:
        self.problems.append(message)


class StuckConnection:
    def close(self) -> None:
        raise OSError("socket is gone")


def test_a_connection_that_will_not_close_is_told_to_the_reporter(capsys: pytest.CaptureFixture[str]) -> None:
    host = Host(name="node1", groups=[], vars=Vars({}, host="node1"))
    state = stages.HostState(host=host, connection=StuckConnection())  # type: ignore[arg-type]
    reporter = Recorder()
    stages.close_all({"node1": state}, reporter)
    assert reporter.problems == ["closing node1: socket is gone"]
    stages.close_all({"node1": state})  # without a reporter: silent
    assert capsys.readouterr() == ("", "")
