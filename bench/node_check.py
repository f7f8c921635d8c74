"""node-check bench: how long `diagnose node-check` takes on one node, against the full host stage.

Issue 16's target is <= 10 s on a healthy 8-GPU node (LBNL NHC users report 31 s). Two commands are
timed, wall clock from start to exit (Python's start and imports included, as slurmd pays them):

1. `diagnose node-check` (the node-check playbook: 17 fast node-local checks);
2. the baseline: `diagnose run --skip-benchmarks --format json` on the same node (the acceptance
   playbook: every per-host check, cluster rules, results.json written).

Where they run:

* default: on node n1 of the Slurm test bed (tests/support/slurmbed.py), a healthy 8x H100 NDR node of
  tests/support/hostkit.py (its tools print real captured outputs), each command a job step `srun -w n1 ...`, so
  srun's own cost is in the numbers as it is in a Prolog; needs what the bed needs (root, Slurm, munge).
* `--local`: on this machine, no Slurm (for a lent GPU machine: real nvidia-smi on real GPUs).

    python3 bench/node_check.py [--runs 10] [--local] [--profile NAME] [-e key=value ...]
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

DIAGNOSE = [sys.executable, "-m", "diagnose.cli"]
_SELF_TIME = re.compile(r"\((\d+) checks, (\d+\.\d) s")


def _timed(
    run: Callable[[list[str]], subprocess.CompletedProcess[str]], argv: list[str]
) -> tuple[float, str]:
    started = time.monotonic()
    done = run(argv)
    elapsed = time.monotonic() - started
    if done.returncode not in (0, 1):  # 1: something unhealthy, still a complete check
        raise SystemExit(f"{' '.join(argv)} exited {done.returncode}:\n{done.stdout}{done.stderr}")
    return elapsed, done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""


def _p95(values: list[float]) -> float:
    return statistics.quantiles(values, n=20, method="inclusive")[18] if len(values) > 1 else values[0]


def measure(
    run: Callable[[list[str]], subprocess.CompletedProcess[str]], runs: int, options: list[str], work: Path
) -> list[tuple[str, list[float], str]]:
    """Each command ``runs`` times (after one warm-up run that fills the page cache); rows for the table."""
    node_check = [*DIAGNOSE, "node-check", *options]
    rows = []
    walls, selfs, line = [], [], ""
    _timed(run, node_check)
    for _ in range(runs):
        wall, line = _timed(run, node_check)
        walls.append(wall)
        found = _SELF_TIME.search(line)
        if found:
            selfs.append(float(found.group(2)))
    rows.append(("diagnose node-check (wall)", walls, line))
    if selfs:
        rows.append(("  of which the checks (its own line)", selfs, ""))
    baseline = []
    for index in range(runs):
        out = work / f"run-{index}"
        argv = [*DIAGNOSE, "run", "--skip-benchmarks", "--format", "json", "--out", str(out), *options]
        wall, _ = _timed(run, argv)
        baseline.append(wall)
    rows.append(("diagnose run --skip-benchmarks (wall)", baseline, ""))
    return rows


def print_table(title: str, rows: list[tuple[str, list[float], str]]) -> None:
    print(title)
    print(f"{'command':<40} {'runs':>4} {'median s':>9} {'p95 s':>7} {'min s':>7}")
    for name, values, _ in rows:
        print(
            f"{name:<40} {len(values):>4} {statistics.median(values):>9.2f} {_p95(values):>7.2f} {min(values):>7.2f}"
        )
    for name, _, line in rows:
        if line:
            print(f"last line of {name.split(' (')[0]}: {line}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--local", action="store_true", help="this machine, no Slurm")
    parser.add_argument("--profile", help="hardware profile (default: h100-8x-ndr400 on the bed)")
    parser.add_argument("-e", "--extra-vars", action="append", default=[])
    args = parser.parse_args()
    extra = [word for pair in args.extra_vars for word in ("-e", pair)]
    with tempfile.TemporaryDirectory(prefix="bench-node-check-") as scratch:
        work = Path(scratch)
        if args.local:
            options = [*(["--profile", args.profile] if args.profile else []), *extra]
            rows = measure(_run, args.runs, _for_run(options), work)
            print_table(f"this machine, {args.runs} runs each", rows)
            return
        from tests.support.hostkit import PROFILE, healthy_h100, memlock_vars
        from tests.support.slurmbed import SlurmBed

        options = ["--profile", args.profile or PROFILE, *memlock_vars(), *extra]
        with SlurmBed(work / "bed", [healthy_h100("n1")]) as bed:
            rows = measure(
                lambda argv: bed.run(["srun", "-w", "n1", "-t", "5", *argv], timeout=300),
                args.runs,
                _for_run(options),
                work,
            )
        print_table(
            f"Slurm test bed, node n1 (healthy 8x H100 NDR), srun -w n1 ..., {args.runs} runs each", rows
        )


def _for_run(options: list[str]) -> list[str]:
    """node-check's --profile is `-e diagnose_profile=` for `diagnose run`; both commands take this form."""
    out, words = [], iter(options)
    for word in words:
        out += ["-e", f"diagnose_profile={next(words)}"] if word == "--profile" else [word]
    return out


def _run(argv: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=300, check=False)


if __name__ == "__main__":
    main()
