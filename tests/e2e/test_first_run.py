"""A new user's first runs: the local default tells the truth, the report names the cluster and the
person, and every wrong input ends in one line naming the file or option (exit 2), touching nothing."""

from __future__ import annotations

import getpass
import json
import socket
from pathlib import Path

import pytest

from diagnose.targets.local_machine import no_gpu_reason, nvidia_gpus_on_pci
from tests.support.cli import diagnose

pytestmark = pytest.mark.e2e


def one_error_line(done) -> str:  # type: ignore[no-untyped-def]
    assert done.returncode == 2, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    return lines[0]


def test_the_report_names_the_cluster_and_the_operator(tmp_path: Path) -> None:
    out = tmp_path / "run"
    done = diagnose(
        "run", "--skip-benchmarks", "-o", str(out), "--format", "json,html",
        "--cluster-name", "dc3-h200-pod7", "--operator", "Ada Lovelace", cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode in (0, 1), done.stderr
    run = json.loads((out / "results.json").read_text())["run"]
    assert (run["cluster"], run["operator"]) == ("dc3-h200-pod7", "Ada Lovelace")
    html = (out / "report.html").read_text()
    assert "dc3-h200-pod7" in html and "Ada Lovelace" in html
    assert "inventories/local.yaml" not in html.split("<h1")[1].split("</h1>")[0], (
        "the cover names the cluster"
    )


def test_by_default_the_cluster_is_this_host_and_the_operator_the_login(tmp_path: Path) -> None:
    out = tmp_path / "run"
    done = diagnose("run", "--skip-benchmarks", "-o", str(out), "--format", "json", cwd=tmp_path)
    assert done.returncode in (0, 1), done.stderr
    run = json.loads((out / "results.json").read_text())["run"]
    assert run["cluster"] == socket.gethostname()
    assert run["operator"] == f"{getpass.getuser()}@{socket.gethostname()}"


def test_the_profile_is_the_operators_choice_when_given(tmp_path: Path) -> None:
    out = tmp_path / "run"
    done = diagnose(
        "run", "--skip-benchmarks", "-o", str(out), "--format", "json",
        "-e", "diagnose_profile=single-node-nvlink", cwd=tmp_path,
    )  # fmt: skip
    run = json.loads((out / "results.json").read_text())["run"]
    assert run["profile"] == "single-node-nvlink" and "profile_note" not in run, done.stdout


def test_no_gpu_is_read_from_the_pci_bus(tmp_path: Path) -> None:
    bus = tmp_path / "pci"
    for name, vendor, klass in (
        ("0000:00:01.0", "0x8086", "0x060000"),
        ("0000:3b:00.0", "0x10de", "0x068000"),
    ):
        (bus / name).mkdir(parents=True)
        (bus / name / "vendor").write_text(vendor + "\n")
        (bus / name / "class").write_text(klass + "\n")
    assert nvidia_gpus_on_pci(str(bus)) == 0, "an NVSwitch is not a GPU"
    assert no_gpu_reason(str(bus), str(tmp_path / "dev")) is not None
    (bus / "0000:18:00.0").mkdir()
    (bus / "0000:18:00.0" / "vendor").write_text("0x10de\n")
    (bus / "0000:18:00.0" / "class").write_text("0x030200\n")
    assert nvidia_gpus_on_pci(str(bus)) == 1
    assert no_gpu_reason(str(bus), str(tmp_path / "dev")) is None, (
        "a GPU without a driver is a fault, not a CPU host"
    )


def test_report_takes_a_run_folder_and_an_out_folder(tmp_path: Path) -> None:
    out = tmp_path / "run"
    diagnose("run", "--skip-benchmarks", "-o", str(out), "--format", "json", cwd=tmp_path)
    elsewhere = tmp_path / "elsewhere"
    done = diagnose("report", str(out), "--format", "html,junit", "--out", str(elsewhere), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    # the run's record comes along: the folder says which run its reports show (and refuses another's)
    assert sorted(p.name for p in elsewhere.iterdir()) == ["junit.xml", "report.html", "results.json"]
    assert not (out / "report.html").exists()


@pytest.mark.parametrize(
    ("content", "words"),
    [
        ("not json at all\n", "not a results.json"),
        ('{"schema": 2, "checks": []}', "schema 2"),
        ("[1, 2]", "JSON object"),
    ],
)
def test_report_input_that_is_not_a_schema_1_results_file(tmp_path: Path, content: str, words: str) -> None:
    bad = tmp_path / "results.json"
    bad.write_text(content)
    line = one_error_line(diagnose("report", str(bad), "--format", "html", cwd=tmp_path))
    assert str(bad) in line and words in line


def test_report_of_nothing(tmp_path: Path) -> None:
    line = one_error_line(diagnose("report", str(tmp_path / "nope"), cwd=tmp_path))
    assert "no such results file or run folder" in line


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["--out", "/proc/diagnose/run"], "--out: cannot create the run folder"),
        (
            ["--known-hosts", "/nonexistent/known_hosts"],
            "--known-hosts /nonexistent/known_hosts: no such file",
        ),
        (["-e", "ansible_port=abc"], "ansible_port"),
        (["-e", "ansible_connection=winrm"], "not supported"),
    ],
)
def test_run_error_paths_exit_2_before_touching_anything(tmp_path: Path, argv: list[str], words: str) -> None:
    line = one_error_line(diagnose("run", "--skip-benchmarks", *argv, cwd=tmp_path))
    assert words in line
    assert not (tmp_path / "diagnose-runs").exists()


def test_a_misspelt_expected_value_is_named_with_the_closest_known_name(tmp_path: Path) -> None:
    out = tmp_path / "run"
    done = diagnose(
        "run", "--skip-benchmarks", "-o", str(out), "--format", "json", "-e", "expectd_mtu=4096", cwd=tmp_path
    )
    assert done.returncode in (0, 1), done.stderr
    assert (
        "variable 'expectd_mtu' (set for localhost) is not a known expected value; did you mean expected_mtu?"
        in (done.stderr)
    )
