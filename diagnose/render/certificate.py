"""A campaign's certificate as HTML and PDF: the as-built record a customer signs to accept a cluster.

certificate.json (built by diagnose.campaign.certificate) holds the record; this module only lays it out, from
the dict alone. A certificate outlives the tool that wrote it, so every key may be missing or odd in an old
file: what is absent shows as MISSING, never as a guess. One template serves the browser and WeasyPrint.

WeasyPrint's time grows with every element and every glyph it sets (about a millisecond per inline element
or table cell, bench/certificate_scale.py), and a cluster has up to 16,384 hosts. So the PDF's long sections
are lines of plain text, each naming a run once for all the phases it evidenced, and firmware, driver and
NCCL are listed once per set of hosts that share them. Past :data:`PDF_HOSTS` hosts even that overruns the
time a sign-off may take: the PDF then folds hosts whose lines read the same into one line of host ranges
and leaves the serials to certificate.html and certificate.json, saying so on its page with their count and
the digest. certificate.html always lists every host and every part.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from jinja2 import Environment
from markupsafe import Markup

import diagnose
from diagnose.core.units import MISSING, is_number, number
from diagnose.render.actions import action_text
from diagnose.render.atomic import write_atomic
from diagnose.render.hostlist import fold
from diagnose.render.html import jinja_environment, status_class
from diagnose.render.pdf import PdfUnavailable, render_pdf
from diagnose.render.text import count_of, format_time, show

#: The most hosts whose lines and parts the PDF carries one by one: bench/certificate_scale.py renders 1,024
#: of them, HTML and PDF, in about 19 CPU seconds of the 30 a certificate of 16,384 hosts is held to.
PDF_HOSTS = 1024
OUTPUT_NAMES = ("certificate.html", "certificate.pdf")
#: The counts in the order the cover shows them; a key a newer file adds comes after them.
COUNTS = ("hosts", "accepted", "pending", "failed", "repaired", "excluded")
#: A campaign's words as the run report's statuses, for their colours: a repaired host awaits its retest.
_AS_STATUS = {
    "ACCEPTED": "PASS",
    "NOT ACCEPTED": "FAIL",
    "accepted": "PASS",
    "failed": "FAIL",
    "repaired": "WARN",
    "pending": "SKIP",
    "excluded": "SKIP",
    "missing": "none",
}
#: The as-built record's groups of parts, then of versions: identity key -> words.
PART_WORDS = {"gpus": "GPUs", "hcas": "HCA ports", "cables": "cables"}
VERSION_WORDS = {"driver": "driver", "nccl": "NCCL"}  # and firmware, a mapping of its own


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _dicts(value: Any) -> list[dict[str, Any]]:
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


def _day(stamp: Any) -> str:
    """The date of a timestamp: the run id beside it already says the time."""
    try:
        return datetime.fromisoformat(stamp).date().isoformat()
    except (TypeError, ValueError):
        return show(stamp, 40)


def burnin(hours: tuple[float, ...]) -> str:
    """A line's burn-in GPU-hours: one host's figure, or the lowest and highest of a folded line's."""
    if not hours:
        return MISSING
    low, high = min(hours), max(hours)
    shown = number(low, 1, grouped=True)
    return f"{shown} GPU-h" if low == high else f"{shown} to {number(high, 1, grouped=True)} GPU-h"


@dataclass(frozen=True)
class Cell:
    """One needed phase of one host: the run that stands as its evidence, or what is missing."""

    word: str
    text: str
    status: str  # the evidence's verdict, or "missing"


@dataclass(frozen=True)
class HostLine:
    """One host, or in a folded PDF the hosts whose lines read the same but for their name."""

    names: str
    count: int
    status: str
    cells: tuple[Cell, ...]
    hours: tuple[float, ...]  # burn-in GPU-hours as recorded, one figure per host that has one
    cause: str | None
    action: str | None

    def runs(self) -> list[tuple[str, str, str]]:
        """The phases whose cells read the same as one: (phase words, text, status). The PDF's line names
        each run once, which halves it where a run evidenced several phases, as a run usually does."""
        grouped: dict[tuple[str, str], list[str]] = {}
        for cell in self.cells:
            grouped.setdefault((cell.text, cell.status), []).append(cell.word)
        return [(", ".join(words), text, status) for (text, status), words in grouped.items()]


