"""The bodies of ``diagnose campaign ...``: status, next, exclude, include, repaired, certificate.

``next`` is the one that runs: it asks the ledger where the campaign stands, plans the missing work
(diagnose.campaign.plan) and runs each step as an ordinary ``diagnose run`` limited to the step's hosts
(``--limit @FILE``) and cut to its phases, recording into the campaign; after each step it plans again, so a
full-scale collective comes as soon as enough hosts are accepted. Each host is tried once per call. With
``soak_hours`` it runs the soak's rounds instead, resuming from the ledger.
"""

from __future__ import annotations

import getpass
import json
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from diagnose import history
from diagnose.campaign import ledger, marks
from diagnose.campaign import phases as ph
from diagnose.campaign.certificate import build
from diagnose.campaign.plan import DEFAULT_MIN_FRACTION, Step, plan
from diagnose.campaign.soak import DEFAULT_INTERVAL_MINUTES, Soak
from diagnose.campaign.standing import Standing, standing, status_lines

__all__ = ["Next", "NextOptions", "ledger", "status_lines"]
from diagnose.config.extra_vars import parse_extra_vars
from diagnose.core.errors import ConfigError
from diagnose.engine.results import write_text_atomic
from diagnose.engine.run import RunOptions, RunOutcome, RunRequest, prepare
from diagnose.history.storage import open_db

SOAK_PHASES = (ph.HOST, ph.STRESS, ph.BURNIN)


def db_path(history_path: str | None) -> Path:
    return Path(history_path) if history_path else history.default_db_path()


def status(history_path: str | None, name: str) -> Standing:
    return standing(ledger.load(db_path(history_path), ledger.check_name(name)))


def status_text(history_path: str | None, name: str, as_json: bool) -> str:
    state = status(history_path, name)
    if as_json:
        return json.dumps(state.to_dict(), indent=1)
    return "\n".join(status_lines(state))


def operator() -> str:
    """Who acts, for the ledger's events: the login, as the run report's sign-off names it."""
    try:
        return os.environ.get("USER") or os.environ.get("LOGNAME") or getpass.getuser()
    except (KeyError, OSError):  # a uid with no passwd entry (a container's)
        return f"uid {os.getuid()}"


def certificate(
    history_path: str | None, name: str, out: str, who: str | None
) -> tuple[dict[str, Any], list[Path]]:
    """certificate.json, .html and .pdf in ``out``, and why the PDF is missing where it could not be drawn."""
    from diagnose.render.certificate import write_certificate
    from diagnose.render.pdf import PdfUnavailable

    book = ledger.load(db_path(history_path), ledger.check_name(name), full=True)
    issued = datetime.now(timezone.utc).isoformat(timespec="seconds")
    content = build(book, standing(book), issued, who or operator())
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "certificate.json"
    text = json.dumps(content, ensure_ascii=False, default=str)  # no indent: Python's fast encoder
    write_text_atomic(path, text + "\n")
    try:
        return content, [path, *write_certificate(content, folder)], None
    except PdfUnavailable as exc:  # the campaign was measured: the verdict stands, the PDF is told
        return content, [path, *exc.written], str(exc).replace("report.pdf", "certificate.pdf")


def certificate_lines(
    history_path: str | None, name: str, out: str, who: str | None
) -> tuple[list[str], bool]:
    """What ``campaign certificate`` prints, and whether the campaign is accepted."""
    content, written, missing = certificate(history_path, name, out, who)
    counts = content["counts"]
    head = (
        f"campaign {name}: {content['verdict']} — {counts['accepted']} of {counts['hosts']} hosts accepted, "
        f"{counts['excluded']} excluded; digest {content['digest'][:16]}"
    )
    lines = [head, *(f"  {path}" for path in written)] + ([f"diagnose: {missing}"] if missing else [])
    return lines, content["verdict"] == "ACCEPTED"


def mark(args: Any) -> str:
    """``campaign exclude|include|repaired``: the event it recorded, as a line."""
    db, who = db_path(args.history), args.operator or operator()
    name = ledger.check_name(args.name)
    if args.campaign_command == "exclude":
        event = marks.exclude(db, name, args.host, args.reason, who)
    elif args.campaign_command == "include":
        event = marks.include(db, name, args.host, who)
    else:
        event = marks.repaired(db, name, args.host, args.note, who)
    return f"campaign {name}: {event.host} {event.kind}: {event.text}"


@dataclass
class NextOptions:
    """``campaign next``: the campaign, the run options every step shares, and whether only to plan."""

    name: str
    run: RunOptions
    check: bool = False


