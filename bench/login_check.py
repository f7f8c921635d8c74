"""login-check bench: what checking every host's SSH key before any connection adds to `prepare()`.

A run now stats and reads `ansible_ssh_private_key_file` for every SSH host while the inventory is read,
and looks for hosts with nothing to log in with before the run folder is made
(diagnose/connectors/ssh_login.py). Both run once per host on the controller, so they must stay small
beside what reading and merging the inventory already costs. Timed, for inventories of N hosts:

1. the baseline: `prepare()` with the key variable's value not checked (the check replaced by the
   path-syntax check it had before), the same inventory;
2. `prepare()` as shipped: each host's key file checked (one file, read once: the content check is cached
   by file version);
3. `login_problem()` over the prepared hosts with no agent and no ~/.ssh keys (the slowest case: every
   host is looked up in the ssh_config files).

    PYTHONPATH=. python3 bench/login_check.py [--hosts 1000,5000] [--runs 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from unittest import mock

import paramiko

from diagnose.config import host_settings
from diagnose.connectors.ssh_login import login_problem
from diagnose.engine.run import RunOptions, prepare
from diagnose.probes.registry import HOST_SETTINGS

KEY = "ansible_ssh_private_key_file"


def write_inventory(folder: Path, hosts: int) -> Path:
    key = folder / "id_ed25519"
    paramiko.ECDSAKey.generate().write_private_key_file(str(key))
    lines = [
        "all:",
        "  vars:",
        f"    ansible_ssh_private_key_file: {key}",
        "    diagnose_profile: cpu-testbed",
    ]
    lines += ["  hosts:"] + [
        f"    node{i:05d}: {{ansible_host: 10.0.{i // 250}.{i % 250}}}" for i in range(hosts)
    ]
    path = folder / "inventory.yaml"
    path.write_text("\n".join(lines) + "\n")
    return path


def timed(action: Callable[[], object], runs: int) -> float:
    walls = []
    for _ in range(runs):
        started = time.perf_counter()
        action()
        walls.append(time.perf_counter() - started)
    return statistics.median(walls)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--hosts", default="1000,5000", help="inventory sizes, comma-separated")
    parser.add_argument("--runs", type=int, default=3, help="timed runs per cell (median shown)")
    args = parser.parse_args()
    print(f"{'hosts':>6} {'prepare, no key check s':>24} {'prepare, key checked s':>23} {'added':>7} "
          f"{'login_problem s':>16}")  # fmt: skip
    with tempfile.TemporaryDirectory() as work:
        os.environ["HOME"] = work  # no ~/.ssh keys, no ssh_config: every host looked up, none found
        os.environ.pop("SSH_AUTH_SOCK", None)
        for count in (int(n) for n in args.hosts.split(",")):
            folder = Path(work) / str(count)
            folder.mkdir()
            options = RunOptions(inventories=[str(write_inventory(folder, count))])
            # the baseline: the key variable checked for its syntax only, as before (the _path check)
            before = {**HOST_SETTINGS, KEY: host_settings.SETTINGS["diagnose_known_hosts_file"]}
            with mock.patch("diagnose.engine.run.HOST_SETTINGS", before):
                baseline = timed(partial(prepare, options), args.runs)
            checked = timed(partial(prepare, options), args.runs)
            hosts = prepare(options).hosts
            for host in hosts:  # nothing to log in with: the slowest path of the scan
                host.vars = host.vars.with_values(**{KEY: None})
            login = timed(partial(login_problem, hosts, {}), args.runs)
            added = 100 * (checked - baseline) / baseline
            print(f"{count:>6} {baseline:>24.3f} {checked:>23.3f} {added:>6.1f}% {login:>16.3f}")


if __name__ == "__main__":
    main()
