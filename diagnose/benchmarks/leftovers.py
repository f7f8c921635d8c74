"""The benchmark stage's part in leaving nothing behind on the hosts: before its first launch it removes the
launch folders earlier runs could not (their host stopped answering), after its last one those of this run
whose host answers again; each removal is said in a ``bench.cleanup`` row of the host
(:mod:`diagnose.launchers.leftovers` finds and removes them)."""

from __future__ import annotations

from diagnose.benchmarks.setup import CHECKLIST, BenchContext
from diagnose.catalog.stage_ids import BENCH_CLEANUP
from diagnose.core.model import CheckResult
from diagnose.launchers.leftovers import MIN_AGE_S, sweep, sweep_script


def sweep_leftovers(ctx: BenchContext, *, this_run: bool = False) -> None:
    """Remove unused launch folders on every benchmark host (``this_run``: this run's, its launches over)."""
    script = sweep_script(ctx.run_id, this_run=this_run, min_age_s=0 if this_run else MIN_AGE_S)
    whose = "this run (the host did not answer when it ended)" if this_run else "earlier runs"
    for host, folders in sweep(ctx.hosts, ctx.connections, script).items():
        if folders:
            listing, word = ", ".join(folders), "folder" if len(folders) == 1 else "folders"
            ctx.emit_check(
                CheckResult(
                    BENCH_CLEANUP,
                    host,
                    CHECKLIST,
                    "PASS",
                    observed=folders,
                    message=f"removed {len(folders)} {word} left on {host} by {whose}: {listing}",
                )
            )
