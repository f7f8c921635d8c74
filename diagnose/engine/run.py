"""One assessment as a library call: what the operator asked for in, a finished record out.

:class:`RunOptions` is what the command line holds (paths, patterns, flags, ``-e`` texts). :func:`prepare`
loads and checks everything — inventory sources, playbook, profiles, variables, the catalog — before any
host is touched, and returns a :class:`RunRequest` or raises :class:`~diagnose.core.errors.ConfigError` (exit 2).
:meth:`Run.execute` then owns the stages in order, with the results store they all write to:

    lock → run folder → host checks → cluster rules → custom checks → benchmarks (load samples meanwhile)
    → second snapshot of the counters → history → reports → retention

and returns a :class:`RunOutcome`. Nothing here prints or exits: progress and trouble that is no result go
to the :class:`~diagnose.engine.reporter.Reporter` the caller gives :class:`Run`, the CLI maps the outcome
to its summary and exit code, and tests and site scripts can run a whole assessment without argparse.
"""

from __future__ import annotations

import signal
import socket
import threading
import traceback
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from diagnose import history
from diagnose.campaign import ledger
from diagnose.campaign.ledger import Recorded, check_name
from diagnose.campaign.phases import Needs
from diagnose.campaign.playbook import needs_of_playbook, restrict
from diagnose.campaign.reference import CampaignReference
from diagnose.catalog.loading import load_catalog, select
from diagnose.config.extra_vars import parse_extra_vars
from diagnose.config.host_settings import LOGIN_SETTINGS
from diagnose.config.playbook import (
    PROFILE_VARIABLE,
    Playbook,
    check_unknown_patterns,
    custom_check_paths,
    load_playbook,
    with_tool,
)
from diagnose.config.profile_files import available_profiles, load_profile
from diagnose.config.profiles import unknown_variable_warnings
from diagnose.connectors.ssh_login import login_problem
from diagnose.core.check import Check, ClusterCheck
from diagnose.core.errors import ConfigError
from diagnose.core.hosts import Host
from diagnose.core.redact import redact_argv
from diagnose.engine import stages as engine
from diagnose.engine import unattended
from diagnose.engine.custom import run_custom_checks
from diagnose.engine.limits import make_room
from diagnose.engine.profile_hint import hardware_of, hosts_without_profile, no_profile_note, suggest
from diagnose.engine.reporter import Reporter
from diagnose.engine.retry import write_retry_file
from diagnose.engine.run_ids import make_run_dir, new_run_id, run_header
from diagnose.engine.underway import Underway, progress_interval
from diagnose.history.coverage import record_coverage
from diagnose.probes.registry import HOST_SETTINGS
from diagnose.quarantine.kubernetes import check_cordon_request
from diagnose.quarantine.stage import act_on_nodes
from diagnose.render.pdf import PdfUnavailable
from diagnose.render.render import DEFAULT_FORMATS, FORMATS, OUTPUT_NAMES, render
from diagnose.targets import slurm_nodes
from diagnose.targets.k8s_pods import PodSource
from diagnose.targets.loading import InventoryFiles
from diagnose.targets.local_machine import LocalMachine, default_inventory
from diagnose.targets.resolve import resolve_hosts
from diagnose.targets.sources import CommandLineDefaults, HostContext, HostSource


@dataclass
class RunOptions:
    """What the operator asked for, as the command line gives it."""

    inventories: list[str] = field(default_factory=list)  # empty: this machine (inventory/local.yaml)
    playbook: str | None = None
    limit: str | None = None
    extra_vars: list[str] = field(default_factory=list)
    forks: int = engine.DEFAULT_FORKS
    out: str | None = None
    runs_dir: str | None = None
    formats: str = DEFAULT_FORMATS
    skip_benchmarks: bool = False
    tool: str | None = None  # --tool: what measures the collectives, over the playbook's own
    accept_unknown_host_keys: bool = False
    known_hosts: str | None = None
    history: str | None = None
    cluster_name: str | None = None
    operator: str | None = None
    argv: list[str] = field(default_factory=list)  # recorded (redacted) in run.argv
    slurm: slurm_nodes.SlurmQuery | None = None  # hosts from Slurm (--slurm ...), inventories lend vars
    connect_timeout: float | None = None  # -T: every host's default, beneath its variables (as Ansible)
    k8s_cordon: bool = False  # cordon and taint the nodes of failing pods (diagnose.quarantine)
    list_only: bool = False  # --list-hosts: the hosts only; key files are not read
    campaign: str | None = None  # --campaign: record into this acceptance campaign (diagnose.campaign)
    phases: tuple[str, ...] | None = None  # a campaign step's phases (None: the whole playbook)
    campaign_kind: str = "run"  # how the ledger lists the run ("run", "soak round 2")


