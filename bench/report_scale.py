"""How long and how much memory rendering takes for a 512-host acceptance run.

Generates a realistic results.json (512 hosts in 16 racks, 8 GPUs each, 14 checks per host with a few
percent of faults, cluster-wide checks, 6 benchmarks of 24 sizes, evidence files under raw/) and renders
it in fresh child processes, one per stage, so that each stage's peak RSS is its own (the child's VmHWM)
and the times include interpreter start and imports, as a user running ``diagnose report`` would see them.
The first row is the cost every stage pays: a fresh interpreter reading results.json as the renderer reads it.

    python bench/report_scale.py [--hosts 512] [--keep DIR] [--baseline REV]

``--baseline REV`` renders every stage a second time with the diagnose of commit REV (checked out with
``git worktree`` into a temporary folder, removed at the end), each baseline stage right before the same
stage of this checkout, so that both see the same load on a shared machine.

Targets: HTML + PDF under 10 s of CPU and 256 MiB at 16,384 hosts (issue 47) on the 2-core development
machine.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

TARGET_SECONDS = 10.0
TARGET_RSS_MIB = 256.0
REPO = Path(__file__).resolve().parents[1]
COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast", "sendrecv")
BUSBW_FACTOR = {  # nccl-tests' busbw/algbw factors for n ranks
    "all_reduce": lambda n: 2 * (n - 1) / n,
    "all_gather": lambda n: (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n,
    "all_to_all": lambda n: (n - 1) / n,
    "broadcast": lambda n: 1.0,
    "sendrecv": lambda n: 1.0,
}


def _ibstat(down: int | None, slow: int | None) -> str:
    lines = []
    for i in range(8):
        state, phys, rate = (
            ("Down", "Polling", 10) if i == down else ("Active", "LinkUp", 200 if i == slow else 400)
        )
        lines += [
            f"CA 'mlx5_{i}'",
            "\tCA type: MT4129",
            "\tNumber of ports: 1",
            "\tFirmware version: 28.39.1002",
            "\tPort 1:",
            f"\t\tState: {state}",
            f"\t\tPhysical state: {phys}",
            f"\t\tRate: {rate}",
            "\t\tLink layer: InfiniBand",
        ]
    return "\n".join(lines) + "\n"


def generate(out: Path, n_hosts: int, faults: float = 1.0, seed: int = 5) -> Path:
    """Write results.json and its raw/ evidence under ``out``; return the results path.

    ``faults`` scales how many hosts have each fault (1: a few percent, as in a typical acceptance).
    """
    rng = random.Random(seed)
    hosts = [f"gpu-r{1 + i // 32:02d}n{1 + i % 32:02d}" for i in range(n_hosts)]

    def some(count: float) -> set[str]:
        return set(rng.sample(hosts, min(n_hosts, max(1, round(count * faults)))))

    unreachable = some(3)
    port_down = some(n_hosts / 50)
    slow_link = some(n_hosts / 100)
    ecc = some(n_hosts / 100)
    p2p_off = some(5)
    old_driver = some(8)
    timeouts = some(2)
    host_rows: list[dict[str, Any]] = []
    checks: list[dict[str, Any]] = []

    def check(
        cid: str, host: str | None, cl: str, status: str, msg: str, obs: Any, exp: Any, ev: str | None
    ) -> None:
        remediation = None if status == "PASS" else f"See the runbook entry for {cid}."
        checks.append(
            {
                "id": cid,
                "host": host,
                "checklist": cl,
                "status": status,
                "observed": obs,
                "expected": exp,
                "message": msg,
                "remediation": remediation,
                "evidence": ev,
            }
        )

    for index, host in enumerate(hosts):
        raw = out / "raw" / host
        if host in unreachable:
            host_rows.append(
                {
                    "name": host,
                    "address": f"10.1.{index // 250}.{index % 250 + 1}",
                    "reachable": False,
                    "error": "timed out after 10 s",
                    "environment": {},
                }
            )
            check(
                "host.reachable",
                host,
                "–",
                "FAIL",
                "ssh: timed out after 10 s",
                "unreachable",
                "reachable",
                None,
            )
            continue
        raw.mkdir(parents=True, exist_ok=True)
        down = rng.randrange(8) if host in port_down else None
        slow = rng.randrange(8) if host in slow_link else None
        (raw / "ibstat.txt").write_text(_ibstat(down, slow))
        (raw / "topo.txt").write_text("\tGPU0\tGPU1\tGPU2\tGPU3\tGPU4\tGPU5\tGPU6\tGPU7\tNIC0\n" * 9)
        (raw / "nccl_env.txt").write_text(
            "NCCL_IB_HCA=mlx5\n" + ("NCCL_P2P_DISABLE=1\n" if host in p2p_off else "")
        )
        nccl_env = {"NCCL_IB_HCA": "mlx5", "NCCL_SOCKET_IFNAME": "bond0"}
        if host in p2p_off:
            nccl_env["NCCL_P2P_DISABLE"] = "1"
        host_rows.append(
            {
                "name": host,
                "address": f"10.1.{index // 250}.{index % 250 + 1}",
                "reachable": True,
                "error": None,
                "environment": {
                    "gpu_model": "NVIDIA H100 80GB HBM3",
                    "gpu_count": 8,
                    "driver": "535.183.01" if host in old_driver else "550.127.05",
                    "cuda": "12.4",
                    "nccl": "2.23.4",
                    "torch": "2.5.1+cu124",
                    "os": "Ubuntu 22.04.5 LTS",
                    "nccl_env": nccl_env,
                },
            }
        )
        ev = f"raw/{host}/ibstat.txt"
        check("host.reachable", host, "–", "PASS", "connected in 0.3 s", "reachable", "reachable", None)
        check("ib.devices", host, "1, 2", "PASS", "8 HCAs", 8, 8, ev)
        if down is not None:
            check("ib.port_state", host, "1", "FAIL", f"mlx5_{down} port 1 Down (Polling)", 7, 8, ev)
        else:
            check("ib.port_state", host, "1", "PASS", "8 of 8 ports Active", 8, 8, ev)
        if host in timeouts:
            check("ib.link_rate", host, "1", "ERROR", "ibstat timed out after 20 s", None, ">= 400", ev)
        elif slow is not None:
            check(
                "ib.link_rate",
                host,
                "1",
                "FAIL",
                f"mlx5_{slow} at 200 Gb/s",
                {f"mlx5_{slow}": 200},
                ">= 400",
                ev,
            )
        else:
            check("ib.link_rate", host, "1", "PASS", "8 ports at 400 Gb/s", 400, ">= 400", ev)
        check("ib.mtu", host, "1", "PASS", "active_mtu 4096", 4096, 4096, None)
        check(
            "gpu.topology", host, "1", "PASS", "NV18 between all pairs", "NV18", "NV#", f"raw/{host}/topo.txt"
        )
        check("gpu.gpudirect", host, "1", "PASS", "nvidia_peermem loaded", True, True, None)
        if host in ecc:
            check("gpu.ecc", host, "1", "WARN", "GPU3: 2 volatile correctable ECC errors", 2, 0, None)
        else:
            check("gpu.ecc", host, "1", "PASS", "no ECC errors", 0, 0, None)
        check("gpu.persistence", host, "1", "PASS", "persistence mode on", True, True, None)
        check("net.port_range", host, "3", "PASS", "15000-65000", [15000, 65000], ">= 28000", None)
        check("nccl.version", host, "3", "PASS", "NCCL 2.23.4", "2.23.4", "installed", None)
        if host in p2p_off:
            check(
                "nccl.env", host, "3", "FAIL", "NCCL_P2P_DISABLE=1", {"NCCL_P2P_DISABLE": "1"}, "unset", None
            )
        else:
            check(
                "nccl.env",
                host,
                "3",
                "PASS",
                "no transport disabled",
                {},
                "unset",
                f"raw/{host}/nccl_env.txt",
            )
        check(
            "sys.hugepages", host, "–", "PASS", "transparent hugepages: madvise", "madvise", "madvise", None
        )
        check("sys.nofile", host, "–", "PASS", "nofile 1048576", 1048576, ">= 65536", None)
    for host in sorted(old_driver - unreachable):
        check(
            "versions.consistency",
            host,
            "3",
            "FAIL",
            "driver 535.183.01, others 550.127.05",
            "535",
            "550",
            None,
        )
    check("ib.mtu", None, "1", "PASS", "active_mtu 4096 everywhere", 4096, 4096, None)
    check("nccl.transport", None, "3", "PASS", "NET/IB with GDRDMA", "NET/IB", "NET/IB", None)
    reachable = [h for h in hosts if h not in unreachable]
    benchmarks = []
    ranks = 8 * len(reachable)
    for collective in COLLECTIVES:
        factor = BUSBW_FACTOR[collective](ranks)
        peak = 140.0 if collective == "all_reduce" else 190.0
        rows = []
        for exponent in range(10, 34):
            size = 1 << exponent
            time_us = 60.0 + size / (peak / factor * 1e3)
            algbw = size / (time_us * 1e3)
            rows.append(
                {
                    "bytes": size,
                    "time_us": round(time_us, 2),
                    "algbw_gbps": round(algbw, 3),
                    "busbw_gbps": round(algbw * factor, 3),
                    "wrong": 0,
                }
            )
        status = "FAIL" if collective == "all_reduce" else "PASS"
        bench = {
            "collective": collective,
            "tool": "torch",
            "backend": "nccl",
            "hosts": reachable,
            "nodes": len(reachable),
            "ranks": ranks,
            "transport": {"inter_node": "NET/IB", "intra_node": ["P2P/CUMEM", "NVLS"], "gdrdma": True},
            "rows": rows,
            "expected_busbw_gbps": 156.0,
            "normal_range_gbps": [132.6, 179.4],
            "status": status,
            "message": f"busbw {rows[-1]['busbw_gbps']:.1f} GB/s at 8 GiB; expected >= 156 GB/s for {len(reachable)} nodes",
        }
        benchmarks.append(bench)
        if status == "FAIL":
            for host in sorted(slow_link - unreachable):
                check(
                    "bench.straggler",
                    host,
                    "3",
                    "FAIL",
                    f"{host} is slow in pair runs of {collective}",
                    95.0,
                    132.6,
                    None,
                )
        check(f"bench.{collective}", None, "3", status, bench["message"], rows[-1]["busbw_gbps"], 156.0, None)
    results = {
        "schema": 1,
        "run": {
            "id": "scale-512",
            "started": "2025-03-14T02:15:00+00:00",
            "finished": "2025-03-14T02:41:09+00:00",
            "tool_version": "0.1.0",
            "inventory": "inventories/big.yaml",
            "playbook": "acceptance",
            "profile": "h100-8x-ndr400",
            "argv": ["diagnose", "run"],
            "operator": "bench@ctl",
        },
        "hosts": host_rows,
        "checks": checks,
        "benchmarks": benchmarks,
        "verdict": "FAIL",
    }
    path = out / "results.json"
    path.write_text(json.dumps(results, indent=1))
    return path


def run_stage(results: Path, formats: set[str], out: Path, tree: Path = REPO) -> tuple[float, float, float]:
    """Render ``formats`` in a fresh interpreter with the diagnose of ``tree`` (this checkout, or the
    baseline's worktree); return (wall seconds, CPU seconds, peak RSS MiB) of that child. CPU seconds are
    what the wall time would be on an idle machine (rendering is one thread).

    The peak is the child's own ``VmHWM``, read by the child as it ends: the ``ru_maxrss`` that ``wait4``
    reports for a child starts from its parent's resident size at the fork, and this parent holds the
    whole generated document (at 16,384 hosts that alone read as 554 MiB for every stage).
    """
    work = (
        "from diagnose.render import load; getattr(load, 'read_cleaned', load.read_results)(Path(sys.argv[1]))"
        if not formats
        else "from diagnose.render import render; "
        "render(Path(sys.argv[1]), set(sys.argv[2].split(',')), Path(sys.argv[3]))"
    )
    code = (
        f"import sys; from pathlib import Path; {work}; "
        "print(next(l.split()[1] for l in open('/proc/self/status') if l.startswith('VmHWM:')))"
    )
    start, before = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
    child = subprocess.run(
        [sys.executable, "-c", code, str(results), ",".join(sorted(formats)), str(out)],
        stdout=subprocess.PIPE,
        text=True,
        check=False,
        cwd=tree,  # ``-c`` puts the working folder first on sys.path: its diagnose is the one imported
        env={**os.environ, "PYTHONPATH": str(tree)},
    )
    seconds = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if child.returncode != 0:
        raise SystemExit(f"stage {formats} failed with {child.returncode}")
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return seconds, cpu, int(child.stdout.split()[-1]) / 1024.0  # VmHWM is in kB


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=512)
    parser.add_argument(
        "--faults", type=float, default=1.0, help="scale the share of faulty hosts (10: ~20%%)"
    )
    parser.add_argument("--keep", type=Path, help="write the results and outputs here and keep them")
    parser.add_argument(
        "--baseline", metavar="REV", help="also render with the diagnose of this commit, stage by stage"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = args.keep or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        start = time.perf_counter()
        results = generate(work, args.hosts, args.faults)
        generated = time.perf_counter() - start
        data = json.loads(results.read_text())
        faulty = len({c["host"] for c in data["checks"] if c["host"] and c["status"] != "PASS"})
        print(
            f"results.json: {args.hosts} hosts ({faulty} with a non-PASS), {len(data['checks'])} check results, "
            f"{len(data['benchmarks'])} benchmarks x 24 sizes, {results.stat().st_size / 1e6:.1f} MB "
            f"(generated in {generated:.1f} s)\n"
        )
        stages = [
            ("read only", set(), None),
            ("html", {"html"}, None),
            ("html + pdf", {"html", "pdf"}, (TARGET_SECONDS, TARGET_RSS_MIB)),
            ("junit", {"junit"}, None),
            ("prom", {"prom"}, None),
        ]
        base = _baseline_tree(args.baseline, work) if args.baseline else None
        head = f"{'seconds':>8} {'CPU s':>6} {'peak MiB':>9}"
        print(
            f"{'stage':<12} "
            + (f"{'baseline ' + args.baseline[:10]:^26} | " if base else "")
            + f"{'this checkout':^26}   {'target':<22} result"
        )
        print(f"{'':<12} " + (f"{head} | " if base else "") + f"{head}")
        failed = False
        try:
            for name, formats, target in stages:
                before = ""
                if base is not None:
                    seconds, cpu, rss = run_stage(results, formats, work / "out-baseline", base)
                    before = f"{seconds:>8.2f} {cpu:>6.2f} {rss:>9.0f} | "
                seconds, cpu, rss = run_stage(results, formats, work / "out")
                if target:  # the time target is judged on CPU time: the machine is shared
                    ok = cpu <= target[0] and rss <= target[1]
                    failed |= not ok
                    verdict = f"<= {target[0]:.0f} s, <= {target[1]:.0f} MiB", "PASS" if ok else "FAIL"
                else:
                    verdict = ("—", "")
                print(
                    f"{name:<12} {before}{seconds:>8.2f} {cpu:>6.2f} {rss:>9.0f}   {verdict[0]:<22} {verdict[1]}",
                    flush=True,
                )
        finally:
            if base is not None:
                subprocess.run(
                    ["git", "-C", str(REPO), "worktree", "remove", "--force", str(base)], check=False
                )
        print()
        for label, out in (("baseline", work / "out-baseline"), ("this checkout", work / "out")):
            if base is not None or label == "this checkout":
                print(f"{label}: {_sizes(out)}")
    load = os.getloadavg()[0]
    print(f"load average (1 min) at the end {load:.1f} on {os.cpu_count()} CPUs")
    return 1 if failed else 0


def _baseline_tree(rev: str, work: Path) -> Path:
    """A worktree of ``rev`` under ``work``. Its reports/ is linked in as diagnose/reports, where the
    installed (editable) diagnose finds the templates, so the baseline renders with its own templates."""
    tree = work / "baseline"
    subprocess.run(
        ["git", "-C", str(REPO), "worktree", "add", "--detach", "--quiet", str(tree), rev], check=True
    )
    (tree / "diagnose" / "reports").symlink_to(tree / "reports", target_is_directory=True)
    return tree


def _sizes(out: Path) -> str:
    pdf, html = out / "report.pdf", out / "report.html"
    return (
        f"report.pdf: {_page_count(pdf)} pages, {pdf.stat().st_size / 1e6:.2f} MB; "
        f"report.html: {html.stat().st_size / 1e6:.2f} MB; "
        f"junit.xml: {(out / 'junit.xml').stat().st_size / 1e6:.2f} MB; "
        f"diagnose.prom: {(out / 'diagnose.prom').stat().st_size / 1e6:.2f} MB"
    )


def _page_count(pdf: Path) -> int:
    from pypdf import PdfReader

    return len(PdfReader(pdf).pages)


if __name__ == "__main__":
    raise SystemExit(main())
