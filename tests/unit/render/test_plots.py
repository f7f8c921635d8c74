"""The report's plots drawn from empty inputs: a sweep with no rows, a trend or a burn-in with no series.

Each must still be a plot (the page keeps its place) and must warn about nothing: a Python warning goes to
stderr, and with ``--quiet`` a nightly's stderr is the cron mail, which must hold the verdict line alone.
"""

from __future__ import annotations

import warnings

from diagnose.render.plots import burnin_svg, busbw_svg, trend_svg


def test_empty_plots_draw_without_a_warning() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        drawn = [busbw_svg([], None, None, "a"), trend_svg([], {}, "b"), burnin_svg({}, "c")]
    assert all(svg.startswith("<svg") for svg in drawn)
    assert "no rows" in drawn[0]
