"""What a round of the search is made of: its host groups, the waves they run in, and the pieces a slow
group was cut into. Kept apart from the search's reasoning (:mod:`diagnose.localize.search`) because the
driver (:mod:`diagnose.localize.run`) schedules waves from these alone."""

from __future__ import annotations

from dataclasses import dataclass

from diagnose.localize.model import Edge, Group, Judged, Task


@dataclass
class Split:
    """A slow group cut into pieces this round, and the links no piece's ring uses any more."""

    parent: Group
    verdict: Judged | None  # the parent's own measurement (None for the full run)
    pieces: list[int]  # task indices
    lost: list[Edge]


@dataclass
class RoundPlan:
    """The groups of one round and the waves they run in (disjoint hosts within a wave)."""

    number: int
    tasks: list[Task]
    waves: list[list[int]]
    splits: list[Split]


def describe(group: Group) -> str:
    """A short name for a group in notes: its ends and size."""
    if len(group) <= 3:
        return "+".join(group)
    return f"{group[0]}…{group[-1]} ({len(group)} hosts)"


def chunk(group: Group, pieces: int) -> list[Group]:
    """``group`` cut into ``pieces`` contiguous runs whose sizes differ by at most one."""
    size, extra = divmod(len(group), pieces)
    out, start = [], 0
    for i in range(pieces):
        end = start + size + (1 if i >= pieces - extra else 0)
        out.append(group[start:end])
        start = end
    return out


def pack(tasks: list[Task], limit: int) -> list[list[int]]:
    """Task indices in waves: each task in the first wave with room (``limit``) and none of its hosts."""
    waves: list[list[int]] = []
    hosts: list[set[str]] = []
    for i, task in enumerate(tasks):
        group = set(task.group)
        for wave, used in zip(waves, hosts, strict=True):
            if len(wave) < limit and not used & group:
                wave.append(i)
                used |= group
                break
        else:
            waves.append([i])
            hosts.append(group)
    return waves


def next_wave(tasks: list[Task], open_tasks: list[int], counts: list[int], limit: int) -> list[int]:
    """Positions in ``open_tasks`` (indices into ``tasks``, measured ``counts`` times so far) for the next
    wave: the least measured first, as many as share no host, up to ``limit``. Open groups that share a
    host take turns instead of each repeat of them costing two waves."""
    order = sorted(range(len(open_tasks)), key=lambda k: (counts[open_tasks[k]], k))
    used: set[str] = set()
    wave: list[int] = []
    for k in order:
        group = tasks[open_tasks[k]].group
        if len(wave) < limit and used.isdisjoint(group):
            wave.append(k)
            used.update(group)
    return wave
