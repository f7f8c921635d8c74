"""Whether a component is getting worse night after night: the pure trend judgement behind ``history.watch``.

Regressions compare one night with the last good one and catch steps; this module reads the slow drift that
stays inside every limit until the night it does not (a GPU's correctable ECC climbing toward a row-remap
failure, an optical module warming toward its alarm, a port's symbol errors accelerating). One series is one
metric of one physical component; the caller (the watch list's wiring) decides the metric catalog and passes
``shape``, ``worse`` and ``limit`` in each :class:`Series`.

How a series is judged, over its newest :data:`WINDOW` nights only (bounded work, and an old history does not
dilute a new trend):

* **counters** are cumulative readings judged on their increase: a counter that stays flat is never watched,
  and a reading lower than the one before is a reset (a cleared counter or a new part under the same name),
  so only the nights after the last reset count;
* **slope** is Theil–Sen's (the median of all pairwise slopes), robust to a single wild night; for a counter
  it is its typical increase per night; **acceleration** is the change of that slope between the older and
  the newer half of the readings the series has in the window (not the window's columns: a nightly begun
  eight nights ago has four readings in each half, and none in the window's older columns), per night²;
* **sustained**: at least :data:`MIN_MOVES` of the newest :data:`RECENT` nights moved the worse way (a
  counter rose; a level stood beyond its own older half's median by :data:`MOVE_SIGMA` noise deviations, its
  own noise but never less than its peers' median, which five readings cannot tell apart from luck) and
  Kendall's tau of the window, signed the worse way, is at least :data:`MIN_TAU`;
* **watched** when sustained and either the projection to ``limit`` falls within :data:`HORIZON` nights (and
  within :data:`REACH` times the nights its readings span, so a young series is not projected far), or
  the slope stands out of the same metric+model peers' slopes by :data:`MIN_Z` robust deviations while the
  component still gets worse (a level's newer half still moves the worse way; a counter's rate in the newer
  half exceeds the older half's by :data:`MIN_RISE_Z` Poisson deviations, each half's rate counted over the
  nights that half spans: a steady rate, however far above
  the peers', is a known condition, not a trend).
* **counting steadily**: a counter sustained the worse way but not watched (its rate does not rise) is listed
  apart (:class:`Steady`), with its rate and how many of its group count steadily too; a later rise is
  judged against that rate, the older half's.
* where the peers' slopes have no spread at all (MAD zero: all flat), the reason says so in words; a z
  divided by nothing is not a figure an operator can read.
* **projection** of a level uses a cautious slope, the :data:`CAUTION` quantile of the pairwise slopes
  toward the limit, so a short, noisy window does not project a near crossing; a counter's projection uses
  its newer half's rate and the acceleration.
  Without peers (fewer than :data:`MIN_PEERS`) the component is held against its own noise instead: its drift
  over the window must reach :data:`MIN_OWN` noise deviations.

Every threshold was measured by ``bench/watch.py`` on simulated fleets; docs/watch-simulation.md gives the
tables and why each value was chosen.
"""

from __future__ import annotations

import math
import warnings
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

#: Nights judged: the newest ones of the series (calendar nights, gaps allowed).
WINDOW = 14
#: The newest nights in which movement the worse way is counted.
RECENT = 7
#: Moves the worse way needed among the :data:`RECENT` nights.
MIN_MOVES = 3
#: Kendall's tau of the window, signed the worse way, needed: the movement is monotone, not noise.
MIN_TAU = 0.4
#: A level night moved when beyond its window's first-half median by this many noise deviations.
MOVE_SIGMA = 2.0
#: Nights ahead within which a projected limit crossing is watched.
HORIZON = 30.0
#: A projection reaches at most this many times the nights its readings span: :data:`HORIZON` over a full
#: window, less for a young series (five nights of noise projected 30 nights ahead cross many a limit).
REACH = HORIZON / (WINDOW - 1)
#: Robust z of the slope among peers that counts as standing out.
MIN_Z = 6.0
#: Peers (other components of the same metric and model) needed for a fleet comparison.
MIN_PEERS = 4
#: Without peers: the drift over the window, in own noise deviations, that counts as standing out.
MIN_OWN = 8.0
#: A counter's rate still rises when the newer half's exceeds the older half's by this many Poisson deviations.
MIN_RISE_Z = 3.0
#: Quantile of the pairwise slopes (toward the limit) a level's projection uses.
CAUTION = 0.25
#: Points a series needs in the window to be judged at all.
MIN_POINTS = 5
#: 1.4826 × MAD estimates the standard deviation of normally distributed values.
MAD_SCALE = 1.4826
#: Rows judged at once: bounds the pairwise-slope arrays (rows × pairs) whatever the fleet's size.
CHUNK = 4096