@dataclass
class RunRequest:
    """A validated run: the hosts with their merged variables, the checks, what to write where."""

    options: RunOptions
    playbook: Playbook
    hosts: list[Host]
    host_checks: list[Check]
    cluster_checks: list[ClusterCheck]
    custom_modules: list[Path]
    formats: set[str]
    inventory: Path | None  # the first source: names the run folder and, by default, the cluster
    profile_note: str | None = None
    warnings: list[str] = field(default_factory=list)
    slurm: slurm_nodes.SlurmNodes | None = None  # where the hosts came from, when Slurm listed them
    needs: Needs | None = None  # a campaign run: what the campaign's whole playbook asks of each host

    @property
    def history_db(self) -> Path | None:
        """The history database, for nightly playbooks, campaigns and runs given ``--history``."""
        if self.playbook.nightly is None and self.options.history is None and self.options.campaign is None:
            return None
        return Path(self.options.history) if self.options.history else history.default_db_path()


@dataclass
class RunOutcome:
    """How a run ended. ``status``: done, interrupted, internal (results so far written), config, locked."""

    status: str
    message: str = ""
    out_dir: Path | None = None
    document: dict[str, Any] | None = None
    written: list[Path] = field(default_factory=list)
    regressions: list[Any] = field(default_factory=list)
    stopped: list[str] = field(default_factory=list)  # an interrupted run's stop: what it ended
    not_stopped: list[str] = field(default_factory=list)
    retention_failures: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what the operator must still hear (a format not written)
    campaign: Recorded | None = None  # what recording into the campaign changed
    retry: Path | None = None  # the run folder's failed.retry
    exit_code: int | None = None  # set by a lock held elsewhere (unattended.LockBusy)


def parse_formats(text: str) -> set[str]:
    chosen = {part.strip() for part in text.split(",") if part.strip()}
    unknown = chosen - set(FORMATS)
    if unknown:
        raise ConfigError(
            f"--format: unknown {'format' if len(unknown) == 1 else 'formats'} {', '.join(sorted(unknown))}; choose from {', '.join(FORMATS)}"
        )
    return chosen | {"json"}


def host_sources(options: RunOptions) -> list[HostSource]:
    """Where the run's hosts come from: the inventories, Slurm's nodes (the inventories then lend their
    variables) or, when neither is named, this machine; pods chosen by label selector in any of them."""
    sources: list[HostSource] = [InventoryFiles(options.inventories)] if options.inventories else []
    if options.slurm is not None:
        sources.append(slurm_nodes.find_nodes(options.slurm))
    elif not sources:
        sources.append(LocalMachine())
    if options.connect_timeout is not None:
        sources.insert(0, CommandLineDefaults({"diagnose_connect_timeout": options.connect_timeout}))
    return [*sources, PodSource()]


def _campaign_sources(options: RunOptions) -> list[HostSource]:
    """The campaign's own reference figures beneath the inventory, once it has any."""
    if options.campaign is None:
        return []
    check_name(options.campaign)
    db = Path(options.history) if options.history else history.default_db_path()
    rows = ledger.reference(db, options.campaign)
    return [CampaignReference(options.campaign, rows)] if rows else []


