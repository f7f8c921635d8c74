"""The report's plots as inline SVG: busbw by message size, busbw trends, GPU clocks and heat under burn-in,
the NICs of every host by rail, the watch list's components night by night.

matplotlib's object API (``Figure``, no pyplot) keeps no global state, so rendering is safe to call from
any thread and leaves no figures behind. Text is written as SVG ``<text>`` (escaped by matplotlib's XML
writer) rather than glyph paths: the SVG stays small, and the PDF keeps the axis labels as searchable text.
Only numbers and fixed labels reach the plot; names from the results (hosts, collectives) stay in the HTML
around it, where autoescaping handles them.
"""

from __future__ import annotations

import io
import math
import re
from typing import Any

import matplotlib
from matplotlib.figure import Figure
from matplotlib.ticker import FixedLocator, NullLocator

from diagnose.core.units import gbps, human_bytes, number

_METADATA = re.compile(r"\s*<metadata>.*?</metadata>", re.DOTALL)
_ID = re.compile(r'(\bid="|xlink:href="#|url\(#)([^"\)]+)')
_STYLE = {
    "svg.fonttype": "none",
    "font.family": "DejaVu Sans",
    "font.size": 7.5,
    "axes.linewidth": 0.6,
    "text.parse_math": False,
}


def busbw_svg(
    rows: list[dict[str, Any]], expected: float | None, normal: tuple[float, float] | None, salt: str
) -> str:
    """The ``<svg>`` element of one sweep; ``salt`` prefixes its element ids, unique among plots on a page."""
    points = [
        (r["bytes"], float(r["busbw_gbps"]), bool(isinstance(r.get("wrong"), int) and r["wrong"] > 0))
        for r in rows
        if isinstance(r.get("bytes"), int) and r["bytes"] > 0 and isinstance(r.get("busbw_gbps"), int | float)
    ]
    with matplotlib.rc_context({**_STYLE, "svg.hashsalt": salt}):
        fig = Figure(figsize=(4.3, 2.6))
        ax = fig.add_subplot()
        ax.set_xscale("log", base=2)
        top = max([p[1] for p in points] + [normal[1] if normal else 0.0, expected or 0.0, 1.0]) * 1.15
        if normal is not None:
            label = f"normal range {number(normal[0], 0)}–{number(normal[1], 0)} GB/s"
            ax.axhspan(normal[0], normal[1], color="#2e7d32", alpha=0.14, lw=0, label=label)
        if expected is not None:
            ax.axhline(expected, color="#2e7d32", lw=0.8, ls="--", label=f"expected {gbps(expected, 0)}")
        if points:
            sizes = [p[0] for p in points]
            ax.plot(sizes, [p[1] for p in points], color="#1f4e79", lw=1.3, marker="o", ms=2.6, label="busbw")
            bad = [p for p in points if p[2]]
            if bad:
                ax.plot(
                    [p[0] for p in bad], [p[1] for p in bad], "x", color="#c62828", ms=6, label="wrong > 0"
                )
            ticks = _ticks(min(sizes), max(sizes))
            ax.xaxis.set_major_locator(FixedLocator(ticks))
            ax.xaxis.set_minor_locator(NullLocator())
            ax.set_xticks(ticks, [human_bytes(t) for t in ticks])
            ax.set_xlim(min(sizes) / 1.3, max(sizes) * 1.3)
        else:
            ax.text(0.5, 0.5, "no rows", ha="center", va="center", transform=ax.transAxes)
        ax.set_ylim(0, top)
        ax.set_xlabel("message size (log scale)")
        ax.set_ylabel("busbw (GB/s)")
        ax.grid(True, which="major", lw=0.3, color="#bbbbbb")
        ax.tick_params(axis="x", labelrotation=35, labelsize=6.5)
        _legend(ax, loc="upper left", fontsize=6.5, frameon=False)
        fig.tight_layout(pad=0.4)
        buffer = io.StringIO()
        fig.savefig(buffer, format="svg", metadata={"Date": None, "Creator": None})
    return _finish(buffer.getvalue(), salt)


def _legend(ax: Any, **options: Any) -> None:
    """A legend where something is labelled: matplotlib warns on an empty one ("No artists with labels
    found"), and that warning would reach a cron job's mail from a plot with no rows."""
    if ax.get_legend_handles_labels()[0]:
        ax.legend(**options)


def _finish(svg: str, salt: str) -> str:
    """The bare ``<svg>`` element, its ids prefixed with ``salt``.

    matplotlib numbers its groups figure_1, line2d_1, ... in every figure; prefixed, the ids (and the
    references to them) stay unique when several plots share one HTML document.
    """
    svg = _METADATA.sub("", svg[svg.index("<svg") :])
    return _ID.sub(lambda m: f"{m.group(1)}{salt}-{m.group(2)}", svg)


