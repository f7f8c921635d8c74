"""Run ids and run folders, made in one place for run, trace, node-check and retention; the engine tells its
caller's Reporter instead of printing."""

from __future__ import annotations

import json
import re
from datetime import datetime, timezone
from pathlib import Path

import pytest

from diagnose.core.errors import ConfigError
from diagnose.core.hosts import Host
from diagnose.core.vars import Vars
from diagnose.engine import stages
from diagnose.engine.reporter import Reporter
from diagnose.engine.run_ids import (
    RunReference,
    dated_folder_time,
    make_run_dir,
    new_run_id,
    run_header,
    run_reference,
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


def _write_run(folder: Path, run_id: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "results.json").write_text(json.dumps({"schema": 1, "run": {"id": run_id}, "verdict": "PASS"}))
    return folder


def test_out_is_taken_empty_or_new_and_runs_dir_gets_a_folder_named_by_the_id(tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert make_run_dir("20261121T020000Z-ab12", None, str(out)) == out and out.is_dir()
    (out / "diagnose-slurm-42.out").write_text("a batch job's output is no run\n")
    assert make_run_dir("20261121T020000Z-ab12", None, str(out)) == out
    folder = make_run_dir("20261121T020000Z-ab12", None, str(out), runs_dir=str(tmp_path / "nightly"))
    assert folder == tmp_path / "nightly" / "20261121T020000Z-ab12"
    assert dated_folder_time(folder) == MOMENT


@pytest.mark.parametrize(
    ("left", "named"),
    [
        ("results.json", "run 20261121T020000Z-ab12"),
        ("report.html", "report.html"),
        ("raw", "raw"),
    ],
)
def test_a_folder_holding_another_run_is_refused_naming_it(tmp_path: Path, left: str, named: str) -> None:
    out = tmp_path / "acceptance"
    if left == "results.json":
        _write_run(out, "20261121T020000Z-ab12")
    else:
        (out / left).mkdir(parents=True)  # a report or evidence left by a run whose record is gone
    with pytest.raises(ConfigError) as caught:
        make_run_dir("20261122T020000Z-cd34", None, str(out))
    assert str(caught.value).startswith(f"--out {out}: holds another run ({named});")
    assert "new or empty folder" in str(caught.value)


def test_the_time_of_a_run_folder_is_read_back_from_its_name_old_or_new(tmp_path: Path) -> None:
    assert dated_folder_time(tmp_path / "20261121T020000Z-ab12") == MOMENT
    assert dated_folder_time(tmp_path / "20261121T020000Z-ab12-prod") == MOMENT
    assert dated_folder_time(tmp_path / "2026-11-21T02-00-00Z") == MOMENT  # nightly folders before the id
    assert dated_folder_time(tmp_path / "2026-11-21T02-00-00Z-2") == MOMENT
    assert dated_folder_time(tmp_path / "my-run") is None


def test_a_run_is_named_by_its_id_its_folder_name_or_path_or_a_file_in_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    default = _write_run(tmp_path / "diagnose-runs" / "20261121T020000Z-ab12-prod", "20261121T020000Z-ab12")
    nightly = _write_run(tmp_path / "nightly" / "2026-11-21T02-00-00Z", "20261121T020002Z-ef56")
    (nightly / "report.html").write_text("<html></html>")
    for text in ("20261121T020000Z-ab12", "20261121T020000Z-ab12-prod", "20261121T020000Z", str(default)):
        found = run_reference(text)
        assert found.folder is not None and found.folder.resolve() == default
        assert found.run_id == "20261121T020000Z-ab12"
    for text in (str(nightly), f"{nightly}/", str(nightly / "report.html"), str(nightly / "results.json")):
        assert run_reference(text).run_id == "20261121T020002Z-ef56"
    assert run_reference("2026-11-21T02-00-00Z") == RunReference(None, None)  # the history's to find
    assert run_reference("20261121T030000Z-9999").run_id == "20261121T030000Z-9999"  # the history's to find
    _write_run(tmp_path / "diagnose-runs" / "20261121T020000Z-cd34-prod", "20261121T020000Z-cd34")
    with pytest.raises(ConfigError, match="names 2 run folders"):
        run_reference("20261121T020000Z")


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