def prepare(options: RunOptions) -> RunRequest:
    """Everything loaded and checked; a ConfigError names the file and line (or option) at fault."""
    formats = parse_formats(options.formats)
    playbook = with_tool(load_playbook(options.playbook), options.tool)
    extra_vars = parse_extra_vars(options.extra_vars)
    if options.history:  # before the lock beside it is taken: a mistyped folder is refused, not made
        history.check_db_path(options.history)
    sources = [*_campaign_sources(options), *host_sources(options)]
    if options.known_hosts and not Path(options.known_hosts).expanduser().is_file():
        raise ConfigError(f"--known-hosts {options.known_hosts}: no such file")
    needs = needs_of_playbook(playbook, {**playbook.vars, **extra_vars}) if options.campaign else None
    if options.phases is not None:
        playbook, forced = restrict(playbook, options.phases)
        extra_vars = {**extra_vars, **forced}
    settings = HOST_SETTINGS if options.list_only else {**HOST_SETTINGS, **LOGIN_SETTINGS}
    hosts = resolve_hosts(sources, HostContext(playbook, options.limit, extra_vars, settings=settings))
    named = history.inventory_db_path(hosts) if options.history is None else None
    if named:  # the inventory's diagnose_history, below --history and DIAGNOSE_HISTORY
        history.check_db_path(named)
        options = replace(options, history=named)
        if options.campaign is not None:  # the campaign's reference figures are read from that database
            sources = [*_campaign_sources(options), *host_sources(options)]
            hosts = resolve_hosts(
                sources, HostContext(playbook, options.limit, extra_vars, settings=settings)
            )
    slurm = next((s for s in sources if isinstance(s, slurm_nodes.SlurmNodes)), None)
    inventories = [Path(i) for i in options.inventories] or ([] if slurm else [default_inventory()])
    catalog = load_catalog()
    check_unknown_patterns(playbook, [e.id for e in catalog])
    host_checks, cluster_checks = engine.split_catalog(select(catalog, playbook.checks))
    if options.k8s_cordon:
        check_cordon_request(hosts)
    room = make_room(hosts, options.forks)  # open files and threads for the fan-out, or exit 2 here
    if room.forks < options.forks:
        options = replace(options, forks=room.forks)
    return RunRequest(
        options=options,
        playbook=playbook,
        hosts=hosts,
        host_checks=host_checks,
        cluster_checks=cluster_checks,
        custom_modules=custom_check_paths(playbook),
        formats=formats,
        inventory=inventories[0] if inventories else None,
        profile_note=next((s.note for s in sources if s.note), None) or no_profile_note(hosts),
        warnings=unknown_variable_warnings(hosts, HOST_SETTINGS) + ([room.note] if room.note else []),
        slurm=slurm,
        needs=needs,
    )


def _port_counters(observed: Any) -> dict[str, Any] | None:
    """ib.counters' observed values of one host ({"mlx5_0 port 1": {counter: value}}), from its
    after-benchmark result ({"after": ..., "delta": ...}) or its single snapshot; None when it saw none."""
    if isinstance(observed, dict) and isinstance(observed.get("after"), dict):
        observed = observed["after"]
    if not isinstance(observed, dict) or not all(isinstance(v, dict) for v in observed.values()):
        return None
    return observed or None


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


