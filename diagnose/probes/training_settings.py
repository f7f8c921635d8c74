"""The training probe's host variables (:mod:`diagnose.probes.training`), checked up front.

Checked when the inventory is read, so a bad ``train_probe_bucket_caps`` stops the run (exit 2, naming
the file and line) before any host is touched. This module stays light: every run loads it, whether or not
the playbook switches the probe on. Steps stay below DDP's hundredth, timed iteration.
"""

from __future__ import annotations

from diagnose.config.host_settings import Validator, bounded
from diagnose.core.vars import Vars
from diagnose.shipped.train_probe import parse_caps


def _bucket_caps(values: Vars, name: str) -> str | None:
    """The DDP bucket sizes the probe compares: positive numbers of MB, parsed as the program will."""
    try:
        parse_caps(",".join(values.list(name) or []))
    except ValueError as exc:
        return f"{name} must list bucket sizes in MB, e.g. 100,400: {exc}"
    return None


SETTINGS: dict[str, Validator] = {
    "train_probe_params_m": bounded(Vars.float, 0.01, 100000),
    "train_probe_batch": bounded(Vars.int, 1, 4096),
    "train_probe_steps": bounded(Vars.int, 1, 50),
    "train_probe_bucket_caps": _bucket_caps,
}
