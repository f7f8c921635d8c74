"""What one measurement costs in time: the model the simulator runs on and the driver budgets with.

A measurement is one launch of the collective over one host group, and its wall time is

    launch_s + per_node_s × nodes  +  passes × bytes × bus factor / busbw

* ``launch_s``: what every launch pays whatever it moves — starting torchrun on each host over SSH,
  copying the program, importing torch, the rendezvous, creating the communicator, the launcher's
  one-second polls, stopping and collecting the logs. A few seconds (see the defaults below for the figures
  they come from).
* ``per_node_s``: what grows with the group — the rendezvous and the communicator's set-up gather every
  rank, and more hosts answer the polls.
* the transfer: ``passes`` launches of the collective (warm-up, one untimed, the timed ones and the
  validation launch of diagnose's program) at ``bytes``, each moving bytes × the bus factor at the
  group's busbw.

Disjoint groups run at once, so a wave of launches lasts as long as its slowest one; the rounds' waves
and repeats run one after another.

Assumed, not measured: a wave costs the same however many launches it holds, 64 or 8,192. That takes a
controller that starts a launch on every host at once (one SSH session a host, as the host stage's
fan-out does) and a fabric that carries every pair's traffic without pairs sharing a link (a
non-blocking or rail-optimized fabric). Where pairs share oversubscribed links, a wide wave reads lower
than a narrow one, evenly (the round's reference absorbs it) or not (pairs behind a busy link look
slow); where either does not hold, ``localize_concurrency`` caps the launches at once and the search
takes more waves.
"""

from __future__ import annotations

from dataclasses import dataclass

from diagnose.core.units import bus_factor


@dataclass(frozen=True)
class TimeModel:
    """Seconds per launch.

    ``launch_s``: a gloo pair launch of 4 MiB all_reduce through diagnose's launcher (local connection,
    two ranks) took 13 to 20 s on this project's 2-core build machine under load, almost all of it
    starting Python and importing torch twice; cluster nodes import torch in a few seconds and set up a
    two-node NCCL communicator in one or two, so 10 s is the default, an estimate rather than a reading.
    ``per_node_s`` is an assumption too: communicator set-up over hundreds of nodes is reported to take
    tens of seconds.
    """

    launch_s: float = 10.0
    per_node_s: float = 0.1
    bytes: int = 1 << 30
    passes: int = 28  # 5 warm-up + 1 untimed + 20 timed + validation (two buffers' worth)
    collective: str = "all_reduce"

    def launch_seconds(self, nodes: int, busbw_gbps: float, ranks_per_node: int = 8) -> float:
        """Wall time of one launch over ``nodes`` hosts that measures ``busbw_gbps``."""
        transfer = 0.0
        if busbw_gbps > 0:
            factor = bus_factor(self.collective, nodes * ranks_per_node)
            transfer = self.passes * self.bytes * factor / (busbw_gbps * 1e9)
        return self.launch_s + self.per_node_s * nodes + transfer