@dataclass(frozen=True)
class Parts:
    """One host's as-built record: each group of parts or versions as one run of text."""

    name: str
    groups: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class ClusterPhase:
    word: str
    verdict: str
    satisfied: str
    nodes: str
    run_id: str
    at: str
    detail: str


@dataclass
class Certificate:
    """Everything the template needs, every value already text."""

    campaign: str
    issued: str
    operator: str
    verdict: str
    verdict_note: str
    counts: list[tuple[str, str]]  # (word, number)
    record: list[tuple[str, str]]  # the cover's (label, value) pairs
    digest: str
    cluster: list[ClusterPhase]
    reference: list[tuple[str, str, str, str, str]]  # what, value, hosts, run id, date
    excluded: list[tuple[str, str, str, str]]  # host, reason, by, date
    phases: list[str]
    hosts: list[HostLine]
    parts: list[Parts]
    part_counts: dict[str, int]  # words -> parts of that kind over every host
    # hosts (folded), how many, and the firmware, driver and NCCL they share
    versions: list[tuple[str, int, str]]
    history: list[tuple[str, str, str, str, str]]  # date, host, kind, run id, text
    runs: list[tuple[str, str, str, str, str]]  # run id, started, verdict, hosts, kind


def _host_phases(cert: dict[str, Any], hosts: list[dict[str, Any]]) -> list[str]:
    """The host table's phases: those the campaign needs, else every phase some host has evidence of."""
    needed = _dict(cert.get("needs")).get("host")
    if isinstance(needed, list):
        return [str(p) for p in needed]
    return list(dict.fromkeys(str(p) for h in hosts for p in _dict(h.get("evidence"))))


def _host_line(host: dict[str, Any], phases: list[str], words: dict[str, Any]) -> HostLine:
    evidence = _dict(host.get("evidence"))
    missing = host.get("missing") if isinstance(host.get("missing"), list) else []
    cells = []
    for phase in phases:
        word = show(words.get(phase, phase), 80)
        row = evidence.get(phase)
        if isinstance(row, dict):
            verdict = show(row.get("verdict"), 40)
            run = f"{show(row.get('run_id'), 80)} {_day(row.get('at'))}"
            cells.append(Cell(word, run if verdict == "PASS" else f"{verdict} {run}", verdict))
        else:
            cells.append(Cell(word, "missing" if phase in missing else MISSING, "missing"))
    cause = host.get("cause")
    action = host.get("action")
    hours = host.get("burnin_gpu_hours")
    return HostLine(
        names=show(host.get("name")),
        count=1,
        status=show(host.get("status"), 40),
        cells=tuple(cells),
        hours=(hours,) if is_number(hours) else (),
        cause=show(cause) if cause is not None else None,
        action=action_text(action) if isinstance(action, str) else None,
    )


def _joined(mapping: Any) -> str:
    return ", ".join(f"{show(k, 80)} {show(v, 120)}" for k, v in _dict(mapping).items())


def _parts(name: str, identity: dict[str, Any]) -> Parts:
    groups = ((words, _joined(identity.get(key))) for key, words in PART_WORDS.items())
    return Parts(name, tuple((words, text) for words, text in groups if text))


def _versions(identity: dict[str, Any]) -> str:
    """Firmware, driver and NCCL as one line: most hosts share it, so it is shown once for all of them."""
    firmware = _joined(identity.get("firmware"))
    found = [f"firmware {firmware}" if firmware else ""] + [
        f"{words} {show(identity[key], 80)}" for key, words in VERSION_WORDS.items() if identity.get(key)
    ]
    return "; ".join(text for text in found if text)


