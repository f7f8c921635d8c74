"""The search for the slow host or link behind a collective that fell short, as a state machine.

It starts from the slow ring (the hosts in the order the collective ran over them) and works in
rounds; each round is a set of disjoint host groups measured at once, repeated, and judged against the
healthy groups of the same size measured in that round (:mod:`diagnose.localize.stats`).

1. **Narrow.** A slow group of more than three hosts is cut into contiguous pieces, as many as the
   concurrency allows (at least halves, at most pairs), so neighbours in the ring stay neighbours and
   the links the collective used are still used. From N hosts the pairs are reached in about
   ``log(N) / log(concurrency)`` rounds; with every host busy at once (concurrency 0, the default), in
   one, and then the seams between the pairs (and the ring's closing link), pairs too, are measured in
   the same round in a second wave: every link the group used is measured, a slow host shows as two
   slow neighbouring pairs and a slow link as one, however many there are. Otherwise, when every piece
   of a slow group is fast, what it lost by the cut is to blame: those links are measured next, alone.
2. **Attribute.** Each host of a slow group of two or three is measured with fresh partners already seen
   fast, as many in one round as its quorum still lacks and one more (each in its own wave). A host is
   accused once it is slow with ``quorum`` distinct partners that are fast elsewhere; one fast group
   clears a host (a slow member would have made it slow). If every host of a slow pair turns out fast,
   the pair's link is the suspect: it is accused after ``quorum`` slow measurements of the two alone.
   A slow pair with one end already fast elsewhere has its link measured in the same round as the other
   end's partners, so that a slow link next to a host the first round could not clear is not a round
   behind. No host is in more than ``quorum + 1`` groups of a round: each is a wave of every repeat.
3. **Reference.** Each round tops up every group size it measures with control groups of hosts already
   seen fast, so that there is always a healthy reference measured at the same time.

The search only decides what to measure and what the measurements mean; :func:`diagnose.localize.run
.localize` drives it through a :class:`~diagnose.localize.run.Measure`, real or simulated.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from statistics import median

from diagnose.core.units import counted
from diagnose.localize.model import (
    Accusation,
    Edge,
    Finding,
    Group,
    Judged,
    Settings,
    Step,
    Suspect,
    Task,
    Verdict,
    edge,
    ring_edges,
)
from diagnose.localize.rounds import RoundPlan, Split, chunk, describe, pack
from diagnose.localize.stats import Noise, critical_z, reference, t_tail

# A slow group of at most this many hosts is attributed host by host instead of being cut further.
SMALL = 3


@dataclass
class LinkTrial:
    link: Edge
    why: str
    slow: list[Judged] = field(default_factory=list)
    tries: int = 0


class Search:
    """One search over ``hosts`` (in ring order) whose full collective was slow."""

    def __init__(self, hosts: Sequence[str], settings: Settings, shortfall: float | None = None) -> None:
        """``shortfall``: the full run's busbw over what was expected of it (0.8: 20 % short), when known;
        a first cut whose slowest piece falls far less short leaves the links between pieces suspect."""
        if len(hosts) < 3 or len(set(hosts)) != len(hosts):
            raise ValueError("localization needs three distinct hosts or more")
        self.settings = settings
        self.ring: list[str] = list(hosts)
        self.position = {h: i for i, h in enumerate(self.ring)}
        self.suspects: list[tuple[Group, Judged | None]] = []  # slow groups to cut, with their verdict
        self.small: list[tuple[Group, Judged | None]] = []
        self.trials: dict[str, Group] = {}  # host under test → the slow group it came from
        self.tried: dict[str, set[str]] = {}  # host → partners it was measured with
        self.pairs_of: dict[str, list[Judged]] = {}  # host → every measured pair containing it
        self.fast_in: dict[str, list[Judged]] = {}  # host → the fast groups it was in
        self.links: dict[Edge, LinkTrial] = {}
        self.cleared: set[str] = set()
        self.cleared_edges: set[Edge] = set()
        self.accused: list[Accusation] = []
        self.accused_hosts: set[str] = set()
        self.unresolved: list[str] = []
        self.left: dict[str, Group] = {}  # an unresolved name → its hosts
        self.against: dict[str, list[Judged]] = {}  # host → the slow, failed or unclear groups it was in
        self.noise = Noise()
        self.pool: dict[int, list[float]] = {}  # healthy log-busbw by group size
        self.steps: list[Step] = []
        self.notes: list[str] = []
        self.launches = 0
        self.hosts_tried = 0
        self.links_tried = 0
        self.stopped: str | None = None
        root = Judged(Task(tuple(hosts), "split"), [], None, shortfall, None, None, "slow")
        self._take(tuple(hosts), root if shortfall is not None else None)

    # -- planning -----------------------------------------------------------------------------------------
    def plan(self) -> RoundPlan | None:
        """The next round's groups, or None when the search is over."""
        if self.stopped:
            return None
        limit = self.width
        tasks: list[Task] = []
        used: set[str] = set()
        quorum = self.settings.quorum
        # Each group a host is in this round is one more wave of every repeat: a host takes part in
        # at most one group more than the quorum.
        cap = quorum + 1
        wide = self.settings.concurrency == 0
        load: Counter[str] = Counter()

        def add(task: Task) -> None:
            tasks.append(task)
            used.update(task.group)
            load.update(task.group)

        def partners(host: str, count: int) -> int:
            added = 0
            while added < count and load[host] < cap and (partner := self._partner(host, used)) is not None:
                add(Task((partner, host), "partner", host))
                added += 1
            return added

        for link in self.links.values():
            if all(load[h] < cap for h in link.link):
                add(Task(link.link, "link", f"{link.link[0]}↔{link.link[1]}"))
        for host in list(self.trials):
            # With every host busy at once, the partners the quorum still lacks at once, and one more: a
            # partner left unclear by the noise would otherwise cost the host a round. Under a cap on
            # launches at once, one a round: more would take the room of the pieces still being cut.
            need = max(1, quorum - len(self._convicting(host))) + 1 if wide else 1
            if not partners(host, need) and load[host] < cap:  # no host left that it was not tried with
                self._give_up_host(host, "no partner left to measure it with")
        for link in self.links.values():
            for end in link.link if link.slow else ():
                short = quorum - len(self._fast_without(end, link.link))
                if end not in self.trials and short > 0:
                    partners(end, short + 1)  # one more than it lacks, as for a host
        splits = []
        suspects = list(self.suspects)
        room = max(0, limit - len(tasks))
        for group, verdict in suspects:
            count = max(2, min(len(group) // 2, room // len(suspects)))
            pieces = chunk(group, count)
            if wide and count == len(group) // 2 and count > 1:  # pairs: their seams are pairs too
                pieces += [(pieces[k][-1], pieces[(k + 1) % count][0]) for k in range(count)]
            index = list(range(len(tasks), len(tasks) + len(pieces)))
            tasks += [Task(piece, "split") for piece in pieces]
            used |= set(group)
            kept = {e for piece in pieces for e in ring_edges(piece)}
            splits.append(Split(group, verdict, index, [e for e in ring_edges(group) if e not in kept]))
        if not tasks:
            self._settle_leftovers()
            return None
        waves = pack(tasks, limit)
        room_left = sum(limit - len(w) for w in waves)
        first_control = len(tasks)
        for size, count in sorted(Counter(len(t.group) for t in tasks).items()):
            want = min(self.settings.min_reference - count, room_left)
            for control in self._controls(size, want, used):
                tasks.append(Task(control, "control"))
                used |= set(control)
                room_left -= 1
        for i in range(first_control, len(tasks)):
            wave = next(w for w in waves if len(w) < limit)
            wave.append(i)
        return RoundPlan(len(self.steps) + 1, tasks, waves, splits)

    def _partner(self, host: str, used: set[str]) -> str | None:
        """A fresh partner for ``host``: a host seen fast, not busy this round, not tried with it before;
        failing that, one busy this round (another wave); failing that, any host not tried with it."""
        tried = self.tried.get(host, set()) | {host}
        start = (self.position[host] + len(self.ring) // 2 + 7 * len(tried)) % len(self.ring)
        order = self.ring[start:] + self.ring[:start]
        for wanted in (
            lambda h: h in self.cleared and h not in used,
            lambda h: h in self.cleared,
            lambda h: h not in self.accused_hosts and h not in used,
            lambda h: h not in self.accused_hosts,
        ):
            for candidate in order:
                if candidate not in tried and wanted(candidate):
                    return candidate
        return None

    def _controls(self, size: int, count: int, used: set[str]) -> list[Group]:
        """Up to ``count`` groups of ``size`` neighbouring hosts, all seen fast and free this round."""
        out: list[Group] = []
        run: list[str] = []
        for host in self.ring:
            if len(out) >= count:
                break
            if host in self.cleared and host not in used and host not in self.accused_hosts:
                run.append(host)
                if len(run) == size:
                    out.append(tuple(run))
                    run = []
            else:
                run = []
        return out

    @property
    def width(self) -> int:
        """Launches at once: the concurrency, or with none set as many disjoint pairs as the hosts make."""
        return self.settings.concurrency or max(1, len(self.ring) // 2)

    def unclear(self, plan: RoundPlan, values: list[list[float | None]]) -> list[int]:
        """Tasks whose verdict is still open and that may be measured again (below ``max_repeats``): the
        round's further repeats go to these alone, not to the groups already clearly above or below."""
        judged, _, _ = self._judge(plan, values, keep=False)
        return [
            i
            for i, j in enumerate(judged)
            if j.verdict == "unclear" and len(values[i]) < self.settings.max_repeats
        ]

    @staticmethod
    def _logs(values: list[list[float | None]]) -> list[list[float]]:
        return [[math.log(v) for v in vals if v is not None and v > 0] for vals in values]

    # -- judging --------------------------------------------------------------------------------------------
    def _judge(
        self, plan: RoundPlan, values: list[list[float | None]], keep: bool = True
    ) -> tuple[list[Judged], float, float]:
        """Verdicts of a round's tasks; ``keep`` adds the round's repeats to the pooled noise for good (and
        works out each test's p, which only the record needs: a round of thousands is judged after every
        wave of repeats)."""
        s = self.settings
        logs = self._logs(values)
        round_noise = Noise()
        for lg in logs:
            round_noise.add(lg)
        noise = self.noise.merged(round_noise)
        if keep:
            self.noise = noise
        sigma = noise.sigma(s.noise_floor)
        dof = noise.dof
        # A group near the line is tested again after each of its repeats past the first ``repeats``: the
        # chance of a false flag is held over every look, not just one.
        looks = s.max_repeats - s.repeats + 1
        z_crit = critical_z(s.alpha, len(plan.tasks) * looks, dof)
        failed = [len(lg) < len(vals) for lg, vals in zip(logs, values, strict=True)]
        judged: list[Judged | None] = [None] * len(plan.tasks)
        sizes: dict[int, list[int]] = {}
        for i, task in enumerate(plan.tasks):
            sizes.setdefault(len(task.group), []).append(i)
        for size, index in sizes.items():
            live = [i for i in index if logs[i] and not failed[i]]
            means = [sum(logs[i]) / len(logs[i]) for i in live]
            errors = [sigma / math.sqrt(len(logs[i])) for i in live]
            if len(live) < 3:
                earlier = self.pool.get(size, [])
                means += earlier
                errors += [sigma / math.sqrt(s.repeats)] * len(earlier)
            ref = reference(means, errors, z_crit) if len(means) >= 2 else None
            for i in index:
                task, vals = plan.tasks[i], values[i]
                if failed[i]:
                    ratio = None
                    if ref is not None and logs[i]:
                        ratio = math.exp(sum(logs[i]) / len(logs[i]) - ref.center)
                    center = None if ref is None else math.exp(ref.center)
                    judged[i] = Judged(task, vals, center, ratio, math.inf, 0.0, "failed")
                    continue
                if ref is None or not logs[i]:
                    judged[i] = Judged(task, vals, None, None, None, None, "unjudged")
                    continue
                mean = sum(logs[i]) / len(logs[i])
                se = math.sqrt(sigma**2 / len(logs[i]) + ref.spread**2 + ref.se**2)
                z = (ref.center - mean) / se
                ratio = math.exp(mean - ref.center)
                above_slow = (mean - ref.center - math.log(1.0 - s.detect_deficit)) / se
                if dof == 0:
                    verdict: Verdict = "unclear"  # one value a group: the noise is not known yet
                elif z >= z_crit and 1.0 - ratio >= s.min_deficit:
                    verdict = "slow"
                elif above_slow >= s.z_power:
                    verdict = "ok"
                elif len(logs[i]) >= s.max_repeats and 1.0 - ratio < max(s.min_deficit, s.detect_deficit / 2):
                    # Out of repeats and closer to healthy than to a slow element, or short by less than
                    # anything worth naming: measuring it again as a suspect would only cost rounds.
                    verdict = "ok"
                else:
                    verdict = "unclear"
                p = t_tail(z, dof) if keep else None
                judged[i] = Judged(task, vals, math.exp(ref.center), ratio, z, p, verdict)
        return [j for j in judged if j is not None], sigma, z_crit

    # -- recording ------------------------------------------------------------------------------------------
    def record(self, plan: RoundPlan, values: list[list[float | None]], seconds: float, repeats: int) -> Step:
        """Judge a measured round and move the search on."""
        judged, sigma, z_crit = self._judge(plan, values)
        self.launches += sum(len(v) for v in values)
        step = Step(plan.number, repeats, len(plan.waves), seconds, judged, [], 100 * sigma, z_crit)
        cut = [split.parent for split in plan.splits]
        self.suspects = [(g, v) for g, v in self.suspects if g not in cut]
        for j in judged:
            if j.verdict == "ok":
                self.cleared |= set(j.task.group)
                self.cleared_edges |= set(ring_edges(j.task.group))
                logs = [math.log(v) for v in j.values if v is not None and v > 0]
                self.pool.setdefault(len(j.task.group), []).append(sum(logs) / len(logs))
                for host in j.task.group:
                    self.fast_in.setdefault(host, []).append(j)
            if j.verdict in ("slow", "failed", "unclear"):
                for host in j.task.group:
                    self.against.setdefault(host, []).append(j)
            if len(j.task.group) == 2:
                a, b = j.task.group
                self.tried.setdefault(a, set()).add(b)
                self.tried.setdefault(b, set()).add(a)
                for host in j.task.group:
                    self.pairs_of.setdefault(host, []).append(j)
        for j in judged:
            if j.task.role == "link":
                trial = self.links.get(edge(*j.task.group))
                if trial is not None:
                    trial.tries += 1
                    if j.verdict in ("slow", "failed"):
                        trial.slow.append(j)
            elif j.verdict in ("slow", "failed") and j.task.role in ("split", "control"):
                self._take(j.task.group, j)
            elif j.verdict in ("unclear", "unjudged") and j.task.role == "split":
                self._take(j.task.group, j)  # not cleared: still a suspect
        for split in plan.splits:
            why = self._unexplained(split, judged)
            if why:
                lost = [e for e in split.lost if e not in self.cleared_edges]
                if lost:
                    step.notes.append(
                        f"{why}: the {counted(len(lost), 'link')} the cut took out of its ring are measured alone next"
                    )
                for e in lost:
                    self._add_link(e, f"left out when slow {describe(split.parent)} was cut")
        step.notes += self._settle()
        self.steps.append(step)
        return step

    def _unexplained(self, split: Split, judged: list[Judged]) -> str:
        """Why the pieces of a slow group do not account for its slowness, or "" when they do.

        Either every piece is fast, or the group was clearly slower than its slowest piece: then something
        the cut removed (a link between two pieces) slowed it, whatever else the pieces hold."""
        pieces = [judged[i] for i in split.pieces]
        if all(j.verdict == "ok" for j in pieces):
            return f"every piece of slow {describe(split.parent)} is fast"
        parent = split.verdict.ratio if split.verdict is not None else None
        worst = min((j.ratio for j in pieces if j.ratio is not None), default=None)
        if parent is not None and worst is not None and parent < worst * (1 - self.settings.detect_deficit):
            return (
                f"slow {describe(split.parent)} (×{parent:.2f}) is clearly slower than its slowest piece "
                f"(×{worst:.2f})"
            )
        return ""

    def _fast_without(self, host: str, link: Edge) -> list[Judged]:
        """The fast groups ``host`` was in without the other end of ``link``, one per group."""
        other = link[1] if host == link[0] else link[0]
        return [j for j in self.fast_in.get(host, []) if other not in j.task.group]

    def _take(self, group: Group, judged: Judged | None) -> None:
        """A slow group: cut it further, or test its hosts one by one."""
        if len(group) > SMALL:
            self.suspects.append((group, judged))
            return
        self.small.append((group, judged))
        for host in group:
            if host not in self.cleared and host not in self.trials and host not in self.accused_hosts:
                self.trials[host] = group
                self.hosts_tried += 1
        slow = judged is not None and judged.verdict in ("slow", "failed")
        wide = self.settings.concurrency == 0
        if wide and len(group) == 2 and slow and any(h in self.cleared for h in group):
            # One end is fast with another host, so the pair's own link is as likely as the other end
            # (with every host busy at once, measuring it costs a wave of each repeat and nothing else):
            # it is measured again alongside that end's partners, not after them, and has its second
            # slow measurement a round earlier when the end turns out fast (when it is accused, the
            # link is dropped).
            self._add_link(edge(*group), f"{describe(group)} was slow")
            self._count_slow(edge(*group), judged)

    def _add_link(self, link: Edge, why: str) -> None:
        if link not in self.links and link not in self.cleared_edges:
            self.links[link] = LinkTrial(link, why)
            self.links_tried += 1

    def _count_slow(self, link: Edge, judged: Judged) -> None:
        """``judged``, a slow measurement of ``link``'s pair, counts once towards the link's quorum."""
        trial = self.links.get(link)
        if trial is not None and all(j is not judged for j in trial.slow):
            trial.slow.append(judged)

    def _convicting(self, host: str) -> list[Judged]:
        """Slow pairs of ``host`` whose partner is fast elsewhere, one per partner (the most telling)."""
        best: dict[str, Judged] = {}
        for j in self.pairs_of.get(host, []):
            partner = next(h for h in j.task.group if h != host)
            if j.verdict not in ("slow", "failed") or partner not in self.cleared:
                continue
            if partner not in best or (j.p or 0.0) < (best[partner].p or 0.0):
                best[partner] = j
        return sorted(best.values(), key=lambda j: j.p or 0.0)

    def _settle(self) -> list[str]:
        """Accuse, clear or give up on the hosts and links under test; turn explained-away slow pairs into
        link suspects."""
        notes: list[str] = []
        quorum = self.settings.quorum
        for host in list(self.trials):
            if host in self.cleared:
                del self.trials[host]
                continue
            convicting = self._convicting(host)
            if len(convicting) >= quorum:
                del self.trials[host]
                self._accuse_host(host, convicting)
                notes.append(f"{host} accused: slow with {len(convicting)} distinct partners fast elsewhere")
            elif len(self.tried.get(host, set())) >= 2 * (quorum + 1):
                self._give_up_host(host, f"no verdict after {2 * (quorum + 1)} partners")
        for group, judged in list(self.small):
            if any(h in self.trials for h in group):
                continue
            self.small.remove((group, judged))
            if any(h in self.accused_hosts for h in group) or any(h in self.unresolved for h in group):
                continue
            for link in ring_edges(group):
                if link in self.cleared_edges:
                    continue
                self._add_link(
                    link, f"{describe(group)} was slow while each of its hosts is fast with others"
                )
                if judged is not None and len(group) == 2 and judged.verdict in ("slow", "failed"):
                    self._count_slow(link, judged)
            notes.append(
                f"every host of slow {describe(group)} is fast with others: its links are the suspects"
            )
        for link, trial in list(self.links.items()):
            if link in self.cleared_edges or any(h in self.accused_hosts for h in link):
                del self.links[link]
            elif len(trial.slow) >= quorum and all(len(self._fast_without(h, link)) >= quorum for h in link):
                del self.links[link]
                self._accuse_link(trial)
                notes.append(
                    f"link {link[0]}↔{link[1]} accused: slow {len(trial.slow)} times, both hosts fast with others "
                    f"(suspected because {trial.why})"
                )
            elif trial.tries >= quorum + 2:
                del self.links[link]
                self._leave(f"{link[0]}↔{link[1]}", link)
        return notes

    def _confidence(self, evidence: list[Judged], tests: int) -> float:
        joint = 1.0
        for j in evidence[: self.settings.quorum]:
            joint *= j.p if j.p is not None else 1.0
        return max(0.0, 1.0 - min(1.0, max(1, tests) * joint))

    @staticmethod
    def _deficit(evidence: list[Judged]) -> float:
        return 1.0 - median(
            (j.ratio if j.verdict == "slow" and j.ratio is not None else 0.0) for j in evidence
        )

    def _accuse_host(self, host: str, evidence: list[Judged]) -> None:
        self.accused_hosts.add(host)
        confidence = self._confidence(evidence, self.hosts_tried)
        self.accused.append(Accusation("host", (host,), self._deficit(evidence), confidence, evidence))

    def _accuse_link(self, trial: LinkTrial) -> None:
        evidence = sorted(trial.slow, key=lambda j: j.p or 0.0)
        cleared_by = [j for h in trial.link for j in self._fast_without(h, trial.link)]
        confidence = self._confidence(evidence, self.links_tried)
        self.accused.append(
            Accusation("link", trial.link, self._deficit(evidence), confidence, evidence, cleared_by)
        )

    def _give_up_host(self, host: str, why: str) -> None:
        origin = self.trials.pop(host, (host,))
        if host not in self.unresolved:
            self._leave(host, (host,))
            self.notes.append(f"{host} (from slow {describe(origin)}): {why}")

    def _settle_leftovers(self) -> None:
        for group, _ in self.small:
            for h in group:
                if h not in self.cleared | self.accused_hosts and h not in self.unresolved:
                    self._leave(h, (h,))
        self.small = []

    def _leave(self, name: str, hosts: Group) -> None:
        """``name`` stays suspected without a verdict."""
        if name not in self.left:
            self.unresolved.append(name)
            self.left[name] = hosts

    def suspected(self) -> list[Suspect]:
        """Each unresolved host, link or group with the measurements against it (the slow, failed or
        unclear groups that held it; for a link, both its ends), the most short first: a search cut short
        still says where to look, and in which order. One that measures less than ``min_deficit`` short
        stays unresolved but is not named, as it would not be accused either."""
        out = []
        for name in dict.fromkeys(self.unresolved):
            hosts = self.left[name]
            members = set(hosts)
            seen: dict[int, Judged] = {}
            for j in self.against.get(hosts[0], []):
                if members <= set(j.task.group):
                    seen.setdefault(id(j), j)
            evidence = sorted(
                seen.values(), key=lambda j: (j.verdict == "unclear", j.p if j.p is not None else 1.0)
            )
            ratios = [j.ratio for j in evidence if j.ratio is not None]
            deficit = 1.0 - median(ratios) if ratios else None
            kind = "host" if len(hosts) == 1 else "link" if "↔" in name else "group"
            if deficit is None or deficit >= self.settings.min_deficit:  # less is not worth naming
                out.append(Suspect(kind, name, hosts, deficit, evidence[:4]))
        return sorted(out, key=lambda x: -(x.deficit or 0.0))

    # -- the end --------------------------------------------------------------------------------------------
    def stop(self, why: str) -> None:
        """End the search early (budget): everything still under suspicion is left unresolved."""
        self.stopped = why
        self.notes.append(why)
        for group, _ in self.suspects:
            self._leave(describe(group), group)
        for h in self.trials:
            if h not in self.accused_hosts:
                self._leave(h, (h,))
        for link in self.links:
            self._leave(f"{link[0]}↔{link[1]}", link)
        self._settle_leftovers()
        self.suspects, self.trials, self.links = [], {}, {}

    def finding(self, seconds: float) -> Finding:
        healthy = {size: math.exp(median(logs)) for size, logs in self.pool.items() if logs}
        if self.stopped:
            status = "incomplete"
        elif self.accused:
            status = "accused"
        else:
            status = "incomplete" if self.unresolved else "none"
        return Finding(
            status,
            list(self.accused),
            list(dict.fromkeys(self.unresolved)),
            list(self.steps),
            len(self.ring),
            self.launches,
            seconds,
            healthy,
            list(self.notes),
            self.stopped,
            self.suspected(),
        )
