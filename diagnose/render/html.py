"""The report as one self-contained HTML file (CSS and plots inline, no script, no network).

Self-contained because the file travels: it is mailed, attached to tickets and opened years later, and the
same string is what weasyprint paginates into the PDF. The Content-Security-Policy in the template forbids
scripts and remote loads outright, a second wall behind autoescaping.
"""

from __future__ import annotations

from functools import cache
from importlib import resources

from jinja2 import Environment, PackageLoader, StrictUndefined
from markupsafe import Markup, escape

import diagnose
from diagnose.core.units import MISSING
from diagnose.render.plots import burnin_svg, busbw_svg, heatmap_svg, trend_svg, watch_svg
from diagnose.render.text import count_of
from diagnose.render.view import Report
from diagnose.render.view_environment import ENV_FIELDS
from diagnose.render.view_fabric import FabricView
from diagnose.render.view_stress import StressView
from diagnose.render.view_watch import WatchView

_STATUS_CLASSES = {
    "PASS": "st-pass",
    "WARN": "st-warn",
    "FAIL": "st-fail",
    "ERROR": "st-error",
    "SKIP": "st-skip",
    "SHOWN": "st-skip",  # shown working, no figure judged: counted apart from the passes
    "NOT COVERED": "st-notcovered",
    "INCOMPLETE": "st-incomplete",
    "none": "st-none",
}


def status_class(status: object) -> str:
    """The CSS class of a status; anything unknown (a hostile or newer status) gets a neutral one."""
    return _STATUS_CLASSES.get(str(status), "st-unknown")


def breakable(text: object) -> Markup:
    """Escaped text with break opportunities after dots and underscores, for narrow column headers."""
    escaped = str(escape(str(text)))
    return Markup(escaped.replace(".", ".<wbr>").replace("_", "_<wbr>"))


def jinja_environment() -> Environment:
    """The templates of reports/: autoescaped (hosts and messages come from the cluster) and strict about
    undefined names (a missing key fails a test, not a page in front of a customer)."""
    return Environment(
        loader=PackageLoader("diagnose.reports", "."),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )


@cache
def _environment() -> Environment:
    env = jinja_environment()
    env.filters["status_class"] = status_class
    env.filters["breakable"] = breakable
    env.filters["counted"] = count_of
    return env


@cache
def _css() -> str:
    return resources.files("diagnose.reports").joinpath("report.css").read_text(encoding="utf-8")


def render_html(report: Report) -> str:
    """The report's HTML; plots are drawn here so that ``view`` stays free of matplotlib."""
    for bench in report.benchmarks:
        bench.svg = Markup(
            busbw_svg(bench.raw_rows, bench.expected, bench.normal, salt=f"bench{bench.index}")
        )
    if report.history is not None:
        labels = [run.started[:10] if run.started != MISSING else run.run_id for run in report.history.runs]
        report.history.plots = {
            collective: Markup(trend_svg(labels, bands, salt=f"trend{index}"))
            for index, (collective, bands) in enumerate(report.history.busbw.items(), start=1)
        }
    for _part, data in report.parts:
        if isinstance(data, StressView):
            for index, plot in enumerate(data.burnin, start=1):
                plot.svg = Markup(burnin_svg(plot.series, salt=f"burnin{index}"))
        elif isinstance(data, FabricView) and data.ratios:
            data.svg = Markup(heatmap_svg(data.ratios, len(data.rails), salt="fabric"))
        elif isinstance(data, WatchView):
            for index, item in enumerate(data.items, start=1):
                drawn = [(m.metric, m.nights, m.values, m.limit) for m in item.metrics if m.values]
                item.svg = Markup(watch_svg(drawn, salt=f"watch{index}")) if drawn else ""
    template = _environment().get_template("report.html.j2")
    return template.render(
        cover=report.cover,
        checklist=report.checklist,
        findings=report.findings,
        top_causes=report.top_causes,
        actions=report.actions,
        chapters=report.chapters,
        left_out=report.left_out,
        cluster_checks=report.cluster_checks,
        matrix=report.matrix,
        benchmarks=report.benchmarks,
        environment=report.environment,
        evidence=report.evidence,
        history=report.history,
        parts=report.parts,
        env_fields=ENV_FIELDS,
        css=Markup(_css()),
        generator_version=diagnose.__version__,
    )