def _counts(counts: dict[str, Any]) -> list[tuple[str, str]]:
    keys = [*(k for k in COUNTS if k in counts), *(k for k in counts if k not in COUNTS)]
    return [(show(k, 40), number(counts[k], 0, grouped=True)) for k in keys]


def _record(cert: dict[str, Any]) -> list[tuple[str, str]]:
    campaign = _dict(cert.get("campaign"))
    days = campaign.get("days")
    last = format_time(campaign.get("last_run"))
    return [
        ("Campaign", show(campaign.get("name"))),
        ("Playbook", show(campaign.get("playbook"))),
        ("First run", format_time(campaign.get("first_run"))),
        ("Inventory", show(campaign.get("inventory"))),
        ("Last run", f"{last} ({number(days, 1)} days)" if is_number(days) else last),
        ("Runs", number(campaign.get("runs"), 0, grouped=True)),
        ("GPUs", number(cert.get("gpus"), 0, grouped=True)),
        ("Burn-in", number(cert.get("burnin_gpu_hours"), 1, grouped=True, unit=" GPU-hours")),
        ("Created", format_time(campaign.get("created"))),
        ("Issued", f"{format_time(cert.get('issued'))} by {show(cert.get('operator'))}"),
    ]


def _cluster(cert: dict[str, Any], words: dict[str, Any]) -> list[ClusterPhase]:
    cluster = _dict(cert.get("cluster"))
    needed = _dict(cert.get("needs")).get("cluster")
    phases = [str(p) for p in needed] if isinstance(needed, list) else list(cluster)
    rows = []
    for phase in phases:
        row = _dict(cluster.get(phase))
        satisfied = row.get("satisfied")
        rows.append(
            ClusterPhase(
                word=show(words.get(phase, phase), 80),
                verdict=show(row.get("verdict"), 40) if row else "not run",
                satisfied=MISSING if not isinstance(satisfied, bool) else "yes" if satisfied else "no",
                nodes=number(row.get("nodes"), 0, grouped=True),
                run_id=show(row.get("run_id"), 80),
                at=format_time(row.get("at")),
                detail=show(row.get("detail")) if row.get("detail") is not None else "",
            )
        )
    return rows


def build_certificate(cert: dict[str, Any]) -> Certificate:
    """certificate.json as the template shows it: every value made text once, here, for both formats."""
    hosts = _dicts(cert.get("hosts"))
    words = _dict(cert.get("phase_words"))
    phases = _host_phases(cert, hosts)
    identities = [(show(h.get("name")), _dict(h.get("identity"))) for h in hosts]
    parts = [_parts(name, identity) for name, identity in identities]
    part_counts = {
        words_: sum(len(_dict(identity.get(key))) for _name, identity in identities)
        for key, words_ in PART_WORDS.items()
    }
    versions: dict[str, list[str]] = {}
    for name, identity in identities:
        versions.setdefault(_versions(identity), []).append(name)
    note = cert.get("verdict_note")
    return Certificate(
        campaign=show(_dict(cert.get("campaign")).get("name")),
        issued=format_time(cert.get("issued")),
        operator=show(cert.get("operator")),
        verdict=show(cert.get("verdict"), 40),
        verdict_note=show(note) if note is not None else "",
        counts=_counts(_dict(cert.get("counts"))),
        record=_record(cert),
        digest=show(cert.get("digest"), 80),
        cluster=_cluster(cert, words),
        reference=[
            (
                show(r.get("what") or r.get("key")),
                number(r.get("value"), 1, grouped=True)
                + (f" {show(r['unit'], 20)}" if r.get("unit") else ""),
                number(r.get("hosts"), 0, grouped=True),
                show(r.get("run_id"), 80),
                format_time(r.get("at")),
            )
            for r in _dicts(cert.get("reference"))
        ],
        excluded=[
            (show(e.get("host")), show(e.get("reason")), show(e.get("by"), 80), format_time(e.get("at")))
            for e in _dicts(cert.get("excluded"))
        ],
        phases=[show(words.get(p, p), 80) for p in phases],
        hosts=[_host_line(h, phases, words) for h in hosts],
        parts=[p for p in parts if p.groups],
        part_counts={k: n for k, n in part_counts.items() if n},
        versions=[(", ".join(fold(names)), len(names), text) for text, names in versions.items() if text],
        history=[
            (
                format_time(e.get("at")),
                show(e.get("host")) if e.get("host") is not None else "cluster",
                show(e.get("kind"), 40),
                show(e.get("run_id"), 80) if e.get("run_id") is not None else "",
                show(e.get("text")),
            )
            for e in _dicts(cert.get("history"))
        ],
        runs=[
            (
                show(r.get("run_id"), 80),
                format_time(r.get("started")),
                show(r.get("verdict"), 40),
                count_of(r.get("hosts"), "host"),
                show(r.get("kind"), 80),
            )
            for r in _dicts(cert.get("runs"))
        ],
    )


