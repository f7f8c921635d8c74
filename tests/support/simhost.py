"""Simulated hosts for runs larger than a machine can host: a connector and a launcher that answer with
outputs captured from real test-bed hosts, after delays drawn from the ones measured there.

The engine is the real one end to end: the simulated connector receives the very batch script
``run_batch`` builds and answers it in the framing that script's shell would print (``batch_script`` in
diagnose/connectors/base.py), so framing, caps, evidence, parsers, rules, results.json and the report all do
their real work; only the network and the hosts' own time are stood in for. It is registered under an
``ansible_connection`` value (the connectors' own seam, ``CONNECTORS``), and the launcher takes the place of
the benchmark stage's ``launch`` (a collective sweep) for as long as a ``with`` block lasts.
"""

from __future__ import annotations

import os
import random
import re
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from diagnose import connectors
from diagnose.benchmarks import stage as bench_stage
from diagnose.benchmarks.expect import expected_busbw
from diagnose.connectors.base import Connection, Exec, Sink
from diagnose.core.hosts import Host
from diagnose.core.model import CommandOutput
from diagnose.core.units import bus_factor
from diagnose.launchers.base import LaunchOutcome, LaunchSpec
from tests.support.paths import FACTS

TOKEN = re.compile(r"@@diagnose-[0-9a-f]{16}")
BEGIN = re.compile(r"'(@@diagnose-[0-9a-f]{16}) OUT (\S+)'; printf")
# An NCCL INFO log of a two-node H100 run over InfiniBand with GPUDirect (captured; see its folder).
NCCL_LOG = FACTS / "nccl_log" / "ib_gdrdma_two_nodes" / "input.log"


@dataclass
class Replies:
    """What every simulated host answers: each command key's captured output, and the measured seconds a
    login and a batch took (each simulated host draws from them)."""

    outputs: dict[str, CommandOutput]
    connect_s: Sequence[float] = (0.0,)
    batch_s: Sequence[float] = (0.0,)
    seed: int = 28
    _rng: random.Random = field(init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)

    def draw(self, samples: Sequence[float]) -> float:
        with self._lock:
            return self._rng.choice(samples)

    def framed(self, script: str) -> tuple[bytes, bytes]:
        """The two outputs a shell running ``script`` (a ``batch_script``) would print, with these replies.

        A key without a captured reply answers as a missing tool would (exit 127), never as a pass.
        """
        found = BEGIN.findall(script)
        token = found[0][0] if found else TOKEN.search(script).group(0)  # type: ignore[union-attr]
        out, err = [f"{token} SID {os.getpid()}\n"], []
        for _, key in found:
            reply = self.outputs.get(key) or CommandOutput(stderr=f"{key}: not captured", exit_code=127)
            code = reply.exit_code if reply.exit_code is not None else 0
            out.append(f"{token} OUT {key}\n{reply.stdout}\n{token} END {key} {code} timeout\n")
            err.append(f"{token} OUT {key}\n{reply.stderr}\n{token} END {key}\n")
        return "".join(out).encode(), "".join(err).encode()


class SimulatedHost(Connection):
    """One simulated host: a login that takes a measured time, batches answered from :class:`Replies`."""

    replies: Replies  # set by :func:`simulated_hosts`

    def open(self) -> None:
        time.sleep(self.replies.draw(self.replies.connect_s))

    def _execute(
        self, script: str, stdin: bytes | None, out: Sink, err: Sink, deadline: Callable[[], float]
    ) -> Exec:
        if BEGIN.search(script) is None:  # a stop or a kill of a session: nothing runs on a simulated host
            return Exec(exit_code=0)
        stdout, stderr = self.replies.framed(script)
        time.sleep(self.replies.draw(self.replies.batch_s))
        out(stdout)
        err(stderr)
        return Exec(exit_code=0)


@contextmanager
def simulated_hosts(replies: Replies, connection: str = "ssh") -> Iterator[None]:
    """Hosts of ``ansible_connection: <connection>`` are simulated ones inside the block."""

    class Bound(SimulatedHost):
        pass

    Bound.replies = replies
    before = connectors.CONNECTORS[connection]
    connectors.CONNECTORS[connection] = lambda host, _accept, _known: Bound(host)
    try:
        yield
    finally:
        connectors.CONNECTORS[connection] = before


@dataclass
class Fabric:
    """The simulated fabric: each host's share of the expected bus bandwidth (1.0 healthy), the seconds a
    launch takes, and every launch made (hosts per launch)."""

    slow: dict[str, float] = field(default_factory=dict)
    launch_s: float = 0.0
    noise: float = 0.02
    launches: list[int] = field(default_factory=list)
    seed: int = 28

    def launch(self, spec: LaunchSpec) -> LaunchOutcome:
        """A finished sweep over ``spec.hosts``: each row at the expected busbw scaled by the slowest host
        of the group (a collective runs at its slowest member's pace), with a little noise."""
        rng = random.Random(f"{self.seed}-{len(self.launches)}")
        self.launches.append(len(spec.hosts))
        time.sleep(self.launch_s)
        first = spec.hosts[0]
        share = min((self.slow.get(h.name, 1.0) for h in spec.hosts), default=1.0)
        rows: list[dict[str, Any]] = []
        ranks = len(spec.hosts) * spec.nproc
        for collective, nbytes in spec.expected_rows:
            expected = expected_busbw(collective, len(spec.hosts), spec.nproc, first.vars)
            peak = expected.expected_gbps or 100.0
            # small messages are latency-bound: they reach the peak only from about 64 MiB on
            busbw = (
                peak * share * min(1.0, nbytes / (64 << 20)) ** 0.5 * (1 + rng.uniform(-1, 1) * self.noise)
            )
            algbw = busbw / bus_factor(collective, ranks)
            rows.append(
                {
                    "collective": collective,
                    "bytes": nbytes,
                    "time_us": nbytes / (algbw * 1e3) if algbw else 0.0,
                    "algbw_gbps": algbw,
                    "busbw_gbps": busbw,
                    "wrong": 0,
                }
            )
        log = Path(spec.out_dir) / "raw" / "nccl-simulated.log"
        if not log.exists():
            log.parent.mkdir(parents=True, exist_ok=True)
            log.write_text(NCCL_LOG.read_text())
        return LaunchOutcome(
            "done",
            "",
            rows=rows,
            start={"event": "start", "ranks": ranks, "backend": spec.backend},
            logs={0: log},
            rank_hosts={
                rank: spec.hosts[rank // spec.nproc].name for rank in range(min(ranks, 2 * spec.nproc))
            },
        )


@contextmanager
def simulated_fabric(fabric: Fabric) -> Iterator[Fabric]:
    """The benchmark stage's sweeps (and the localization's group launches) run on ``fabric`` inside."""
    before = bench_stage.launch
    bench_stage.launch = fabric.launch
    try:
        yield fabric
    finally:
        bench_stage.launch = before


def capture(host: Host, connection: Connection, commands: Sequence[Any]) -> dict[str, CommandOutput]:
    """One real batch of ``commands`` on a real host: the replies a simulated host gives."""
    return connection.run_batch(commands, timeout_cap=host.vars.float("command_timeout_s", None))