@dataclass
class StepResult:
    step: Step
    outcome: RunOutcome | None
    request: RunRequest | None


def _setting(extra: dict[str, Any], key: str, kind: Callable[[Any], Any], default: Any) -> Any:
    value = extra.get(key)
    if value is None or value == "":
        return default
    try:
        return kind(value)
    except (TypeError, ValueError):
        raise ConfigError(f"-e {key}: not a valid value: {value!r}") from None


class Next:
    """One ``campaign next``: the hosts of the inventory, the ledger, the steps."""

    def __init__(self, options: NextOptions, execute: Callable[[RunRequest], RunOutcome]) -> None:
        self.options = options
        self.name = ledger.check_name(options.name)
        self.db = db_path(options.run.history)
        self.execute = execute
        extra = parse_extra_vars(options.run.extra_vars)
        self.batch = _setting(extra, "campaign_batch", int, None)
        self.min_fraction = _setting(extra, "campaign_min_fraction", float, DEFAULT_MIN_FRACTION)
        self.soak_hours = _setting(extra, "soak_hours", float, 0.0)
        self.interval = _setting(extra, "soak_interval_minutes", float, DEFAULT_INTERVAL_MINUTES)
        if self.batch is not None and self.batch < 1:
            raise ConfigError("-e campaign_batch: at least 1 host a batch")
        if not 0 < self.min_fraction <= 1:
            raise ConfigError("-e campaign_min_fraction: a fraction above 0, at most 1")
        if self.soak_hours < 0 or self.interval <= 0:
            raise ConfigError("-e soak_hours must be 0 or more and soak_interval_minutes above 0")
        self.limit_file = self.db.parent / "campaigns" / self.name / "step.hosts"
        self.steps_made = 0  # numbers the steps' run folders under --out
        self.base = self._prepare_base()

    def _prepare_base(self) -> RunRequest:
        """The inventory's selected hosts, checked once before any step; the campaign learns them."""
        request = prepare(replace(self.options.run, campaign=self.name))
        if request.options.history and self.options.run.history is None:  # the inventory's diagnose_history
            self.db = Path(request.options.history)
            self.limit_file = self.db.parent / "campaigns" / self.name / "step.hosts"
        if not self.options.check:
            history.check_db_path(self.db)
            history.create_db(self.db)
            with open_db(self.db) as conn, conn:
                needs = request.needs or ph.Needs(ph.HOST_PHASES, ph.CLUSTER_PHASES)
                run = self.options.run
                ledger.ensure_campaign(
                    conn, self.name, needs, request.playbook.name, ", ".join(run.inventories)
                )
            marks.add_hosts(self.db, self.name, [h.name for h in request.hosts])
        return request

    def standing(self) -> Standing:
        if not self.db.is_file() or self.name not in ledger.campaign_names(self.db):
            book = ledger.Ledger(
                self.name, "", None, None, self.base.needs or ph.Needs(ph.HOST_PHASES, ph.CLUSTER_PHASES),
                {}, {h.name: {} for h in self.base.hosts}, {}, {}, {}, 0, None, None,
            )  # fmt: skip
            return standing(book)
        book = ledger.load(self.db, self.name)
        selected = {h.name for h in self.base.hosts}  # a --limit keeps the others out of this call
        book.hosts = {h: marks_of for h, marks_of in book.hosts.items() if h in selected}
        return standing(book)

    def status_lines(self) -> list[str]:
        return status_lines(self.standing())

    def plan(self, done: set[str], full_done: bool) -> list[Step]:
        steps = plan(self.standing(), self.batch, self.min_fraction, done)
        return [s for s in steps if not (full_done and s.why in ("full scale", "training reference"))]

    def run_step(self, step: Step, kind: str = "run") -> StepResult:
        self.limit_file.parent.mkdir(parents=True, exist_ok=True)
        write_text_atomic(self.limit_file, "".join(f"{h}\n" for h in step.hosts))
        options = replace(
            self.options.run,
            limit=f"@{self.limit_file}",
            campaign=self.name,
            phases=step.phases,
            campaign_kind=kind,
            out=self._out(kind),
        )
        request = prepare(options)
        return StepResult(step, self.execute(request), request)

    def _out(self, kind: str) -> str | None:
        """A step's run folder: under ``--out`` one folder per step, else a new dated folder as usual."""
        if self.options.run.out is None:
            return None
        self.steps_made += 1
        return str(Path(self.options.run.out) / f"{self.steps_made:02d}-{kind.replace(' ', '-')}")

    def steps(self, on_step: Callable[[StepResult], None]) -> list[StepResult]:
        """Plan, run the first step, plan again, until nothing is left to do in this call."""
        done: set[str] = set()
        full_done = False
        results = []
        while True:
            steps = self.plan(done, full_done)
            if not steps:
                return results
            step = steps[0]
            result = self.run_step(step)
            results.append(result)
            on_step(result)
            done.update(step.hosts)
            full_done = full_done or step.why in ("full scale", "training reference")
            if result.outcome is None or result.outcome.status != "done":
                return results

    def soak(self) -> Soak:
        """The soak as the ledger knows it (its start kept across restarts), or a new one from now."""
        book = ledger.load(self.db, self.name)
        stored = book.settings.get("soak")
        if isinstance(stored, dict):
            return Soak.of(stored)
        soak = Soak(time.time(), self.soak_hours, self.interval)
        marks.save_settings(self.db, self.name, {"soak": soak.to_dict()})
        return soak

    def soak_hosts(self) -> list[str]:
        """Every selected host not excluded and not failed: one host's failure does not stop the others."""
        return [h.host for h in self.standing().hosts if h.state not in ("excluded", "failed")]

    def soak_rounds(
        self,
        on_step: Callable[[StepResult], None],
        say: Callable[[str], None],
        sleep: Callable[[float], None] = time.sleep,
    ) -> list[StepResult]:
        soak = self.soak()
        results = []
        while True:
            finished = {r["round"] for r in marks.soak_rounds(self.db, self.name)}
            number = soak.next_round(finished)
            if number is None:
                say(f"soak: all {soak.rounds} rounds finished")
                return results
            wait = soak.due(number) - time.time()
            if wait > 0:
                say(f"soak: round {number} of {soak.rounds} due in {wait / 60:.1f} min")
                sleep(wait)
            hosts = self.soak_hosts()
            if not hosts:
                say("soak: no host left to soak (all failed or excluded)")
                return results
            step = Step(tuple(hosts), SOAK_PHASES, f"soak round {number} of {soak.rounds}")
            result = self.run_step(step, kind=f"soak round {number}")
            results.append(result)
            on_step(result)
            if result.outcome is None or result.outcome.status != "done" or result.outcome.document is None:
                return results
            marks.record_soak_round(self.db, self.name, number, result.outcome.document)