class Run:
    """One assessment from a :class:`RunRequest`; see the module docstring for the order of its stages."""

    def __init__(self, request: RunRequest, reporter: Reporter | None = None) -> None:
        self.request = request
        # Kept between the engine's notices: a long step told again, a stage cut short told as such, each
        # stage's time in results.json (diagnose.engine.underway).
        self.reporter = Underway(reporter or Reporter(), progress_interval(request.hosts))
        self.options = request.options
        self.nightly = request.playbook.nightly
        self.deadline = unattended.Deadline(self.nightly.time_budget_s if self.nightly else None)
        self.started = datetime.now(timezone.utc)
        self.run_id = new_run_id(self.started)
        self.states: dict[str, engine.HostState] = {}
        self.watched = history.WatchFindings()
        # SIGINT's and SIGTERM's handlers before an interrupt set them aside for the stop; the reports that
        # follow it may be cut short again (:meth:`_report_interrupted`).
        self._handlers: tuple[Any, Any] | None = None

    def execute(self) -> RunOutcome:
        """The run under the history lock (when it keeps history); never raises for a host's trouble."""
        db = self.request.history_db
        try:
            lock = unattended.acquire_lock(db) if db is not None else None
        except unattended.LockBusy as exc:
            return RunOutcome("locked", str(exc), exit_code=exc.exit_code)
        try:
            with self.reporter.beating():
                return self._locked(db)
        finally:
            if lock is not None:
                lock.release()

    def _out_dir(self) -> Path:
        options = self.options
        try:
            return make_run_dir(self.run_id, self._source_name(), options.out, options.runs_dir)
        except OSError as exc:
            where = "--runs-dir" if options.runs_dir else "--out" if options.out else "./diagnose-runs"
            raise ConfigError(f"{where}: cannot create the run folder: {exc.strerror or exc}") from None

    def _source_name(self) -> Path | None:
        """What names the run folder: the first inventory, else Slurm's cluster; None for this machine."""
        slurm = self.request.slurm
        if slurm is not None and not self.options.inventories:
            return Path(slurm.cluster or "slurm")
        return self.request.inventory if self.options.inventories else None

    def _header(self) -> dict[str, Any]:
        request, options = self.request, self.options
        hosts = request.hosts
        profiles = sorted({str(h.vars.get(PROFILE_VARIABLE)) for h in hosts if h.vars.get(PROFILE_VARIABLE)})
        argv = ["diagnose", *redact_argv(options.argv)]
        header = run_header(
            self.run_id, self.started, request.inventory, request.playbook.name, ",".join(profiles) or None,
            argv, options.limit,
        )  # fmt: skip
        if len(options.inventories) > 1:  # the history series is the whole set, in its order
            header["inventory"] = ", ".join(options.inventories)
        if request.slurm is not None:  # the query, not the nodes of one night, keys the series
            header["inventory"] = ", ".join([request.slurm.label, *options.inventories])
            if request.slurm.job_id:
                header["slurm_job"] = request.slurm.job_id
        source = self._source_name()
        header["cluster"] = options.cluster_name or (source.stem if source else socket.gethostname())
        if options.operator:
            header["operator"] = options.operator
        if options.campaign is not None and request.needs is not None:
            header["campaign"] = {
                "name": options.campaign,
                "needs": request.needs.to_dict(),
                "phases": list(options.phases) if options.phases is not None else None,
                "kind": options.campaign_kind,
            }
        if request.profile_note:
            header["profile_note"] = request.profile_note
        return header

    def _nightly_xid_window(self, db: Path, header: dict[str, Any]) -> None:
        """Xid events and link flaps count from the previous run of the series on, so each is reported once;
        ib.flaps also gets that run's IB port counters, to judge their growth per hour since."""
        since = history.previous_run_started(db, header)
        if since is None:
            return
        previous = history.previous_check_observed(db, header, "ib.counters")
        for host in self.request.hosts:
            if "xid_since" not in host.vars and "xid_window" not in host.vars:
                host.vars = host.vars.with_values(xid_since=since)
            if "flap_since" not in host.vars:
                host.vars = host.vars.with_values(flap_since=since)
            ports = _port_counters(previous[1].get(host.name)) if previous else None
            if ports and "ib_counters_before" not in host.vars:
                host.vars = host.vars.with_values(ib_counters_before={"at": previous[0], "ports": ports})

    def _locked(self, db: Path | None) -> RunOutcome:
        stranded = login_problem(self.request.hosts)  # once for all hosts, not one failed login each
        if stranded is not None:
            return RunOutcome("config", str(ConfigError(stranded, self.request.inventory)))
        try:
            if db is not None:
                history.create_db(db)  # the one place a database is made: prepare() checked its path
            out_dir = self._out_dir()
        except ConfigError as exc:
            return RunOutcome("config", str(exc))
        header = self._header()
        store = engine.ResultsStore(out_dir / "results.json", header)
        self.reporter.keep(store)
        if self.nightly is not None and db is not None:
            self._nightly_xid_window(db, header)
        interrupted: RunOutcome | None = None
        try:
            regressions = self._stages(out_dir, store, db)
            document = store.finish(finished=_now())
        except KeyboardInterrupt:
            interrupted = self._interrupted(out_dir, store)
        except Exception:
            detail = traceback.format_exc()
            store.finish(finished=_now(), error="internal error; see stderr")
            return RunOutcome("internal", detail, out_dir=out_dir)
        finally:
            self.reporter.keep(None)  # the document is final: later stages (the reports) are not in it
            engine.close_all(self.states, self.reporter)
        if interrupted is not None:
            return self._report_interrupted(interrupted, out_dir)
        return self._record(out_dir, document, regressions, db)

    def _stages(self, out_dir: Path, store: engine.ResultsStore, db: Path | None) -> list[Any]:
        request, options, deadline = self.request, self.options, self.deadline
        self.states = engine.run_host_stage(
            request.hosts,
            request.host_checks,
            out_dir,
            store,
            options.forks,
            options.accept_unknown_host_keys,
            options.known_hosts,
            self.reporter,
            deadline=deadline.expired if self.nightly else None,
        )
        self._suggest_profile(store)
        engine.run_cluster_stage(request.cluster_checks, self.states, store)
        reachable = [s.host for s in self.states.values() if s.connection is not None]
        if request.custom_modules:
            with self.reporter.stage("custom checks", [h.name for h in reachable]):
                store.add_checks(
                    run_custom_checks(
                        request.custom_modules,
                        reachable,
                        out_dir,
                        accept_unknown_host_keys=options.accept_unknown_host_keys,
                        known_hosts=options.known_hosts,
                    )
                )
        plan = request.playbook.benchmarks
        samples: dict[str, Any] = {}
        if plan and plan.enabled and not options.skip_benchmarks and not deadline.expired():
            healthy = [s.host.name for s in self.states.values() if s.healthy]
            with self.reporter.stage("benchmarks", healthy):
                samples = engine.run_benchmark_stage(
                    plan, self.states, out_dir, store, deadline, request.host_checks, self.reporter
                )
        if not deadline.expired():
            with self.reporter.stage("second snapshot", [h.name for h in reachable]):
                engine.run_after_snapshot_stage(
                    self.states, request.host_checks, out_dir, store, options.forks, samples, self.reporter
                )
            engine.note_counters_on_slow_collectives(store)
        act_on_nodes(request.hosts, self.states, out_dir, store, self.run_id, options.k8s_cordon)
        regressions: list[Any] = []
        if db is not None:
            drop = self.nightly.busbw_drop_pct if self.nightly else 10.0
            regressions = history.regressions(db, store.document(), drop)
            first = request.hosts[0].vars if request.hosts else None
            regressions, unstable = history.instability(db, store.document(), regressions, first)
            self.watched = history.watch(db, store.document(), {n: s.facts for n, s in self.states.items()})
            store.add_checks([r.result for r in regressions] + unstable + self.watched.results)
            store.extra["history"] = {
                "trend": history.trend_for_report(db, store.document()),
                "watch": self.watched.summary,
            }
        return regressions

    def _suggest_profile(self, store: engine.ResultsStore) -> None:
        """``run.profile_suggestion`` from the facts of the hosts that have no profile (none: nothing)."""
        missing = hosts_without_profile(self.request.hosts)
        if not missing:
            return
        profiles = [load_profile(name) for name in available_profiles()]
        hardware = {name: hardware_of(self.states[name].facts) for name in missing if name in self.states}
        suggestion = suggest(hardware, profiles)
        if suggestion is not None:
            store.run["profile_suggestion"] = suggestion
            store.flush(force=True)

    def _interrupted(self, out_dir: Path, store: engine.ResultsStore) -> RunOutcome:
        """Ctrl-C, SIGTERM: keep what was measured, then one bounded stop of everything started."""
        if threading.current_thread() is threading.main_thread():
            # A second Ctrl-C must not cut the stop short and leave half the hosts with work running.
            self._handlers = (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM))
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        store.finish(finished=_now(), interrupted=True)
        stopped, problems = engine.stop_remote_work()
        said = {"stopped": stopped} if stopped else {}
        said |= {"not_stopped": problems} if problems else {}
        document = store.finish(finished=_now(), interrupted=True, **said)
        outcome = RunOutcome(
            "interrupted", out_dir=out_dir, document=document, stopped=stopped, not_stopped=problems
        )
        outcome.retry = write_retry_file(out_dir, document)
        db = self.request.history_db
        if db is not None and self.options.campaign is not None:  # what it found failing still counts
            outcome.campaign = ledger.record_run(
                db, self.options.campaign, document, self.request.needs, self.options.campaign_kind
            )
        return outcome

    def _report_interrupted(self, outcome: RunOutcome, out_dir: Path) -> RunOutcome:
        """The reports asked for, of what was measured, once the hosts are stopped and results.json is final:
        an operator who stops a run still wants the record in the form asked for (the cover says INCOMPLETE),
        not a second command to get it. Unlike the stop, this may be cut short: a second Ctrl-C (or SIGTERM)
        ends the writing, results.json already whole, each report either whole or absent (written atomically)."""
        formats, results = self.request.formats, out_dir / "results.json"
        if not formats - {"json"}:
            outcome.written = [results]
            return outcome
        handlers = self._handlers
        if handlers is not None:
            signal.signal(signal.SIGINT, handlers[0])
            signal.signal(signal.SIGTERM, handlers[1])
        try:
            with self.reporter.stage(f"reports ({', '.join(sorted(formats))})"):
                outcome.written = render(results, formats)
        except PdfUnavailable as exc:
            outcome.written, outcome.notes = exc.written, [str(exc)]
        except KeyboardInterrupt:  # the reports written before it stand; the rest are said not written
            done = [out_dir / name for key, name in OUTPUT_NAMES.items() if key in formats]
            outcome.written = [results, *(path for path in done if path.is_file())]
            missing = ", ".join(path.name for path in done if not path.is_file())
            outcome.notes = (
                [f"interrupted again: {missing} not written; {results} is complete"] if missing else []
            )
        except Exception:  # the measurements are kept: a renderer's bug costs the reports, not the record
            outcome.notes = [traceback.format_exc().rstrip("\n"), f"rendering failed; {results} is complete"]
        finally:
            if handlers is not None:
                signal.signal(signal.SIGINT, signal.SIG_IGN)
                signal.signal(signal.SIGTERM, signal.SIG_IGN)
        return outcome

    def _record(
        self, out_dir: Path, document: dict[str, Any], regressions: list[Any], db: Path | None
    ) -> RunOutcome:
        """History, reports and retention, once the record is complete."""
        if db is not None:
            history.record_run(db, document, out_dir)
            history.record_watch(db, document, self.watched)
            record_coverage(db, document)
        outcome = RunOutcome("done", out_dir=out_dir, document=document, regressions=regressions)
        outcome.retry = write_retry_file(out_dir, document)
        if db is not None and self.options.campaign is not None:
            outcome.campaign = ledger.record_run(
                db, self.options.campaign, document, self.request.needs, self.options.campaign_kind
            )
        try:
            with self.reporter.stage(f"reports ({', '.join(sorted(self.request.formats))})"):
                outcome.written = render(out_dir / "results.json", self.request.formats)
        except PdfUnavailable as exc:  # the cluster was measured: the verdict stands, the PDF is told
            outcome.written, outcome.notes = exc.written, [str(exc)]
        except Exception:
            outcome.status, outcome.message = "internal", traceback.format_exc()
            return outcome
        if self.nightly is not None and self.options.runs_dir and db is not None:
            kept = unattended.retain(
                db, document, self.options.runs_dir, out_dir, self.nightly.keep_runs, self.nightly.keep_days
            )
            outcome.retention_failures = list(kept.failures)
        self.reporter.run_finished((datetime.now(timezone.utc) - self.started).total_seconds())
        return outcome
