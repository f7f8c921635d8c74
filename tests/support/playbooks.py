"""Small playbooks the integration tests run ``diagnose run`` with: reachability and ports only (seconds per
host), and the same with a short gloo sweep across the hosts.
"""

from __future__ import annotations

from pathlib import Path

PORTS_ONLY = "name: ports\ndescription: reachability and ports\nchecks: [host.reachable, net.port_range]\n"
GLOO_BENCH = (
    "name: gloo\ndescription: a short gloo sweep\n"
    "checks: [host.reachable, net.port_range, nccl.version]\n"
    "benchmarks:\n  collectives: [all_reduce]\n  min_bytes: 4096\n  max_bytes: 16384\n"
    "  step_factor: 4\n  warmup_iters: 1\n  iters: 2\n"
)


def write_playbook(folder: Path, text: str = PORTS_ONLY) -> Path:
    """``text`` as folder/playbook.yaml, for ``--playbook``."""
    path = folder / "playbook.yaml"
    path.write_text(text)
    return path
