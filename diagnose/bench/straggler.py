"""Find the slow host(s) behind a multi-node result that fell short, by running host pairs.

A collective over N nodes runs at the pace of its slowest link, so one bad NIC, cable or switch port
drags the whole cluster's busbw down without saying where. Pairs isolate it: first every host in a
disjoint pair (all pairs at once — they share no host), then each host of a slow pair (and the odd one
out) against a host already seen fast, until every suspect is either cleared or confirmed. A host is
named slow only when it was slow with a partner that is fast elsewhere; when no pair is fast at all the
shortfall is cluster-wide (a fabric setting, a congested spine), not a straggler, and the search says so.

This module only decides which pairs to run next and what the measurements mean; the stage runs them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

Pair = tuple[str, str]


@dataclass
class StragglerSearch:
    """State of one search. ``low_gbps`` is the bottom of the normal range for two nodes."""

    hosts: list[str]
    low_gbps: float
    max_rounds: int = 4
    results: dict[Pair, float | None] = field(default_factory=dict)
    rounds: int = 0

    def _slow(self, value: float | None) -> bool:
        return value is None or value < self.low_gbps

    def fast_hosts(self) -> list[str]:
        fast = {h for pair, value in self.results.items() if not self._slow(value) for h in pair}
        return [h for h in self.hosts if h in fast]

    def suspects(self) -> list[str]:
        """Hosts with no fast pair yet: in a slow pair, or never measured."""
        fast = set(self.fast_hosts())
        return [h for h in self.hosts if h not in fast]

    def _confirmed(self, host: str) -> bool:
        """Slow together with a partner that has a fast pair elsewhere."""
        fast = set(self.fast_hosts())
        return any(
            host in pair and self._slow(value) and (set(pair) - {host}) <= fast
            for pair, value in self.results.items()
        )

    def next_round(self) -> list[Pair]:
        """Disjoint pairs to measure next; empty when the search is over."""
        if self.rounds >= self.max_rounds:
            return []
        if not self.results:
            pairs = [(self.hosts[i], self.hosts[i + 1]) for i in range(0, len(self.hosts) - 1, 2)]
        else:
            free = self.fast_hosts()
            pairs = []
            for suspect in (h for h in self.suspects() if not self._confirmed(h)):
                partner = next(
                    (
                        f
                        for f in free
                        if (f, suspect) not in self.results and (suspect, f) not in self.results
                    ),
                    None,
                )
                if partner is not None:
                    free.remove(partner)
                    pairs.append((partner, suspect))
        if pairs:
            self.rounds += 1
        return pairs

    def record(self, pair: Pair, busbw_gbps: float | None) -> None:
        """busbw of one pair run; None when the pair failed or hung (as bad as slow)."""
        self.results[pair] = busbw_gbps

    def slow_hosts(self) -> list[str]:
        return [h for h in self.hosts if self._confirmed(h)]

    def cluster_wide(self) -> bool:
        """Every measured pair was slow: nothing to single out."""
        return bool(self.results) and not self.fast_hosts()

    def summary(self) -> str:
        def show(value: float | None) -> str:
            return "failed" if value is None else f"{value:.0f} GB/s"

        measured = ", ".join(f"{a}+{b}: {show(v)}" for (a, b), v in self.results.items())
        return f"pairs (normal from {self.low_gbps:.0f} GB/s): {measured}"
