"""The run's failures grouped by cause: what the terminal prints after the verdict and what the report's
first page and findings chapter are built from.

A *cause* is one underlying failure, however many hosts and checks it shows up in: ten hosts refusing
SSH, every collective that could not start because torch is missing, eleven GPU checks whose tool timed
out on one wedged host. Results belong to the same cause when they have the same status, the same
recorded ``action`` and the same message once its host-specific parts are set aside (the host's name and
address, ports, which HCA or GPU of the host, PCI bus ids, GPU UUIDs, process ids, a quoted command line,
the timeout's seconds, a benchmark's collective): a port Down is one cause whether it is mlx5_0 on one
host or mlx5_5 on another, while an Xid 79 and an Xid 48 stay two. What is left is the sentence that names the fault, so grouping on it needs no
list of known faults and works on results.json files of any age.

The engine has already folded checks that depend on a root check under it (they SKIP and point there,
``engine/evaluate.py``). Results that were *measured* while a root condition stood (a foreign process on
the GPU, an NCCL variable that disables a transport, a port down) still fail on their own figures; those
become the root's ``consequences`` (:mod:`diagnose.render.cause_links`), listed under it instead of as
causes of their own. This module only joins what the run recorded, it never re-judges: :func:`causes_of`
is results.json's ``causes`` (the engine writes it when the run ends, ``diagnose report --format json``
adds it to an older file) and what the terminal, the report and JUnit show. Pure: a document in, causes out.
"""

from __future__ import annotations

import re
import shutil
import sys
import textwrap
from dataclasses import dataclass, field
from typing import Any

from diagnose.catalog.stage_ids import (
    BENCH_CLEANUP,
    BENCH_LINK,
    BENCH_NCCL_TESTS,
    BENCH_PREFIX,
    BENCH_STRAGGLER,
)
from diagnose.core.model import SEVERITY, worst
from diagnose.core.units import counted
from diagnose.render import cause_links
from diagnose.render.actions import action_of, action_text
from diagnose.render.hostlist import natural_key, summarize
from diagnose.render.load import clean_text
from diagnose.render.tally import results_of, status_of
from diagnose.render.text import host_label

#: The statuses a cause is made of, worst first; PASS and SKIP are not causes of anything.
CAUSE_STATUSES = ("FAIL", "ERROR", "WARN")
REACHABLE = "host.reachable"
#: Cause lines the terminal prints at most (the last one says how many more there are, and where).
TERMINAL_LINES = 10
#: Characters of a message the terminal shows of a cause, wrapped over as many lines as it takes (cut at a
#: word past that: a captured stderr of pages is the report's to show, not the terminal's).
TERMINAL_MESSAGE = 1000
#: The width cause lines are wrapped to where stdout is no terminal (a pipe, cron mail, CI logs).
PLAIN_WIDTH = 100

_TOKEN = re.compile(r"[\w.\-]+")
_IPV4 = re.compile(r"\b\d{1,3}(?:\.\d{1,3}){3}\b")
_PORT = re.compile(r"(<host>|<addr>):\d+")
_PORT_NUMBER = re.compile(r"\bport \d+\b")
#: RDMA devices and GPUs by index (``mlx5_3``, ``mlx5_3/1``, ``GPU 3``, ``GPU0->GPU1``): which one of the
#: host's is named, not what is wrong with it.
_DEVICE = re.compile(r"\b(mlx\d_|bnxt_re|irdma|efa_|hfi1_|qedr|rxe)\d+(?:/\d+)?\b")
_GPU = re.compile(r"\bGPU ?\d+\b")
_BUS_ID = re.compile(r"\b[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]\b")
_UUID = re.compile(r"\b(?:GPU|MIG)-[0-9a-fA-F-]{8,}")
_PID = re.compile(r"\bpid \d+")
_QUOTED = re.compile(r"`[^`]*`")
_AFTER = re.compile(r"after \d+(?:\.\d+)? s\b")
_EACH_HOST_PORT = re.compile(r"<host>(?::\d+)+")


