"""A run stopped mid-benchmark leaves nothing running, even ranks that ignore SIGTERM (issue 33).

On a lent 4x H200 node, `timeout -s TERM 100 diagnose run` with NCCL's transports cut to sockets left
torchrun and four ranks running: they sat in long collectives and did not react to SIGTERM, and the
stop's SIGTERM grace, bounded by a count of passes that each forked twice per process on the machine,
outlived the caller's timeout before any SIGKILL came. Here the ranks are real torchrun workers with gloo
on this machine's CPU (two hosts over the local connection), made deaf to SIGTERM by a ``sitecustomize``
on their PYTHONPATH, and the run is stopped by SIGTERM and by SIGINT alike.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.bedhosts import wait_until
from tests.support.paths import REPO
from tests.support.playbooks import GLOO_BENCH, write_playbook

pytestmark = pytest.mark.integration

#: Makes every Python that imports it at start-up (the ranks; torchrun sets its own handler) ignore SIGTERM.
DEAF = "import signal\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
#: Long enough that the stop always finds the ranks inside a collective.
LONG_SWEEP = GLOO_BENCH.replace("max_bytes: 16384", "max_bytes: 67108864").replace("iters: 2", "iters: 200")


def marked(mark: str) -> list[int]:
    """Pids on this machine whose environment carries ``mark`` (this test's launch, not a neighbour's)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes().split(b"\0")
            state = (entry / "stat").read_text().rpartition(") ")[2][:1]
        except OSError:
            continue
        if mark.encode() in environ and state != "Z":
            found.append(int(entry.name))
    return found


def ranks_of(pids: list[int]) -> list[int]:
    """The benchmark ranks among ``pids`` (torchrun's workers run ``program.py``)."""
    ranks = []
    for pid in pids:
        try:
            args = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if any(a.endswith(b"program.py") for a in args) and b"torch.distributed.run" not in args:
            ranks.append(pid)
    return ranks


def launch_folder(rank: int) -> Path:
    """The launch's folder on this machine: where the rank's ``program.py`` lies."""
    args = Path(f"/proc/{rank}/cmdline").read_bytes().split(b"\0")
    return Path(next(a for a in args if a.endswith(b"program.py")).decode()).parent


def read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def sigterm_ignored(pid: int) -> bool:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("SigIgn:"):
            return bool(int(line.split()[1], 16) & (1 << (signal.SIGTERM - 1)))
    return False


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_stop_mid_benchmark_leaves_no_rank_even_one_deaf_to_sigterm(tmp_path: Path, signum: int) -> None:
    deaf = tmp_path / "deaf"
    deaf.mkdir()
    (deaf / "sitecustomize.py").write_text(DEAF)
    mark = f"DIAGNOSE_TEST_MARK={secrets.token_hex(8)}"
    inventory = tmp_path / "inv.yaml"
    host_vars = {
        "ansible_connection": "local",
        "ansible_host": "127.0.0.1",
        "diagnose_profile": "cpu-testbed",
        "ansible_python_interpreter": sys.executable,
        "bench_startup_timeout_s": 120,
        "bench_env": {"PYTHONPATH": str(deaf), mark.split("=")[0]: mark.split("=")[1]},
    }
    # Two hosts, both this machine: one host alone has no fabric to measure.
    inventory.write_text(json.dumps({"all": {"hosts": {"node1": host_vars, "node2": host_vars}}}))
    out = tmp_path / "out"
    argv = ["run", "-i", str(inventory), "--playbook", str(write_playbook(tmp_path, LONG_SWEEP))]
    proc = subprocess.Popen(
        [sys.executable, "-m", "diagnose.cli", *argv, "-o", str(out), "--format", "json"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_until(lambda: len(ranks_of(marked(mark))) >= 2, 180, "two ranks inside the benchmark")
        ranks = ranks_of(marked(mark))
        folders = {launch_folder(pid) for pid in ranks}
        progress = [f / "results.jsonl" for f in folders]  # rank 0's folder has it
        wait_until(lambda: any("warm" in read(p) for p in progress), 120, "the sweep's first collective")
        assert all(sigterm_ignored(pid) for pid in ranks), "the ranks must ignore SIGTERM for this test"
        time.sleep(1)  # inside the sweep's collectives
        stopped_at = time.monotonic()
        proc.send_signal(signum)
        _, stderr = proc.communicate(timeout=60)
        took = time.monotonic() - stopped_at
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
        left = marked(mark)
        for pid in left:  # a failing test leaves nothing behind either
            os.kill(pid, signal.SIGKILL)
    assert proc.returncode == 130, stderr
    assert not left, f"left running after the stop: {left}\n{stderr}"
    assert took < 20, f"the stop took {took:.1f} s"
    assert not [f for f in folders if f.exists()], "the launch's folders are removed"
    results = json.loads((out / "results.json").read_text())
    assert results["verdict"] == "INCOMPLETE" and results["run"]["interrupted"] is True
    assert any(c["id"] == "net.port_range" for c in results["checks"]), "the host stage's results are kept"
    stopped = results["run"].get("stopped", [])
    assert {line.split(":")[0] for line in stopped} == {
        "torchrun (main) on node1",
        "torchrun (main) on node2",
    }
    # Deaf to SIGTERM, a rank ends by SIGKILL (or, once its peer is gone, by the broken collective).
    assert any("by SIGKILL" in line for line in stopped), stopped
    assert "not_stopped" not in results["run"], results["run"]
    assert "diagnose: stopped torchrun (main) on node1" in stderr, stderr
    assert "everything started on the hosts was stopped" in stderr, stderr