@dataclass(frozen=True)
class Series:
    """One metric of one physical component over the nights it was read."""

    component: str  # stable id: "gpu:<serial>", "port:<guid>/<n>", "cable:<serial>"
    metric: str  # e.g. "gpu.ecc_corrected_volatile", "ib.symbol_errors", "cable.rx_power_dbm"
    model: str  # peer group for the fleet comparison
    nights: tuple[float, ...]  # ascending night index or epoch days; gaps allowed
    values: tuple[float, ...]  # same length; cumulative for counters, readings for levels
    shape: str  # "counter" | "level"
    worse: int  # +1: higher is worse; -1: lower is worse
    limit: float | None = None  # the value at which the component fails or alarms, if known


@dataclass(frozen=True)
class Watch:
    """A component on the watch list: what moved, how fast, and how soon it reaches its limit."""

    component: str
    metric: str
    first: float  # value at the start of the window judged
    last: float  # latest value
    nights: int  # nights the window spans
    slope_per_night: float  # robust slope, as measured (sign of the data)
    acceleration: float  # change of slope between window halves, per night²; 0 when unknown
    nights_to_limit: float | None  # projection where a limit is set and approached, else None
    versus_fleet: float | None  # robust z of the slope among peers; None without enough peers or when they
    # all stayed flat (no spread to count deviations in: the reason says so in words)
    reason: str  # one sentence an operator reads


@dataclass(frozen=True)
class Trends:
    """The judgement of a matrix of aligned series (rows), each array one value per row (NaN: not known)."""

    watched: np.ndarray  # bool
    slope: np.ndarray
    acceleration: np.ndarray
    nights_to_limit: np.ndarray
    versus_fleet: np.ndarray
    first: np.ndarray
    last: np.ndarray
    span: np.ndarray
    steady: np.ndarray  # bool: a counter counting the same amount night after night, not watched
    rate_old: np.ndarray  # slope of the older half of the readings the row has
    rate_new: np.ndarray  # and of the newer half
    peers_flat: bool = False  # the peers' slopes have no spread (MAD zero)


def _pairs(columns: int) -> tuple[np.ndarray, np.ndarray]:
    i, j = np.triu_indices(columns, k=1)
    return i, j


def _nanmedian(a: np.ndarray) -> np.ndarray:
    """Row medians ignoring NaN; all-NaN rows give NaN without numpy's warning."""
    gaps = np.isnan(a)
    if not gaps.any():
        return np.median(a, axis=1) if a.shape[1] else np.full(a.shape[0], np.nan)
    out = np.full(a.shape[0], np.nan)
    ok = ~np.all(gaps, axis=1)
    if ok.any():
        out[ok] = np.nanmedian(a[ok], axis=1)
    return out


def _tau(values: np.ndarray) -> np.ndarray:
    """Kendall's tau of each row against time (ties count zero), NaN ignored: how monotone the row is."""
    i, j = _pairs(values.shape[1])
    diff = values[:, j] - values[:, i]
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.nansum(np.sign(diff), axis=1) / np.sum(~np.isnan(diff), axis=1)


def _drop_before_reset(nights: np.ndarray, values: np.ndarray) -> None:
    """Blank (NaN) a counter's readings before its last reset, in place: after it, a new count begins."""
    valid = ~np.isnan(values)
    cols = np.arange(values.shape[1])
    last_seen = np.maximum.accumulate(np.where(valid, cols, -1), axis=1)
    prev = np.concatenate([np.full((values.shape[0], 1), -1), last_seen[:, :-1]], axis=1)
    prev_value = np.take_along_axis(values, np.maximum(prev, 0), axis=1)
    reset = valid & (prev >= 0) & (values < prev_value)
    start = np.where(reset, cols, 0).max(axis=1)
    before = cols[None, :] < start[:, None]
    values[before] = np.nan
    nights[before] = np.nan