def normalized(message: str, names: frozenset[str], own: tuple[str, ...] = ()) -> str:
    """``message`` with its host-specific parts replaced, so that hosts failing alike read alike.

    ``names`` are every host name and address of the run (matched as whole tokens, so ``gpu1`` never eats
    into ``gpu12``); ``own`` are words of this result to set aside as well (a benchmark's collective).
    """
    text = _QUOTED.sub("`…`", message)
    for word in own:
        text = re.sub(rf"\b{re.escape(word)}\b", "<own>", text)
    text = _TOKEN.sub(lambda m: _token(m.group(0), names), text)
    text = _IPV4.sub("<addr>", text)
    text = _PORT.sub(r"\1:#", text)
    text = _PORT_NUMBER.sub("port #", text)
    text = _DEVICE.sub(r"\1#", text)
    text = _GPU.sub("GPU #", text)
    text = _BUS_ID.sub("<bus>", text)
    text = _UUID.sub("<uuid>", text)
    text = _PID.sub("pid #", text)
    return _AFTER.sub("after # s", text)


def _token(token: str, names: frozenset[str]) -> str:
    bare = token.rstrip(".-")
    return "<host>" + token[len(bare) :] if bare in names else token


@dataclass
class Cause:
    """Results that fail the same way, on one or many hosts and checks."""

    status: str
    action: str | None
    message: str  # the first result's message, as recorded
    rows: list[dict[str, Any]] = field(default_factory=list)
    #: Every host name and address of the run (:func:`cause_names`): a cause of several hosts names none.
    names: frozenset[str] = frozenset()
    #: Results measured while this cause stood, which it explains (rows of other checks, any status).
    consequences: list[dict[str, Any]] = field(default_factory=list)

    @property
    def consequence_ids(self) -> list[str]:
        """The checks among the consequences, in the order they were met."""
        return list(dict.fromkeys(str(r.get("id", "?")) for r in self.consequences))

    @property
    def consequences_text(self) -> str:
        """``+5 consequences (gpu.gemm, bench.all_reduce, ...)``; empty without any."""
        if not self.consequences:
            return ""
        count = len(self.consequences)
        return f"+{count} consequence{'' if count == 1 else 's'} ({', '.join(self.consequence_ids)})"

    def to_dict(self) -> dict[str, Any]:
        """results.json's ``causes`` entry (docs/contracts.md)."""
        return {
            "status": self.status,
            "check": self.check_ids[0],
            "hosts": sorted(
                {str(r["host"]) for r in self.rows if isinstance(r.get("host"), str)}, key=natural_key
            ),
            "message": self.message,
            "action": self.action,
            "consequences": [
                {"id": str(r.get("id", "?")), "host": r.get("host"), "status": status_of(r)}
                for r in self.consequences
            ],
        }

    @property
    def check_ids(self) -> list[str]:
        """The checks this cause shows up in, in the order they were met."""
        return list(dict.fromkeys(str(r.get("id", "?")) for r in self.rows))

    @property
    def hosts(self) -> list[str]:
        """The hosts it shows up on in natural order; a cluster-wide result is named as the cluster."""
        return sorted({host_label(r.get("host")) for r in self.rows}, key=natural_key)

    @property
    def hosts_text(self) -> str:
        return summarize(self.hosts, limit=160)

    @property
    def remediation(self) -> str:
        """The first remediation a result of the cause gives (the checks of one cause give the same)."""
        return next((str(r["remediation"]) for r in self.rows if r.get("remediation")), "")

    @property
    def summary(self) -> str:
        """The message without the ``gpu05: `` or ``gpu05 is `` it opens with, where it does: the hosts are
        shown beside it. On a cause of several hosts, the first one's name or address anywhere else in it
        reads ``<host>``: under ``node[1-2]``, "host key for 127.0.0.1:2201" would name one of them as if it
        were the only one."""
        text = self.message
        host = self.rows[0].get("host")
        if isinstance(host, str) and host:
            for prefix in (f"{host}: ", f"{host} is "):
                if text.startswith(prefix) and len(text) > len(prefix):
                    text = text[len(prefix) :]
                    break
        if len(self.hosts) > 1 and self.names:
            text = _EACH_HOST_PORT.sub("<host>", _TOKEN.sub(lambda m: _token(m.group(0), self.names), text))
        return text

    @property
    def what_to_do(self) -> str:
        """The recorded action in words; without one (older files), the remediation's first sentence."""
        words = action_text(self.action)
        if words is not None:
            return words
        return self.remediation.split(". ")[0].rstrip(".")


