"""What the watch list reads from one run: a number per physical component and metric, keyed by identity.

A degrading component is judged on its own past (diagnose.history.watch_trend), so its series must follow the
part, not the place: a GPU is its board serial (its UUID where the board prints none), an InfiniBand port is
its port GUID and port number, a cable or transceiver is the module serial mlxlink reads. Only where none is
known does the slot stand in (``slot:node1/00000000:18:00.0``): then a move cannot be told from a swap.

Everything here is read from what the nightly already measures: the GPU query of gpu.memory (corrected and
uncorrected ECC, remapped rows, retired pages, serial and UUID), the IB port counters of ib.counters with the
port GUIDs of ib.port_state's ``ibstat``, mlxlink's BER and module temperature of ib.optics, and the stress
figures (GEMM, HBM, burn-in clock and temperature) recorded in the results. The catalog below says, per
metric, whether it is a counter or a level, which way is worse, and what the operator does about a trend.
Pure: facts and result rows in, readings out.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from diagnose.catalog.stage_ids import GPU_BURNIN, GPU_GEMM, GPU_HBM

#: The ib.optics default for the effective BER (after FEC) an HDR/NDR link must stay below.
EFFECTIVE_BER_LIMIT = 1e-12


@dataclass(frozen=True)
class Metric:
    """One watched quantity: its shape for the trend judgement and the action a worsening trend asks for."""

    name: str
    shape: str  # "counter" (cumulative) | "level"
    worse: int  # +1: higher is worse; -1: lower is worse
    action: str  # one of diagnose.core.model.ACTIONS
    words: str  # what it is, for a reader


_CATALOG = (
    Metric(
        "gpu.ecc_corrected_volatile", "counter", 1, "drain_at_next_window", "corrected ECC since driver load"
    ),
    Metric("gpu.ecc_corrected_aggregate", "counter", 1, "drain_at_next_window", "corrected ECC, lifetime"),
    Metric(
        "gpu.ecc_uncorrected_aggregate", "counter", 1, "drain_at_next_window", "uncorrectable ECC, lifetime"
    ),
    Metric(
        "gpu.rows_remapped_correctable", "counter", 1, "drain_at_next_window", "rows remapped (correctable)"
    ),
    Metric(
        "gpu.rows_remapped_uncorrectable",
        "counter",
        1,
        "drain_at_next_window",
        "rows remapped (uncorrectable)",
    ),
    Metric("gpu.retired_pages", "counter", 1, "drain_at_next_window", "retired pages (SBE + DBE)"),
    Metric("ib.symbol_error", "counter", 1, "reseat_or_replace_cable", "port symbol errors"),
    Metric("ib.link_error_recovery", "counter", 1, "reseat_or_replace_cable", "port link recoveries"),
    Metric("ib.link_downed", "counter", 1, "reseat_or_replace_cable", "port link downs"),
    Metric("ib.port_rcv_errors", "counter", 1, "reseat_or_replace_cable", "port receive errors"),
    Metric(
        "ib.local_link_integrity_errors", "counter", 1, "reseat_or_replace_cable", "link integrity errors"
    ),
    Metric(
        "link.effective_ber_log10", "level", 1, "reseat_or_replace_cable", "log10 effective BER (after FEC)"
    ),
    Metric("link.raw_ber_log10", "level", 1, "reseat_or_replace_cable", "log10 raw BER (before FEC)"),
    Metric("cable.temperature_c", "level", 1, "check_cooling", "module temperature, °C"),
    Metric("gpu.gemm_tflops", "level", -1, "drain_at_next_window", "GEMM TFLOP/s"),
    Metric("gpu.hbm_gbps", "level", -1, "drain_at_next_window", "HBM GB/s"),
    Metric("gpu.burnin_sm_mhz", "level", -1, "check_cooling", "median SM clock under load, MHz"),
    Metric("gpu.burnin_temp_c", "level", 1, "check_cooling", "hottest GPU temperature under load, °C"),
)
METRICS: dict[str, Metric] = {m.name: m for m in _CATALOG}


def metric_of(name: str) -> Metric | None:
    """The catalog entry of a reading's metric; a GEMM or HBM figure carries its kind after a dot
    (``gpu.gemm_tflops.bf16``), which is still the one catalog entry."""
    return METRICS.get(name) or METRICS.get(name.rsplit(".", 1)[0])


@dataclass(frozen=True)
class Reading:
    """One number of one component in one run."""

    component: str  # "gpu:<serial>", "gpu:<uuid>", "port:<guid>/<n>", "cable:<serial>", "slot:<host>/<where>"
    host: str
    slot: str  # where it sat: "node1 GPU 00000000:18:00.0", "node1 mlx5_0/1"
    model: str  # peers are the components of the same model
    metric: str
    value: float
    limit: float | None = None
    shared: str = ""  # the identity it reported where another slot reported it too tonight (then the
    # component is the slot)


_GPU_COUNTERS = (
    ("gpu.ecc_corrected_volatile", ("corrected_volatile",)),
    ("gpu.ecc_corrected_aggregate", ("corrected_aggregate",)),
    ("gpu.ecc_uncorrected_aggregate", ("uncorrected_aggregate",)),
    ("gpu.rows_remapped_correctable", ("remapped_correctable",)),
    ("gpu.rows_remapped_uncorrectable", ("remapped_uncorrectable",)),
    ("gpu.retired_pages", ("retired_sbe", "retired_dbe")),
)
_IB_COUNTERS = (
    "symbol_error",
    "link_error_recovery",
    "link_downed",
    "port_rcv_errors",
    "local_link_integrity_errors",
)
_BUS_IN_LABEL = re.compile(r"\(([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f])\)")


@dataclass(frozen=True)
class _Gpu:
    component: str
    slot: str
    model: str


def _gpus(host: str, facts: Mapping[str, Any]) -> dict[str, _Gpu]:
    """The GPUs of gpu.memory's facts by bus id (upper case), each with its identity."""
    found: dict[str, _Gpu] = {}
    for gpu in (facts.get("gpu.memory") or {}).get("gpus") or []:
        bus = str(gpu.get("bus_id") or "").upper()
        if not bus:
            continue
        key = gpu.get("serial") or gpu.get("uuid")
        component = f"gpu:{key}" if key else f"slot:{host}/{bus}"
        found[bus] = _Gpu(component, f"{host} GPU {bus}", str(gpu.get("name") or "GPU"))
    return found


