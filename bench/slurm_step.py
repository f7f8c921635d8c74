"""Slurm host stage bench: the checks as ONE step per wave against a step per node (the baseline).

On the Slurm test bed (tests/support/slurmbed.py: real slurmctld, slurmd and munged on loopback, each node a
healthy 8x H100 NDR node of tests/support/hostkit.py whose tools print real captured outputs), inside an
allocation of N nodes, the host stage of the whole catalog runs through the engine's own entry
(diagnose.engine.stages.run_host_stage) two ways:

* one step: every node's batch as a task of a single ``srun --nodes=N --ntasks-per-node=1`` step
  (diagnose.engine.step_stage, the default for srun hosts);
* per node (baseline): ``slurm_step_checks=false``, the per-host path — each node opened with a
  ``true`` step, then its batch as a step of its own, nodes side by side (forks 32).

Steps are counted from the scheduler's side: the ``launch task StepId=J.S`` lines each slurmd logs.
Wall time is the host stage alone (results judged and written), median of ``--runs`` after a warm-up.
The last lines scale the step counts to a 16,384-node cluster (waves of slurm_step_nodes = 2,048).

    python3 bench/slurm_step.py [--nodes 2,4,8,16] [--runs 3]

Needs what the bed needs: root, Debian's slurmctld/slurmd/slurm-client/munge, unshare.
"""

from __future__ import annotations

import argparse
import math
import os
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from diagnose.connectors.srun import DEFAULT_STEP_NODES  # noqa: E402
from diagnose.core.hosts import Host  # noqa: E402
from diagnose.core.vars import Vars  # noqa: E402
from diagnose.engine.results import ResultsStore  # noqa: E402
from diagnose.engine.stages import run_host_stage, selected_catalog  # noqa: E402
from tests.support.hostkit import PROFILE, healthy_h100  # noqa: E402
from tests.support.slurmbed import SlurmBed, prerequisite_problem  # noqa: E402

MODES = (("per node (baseline)", False), ("one step", True))
CLUSTER_NODES = 16_384


def allocate(bed: SlurmBed, nodes: list[str]) -> str:
    done = bed.run(["salloc", "--no-shell", "-N", str(len(nodes)), "-w", ",".join(nodes)], check=True)
    found = re.search(r"Granted job allocation (\d+)", done.stderr)
    if found is None:
        raise SystemExit(f"salloc gave no allocation: {done.stderr}")
    return found.group(1)


def host_stage(
    bed: SlurmBed, job: str, nodes: list[str], one_step: bool, work: Path
) -> tuple[float, int, int]:
    """(seconds, steps launched, hosts whose host.reachable passed) for one host stage."""
    values = {
        "ansible_connection": "srun",
        "slurm_job_id": job,
        "diagnose_profile": PROFILE,
        "slurm_step_checks": one_step,
    }
    hosts = [Host(n, vars=Vars(values, n)) for n in nodes]
    checks, _ = selected_catalog(["*"])
    out = Path(tempfile.mkdtemp(dir=work))
    store = ResultsStore(out / "results.json", {"id": out.name})
    before = set(bed.launched_steps(job))
    started = time.monotonic()
    states = run_host_stage(hosts, checks, out, store, 32, False, None)
    elapsed = time.monotonic() - started
    steps = len(set(bed.launched_steps(job)) - before)
    reachable = sum(s.healthy for s in states.values())
    for state in states.values():
        if state.connection is not None:
            state.connection.close()
    return elapsed, steps, reachable


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--nodes", default="2,4,8,16", help="allocation sizes, comma-separated (default 2,4,8,16)"
    )
    parser.add_argument("--runs", type=int, default=3, help="timed runs per size and mode (default 3)")
    args = parser.parse_args()
    sizes = [int(n) for n in args.nodes.split(",")]
    problem = prerequisite_problem()
    if problem:
        raise SystemExit(f"the Slurm test bed cannot run here: {problem}")
    with tempfile.TemporaryDirectory(prefix="slurm-step-bench-") as tmp:
        work = Path(tmp)
        names = [f"n{i}" for i in range(1, max(sizes) + 1)]
        with SlurmBed(work / "slurm", [healthy_h100(n) for n in names]) as bed:
            os.environ.update(SLURM_CONF=bed.env["SLURM_CONF"], PATH=bed.env["PATH"])
            print("Slurm host stage, whole catalog, healthy 8x H100 nodes of the test bed (2 CPU cores)")
            print(f"{'nodes':>5}  {'path':<20} {'srun steps':>10} {'steps/node':>10} {'wall s (median)':>15}")
            for size in sizes:
                nodes = names[:size]
                job = allocate(bed, nodes)
                for _, one_step in MODES:  # warm-up: page cache, Python imports
                    host_stage(bed, job, nodes, one_step, work)
                # The modes alternate, so that a load that drifts (a shared machine) weighs on both alike.
                runs: dict[bool, list[tuple[float, int, int]]] = {one_step: [] for _, one_step in MODES}
                for _ in range(args.runs):
                    for _, one_step in MODES:
                        runs[one_step].append(host_stage(bed, job, nodes, one_step, work))
                for label, one_step in MODES:
                    if any(reachable != size for _, _, reachable in runs[one_step]):
                        raise SystemExit(f"{label}: a node was not reached: {runs[one_step]}")
                    steps = runs[one_step][0][1]
                    wall = statistics.median(seconds for seconds, _, _ in runs[one_step])
                    print(f"{size:>5}  {label:<20} {steps:>10} {steps / size:>10.1f} {wall:>15.2f}")
                bed.run(["scancel", job], check=True)
            load = ", ".join(f"{value:.1f}" for value in os.getloadavg())
            print(f"(load average of this machine after the runs: {load})")
            waves = math.ceil(CLUSTER_NODES / DEFAULT_STEP_NODES)
            print(
                f"\nAt {CLUSTER_NODES:,} nodes: per node {2 * CLUSTER_NODES:,} steps for slurmctld to create "
                f"(2 per node, as measured); one step per wave of {DEFAULT_STEP_NODES:,}: {waves} steps."
            )


if __name__ == "__main__":
    main()
