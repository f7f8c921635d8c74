"""Snapshots taken while the benchmarks run, for what only shows under load.

A GPU's PCIe link drops to Gen1 at idle to save power, so a generation read by the host stage says
nothing; the same reading taken while the collectives move data does. The sampler runs the commands of
the checks that judge under load (``Check.judge_under_load``) on every GPU host every few seconds, over
the connections the host stage opened, until the benchmark stage ends; the checks then judge all samples.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from types import TracebackType

from diagnose.connectors import Connection
from diagnose.core.check import Check, Facts
from diagnose.core.hosts import Host
from diagnose.engine.evaluate import evaluate_check

DEFAULT_INTERVAL_S = 2.0  # one nvidia-smi query, about 0.04 s of CPU on the host
_SAMPLE_TIMEOUT_S = 10.0


class LoadSampler:
    """A background thread sampling ``checks`` on ``hosts`` until the ``with`` block ends.

    ``samples[host][check_id]`` holds the parsed facts of every sample that answered; a sample that did
    not is left out (the benchmark stage has its own account of a host that stopped answering).
    """

    def __init__(
        self,
        hosts: Sequence[Host],
        connections: Mapping[str, Connection],
        checks: Sequence[Check],
        interval_s: float = DEFAULT_INTERVAL_S,
    ) -> None:
        self.hosts = [h for h in hosts if h.name in connections]
        self.connections = connections
        self.checks = list(checks)
        self.interval_s = interval_s
        self.samples: dict[str, dict[str, list[Facts]]] = {h.name: {} for h in self.hosts}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="load-sampler", daemon=True)

    def __enter__(self) -> LoadSampler:
        if self.hosts and self.checks:
            self._thread.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self._stop.set()
        # On Ctrl-C do not wait for a sample in flight: the run's stop ends its batch with all the others.
        if kind is None and self._thread.is_alive():
            self._thread.join(timeout=_SAMPLE_TIMEOUT_S + 2)

    def _loop(self) -> None:
        with ThreadPoolExecutor(max_workers=min(32, len(self.hosts)), thread_name_prefix="sample") as pool:
            while not self._stop.wait(self.interval_s):
                list(pool.map(self._sample, self.hosts))

    def _sample(self, host: Host) -> None:
        commands = {c.key: c for check in self.checks for c in check.host_commands(host.vars)}
        try:
            outputs = self.connections[host.name].run_batch(list(commands.values()), _SAMPLE_TIMEOUT_S)
        except Exception:  # a sample that fails is a sample not taken
            return
        for check in self.checks:
            _, facts = evaluate_check(check, outputs, host.vars, None)
            if facts is not None:
                self.samples[host.name].setdefault(check.id, []).append(facts)
