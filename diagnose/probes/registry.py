"""Benchmarks that run after the collective sweep, each switched on by its own key of a playbook's
``benchmarks`` section.

They share the stage's hosts, setup (backend, ranks per host) and launcher, and may read what the sweep
measured (:attr:`diagnose.benchmarks.stage.Stage.records`: the training probe judges exposed communication
against the busbw the fabric just delivered). Each module named here has ``run(stage, setup) -> None`` and
emits its own checks and results.json records; modules are imported only when their key is on, so a
playbook without them never loads their code. Their host variables are checked on every run, from light
modules of their own (:data:`HOST_SETTINGS`), so a typo stops the run whether or not the extra is on.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

from diagnose.benchmarks.expect import check_busbw_setting
from diagnose.benchmarks.setup import Setup
from diagnose.config import quarantine_settings
from diagnose.config.host_settings import SETTINGS, Validator
from diagnose.config.playbook import COLLECTIVES
from diagnose.probes import kv_settings, perftest_settings, training_settings


@dataclass(frozen=True)
class Extra:
    """One benchmark after the sweep: the plan key that enables it, the module that runs it, and its name
    in the run's progress (the names the dry run's estimate gives its stages)."""

    plan_key: str
    module: str
    title: str


EXTRAS: tuple[Extra, ...] = (
    Extra("fleet_probes", "diagnose.probes.fleet", "fleet probes"),
    Extra("training_probe", "diagnose.probes.training", "training probe"),
    Extra("kv_transfer", "diagnose.probes.kv_transfer", "KV transfer"),
    # Per NIC and rail (perftest_latency adds ib_write_lat to the same launches).
    Extra("perftest", "diagnose.probes.perftest", "perftest"),
    # Last: its burn-in heats the GPUs for minutes, and a GPU that fails under it costs no other figure.
    Extra("stress", "diagnose.probes.stress", "GPU stress"),
)


#: Every host variable a run checks before any host is touched: the transports' and the benchmark stage's
#: (diagnose.config.host_settings), then each extra's own, and the bounds on acting on nodes.
HOST_SETTINGS: dict[str, Validator] = {
    **SETTINGS,
    **{f"expected_busbw_{c}_gbps": check_busbw_setting for c in COLLECTIVES},
    **kv_settings.SETTINGS,
    **training_settings.SETTINGS,
    **perftest_settings.SETTINGS,
    **quarantine_settings.SETTINGS,
}


def enabled(plan: Any) -> list[Extra]:
    """The extras a plan switches on, in the order they run."""
    return [extra for extra in EXTRAS if getattr(plan, extra.plan_key, False)]


def run_extras(stage: Any, setup: Setup) -> None:
    """Run every extra the stage's plan switches on, one after the other (they share the hosts' GPUs), each
    told as a stage of its own (its start, its hosts, its steps, its time)."""
    hosts = [h.name for h in setup.hosts]
    for extra in enabled(stage.plan):
        with stage.ctx.told.stage(extra.title, hosts):
            importlib.import_module(extra.module).run(stage, setup)