def _halves(nights: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each row's older and newer half of the readings it has (columns, as masks): a series that began a week
    ago has no reading in the window's older columns, yet its first nights are still its own past."""
    valid = ~np.isnan(values) & ~np.isnan(nights)
    rank = np.cumsum(valid, axis=1) - 1
    count = valid.sum(axis=1, keepdims=True)
    older = valid & (rank < count // 2)
    newer = valid & (rank >= count - count // 2)
    return older, newer


def _span(nights: np.ndarray) -> np.ndarray:
    """Nights from each row's first reading to its last (NaN where it has none)."""
    with np.errstate(invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.nanmax(nights, axis=1) - np.nanmin(nights, axis=1)


def _judge_rows(
    nights: np.ndarray, values: np.ndarray, counter: bool, worse: np.ndarray, limited: np.ndarray
) -> dict:
    """Own-series statistics of a chunk of rows (columns ordered oldest first)."""
    rows, columns = values.shape
    i, j = _pairs(columns)
    dv = values[:, j] - values[:, i]
    dn = nights[:, j] - nights[:, i]
    with np.errstate(invalid="ignore", divide="ignore"):
        slopes = dv / dn
    slope = _nanmedian(slopes)
    older_col, newer_col = _halves(nights, values)
    slope_old = _nanmedian(np.where(older_col[:, i] & older_col[:, j], slopes, np.nan))
    slope_new = _nanmedian(np.where(newer_col[:, i] & newer_col[:, j], slopes, np.nan))
    tau = _tau(values) * worse
    mid_old = _nanmedian(np.where(older_col, nights, np.nan))
    mid_new = _nanmedian(np.where(newer_col, nights, np.nan))
    with np.errstate(invalid="ignore", divide="ignore"):
        acceleration = np.where(mid_new > mid_old, (slope_new - slope_old) / (mid_new - mid_old), 0.0)
    acceleration = np.nan_to_num(acceleration)
    recent = values[:, -RECENT:]
    if counter:
        valid = ~np.isnan(values)
        previous = np.maximum.accumulate(np.where(valid, values, -np.inf), axis=1)[:, :-1]
        night_before = np.maximum.accumulate(np.where(valid, nights, -np.inf), axis=1)[:, :-1]
        with np.errstate(invalid="ignore", divide="ignore"):
            step = np.where(
                np.isfinite(previous), (values[:, 1:] - previous) / (nights[:, 1:] - night_before), np.nan
            )
        moves = np.sum((step[:, -RECENT:] * worse[:, None]) > 0, axis=1)
        noise = np.zeros(rows)
        spans = [
            np.maximum(np.nan_to_num(_span(np.where(half, nights, np.nan))), 1.0)
            for half in (older_col, newer_col)
        ]
        with np.errstate(invalid="ignore", divide="ignore"):
            deviation = np.sqrt(np.abs(slope_old) / spans[0] + np.abs(slope_new) / spans[1])
            rise = (slope_new - slope_old) * worse / deviation
        still = np.nan_to_num(rise) >= MIN_RISE_Z
        cautious = slope_new
    else:
        intercept = _nanmedian(values - slope[:, None] * nights)
        residual = values - slope[:, None] * nights - intercept[:, None]
        noise = MAD_SCALE * _nanmedian(np.abs(residual))
        baseline = _nanmedian(np.where(older_col, values, np.nan))
        excess = (recent - baseline[:, None]) * worse[:, None]
        floor = np.maximum(noise, 1e-12 * np.maximum(np.abs(baseline), 1.0))
        moves = np.zeros(rows)  # counted by the caller, once the peers' noise is known
        still = slope_new * worse > 0
        cautious = np.full(rows, np.nan)
        if limited.any():
            toward = slopes[limited] * worse[limited, None]
            cautious[limited] = np.nanquantile(toward, CAUTION, axis=1) * worse[limited]
    return {
        "slope": slope,
        "acceleration": acceleration,
        "tau": tau,
        "moves": moves,
        "noise": noise,
        "still": still,
        "slope_old": slope_old,
        "slope_new": slope_new,
        "cautious": cautious,
        **({} if counter else {"excess": excess, "floor": floor}),
    }


def judge_matrix(
    nights: np.ndarray,
    values: np.ndarray,
    shape: str,
    worse: int,
    limits: np.ndarray | None = None,
    peers: bool = True,
) -> Trends:
    """Judge aligned series of one metric and model at once: row r of ``nights``/``values`` (rows × columns,
    oldest column first, NaN where a night is missing) is one component over the window.

    The vectorised form of :func:`judge_fleet`, which calls it per group; a simulation of a whole fleet calls
    it directly night after night. ``peers`` False judges each row against its own noise only.
    """
    nights = np.array(nights, dtype=float)
    values = np.array(values, dtype=float)
    rows, columns = values.shape
    counter = shape == "counter"
    if counter:
        _drop_before_reset(nights, values)
    limit = np.full(rows, np.nan) if limits is None else np.asarray(limits, dtype=float)
    sign = np.full(rows, float(worse))
    points = np.sum(~np.isnan(values), axis=1)
    first_col = np.argmax(~np.isnan(values), axis=1)
    last_col = columns - 1 - np.argmax(~np.isnan(values[:, ::-1]), axis=1)
    take = np.arange(rows)
    first = np.where(points > 0, values[take, first_col], np.nan)
    last = np.where(points > 0, values[take, last_col], np.nan)
    span = np.where(points > 0, nights[take, last_col] - nights[take, first_col], 0.0)
    judged = points >= MIN_POINTS
    moving = judged & ((last != first) if counter else judged)
    stats = {
        key: np.zeros(rows)
        for key in ("slope", "acceleration", "tau", "moves", "noise", "slope_old", "slope_new", "cautious")
    }
    stats["still"] = np.zeros(rows, dtype=bool)
    stats["excess"] = np.full((rows, min(RECENT, columns)), np.nan)
    stats["floor"] = np.zeros(rows)
    index = np.flatnonzero(moving)
    for start in range(0, len(index), CHUNK):
        part = index[start : start + CHUNK]
        got = _judge_rows(nights[part], values[part], counter, sign[part], ~np.isnan(limit[part]))
        for key, array in got.items():
            stats[key][part] = array
    slope = np.where(judged, stats["slope"], np.nan)
    if not counter:
        stats["moves"] = _level_moves(stats, judged, peers and judged.sum() > MIN_PEERS)
    versus = np.full(rows, np.nan)
    flat = False
    if peers and judged.sum() > MIN_PEERS:
        versus, flat = _versus_fleet(slope, stats, span, points, counter, worse)
    sustained = (stats["moves"] >= MIN_MOVES) & (stats["tau"] >= MIN_TAU) & moving
    to_limit = _nights_to_limit(last, limit, stats, counter, worse)
    own = np.abs(slope) * span / np.maximum(stats["noise"], 1e-300)
    out_of_fleet = np.where(np.isnan(versus), (own >= MIN_OWN) & (not counter), versus >= MIN_Z)
    horizon = np.minimum(HORIZON, REACH * span)
    watched = sustained & ((to_limit <= horizon) | (out_of_fleet & stats["still"]))
    steady = sustained & ~watched & (np.nan_to_num(slope) * worse > 0) if counter else np.zeros(rows, bool)
    rate_old = np.where(judged, stats["slope_old"], np.nan)
    rate_new = np.where(judged, stats["slope_new"], np.nan)
    return Trends(
        watched,
        slope,
        stats["acceleration"],
        to_limit,
        versus,
        first,
        last,
        span,
        steady,
        rate_old,
        rate_new,
        flat,
    )


def _level_moves(stats: dict, judged: np.ndarray, peers: bool) -> np.ndarray:
    """The newest nights a level stood beyond its older half's median by :data:`MOVE_SIGMA` noise deviations.

    The noise is the row's own, but never below its peers' median: five readings cannot tell their own noise
    (their residuals are as often a third of it as not), and a young fleet then watched its healthy parts
    for wandering within it."""
    floor = stats["floor"]
    if peers:
        floor = np.maximum(floor, float(np.median(stats["noise"][judged])))
    with np.errstate(invalid="ignore"):
        return np.sum(stats["excess"] > MOVE_SIGMA * floor[:, None], axis=1)


def _versus_fleet(
    slope: np.ndarray, stats: dict, span: np.ndarray, points: np.ndarray, counter: bool, worse: int
) -> tuple[np.ndarray, bool]:
    """Robust z of each row's slope among all rows' (signed the worse way), with a floor on the spread, and
    whether the peers had no spread at all.

    Peers that all sit still (the usual counter: zero) have no spread; the floor is what one row's own slope
    could not tell apart from nothing: a single count over the window for counters, the slope's standard error
    from its own noise for levels (the median over peers). Levels read exactly alike night after night leave
    no floor either, and the z becomes a number of 300 digits: the caller says "its peers stayed flat".
    """
    known = ~np.isnan(slope)
    center = float(np.median(slope[known]))
    spread = MAD_SCALE * float(np.median(np.abs(slope[known] - center)))
    with np.errstate(invalid="ignore", divide="ignore"):
        if counter:
            floor = float(np.median(1.0 / np.maximum(span[known], 1.0)))
        else:
            k = np.maximum(points[known], 3).astype(float)
            floor = float(np.median(stats["noise"][known] * np.sqrt(12.0 / (k * (k * k - 1.0)))))
    scale = max(spread, floor, 1e-300)
    return (slope - center) * worse / scale, spread == 0.0


def _nights_to_limit(
    last: np.ndarray, limit: np.ndarray, stats: dict, counter: bool, worse: int
) -> np.ndarray:
    """Nights until ``limit`` at the current rate (a counter's with its acceleration); NaN when not approached."""
    gap = (limit - last) * worse
    rate = stats["cautious"]
    rate = np.nan_to_num(rate) * worse
    out = np.full(last.shape, np.nan)
    reached = gap <= 0
    out[reached] = 0.0
    if counter:
        accel = np.maximum(np.nan_to_num(stats["acceleration"]) * worse, 0.0)
        with np.errstate(invalid="ignore", divide="ignore"):
            quad = np.where(
                accel > 0,
                (-rate + np.sqrt(rate * rate + 2.0 * accel * np.maximum(gap, 0)))
                / np.where(accel > 0, accel, 1),
                gap / rate,
            )
        approach = ~reached & ((rate > 0) | (accel > 0)) & (gap > 0)
        out[approach] = quad[approach]
    else:
        approach = ~reached & (rate > 0) & (gap > 0)
        out[approach] = gap[approach] / rate[approach]
    return out


def _window(series: Sequence[Series], latest: float) -> tuple[np.ndarray, np.ndarray]:
    """Align series on window columns by age in nights (column 0 oldest); the newest reading of a night wins."""
    nights = np.full((len(series), WINDOW), np.nan)
    values = np.full((len(series), WINDOW), np.nan)
    reference: tuple[float, ...] | None = None
    fast: list[int] = []
    for row, s in enumerate(series):
        tail = _tail(s.nights, latest)
        if tail == 0:
            continue
        ns = s.nights[-tail:]
        if reference is None and tail == WINDOW and ns[-1] == latest:
            reference = ns
        if ns == reference:
            fast.append(row)
            continue
        for n, v in zip(ns, s.values[-tail:], strict=True):
            col = WINDOW - 1 - min(math.floor(latest - n), WINDOW - 1)
            nights[row, col] = n
            values[row, col] = v
    if fast and reference is not None:
        nights[fast] = np.asarray(reference)
        values[fast] = np.asarray([series[r].values[-WINDOW:] for r in fast], dtype=float)
    return nights, values


def _tail(nights: tuple[float, ...], latest: float) -> int:
    """How many of the newest readings fall within the window ending at ``latest``."""
    count = 0
    for n in reversed(nights):
        if latest - n >= WINDOW or count == WINDOW:
            break
        count += 1
    return count


def _reason(s: Series, trends: Trends, row: int, peers: int) -> str:
    """The operator's sentence: what moved, from what to what, over how many nights, and where it is heading."""
    first, last, span = float(trends.first[row]), float(trends.last[row]), round(float(trends.span[row]))
    slope = float(trends.slope[row])
    unit = "per night"
    words = f"{s.metric} went from {first:.4g} to {last:.4g} over {span} nights ({slope:+.3g} {unit}"
    if trends.acceleration[row] * s.worse > 0 and s.shape == "counter":
        words += ", accelerating"
    words += ")"
    before, now = float(trends.rate_old[row]), float(trends.rate_new[row])
    if s.shape == "counter" and before * s.worse > 0 and now * s.worse > before * s.worse:
        words += f"; it counted {before:+.3g} a night before, {now:+.3g} now"
    to_limit = float(trends.nights_to_limit[row])
    if not math.isnan(to_limit) and s.limit is not None:
        words += (
            f"; at or past its limit {s.limit:.4g}"
            if to_limit <= 0
            else f"; reaches its limit {s.limit:.4g} in about {max(1, round(to_limit))} nights"
        )
    z = float(trends.versus_fleet[row])
    if trends.peers_flat and not math.isnan(z):
        words += f"; its {peers} peers stayed flat" if peers > 1 else "; its peer stayed flat"
    elif not math.isnan(z):
        words += f"; {z:.1f} robust deviations off its peers' trend"
    return words


@dataclass(frozen=True)
class Steady:
    """A counter that counts about the same amount every night: not a trend (healthy parts do it too), but
    listed apart so that an operator sees its rate, and a later rise is judged against that rate."""

    component: str
    metric: str
    first: float
    last: float
    nights: int
    rate_per_night: float
    fleet_steady: int  # components of its group (metric and model) counting steadily, itself included
    fleet: int  # components in its group
    words: str  # "counting steadily: +40 a night for 8 nights; 3 ports of 96 do"


#: The word for a group of components, by the kind their identity names.
_PLURAL = {"gpu": "GPUs", "port": "ports", "cable": "cables"}


def _steady_words(s: Series, rate: float, nights: int, steady: int, fleet: int) -> str:
    noun = _PLURAL.get(s.component.split(":", 1)[0], "components")
    others = f"no other of its {fleet} {noun} does" if steady == 1 else f"{steady} {noun} of {fleet} do"
    return f"counting steadily: {rate:+.3g} a night for {nights} nights; {others}"


@dataclass(frozen=True)
class Verdicts:
    """A fleet's judgement: the watch list, and the counters counting steadily that are not on it."""

    watched: list[Watch]
    steady: list[Steady]


def _judge_group(group: Sequence[Series], peers: bool) -> tuple[list[Watch | None], list[Steady]]:
    latest = max(s.nights[-1] for s in group if s.nights)
    nights, values = _window(group, latest)
    limits = np.array([np.nan if s.limit is None else s.limit for s in group])
    head = group[0]
    trends = judge_matrix(nights, values, head.shape, head.worse, limits, peers=peers)
    out: list[Watch | None] = []
    for row, s in enumerate(group):
        if not trends.watched[row]:
            out.append(None)
            continue
        to_limit = float(trends.nights_to_limit[row])
        z = float(trends.versus_fleet[row])
        out.append(
            Watch(
                component=s.component,
                metric=s.metric,
                first=float(trends.first[row]),
                last=float(trends.last[row]),
                nights=round(float(trends.span[row])),
                slope_per_night=float(trends.slope[row]),
                acceleration=float(trends.acceleration[row]),
                nights_to_limit=None if math.isnan(to_limit) else to_limit,
                versus_fleet=None if math.isnan(z) or trends.peers_flat else z,
                reason=_reason(s, trends, row, len(group) - 1),
            )
        )
    count = int(trends.steady.sum())
    steady = []
    for row in np.flatnonzero(trends.steady):
        s, rate, span = group[row], float(trends.slope[row]), round(float(trends.span[row]))
        words = _steady_words(s, rate, span, count, len(group))
        first, last = float(trends.first[row]), float(trends.last[row])
        steady.append(Steady(s.component, s.metric, first, last, span, rate, count, len(group), words))
    return out, steady


def judge(series: Series, peers: Sequence[Series] = ()) -> Watch | None:
    """The watch entry of one series judged against its peers (same metric and model), or None."""
    if not series.nights:
        return None
    group = [series, *(p for p in peers if p.nights and p.shape == series.shape)]
    return _judge_group(group, peers=len(group) > MIN_PEERS)[0][0]


def judge_groups(series: Sequence[Series]) -> Verdicts:
    """A fleet grouped by (metric, model), each group judged against itself: what is watched, and which
    counters count steadily without being watched."""
    groups: dict[tuple[str, str, str, int], list[Series]] = defaultdict(list)
    for s in series:
        if s.nights:
            groups[(s.metric, s.model, s.shape, s.worse)].append(s)
    watched: list[Watch] = []
    steady: list[Steady] = []
    for key in sorted(groups):
        group = groups[key]
        found, counting = _judge_group(group, peers=len(group) > MIN_PEERS)
        watched.extend(w for w in found if w is not None)
        steady.extend(counting)
    return Verdicts(watched, steady)


def judge_fleet(series: Sequence[Series]) -> list[Watch]:
    """Every watched series of a fleet: grouped by (metric, model), each judged against its group."""
    return judge_groups(series).watched
