"""How close diagnose's collective benchmark comes to nccl-tests on the same GPUs.

Runs the program diagnose ships to hosts (diagnose/shipped/collective_bench.py) with torchrun on this machine's
GPUs, exactly as the benchmark stage starts it, and prints one table: size, our busbw, the nccl-tests
reference, the ratio and whether it meets the target (≥ 0.97 × from 64 MiB up, ≥ 0.8 × below).

The references were measured with nccl-tests 2.19.6 on a lent 4× H200 (NVLS off, NCCL 2.28.9):
all_reduce busbw 53.3 GB/s at 1 MiB, 338.5 at 256 MiB, 362.9 at 4 GiB; all_gather 456, reduce_scatter
459, alltoall 469 GB/s at 4 GiB. Run it there with NCCL_NVLS_ENABLE=0:

    NCCL_NVLS_ENABLE=0 python bench/fidelity.py --out /tmp/fidelity

``--out`` keeps the rows (JSON lines), each rank's NCCL INFO log and the table.

Measured there (NCCL 2.28.9, torch 2.11, graph timing): all_reduce 0.998-0.999 × at 256 MiB and 4 GiB,
1.39 × at 1 MiB. For all_gather, reduce_scatter and alltoall at 4 GiB our *algbw* is 456.4, 456.8 and
468.3 GB/s — the reference figures to within 0.5 % — while our busbw, by nccl-tests' (n-1)/n, is 0.75 ×
of them; a busbw of 456-469 GB/s would exceed NVLink 4's 450 GB/s per direction, so those three
reference values look like algbw. The table prints both so the comparison can be read either way.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

PROGRAM = Path(__file__).resolve().parent.parent / "diagnose" / "shipped" / "collective_bench.py"
MIB, GIB = 1 << 20, 1 << 30
REFERENCE = {
    ("all_reduce", 1 * MIB): 53.3,
    ("all_reduce", 256 * MIB): 338.5,
    ("all_reduce", 4 * GIB): 362.9,
    ("all_gather", 4 * GIB): 456.0,
    ("reduce_scatter", 4 * GIB): 459.0,
    ("all_to_all", 4 * GIB): 469.0,
}
# (collectives, min bytes, max bytes, step factor) of each torchrun launch.
SWEEPS = (
    ("all_reduce", 1 * MIB, 4 * GIB, 2),
    ("all_gather,reduce_scatter,all_to_all", 256 * MIB, 4 * GIB, 4),
)


def target(nbytes: int) -> float:
    return 0.97 if nbytes >= 64 * MIB else 0.8


def size_text(nbytes: int) -> str:
    return f"{nbytes // GIB} GiB" if nbytes >= GIB else f"{nbytes // MIB} MiB"


def run_sweep(
    args: argparse.Namespace, collectives: str, low: int, high: int, factor: int, out: Path
) -> list[dict]:
    results = out / "rows.jsonl"
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        f"--nproc-per-node={args.gpus}",
        "--standalone",
        str(PROGRAM),
        "--backend=nccl",
        f"--collectives={collectives}",
        f"--min-bytes={low}",
        f"--max-bytes={high}",
        f"--step-factor={factor}",
        f"--warmup={args.warmup}",
        f"--iters={args.iters}",
        f"--timing={args.timing}",
        f"--results={results}",
        f"--log-dir={out / 'logs' / collectives.split(',')[0]}",
    ]
    env = {
        **os.environ,
        "NCCL_DEBUG": os.environ.get("NCCL_DEBUG", "INFO"),
        "NCCL_DEBUG_SUBSYS": "INIT,NET,GRAPH",
    }
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    (out / f"torchrun-{collectives.split(',')[0]}.err.txt").write_text(done.stderr)
    if done.returncode != 0:
        sys.stderr.write(done.stderr[-4000:])
        raise SystemExit(f"torchrun failed with exit code {done.returncode}")
    rows = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    return [r for r in rows if r.get("event") == "row" and r["collective"] in collectives.split(",")]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpus", type=int, default=4)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--out", type=Path, default=Path("fidelity-out"))
    parser.add_argument(
        "--timing",
        choices=("graph", "eager"),
        default="graph",
        help="as the program's --timing (default graph)",
    )
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    rows: list[dict] = []
    for collectives, low, high, factor in SWEEPS:
        rows += run_sweep(args, collectives, low, high, factor, args.out)
    lines = [
        f"{'collective':<15} {'size':>8} {'algbw':>7} {'busbw':>7} {'nccl-tests':>10} {'ratio':>6} {'target':>6}  pass  wrong",
    ]
    failures = 0
    for row in rows:
        key = (row["collective"], row["bytes"])
        reference = REFERENCE.get(key)
        ours = row["busbw_gbps"]
        if reference is None:
            lines.append(
                f"{row['collective']:<15} {size_text(row['bytes']):>8} {row['algbw_gbps']:>7.1f} {ours:>7.1f} "
                f"{'-':>10} {'-':>6} {'-':>6}  -     {row['wrong']}"
            )
            continue
        ratio = ours / reference
        ok = ratio >= target(row["bytes"]) and row["wrong"] == 0
        failures += not ok
        lines.append(
            f"{row['collective']:<15} {size_text(row['bytes']):>8} {row['algbw_gbps']:>7.1f} {ours:>7.1f} {reference:>10.1f} "
            f"{ratio:>6.3f} {target(row['bytes']):>6.2f}  {'yes' if ok else 'NO':<4}  {row['wrong']}"
        )
    table = "\n".join(lines)
    print(table)
    (args.out / "fidelity.txt").write_text(table + "\n")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
