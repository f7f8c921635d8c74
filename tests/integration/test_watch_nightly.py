"""The watch list across successive nightly runs on real sshd hosts (issue 35).

Three 4-GPU hosts answer a nightly of the fast per-host checks (gpu.memory, ib.port_state, ib.counters)
nine times. Between nights only counters change: on node1 one GPU's corrected ECC climbs faster each
night (its fake nvidia-smi prints the lent H100's real query with the counter cells edited, see
tests/support/watchkit.py); on node2 one InfiniBand port's symbol_error accelerates (its sysfs file
rewritten through TestHost.set_ib_counter); everywhere else counters tick by one now and then, as on a
healthy fleet, and node3 has nothing else. ``history.watch`` must name exactly those two parts, by their
serial and port GUID, with their actions, and leave node3 and the noisy counters alone.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import yaml

from tests.support.cli import diagnose
from tests.support.hostkit import PROFILE, healthy_h100, memlock_vars
from tests.support.testbed import Reply, TestBed
from tests.support.watchkit import gpu_rows, ibstat_of_host, port_guid, query_from_file

pytestmark = pytest.mark.integration

NIGHTS = 9
HOSTS = ("node1", "node2", "node3")
SYMBOL_PORT = "mlx5_4"


def gpu_counts(host: int, night: int) -> list[int]:
    """Corrected ECC per GPU tonight: node1's GPU 2 climbs, the rest tick now and then."""
    return [
        3 * night * (night + 1) if (host, gpu) == (0, 2) else (night + gpu + host) // 4 for gpu in range(4)
    ]


def test_history_watch_names_the_planted_gpu_and_port_and_nothing_else(
    testbed: TestBed, tmp_path: Path
) -> None:
    playbook = tmp_path / "watch-nightly.yaml"
    playbook.write_text(
        yaml.safe_dump(
            {
                "name": "watch-nightly",
                "checks": ["host.reachable", "gpu.memory", "ib.port_state", "ib.counters"],
                "benchmarks": {"enabled": False},
                "nightly": {"keep_runs": 30},
            }
        )
    )
    queries = [tmp_path / f"query-{name}.csv" for name in HOSTS]
    for index, path in enumerate(queries):
        path.write_text(gpu_rows(gpu_counts(index, 0), 1752524022500 + 10 * index))
    hosts = testbed.add_many(
        [
            dataclasses.replace(
                spec,
                tools={
                    **spec.tools,
                    "nvidia-smi": query_from_file(path),
                    "ibstat": Reply(stdout=ibstat_of_host(index)),
                },
            )
            for index, (spec, path) in enumerate(
                (healthy_h100(name), path) for name, path in zip(HOSTS, queries, strict=True)
            )
        ]
    )
    inventory = tmp_path / "inv.yaml"
    testbed.write_inventory(inventory)
    runs, db = tmp_path / "runs", tmp_path / "h.sqlite3"
    lines = []
    for night in range(NIGHTS):
        for index, path in enumerate(queries):
            path.write_text(gpu_rows(gpu_counts(index, night), 1752524022500 + 10 * index))
        hosts[1].set_ib_counter(SYMBOL_PORT, 1, "symbol_error", 2 * night * night)
        for index, host in enumerate(hosts):  # background: an odd symbol error on another port
            host.set_ib_counter("mlx5_0", 1, "symbol_error", (night + index) // 3)
        done = diagnose(
            "run",
            "--playbook",
            str(playbook),
            "--runs-dir",
            str(runs),
            "--history",
            str(db),
            "-i",
            str(inventory),
            "-e",
            f"diagnose_profile={PROFILE}",
            *memlock_vars(),
            "--quiet",
            cwd=tmp_path,
            timeout=300,
        )
        assert done.returncode in (0, 1), done.stdout + done.stderr
        lines.append(done.stdout.strip())
    newest = max(runs.iterdir())
    results = json.loads((newest / "results.json").read_text())
    watched = {
        (c["host"], c["observed"]["component"]): c for c in results["checks"] if c["id"] == "history.watch"
    }
    guid = port_guid(1, SYMBOL_PORT)
    assert set(watched) == {("node1", "gpu:1752524022502"), ("node2", f"port:{guid}/1")}, lines[-1]
    gpu = watched[("node1", "gpu:1752524022502")]
    assert gpu["status"] == "WARN" and gpu["action"] == "drain_at_next_window"
    assert "gpu.ecc_corrected_volatile went from" in gpu["message"]
    port = watched[("node2", f"port:{guid}/1")]
    assert port["action"] == "reseat_or_replace_cable" and "ib.symbol_error" in port["message"]
    assert results["history"]["watch"]["components"] == 3 * 4 + 3 * 9
    assert "2 watched (" in lines[-1] and all("watched" not in line for line in lines[:4]), lines
    table = diagnose("history", "--watch", "--history", str(db), cwd=tmp_path).stdout
    assert "gpu:1752524022502" in table and "ib.symbol_error" in table, table