def _gpu_readings(host: str, facts: Mapping[str, Any], gpus: Mapping[str, _Gpu]) -> Iterable[Reading]:
    for gpu in (facts.get("gpu.memory") or {}).get("gpus") or []:
        where = gpus.get(str(gpu.get("bus_id") or "").upper())
        if where is None:
            continue
        for metric, keys in _GPU_COUNTERS:
            values = [gpu.get(k) for k in keys]
            if all(isinstance(v, int) for v in values):
                yield Reading(where.component, host, where.slot, where.model, metric, float(sum(values)))


def _port_guids(facts: Mapping[str, Any]) -> tuple[dict[tuple[str, int], str], dict[str, str]]:
    """(device, port) -> port GUID, device -> CA type, from whichever check kept ibstat's facts."""
    guids: dict[tuple[str, int], str] = {}
    models: dict[str, str] = {}
    for check_id in ("ib.port_state", "ib.link_rate", "ib.devices"):
        ibstat = facts.get(check_id) or {}
        for ca in ibstat.get("cas") or []:
            if ca.get("name") and ca.get("ca_type"):
                models.setdefault(str(ca["name"]), str(ca["ca_type"]))
        for port in ibstat.get("ports") or []:
            if port.get("device") and port.get("port_guid") and isinstance(port.get("port"), int):
                guids.setdefault((str(port["device"]), port["port"]), str(port["port_guid"]).lower())
    return guids, models


def _port_component(host: str, device: str, port: Any, guids: Mapping[tuple[str, int], str]) -> str:
    """``port:<guid>/<n>``; sysfs names the port ``"1"`` where ibstat counts it as 1."""
    number = int(port) if str(port).isdigit() else None
    guid = guids.get((device, number)) if number is not None else None
    return f"port:{guid}/{number}" if guid else f"slot:{host}/{device}/{port}"


def _ib_readings(host: str, facts: Mapping[str, Any]) -> Iterable[Reading]:
    guids, models = _port_guids(facts)
    for port in (facts.get("ib.counters") or {}).get("ports") or []:
        if port.get("state") != "ACTIVE":
            continue  # a Down port's counters say nothing new; ib.port_state judges it
        device, number = str(port.get("device")), port.get("port")
        component = _port_component(host, device, number, guids)
        slot, model = f"{host} {device}/{number}", models.get(device, "HCA")
        for name in _IB_COUNTERS:
            value = (port.get("counters") or {}).get(name)
            if isinstance(value, int):
                yield Reading(component, host, slot, model, f"ib.{name}", float(value))


def _log10(value: Any) -> float | None:
    return math.log10(value) if isinstance(value, int | float) and value > 0 else None