def cause_names(document: dict[str, Any], rows: list[dict[str, Any]] | None = None) -> frozenset[str]:
    """Every host name and address of the run: the words of a message that differ from host to host.
    ``rows``: the run's results, where the caller has them already."""
    names: set[str] = set()
    for host in document.get("hosts") or []:
        if isinstance(host, dict):
            names.update(
                str(host[k]) for k in ("name", "address") if isinstance(host.get(k), str) and host[k]
            )
    for row in results_of(document) if rows is None else rows:
        if isinstance(row.get("host"), str):
            names.add(row["host"])
    return frozenset(n for n in names if _TOKEN.fullmatch(n))


#: Benchmark ids that name no collective: their message's words are all the cause's own.
_NOT_COLLECTIVES = frozenset((BENCH_STRAGGLER, BENCH_LINK, BENCH_CLEANUP, BENCH_NCCL_TESTS))


def _own_words(row: dict[str, Any]) -> tuple[str, ...]:
    """A collective's benchmark says its collective's name: ``all_reduce not run: torch ...`` and
    ``all_gather not run: torch ...`` are one cause."""
    check_id = str(row.get("id", ""))
    if not check_id.startswith(BENCH_PREFIX) or check_id in _NOT_COLLECTIVES:
        return ()
    return (check_id.removeprefix(BENCH_PREFIX),)


def group_causes(document: dict[str, Any], rows: list[dict[str, Any]] | None = None) -> list[Cause]:
    """The FAIL, ERROR and WARN results grouped by cause: worst first, then the most hosts (a cluster-wide
    result counts as one, the cluster), then as :func:`_rank` orders equals. ``rows``: as for
    :func:`cause_names` (at 16,384 hosts each listing of the results walks 230,000 rows)."""
    rows = results_of(document) if rows is None else rows
    names = cause_names(document, rows)
    causes: dict[tuple[str, str | None, str], Cause] = {}
    for row in rows:
        status = status_of(row)
        if status not in CAUSE_STATUSES:
            continue
        raw = row.get("message")
        message = raw if isinstance(raw, str) else str(raw or "")
        action = action_of(row)
        key = (status, action, normalized(message, names, _own_words(row)))
        causes.setdefault(key, Cause(status, action, message, names=names)).rows.append(row)
    return sorted(causes.values(), key=_rank)


def causes_of(document: dict[str, Any]) -> list[Cause]:
    """The run's causes, each root with the results it explains under it, worst first (a cause counts
    at the worst status among its own results and its consequences)."""
    rows = results_of(document)
    causes = group_causes(document, rows)
    accused = frozenset(
        str(r["host"])
        for r in rows
        if r.get("id") in (BENCH_STRAGGLER, BENCH_LINK)
        and status_of(r) in CAUSE_STATUSES
        and isinstance(r.get("host"), str)
    )
    participants = cause_links.took_part(document, accused)
    taken: set[int] = set()  # rows already a root's own or a root's consequence: never claimed again
    for root in cause_links.ROOTS:
        for cause in causes:
            own = [r for r in cause.rows if r.get("id") == root.check and id(r) not in taken]
            if not own:
                continue
            taken.update(id(r) for r in own)
            hosts = [r["host"] if isinstance(r.get("host"), str) else None for r in own]
            for other in causes:
                if other is cause:  # the same sentence on more checks is already this cause's own
                    continue
                claimed = [
                    row
                    for row in other.rows
                    if id(row) not in taken
                    and root.covers(str(row.get("id")))
                    and cause_links.in_scope(root, hosts, row, participants)
                ]
                for row in claimed:
                    other.rows.remove(row)
                    cause.consequences.append(row)
                    taken.add(id(row))
    linked = [c for c in causes if c.rows]
    for cause in linked:
        cause.status = worst([cause.status, *(status_of(r) for r in cause.consequences)])
    return sorted(linked, key=_rank)


def causes_json(document: dict[str, Any]) -> list[dict[str, Any]]:
    """results.json's ``causes``: :func:`causes_of` as plain data."""
    return [cause.to_dict() for cause in causes_of(document)]