def _ticks(low: int, high: int) -> list[int]:
    """Powers of two spread so that at most about eight labels fit under the plot."""
    first = low.bit_length() - 1
    last = high.bit_length() - 1
    step = max(1, (last - first + 7) // 8)
    return [1 << e for e in range(first, last + 1, step)]


def trend_svg(labels: list[str], series: dict[str, list[float | None]], salt: str) -> str:
    """busbw per size band over the last runs, the current run last; gaps where a run has no value."""
    with matplotlib.rc_context({**_STYLE, "svg.hashsalt": salt}):
        fig = Figure(figsize=(6.8, 2.2))
        ax = fig.add_subplot()
        xs = list(range(len(labels)))
        for name, values in series.items():
            ys = [math.nan if v is None else v for v in values]
            ax.plot(xs, ys, marker="o", ms=2.6, lw=1.1, label=name)
        step = max(1, len(labels) // 10)
        ax.set_xticks(xs[::step], labels[::step])
        ax.tick_params(axis="x", labelrotation=30, labelsize=6)
        ax.set_ylim(bottom=0)
        ax.set_ylabel("busbw (GB/s)")
        ax.grid(True, lw=0.3, color="#bbbbbb")
        _legend(ax, loc="lower left", fontsize=6.5, frameon=False, ncol=max(1, len(series)))
        fig.tight_layout(pad=0.4)
        buffer = io.StringIO()
        fig.savefig(buffer, format="svg", metadata={"Date": None, "Creator": None})
    return _finish(buffer.getvalue(), salt)


def burnin_svg(series: dict[str, dict[str, list[Any]]], salt: str) -> str:
    """SM clock and GPU temperature of each GPU of one host over its burn-in, two panels sharing the time
    axis; ``series`` maps a GPU label (``GPU 3``) to its ``t_s``, ``clocks.sm`` and ``temperature.gpu``."""
    with matplotlib.rc_context({**_STYLE, "svg.hashsalt": salt}):
        fig = Figure(figsize=(6.8, 3.2))
        clock, heat = fig.subplots(2, 1, sharex=True)
        for label, points in series.items():
            times = points.get("t_s") or []
            for ax, key in ((clock, "clocks.sm"), (heat, "temperature.gpu")):
                values = [math.nan if v is None else float(v) for v in points.get(key) or []]
                ax.plot(times[: len(values)], values, lw=0.9, label=label)
        clock.set_ylabel("SM clock (MHz)")
        heat.set_ylabel("GPU temp. (°C)")
        heat.set_xlabel("seconds into the burn-in")
        for ax in (clock, heat):
            ax.grid(True, lw=0.3, color="#bbbbbb")
        _legend(clock, loc="lower left", fontsize=6, frameon=False, ncol=min(8, max(1, len(series))))
        fig.tight_layout(pad=0.4)
        buffer = io.StringIO()
        fig.savefig(buffer, format="svg", metadata={"Date": None, "Creator": None})
    return _finish(buffer.getvalue(), salt)


def watch_svg(series: list[tuple[str, list[float], list[float], float | None]], salt: str) -> str:
    """One small panel per watched metric of a component: its readings night by night, its limit dashed
    where one is known; ``series`` holds (metric, nights, values, limit)."""
    with matplotlib.rc_context({**_STYLE, "svg.hashsalt": salt}):
        fig = Figure(figsize=(3.4 * min(2, len(series)), 1.7 * math.ceil(len(series) / 2)))
        for index, (metric, nights, values, limit) in enumerate(series, start=1):
            ax = fig.add_subplot(math.ceil(len(series) / 2), min(2, len(series)), index)
            ax.plot(nights, values, marker="o", ms=2.4, lw=1.0)
            if limit is not None:
                ax.axhline(limit, ls="--", lw=0.8, color="#c0392b")
            ax.set_title(metric, fontsize=7)
            ax.set_xlabel("night", fontsize=6.5)
            ax.tick_params(labelsize=6)
            ax.grid(True, lw=0.3, color="#bbbbbb")
        fig.tight_layout(pad=0.4)
        buffer = io.StringIO()
        fig.savefig(buffer, format="svg", metadata={"Date": None, "Creator": None})
    return _finish(buffer.getvalue(), salt)


def heatmap_svg(ratios: list[list[float | None]], rails: int, salt: str) -> str:
    """Hosts × rails coloured by each NIC's share of its line rate (red at half or less, green at full);
    rows are numbered from 1 in the order of the table beside it, columns are the rails (names stay in
    the HTML). Empty cells (a NIC not measured) are grey."""
    rows = max(1, len(ratios))
    with matplotlib.rc_context({**_STYLE, "svg.hashsalt": salt}):
        fig = Figure(figsize=(min(6.8, 1.6 + 0.55 * rails), min(9.0, 1.0 + 0.16 * rows)))
        ax = fig.add_subplot()
        grid = [[math.nan if v is None else float(v) for v in row] for row in ratios] or [[math.nan] * rails]
        cmap = matplotlib.colormaps["RdYlGn"].with_extremes(bad="#dddddd")
        image = ax.imshow(grid, cmap=cmap, vmin=0.5, vmax=1.0, aspect="auto", interpolation="nearest")
        ax.set_xticks(range(rails), [str(r) for r in range(rails)])
        ax.set_xlabel("rail")
        step = max(1, rows // 24)
        ax.set_yticks(range(0, rows, step), [str(i + 1) for i in range(0, rows, step)])
        ax.set_ylabel("host (row of the table)")
        bar = fig.colorbar(image, ax=ax, fraction=0.08, pad=0.04)
        bar.set_label("share of line rate")
        fig.tight_layout(pad=0.4)
        buffer = io.StringIO()
        fig.savefig(buffer, format="svg", metadata={"Date": None, "Creator": None})
    return _finish(buffer.getvalue(), salt)