def _optics_readings(host: str, facts: Mapping[str, Any]) -> Iterable[Reading]:
    """mlxlink per port: BER on the cable where its module has a serial (the cable is what gets replaced),
    else on the port; the module's temperature against its own high alarm."""
    guids, _ = _port_guids(facts)
    for port in (facts.get("ib.optics") or {}).get("ports") or []:
        device, number = str(port.get("device") or "port"), port.get("port") or 1
        module = port.get("module") or {}
        slot = f"{host} {device}/{number}"
        serial = str(module.get("serial") or "").strip()
        component = f"cable:{serial}" if serial else _port_component(host, device, number, guids)
        model = str(module.get("part_number") or "cable")
        ber = port.get("ber") or {}
        effective, raw = _log10(ber.get("effective")), _log10(ber.get("raw"))
        if effective is not None:
            limit = math.log10(EFFECTIVE_BER_LIMIT)
            yield Reading(component, host, slot, model, "link.effective_ber_log10", effective, limit)
        if raw is not None:
            yield Reading(component, host, slot, model, "link.raw_ber_log10", raw)
        temperature = module.get("temperature") or {}
        if serial and isinstance(temperature.get("value"), int | float):
            high = temperature.get("high")
            limit = float(high) if isinstance(high, int | float) and high > 0 else None
            yield Reading(
                component, host, slot, model, "cable.temperature_c", float(temperature["value"]), limit
            )


def _by_gpu(observed: Any) -> Iterable[tuple[str, str, float]]:
    """(kind, bus id, value) of a stress row's ``{kind: {"GPU 0 (bus)": value}}``."""
    if not isinstance(observed, Mapping):
        return
    for kind, per_gpu in observed.items():
        if not isinstance(per_gpu, Mapping):
            continue
        for label, value in per_gpu.items():
            bus = _BUS_IN_LABEL.search(str(label))
            if bus and isinstance(value, int | float) and not isinstance(value, bool):
                yield str(kind), bus.group(1).upper(), float(value)


def _stress_readings(
    host: str, checks: Sequence[Mapping[str, Any]], gpus: Mapping[str, _Gpu]
) -> Iterable[Reading]:
    for row in checks:
        if row.get("host") != host or row.get("status") not in ("PASS", "WARN", "FAIL"):
            continue
        observed = row.get("observed")
        if row.get("id") in (GPU_GEMM, GPU_HBM):
            metric = "gpu.gemm_tflops" if row["id"] == GPU_GEMM else "gpu.hbm_gbps"
            for kind, bus, value in _by_gpu(observed):
                where = gpus.get(bus) or _Gpu(f"slot:{host}/{bus}", f"{host} GPU {bus}", "GPU")
                yield Reading(
                    where.component, host, where.slot, where.model, f"{metric}.{kind.split('.')[-1]}", value
                )
        elif row.get("id") == GPU_BURNIN and isinstance(observed, Mapping):
            for label, figures in observed.items():
                bus = _BUS_IN_LABEL.search(str(label))
                if not bus or not isinstance(figures, Mapping):
                    continue
                where = gpus.get(bus.group(1).upper())
                where = where or _Gpu(
                    f"slot:{host}/{bus.group(1).upper()}", f"{host} GPU {bus.group(1)}", "GPU"
                )
                for metric, key in (
                    ("gpu.burnin_sm_mhz", "median_sm_mhz"),
                    ("gpu.burnin_temp_c", "max_temp_c"),
                ):
                    value = figures.get(key)
                    if isinstance(value, int | float):
                        yield Reading(where.component, host, where.slot, where.model, metric, float(value))


def _by_slot(reading: Reading) -> Reading:
    """The reading keyed by where it sat (``slot:node1/00000000:18:00.0``, ``slot:node1/mlx5_0/1``), the
    identity it reported kept in ``shared``."""
    host, _, where = reading.slot.partition(" ")
    where = where.removeprefix("GPU ")
    return replace(reading, component=f"slot:{host}/{where}", shared=reading.component)


def readings(
    facts_by_host: Mapping[str, Mapping[str, Any]], checks: Sequence[Mapping[str, Any]] = ()
) -> list[Reading]:
    """Every watched number of one run: ``facts_by_host`` is each host's facts by check id (the host stage's),
    ``checks`` the run's result rows (the stress figures), one reading per component and metric.

    An identity that two slots report the same night (a cloned serial, a board's placeholder the parser did
    not catch, a GUID repeated across hosts) is not one part: merged, the two would make one series of
    alternating readings, or one would silently go unread. Both are read by their host and slot instead, and
    ``shared`` says which identity they had, for the report."""
    found: list[Reading] = []
    slots: dict[str, set[str]] = {}
    for host in sorted(facts_by_host):
        facts = facts_by_host[host]
        gpus = _gpus(host, facts)
        for reading in (
            *_gpu_readings(host, facts, gpus),
            *_ib_readings(host, facts),
            *_optics_readings(host, facts),
            *_stress_readings(host, checks, gpus),
        ):
            found.append(reading)
            slots.setdefault(reading.component, set()).add(reading.slot)
    unique: dict[tuple[str, str], Reading] = {}
    for reading in found:
        if len(slots[reading.component]) > 1 and not reading.component.startswith("slot:"):
            reading = _by_slot(reading)
        unique.setdefault((reading.component, reading.metric), reading)
    return list(unique.values())