def fold_lines(lines: Iterable[HostLine]) -> list[HostLine]:
    """Hosts whose lines read the same but for the name and burn-in hours as one line of host ranges.

    The ranges expand back to exactly the hosts they stand for (hostlist.fold); the line keeps every host's
    hours and :func:`burnin` shows their range, so no host's figure is rounded into another's.
    """
    groups: dict[tuple[Any, ...], list[HostLine]] = {}
    for line in lines:
        groups.setdefault((line.status, line.cells, line.cause, line.action), []).append(line)
    folded = []
    for members in groups.values():
        first = members[0]
        folded.append(
            HostLine(
                names=", ".join(fold(m.names for m in members)),
                count=len(members),
                status=first.status,
                cells=first.cells,
                hours=tuple(h for m in members for h in m.hours),
                cause=first.cause,
                action=first.action,
            )
        )
    return folded


def as_status(word: object) -> str:
    """The CSS class of a certificate's word (ACCEPTED, accepted, repaired) or of an evidence verdict."""
    return status_class(_AS_STATUS.get(str(word), word))


@cache
def _environment() -> Environment:
    env = jinja_environment()
    env.filters["as_status"] = as_status
    env.filters["burnin"] = burnin
    env.filters["counted"] = count_of
    env.filters["grouped"] = lambda n: number(n, 0, grouped=True)
    return env


@cache
def _css() -> str:
    folder = resources.files("diagnose.reports")
    return "\n".join(
        folder.joinpath(n).read_text(encoding="utf-8") for n in ("report.css", "certificate.css")
    )


def _render(view: Certificate, paged: bool) -> str:
    """The HTML; ``paged`` for WeasyPrint, which past PDF_HOSTS hosts gets the folded lines and no parts."""
    short = paged and len(view.hosts) > PDF_HOSTS
    return (
        _environment()
        .get_template("certificate.html.j2")
        .render(
            c=view,
            hosts=fold_lines(view.hosts) if short else view.hosts,
            parts=[] if short else view.parts,
            parts_left_out=short and bool(view.parts),
            paged=paged,
            part_total=sum(view.part_counts.values()),
            css=Markup(_css()),
            generator_version=diagnose.__version__,
        )
    )


def certificate_html(cert: dict[str, Any], *, paged: bool = False) -> str:
    """certificate.html, every host and every part whatever the size of the cluster; ``paged``: the HTML
    the PDF is drawn from, folded past PDF_HOSTS hosts."""
    return _render(build_certificate(cert), paged=paged)


def write_certificate(cert: dict[str, Any], out_dir: Path) -> list[Path]:
    """Write certificate.html and certificate.pdf into ``out_dir``; return their paths.

    The PDF comes last, as in render.py: :class:`PdfUnavailable` carries the HTML already written.
    """
    view = build_certificate(cert)
    html = _render(view, paged=False)
    written = [write_atomic(out_dir / OUTPUT_NAMES[0], html.encode("utf-8"))]
    html = _render(view, paged=True)  # the browser's copy is let go: at 16,384 hosts it is tens of MB
    try:
        written.append(write_atomic(out_dir / OUTPUT_NAMES[1], render_pdf(html, out_dir)))
    except PdfUnavailable as exc:
        exc.written = written
        raise
    return written