def plan_lines(job: Next) -> list[str]:
    """``campaign next --check``: what would run, step by step, touching no host."""
    state = job.standing()
    lines = status_lines(state)[:1]
    if job.soak_hours > 0:
        rounds = Soak(time.time(), job.soak_hours, job.interval).rounds
        hosts = [h.host for h in state.hosts if h.state not in ("excluded", "failed")]
        lines.append(
            f"soak: {rounds} round{'s' if rounds != 1 else ''} every {job.interval:g} min on {len(hosts)} hosts "
            f"({', '.join(ph.WORDS[p] for p in SOAK_PHASES)}); resumes from the ledger's finished rounds"
        )
        return lines
    steps = plan(state, job.batch, job.min_fraction)
    if not steps:
        lines.append("nothing to run: every selected host has its evidence")
    lines += [f"step {i}: {s.describe()}" for i, s in enumerate(steps, 1)]
    full = [s for s in steps if s.why == "full scale"]
    if not full and any(not c.satisfied for c in state.cluster):
        counted = state.counts["hosts"] - state.counts["excluded"]
        lines.append(
            f"full-scale collective: after {job.min_fraction:.0%} of {counted} hosts are accepted "
            f"({len(state.accepted)} now)"
        )
    return lines


def event_lines(recorded: ledger.Recorded | None, limit: int = 6) -> list[str]:
    """What recording a run into its campaign changed, a line an event (the rest counted)."""
    if recorded is None:
        return []
    shown = [e for e in recorded.events if e.kind != "reference"][:limit]
    lines = [f"campaign {recorded.campaign}: {e.host or 'cluster'} {e.kind}: {e.text}" for e in shown]
    rest = len(recorded.events) - len(shown)
    references = [e for e in recorded.events if e.kind == "reference"]
    if references:
        lines.append(
            f"campaign {recorded.campaign}: reference recorded: " + "; ".join(e.text for e in references[:4])
        )
    elif rest > 0:
        lines.append(
            f"campaign {recorded.campaign}: {rest} more events (diagnose campaign status {recorded.campaign})"
        )
    return lines


def hosts_line(names: Sequence[str]) -> str:
    return ", ".join(names[:8]) + (f" and {len(names) - 8} more" if len(names) > 8 else "")