def _rank(cause: Cause) -> tuple[int, int, int, int, int, str, str]:
    """Worst first, then the most hosts; among equals, what a host was found to have before what a
    measurement across hosts shows of it (an unreachable host first, a cluster-wide busbw FAIL last): the
    port that is down on gpu03 is the cause the slow all_reduce is the effect of."""
    first = cause.check_ids[0]
    cluster_only = all(r.get("host") is None for r in cause.rows)
    return (
        -SEVERITY[cause.status],
        -len(cause.hosts),
        cluster_only,
        first != REACHABLE,
        first.startswith(BENCH_PREFIX),
        first,
        cause.message,
    )


def _cut(text: str, limit: int) -> str:
    """One line of at most ``limit`` characters, cleaned for a terminal: a hostile host name or message
    carries no escape sequence (and no unencodable character) to the operator's tty."""
    line = clean_text(" ".join(text.split()), None)
    return line if len(line) <= limit else f"{line[: limit - 1]}…"


def _words(text: str, limit: int) -> str:
    """``text`` cleaned for a terminal, whole up to ``limit`` characters, else cut after a word."""
    line = clean_text(" ".join(text.split()), None)
    if len(line) <= limit:
        return line
    cut = line[:limit]
    return (cut.rsplit(" ", 1)[0] if " " in cut else cut) + " …"


def _hosts_column(cause: Cause, width: int = 28) -> str:
    """The folded hosts; where they do not fit the column, their count first (``183 hosts gpu-r01n[…``)."""
    text = cause.hosts_text
    if len(text) <= width:
        return _cut(text, width)
    count = f"{counted(len(cause.hosts), 'host')} "
    return count + _cut(text, width - len(count))


def terminal_width() -> int:
    """The columns of the terminal stdout is, else :data:`PLAIN_WIDTH` (``COLUMNS`` overrides both)."""
    fallback = (PLAIN_WIDTH, 24)
    return shutil.get_terminal_size(fallback).columns if sys.stdout.isatty() else PLAIN_WIDTH


def _wrapped(first: str, indent: int, text: str, width: int) -> list[str]:
    """``first`` then ``text``, wrapped at spaces to ``width`` onto lines indented by ``indent``: a word is
    never cut; only a run of characters longer than a whole line is split across lines."""
    wrapper = textwrap.TextWrapper(
        width=max(width, indent + 20),
        initial_indent=first,
        subsequent_indent=" " * indent,
        break_on_hyphens=False,
    )
    return wrapper.wrap(text) or [first.rstrip()]


def cause_lines(
    causes: list[Cause], rest_at: str, limit: int = TERMINAL_LINES, width: int | None = None
) -> list[str]:
    """The causes for the terminal, at most ``limit`` of them; when there are more, the last line says
    how many and where the rest is (``rest_at``: the report, or results.json). Each cause's whole message
    and what to do follow its status, hosts and check, wrapped to ``width`` (default
    :func:`terminal_width`) under the message's column, its consequences on the line after."""
    width = width or terminal_width()
    shown = causes if len(causes) <= limit else causes[: limit - 1]
    if not shown:
        return []
    hosts = [_hosts_column(c) for c in shown]
    checks = [
        _cut(c.check_ids[0], 28) + (f" +{len(c.check_ids) - 1}" if len(c.check_ids) > 1 else "")
        for c in shown
    ]
    host_width, check_width = max(map(len, hosts)), max(map(len, checks))
    lines = []
    for cause, where, ids in zip(shown, hosts, checks, strict=True):
        todo = _words(cause.what_to_do, TERMINAL_MESSAGE)
        first = f"  {cause.status:<5}  {where:<{host_width}}  {ids:<{check_width}}  "
        indent = len(first) if len(first) <= width // 2 else 9
        text = _words(cause.summary, TERMINAL_MESSAGE) + (f" → {todo}" if todo else "")
        lines += _wrapped(first, indent, text, width)
        if cause.consequences:
            lines += _wrapped(" " * 9, 11, _words(cause.consequences_text, TERMINAL_MESSAGE), width)
    left = causes[len(shown) :]
    if left:
        results = sum(len(c.rows) for c in left)
        lines.append(
            f"  … {counted(len(left), 'more cause')}, {counted(results, 'result')}: see {_cut(rest_at, 400)}"
        )
    return lines
