"""The per-NIC perftest benchmark's host variables (:mod:`diagnose.probes.perftest`), checked up front.

Every run loads this module (it is light: no launcher), so a bad ``perftest_ports`` stops the run with exit 2
naming the file and line, whether or not the playbook switches the benchmark on. :func:`settings_from`
reads them once, from the first host, for the whole stage.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from diagnose.config.host_settings import Validator, bounded, parsed_by
from diagnose.config.playbook import parse_size
from diagnose.core.errors import ConfigError
from diagnose.core.vars import Vars

DEFAULT_PORTS = (18515, 19514)
DEFAULT_BYTES = 1 << 20
DEFAULT_DURATION_S = 5
DEFAULT_BUDGET_S = 1200.0
DEFAULT_CONNECT_S = 30.0
DEFAULT_FRACTION = 0.9
DEFAULT_LATENCY_P99_US = 5.0
DEFAULT_LATENCY_ITERS = 5000
#: The message size of the latency test: perftest's default and smallest, the one fabrics quote.
LATENCY_BYTES = 2


def parse_ports(value: Any) -> tuple[int, int]:
    """``perftest_ports``: ``"18515-19514"`` (or a list of two), the TCP ports perftest servers listen on."""
    if value is None or value == "":
        return DEFAULT_PORTS
    parts = value if isinstance(value, list | tuple) else str(value).replace(" ", "").split("-")
    try:
        low, high = (int(p) for p in parts)
    except (TypeError, ValueError):
        raise ValueError(f"perftest_ports must be a range like 18515-19514, got {value!r}") from None
    if not 1024 <= low <= high <= 65535 or high - low < 1:
        raise ValueError(f"perftest_ports must be two or more ports within 1024-65535, got {value!r}")
    return low, high


def parse_bytes(value: Any) -> int:
    """``perftest_message_bytes``: ``1M`` (default), ``8M``, ``65536``."""
    return DEFAULT_BYTES if value is None or value == "" else parse_size(value)


#: An address perftest's client may be given: a host name or an IP address, nothing a shell would read.
_ADDRESS = re.compile(r"[A-Za-z0-9_.:%-]+\Z")


def _folder(values: Vars, name: str) -> str | None:
    value = values.str(name)
    if value is not None and (not value.strip() or any(ord(c) < 32 for c in value)):
        return f"{name} must be a folder path without control characters, got {value!r}"
    return None


def _address(values: Vars, name: str) -> str | None:
    value = values.str(name)
    if value is not None and (not _ADDRESS.match(value) or value.startswith("-")):
        return f"{name} must be a host name or an IP address, got {value!r}"
    return None


def _flag(values: Vars, name: str) -> str | None:
    try:
        values.bool(name)
    except ConfigError as exc:
        return str(exc)
    return None


SETTINGS: dict[str, Validator] = {
    "perftest_path": _folder,
    "perftest_address": _address,
    "perftest_gpudirect": _flag,
    "perftest_ports": parsed_by(parse_ports),
    "perftest_message_bytes": parsed_by(parse_bytes),
    "perftest_duration_s": bounded(Vars.int, 1, 3600),
    "perftest_budget_s": bounded(Vars.float, 10),
    "perftest_connect_s": bounded(Vars.float, 1, 600),
    "perftest_latency_iters": bounded(Vars.int, 100, 10_000_000),
    "min_nic_bw_fraction": bounded(Vars.float, 0.01, 1.0),
    "max_ib_latency_p99_us": bounded(Vars.float, 0.01),
}


@dataclass(frozen=True)
class Settings:
    """What one stage measures and how it judges: sizes, times, ports, thresholds.

    ``path`` is the folder of the perftest binaries (``perftest_path``; empty: the login PATH);
    ``gpudirect`` false keeps every buffer in host memory even where GPUDirect RDMA passed
    (``perftest_gpudirect``). Per host, ``perftest_address`` is the address clients reach its servers at
    (default: the host's own address; an IPoIB address keeps the exchange off the management network).
    """

    message_bytes: int = DEFAULT_BYTES
    duration_s: int = DEFAULT_DURATION_S
    ports: tuple[int, int] = DEFAULT_PORTS
    budget_s: float = DEFAULT_BUDGET_S
    connect_s: float = DEFAULT_CONNECT_S
    fraction: float = DEFAULT_FRACTION
    latency_p99_us: float = DEFAULT_LATENCY_P99_US
    latency_iters: int = DEFAULT_LATENCY_ITERS
    path: str = ""
    gpudirect: bool = True

    @property
    def step_budget_s(self) -> float:
        """How long one step may take before its pair counts as hung: connecting, measuring, tearing down."""
        return self.connect_s + self.duration_s + 30.0


def settings_from(host_vars: Vars) -> Settings:
    """The stage's settings from the first host's variables (validated when the inventory was read)."""
    base = Settings()
    return Settings(
        message_bytes=parse_bytes(host_vars.get("perftest_message_bytes")),
        duration_s=host_vars.int("perftest_duration_s", base.duration_s) or base.duration_s,
        ports=parse_ports(host_vars.get("perftest_ports")),
        budget_s=host_vars.float("perftest_budget_s", base.budget_s) or base.budget_s,
        connect_s=host_vars.float("perftest_connect_s", base.connect_s) or base.connect_s,
        fraction=host_vars.float("min_nic_bw_fraction", base.fraction) or base.fraction,
        latency_p99_us=host_vars.float("max_ib_latency_p99_us", base.latency_p99_us) or base.latency_p99_us,
        latency_iters=host_vars.int("perftest_latency_iters", base.latency_iters) or base.latency_iters,
        path=(host_vars.str("perftest_path") or "").rstrip("/"),
        gpudirect=bool(host_vars.bool("perftest_gpudirect", True)),
    )
