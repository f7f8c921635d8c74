"""How well the watch list names degrading components before they fail, on simulated fleets (issue 35).

A fleet of ``--gpus`` GPUs (8 per host, one HCA port and one cable per GPU) is read every night. Healthy
noise is sized from real captures in tests/fixtures where one exists, and from stated assumptions
(bench/watch_data/assumptions.json) where none does; failures arrive at Llama 3's rate, split over its
Table 5's causes, each with its trajectory before the failure or none. Every night the fleet is judged
with ``judge_matrix``, the arithmetic ``judge_fleet`` runs per (metric, model) group. Printed: recall and
lead time per kind, precision, false entries on a healthy fleet, the time and memory of ``judge_fleet``
over a whole history (docs/watch-simulation.md explains each).

    python bench/watch.py --gpus 1024            # about 20 s on 2 cores
    python bench/watch.py --gpus 16384 --seed 1  # the table of docs/watch-simulation.md
    python bench/watch.py --gpus 1024 --failure-scale 16 --sweep   # how each threshold was chosen
    python bench/watch.py --gpus 1024 --history-nights 7          # also a nightly begun a week before
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import re
import resource
import statistics
import subprocess
import sys
import time
import tracemalloc
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from diagnose.history import watch_trend  # noqa: E402
from diagnose.history.watch_trend import WINDOW, Series, judge_fleet, judge_matrix  # noqa: E402

CAPTURED = REPO / "tests" / "fixtures" / "captured"
GPU_RUNS = REPO / "tests" / "fixtures" / "gpu_runs"
#: What no capture shows (nightly behaviour of healthy parts), each value with its reason.
ASSUMED = REPO / "bench" / "watch_data" / "assumptions.json"
#: Llama 3 (arXiv 2407.21783), Table 5: unexpected interruptions in 54 days on 16,384 H100 GPUs.
LLAMA3_INTERRUPTIONS, LLAMA3_DAYS, LLAMA3_GPUS = 419, 54, 16384
#: Nights before a failure within which a watch counts as naming it.
LOOKAHEAD = 30


@dataclass(frozen=True)
class Metric:
    name: str
    unit: str  # "gpu" | "port" | "cable" | "host": which component carries it
    shape: str
    worse: int
    limit: float | None = None


#: Per-kind trajectories. ``row`` is Table 5's root cause, ``count`` its interruptions, ``part`` the share
#: of that row the kind stands for (an assumption where a row mixes kinds: stated in the docs).
@dataclass(frozen=True)
class Kind:
    name: str
    row: str
    count: int
    part: float
    unit: str
    visible: bool


KINDS = (
    Kind("gpu_off_bus", "Faulty GPU", 148, 0.5, "gpu", False),
    Kind("gpu_nvlink_errors", "Faulty GPU", 148, 0.2, "gpu", True),
    Kind("gpu_pcie_replays", "Faulty GPU", 148, 0.1, "gpu", True),
    Kind("gpu_perf_decay", "Faulty GPU", 148, 0.2, "gpu", True),
    Kind("hbm_ce_then_ue", "GPU HBM3 Memory", 72, 0.6, "gpu", True),
    Kind("hbm_sudden_ue", "GPU HBM3 Memory", 72, 0.4, "gpu", False),
    Kind("software_bug", "Software Bug", 54, 1.0, "host", False),
    Kind("cable_ber", "Network Switch/Cable", 35, 0.4, "cable", True),
    Kind("cable_optics", "Network Switch/Cable", 35, 0.2, "cable", True),
    Kind("switch_sudden", "Network Switch/Cable", 35, 0.4, "cable", False),
    Kind("host_maintenance", "Host Maintenance", 32, 1.0, "host", False),
    Kind("gpu_sram", "GPU SRAM Memory", 19, 1.0, "gpu", False),
    Kind("gpu_system_processor", "GPU System Processor", 17, 1.0, "gpu", False),
    Kind("nic_port_errors", "NIC", 7, 0.5, "port", True),
    Kind("nic_sudden", "NIC", 7, 0.5, "port", False),
    Kind("nccl_watchdog", "NCCL Watchdog Timeouts", 7, 1.0, "host", False),
    Kind("silent_data_corruption", "Silent Data Corruption", 6, 1.0, "gpu", False),
    Kind("gpu_thermal", "GPU Thermal Interface + Sensor", 6, 1.0, "gpu", True),
    Kind("host_hardware", "SSD, PSU, chassis, IO board, CPU, memory, dependency", 16, 1.0, "host", False),
)


@dataclass
class Noise:
    """Healthy noise: each figure with where it came from (a capture, or "assumed")."""

    values: dict[str, float] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)

    def put(self, key: str, value: float, source: str) -> None:
        self.values[key], self.sources[key] = value, source

    def __getitem__(self, key: str) -> float:
        return self.values[key]


def _rel_spread(values: list[float]) -> float:
    center = statistics.median(values)
    return 1.4826 * statistics.median(abs(v - center) for v in values) / center


def _bf16(path: Path) -> float:
    """The bf16 GEMM figure of a stress program's progress file."""
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    return next(r["gpus"][0]["tflops"] for r in rows if r.get("collective") == "gemm.bf16" and "gpus" in r)


def noise_model() -> Noise:
    """The healthy noise, read from the repository's real captures where one exists."""
    n = Noise()
    base = CAPTURED / "stress" / "h100_gemm_baseline.txt"
    rows = [json.loads(line) for line in base.read_text().splitlines() if line.startswith("{")]
    bf16 = [r["median"] for r in rows if r["what"] == "matmul bf16"]
    copy = [r["median"] for r in rows if r["what"] == "device copy"]
    n.put("gemm_tflops", statistics.mean(bf16), f"{base.relative_to(REPO)}: bf16 medians {bf16}")
    n.put("hbm_gbps", statistics.mean(copy), f"{base.relative_to(REPO)}: device copy medians {copy}")
    calib = GPU_RUNS / "h200x4-2026-11-27" / "calibration.txt"
    text = calib.read_text()
    gemm = [float(x) for x in re.findall(r"^matmul bf16\s+([\d.]+)", text, re.M)]
    hbm = [float(x) for x in re.findall(r"^device copy\s+([\d.]+)", text, re.M)]
    where = f"{calib.relative_to(REPO)}: {len(gemm)} runs x GPUs of 4 H200"
    n.put("gemm_rel_sigma", _rel_spread(gemm), f"{where}, robust spread of the bf16 medians")
    n.put("hbm_rel_sigma", _rel_spread(hbm), f"{where}, robust spread of the device-copy medians")
    hog = CAPTURED / "stress" / "h100_gemm_hbm_with_hog.jsonl"
    alone = CAPTURED / "stress" / "h100_all_phases_burnin120.jsonl"
    bf16 = [_bf16(path) for path in (hog, alone)]
    n.put("hog_ratio", bf16[0] / bf16[1], f"{hog.relative_to(REPO)} over {alone.name}: bf16 {bf16}")
    burn = alone
    last = [json.loads(line) for line in burn.read_text().splitlines() if '"burnin"' in line][-1]
    fields = last["fields"]
    samples = next(iter(last["samples"].values()))
    clock = [s[1 + fields.index("clocks.sm")] for s in samples]
    temp = [s[1 + fields.index("temperature.gpu")] for s in samples]
    where = f"{burn.relative_to(REPO)}: second burn-in minute, {len(samples)} nvidia-smi samples"
    n.put("clock_mhz", statistics.median(clock), where)
    n.put("clock_sigma", statistics.pstdev(clock), where + " (sample deviation, taken as night noise)")
    n.put("temp_c", statistics.median(temp), where)
    n.put("temp_sigma", statistics.pstdev(temp), where + " (sample deviation, taken as night noise)")
    optic = CAPTURED / "mlxlink" / "osfp_400g_optic_sichek.txt"
    text = optic.read_text()
    t = re.search(r"Temperature \[C\]\s*:\s*([\d.]+) \[([-\d.]+)\.\.([-\d.]+)\]", text)
    rx = re.search(r"Rx Power Current \[dBm\]\s*:\s*([-\d.,]+) \[([-\d.]+)\.\.", text)
    ber = re.search(r"Raw Physical BER\s*:\s*\S*?(\d+)E-(\d+)", text)
    assert t and rx and ber, "the mlxlink capture changed"
    lanes = [float(x) for x in rx.group(1).split(",")]
    where = f"{optic.relative_to(REPO)} (healthy 400G OSFP optic)"
    n.put("module_temp_c", float(t.group(1)), where)
    n.put("module_temp_alarm", float(t.group(3)), where + ", alarm range high end")
    n.put("rx_dbm", min(lanes), where + ", weakest of 4 lanes")
    n.put("rx_lane_sigma", statistics.pstdev(lanes), where + ", spread of its 4 lanes, as module-to-module")
    n.put("rx_alarm", float(rx.group(2)), where + ", low alarm")
    n.put("ber_log10", math.log10(float(ber.group(1))) - float(ber.group(2)), where + ", raw BER")
    ports = (CAPTURED / "ib_counters" / "h100_gpud_sysfs_testdata.txt").read_text()
    rcv = [int(v) for v in re.findall(r"port_rcv_errors (\d+)", ports)]
    downed = [int(v) for v in re.findall(r"link_downed (\d+)", ports)]
    where = "tests/fixtures/captured/ib_counters/h100_gpud_sysfs_testdata.txt (8 ports of an H100 node)"
    n.put("rcv_start", statistics.median(rcv), where + ", port_rcv_errors")
    n.put("downed_saturated_share", sum(d == 255 for d in downed) / len(downed), where + ", link_downed 255")
    for key, (value, why) in json.loads(ASSUMED.read_text()).items():
        n.put(key, value, f"assumed ({ASSUMED.relative_to(REPO)}): {why}")
    return n


METRICS = (
    Metric("gpu.ecc_corrected_aggregate", "gpu", "counter", 1),
    Metric("gpu.remapped_rows", "gpu", "counter", 1),
    Metric("gpu.nvlink_replay", "gpu", "counter", 1),
    Metric("gpu.pcie_replay", "gpu", "counter", 1),
    Metric("gpu.gemm_tflops", "gpu", "level", -1),
    Metric("gpu.hbm_gbps", "gpu", "level", -1),
    Metric("gpu.burnin_clock_mhz", "gpu", "level", -1),
    Metric("gpu.burnin_temp_c", "gpu", "level", 1, 87.0),
    Metric("ib.symbol_errors", "port", "counter", 1),
    Metric("ib.link_downed", "port", "counter", 1),
    Metric("ib.rcv_errors", "port", "counter", 1),
    Metric("cable.raw_ber_log10", "cable", "level", 1, -5.0),
    Metric("cable.temperature_c", "cable", "level", 1, 75.0),  # the mlxlink capture's alarm range
    Metric("cable.rx_power_dbm", "cable", "level", -1, -10.41),  # and its Rx power low alarm
    Metric("host.busbw_gbps", "host", "level", -1),
)


@dataclass(frozen=True)
class Failure:
    kind: Kind
    row: int  # row of the component (in its unit's arrays)
    night: int  # the first night the old part is no longer read
    onset: int  # first night of the trajectory


class Fleet:
    """The nightly readings of every metric of every component, with the failures planted in them."""

    def __init__(
        self, gpus: int, nights: int, rng: np.random.Generator, noise: Noise, failures: float = 0.0
    ) -> None:
        self.gpus, self.nights, self.rng, self.noise, self.scale = gpus, nights, rng, noise, failures
        self.rows = {"gpu": gpus, "port": gpus, "cable": gpus, "host": max(1, gpus // 8)}
        self.born = {unit: np.zeros(count, dtype=int) for unit, count in self.rows.items()}
        self.failures = self._plant() if failures else []
        for f in self.failures:
            self.born[f.kind.unit][f.row] = max(self.born[f.kind.unit][f.row], f.night)
        self.increments: dict[str, np.ndarray] = {}
        self.levels: dict[str, np.ndarray] = {}
        for m in METRICS:
            if m.shape == "counter":
                self.increments[m.name] = self._healthy_counter(m)
            else:
                self.levels[m.name] = self._healthy_level(m)
        for f in self.failures:
            self._degrade(f)
        self.values = {m.name: self._readings(m) for m in METRICS}

    def _plant(self) -> list[Failure]:
        """Failures at Llama 3's rate (times ``scale``), scaled to the fleet; nights run past the end so late
        watches can be true."""
        per_night = LLAMA3_INTERRUPTIONS / LLAMA3_DAYS / LLAMA3_GPUS * self.gpus * self.scale
        span = self.nights + LOOKAHEAD
        total = sum(k.count * k.part for k in KINDS)
        out, used = [], {unit: set() for unit in self.rows}
        for kind in KINDS:
            expected = per_night * span * kind.count * kind.part / total
            for _ in range(self.rng.poisson(expected)):
                row = int(self.rng.integers(self.rows[kind.unit]))
                if row in used[kind.unit]:
                    continue
                used[kind.unit].add(row)
                night = int(self.rng.integers(1, span))
                onset = night - int(self.rng.integers(3, 31))
                out.append(Failure(kind, row, night, onset))
        return out

    def _healthy_counter(self, m: Metric) -> np.ndarray:
        n, rows, rng = self.noise, self.rows[m.unit], self.rng
        shape = (rows, self.nights)
        bursts = (rng.random(shape) < n["burst_p"]) * np.ceil(rng.lognormal(1.5, 1.2, shape))
        inc = bursts
        if m.name in ("gpu.ecc_corrected_aggregate", "ib.symbol_errors"):
            steady = rng.random(rows) < n["steady_share"]
            rates = np.exp(rng.uniform(math.log(0.2), math.log(20.0), rows)) * steady
            inc = inc + rng.poisson(rates[:, None] * np.ones(shape))
        if m.name in ("gpu.remapped_rows", "ib.link_downed"):
            inc = (rng.random(shape) < n["burst_p"] / 6).astype(float)
        return inc.astype(float)

    def _healthy_level(self, m: Metric) -> np.ndarray:
        n, rows, rng, nights = self.noise, self.rows[m.unit], self.rng, self.nights
        shape = (rows, nights)
        ambient = n["ambient_c"] * np.sin(np.arange(nights) / nights * 2 * math.pi)
        if m.name in ("gpu.gemm_tflops", "gpu.hbm_gbps"):
            key = "gemm" if m.name == "gpu.gemm_tflops" else "hbm"
            center = n[f"{key}_tflops" if key == "gemm" else "hbm_gbps"]
            offset = center * (1 + n["level_offset_rel"] * rng.standard_normal(rows))
            out = offset[:, None] * (1 + n[f"{key}_rel_sigma"] * rng.standard_normal(shape))
            hog = rng.random(shape) < n["gemm_outlier_p"]
            return np.where(hog, out * n["hog_ratio"], out)
        plain = {  # centre, part-to-part deviation, night deviation, follows the ambient temperature
            "gpu.burnin_clock_mhz": ("clock_mhz", "clock_offset_mhz", "clock_sigma", False),
            "gpu.burnin_temp_c": ("temp_c", "temp_offset_c", "temp_sigma", True),
            "cable.temperature_c": ("module_temp_c", "module_temp_offset_c", "module_temp_sigma", True),
            "cable.rx_power_dbm": ("rx_dbm", "rx_lane_sigma", "rx_sigma", False),
            "cable.raw_ber_log10": ("ber_log10", "ber_offset", "ber_sigma", False),
        }
        if m.name in plain:
            center, part, night, warm = plain[m.name]
            offset = n[center] + n[part] * rng.standard_normal(rows)
            return offset[:, None] + warm * ambient + n[night] * rng.standard_normal(shape)
        fabric = 1 + n["busbw_rel_sigma"] * rng.standard_normal(nights)
        return n["busbw_gbps"] * fabric[None, :] * (1 + n["busbw_rel_sigma"] * rng.standard_normal(shape))

    def _ramp(self, f: Failure, power: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
        """Nights of the trajectory within the simulation and its progress (0 at onset, 1 at the failure)."""
        nights = np.arange(max(f.onset, 0), min(f.night, self.nights))
        return nights, ((nights - f.onset + 1) / (f.night - f.onset)) ** power

    def _accelerate(
        self, f: Failure, metric: str, start: tuple[float, float], end: tuple[float, float]
    ) -> None:
        """Poisson increments whose rate grows exponentially from ``start`` to ``end`` (each drawn log-uniform)."""
        nights, progress = self._ramp(f)
        first, last = (math.exp(self.rng.uniform(math.log(lo), math.log(hi))) for lo, hi in (start, end))
        rate = first * (last / first) ** progress
        self.increments[metric][f.row, nights] += self.rng.poisson(rate)

    def _degrade(self, f: Failure) -> None:
        """Add the kind's trajectory to the component's readings on the nights before its failure."""
        rng, name = self.rng, f.kind.name
        nights, progress = self._ramp(f, float(rng.choice([1.0, 2.0])))
        if not len(nights):
            return
        if name == "gpu_nvlink_errors":
            self._accelerate(f, "gpu.nvlink_replay", (0.2, 2), (5, 5000))
        elif name == "gpu_pcie_replays":
            self._accelerate(f, "gpu.pcie_replay", (0.2, 2), (5, 2000))
        elif name == "hbm_ce_then_ue":
            self._accelerate(f, "gpu.ecc_corrected_aggregate", (0.2, 2), (5, 2000))
            self._accelerate(f, "gpu.remapped_rows", (0.02, 0.1), (0.3, 3))
        elif name == "gpu_perf_decay":
            drop = rng.uniform(0.02, 0.10)
            for metric in ("gpu.gemm_tflops", "gpu.burnin_clock_mhz"):
                self.levels[metric][f.row, nights] *= 1 - drop * progress
        elif name == "gpu_thermal":
            level = self.levels["gpu.burnin_temp_c"]
            level[f.row, nights] += (87.0 + 1.0 - level[f.row].mean()) * progress
            self.levels["gpu.burnin_clock_mhz"][f.row, nights] *= 1 - 0.05 * progress**3
        elif name == "cable_ber":
            level = self.levels["cable.raw_ber_log10"]
            level[f.row, nights] += (-5.0 + 0.2 - level[f.row].mean()) * progress
            self._accelerate(f, "ib.symbol_errors", (0.1, 1), (5, 500))
        elif name == "cable_optics" and rng.random() < 0.5:
            level = self.levels["cable.temperature_c"]
            level[f.row, nights] += (self.noise["module_temp_alarm"] + 1 - level[f.row].mean()) * progress
        elif name == "cable_optics":
            level = self.levels["cable.rx_power_dbm"]
            level[f.row, nights] += (self.noise["rx_alarm"] - 0.5 - level[f.row].mean()) * progress
        elif name == "nic_port_errors":
            self._accelerate(f, "ib.symbol_errors", (0.1, 1), (5, 500))
            self._accelerate(f, "ib.rcv_errors", (0.1, 1), (3, 200))

    def _readings(self, m: Metric) -> np.ndarray:
        """What the nightly reads: cumulative counters (restarting with a replaced part), levels as they are."""
        if m.shape == "level":
            return self.levels[m.name]
        inc = self.increments[m.name]
        start = np.zeros(self.rows[m.unit])
        if m.name == "ib.rcv_errors":
            start += self.noise["rcv_start"]
        cum = start[:, None] + np.cumsum(inc, axis=1)
        if m.name == "ib.link_downed":
            saturated = self.rng.random(self.rows[m.unit]) < self.noise["downed_saturated_share"]
            cum = np.where(saturated[:, None], 255.0, np.minimum(cum, 255.0))
        for f in self.failures:
            if f.kind.unit == m.unit and 0 < f.night < self.nights:
                cum[f.row, f.night :] = np.cumsum(inc[f.row, f.night :])
        return cum

    def judge_night(self, m: Metric, lo: int, t: int) -> np.ndarray:
        """The components the watch list names on night ``t`` by metric ``m``, its readings from night ``lo``
        on (a part replaced since then from its own first night). The matrix is the nightly's: ``WINDOW``
        columns, nights without a reading NaN, as ``judge_fleet`` aligns a young series."""
        cols = np.arange(t - WINDOW + 1, t + 1)
        window = np.full((self.rows[m.unit], WINDOW), np.nan)
        window[:, cols >= lo] = self.values[m.name][:, lo : t + 1]
        born = self.born[m.unit]
        window[(cols[None, :] < born[:, None]) & (born[:, None] <= t)] = np.nan
        grid = np.where(np.isnan(window), np.nan, cols.astype(float))
        limits = None if m.limit is None else np.full(window.shape[0], m.limit)
        return judge_matrix(grid, window, m.shape, m.worse, limits).watched

    def judged_nights(self, history: int | None) -> list[tuple[int, int]]:
        """(first night of the window, night judged): the nightly has run since night 0, or with ``history``
        it starts afresh every that many nights (a fleet whose nightly is young), judged from its
        ``MIN_POINTS``-th night on."""
        if history is None:
            return [(max(0, t - WINDOW + 1), t) for t in range(MIN_NIGHT - 1, self.nights)]
        out = []
        for t in range(self.nights):
            lo = max(t - WINDOW + 1, t - t % history)
            if t - lo + 1 >= watch_trend.MIN_POINTS:
                out.append((lo, t))
        return out

    def watched(self, history: int | None = None) -> dict[str, np.ndarray]:
        """Per unit, a (rows × nights) map of the nights each component had at least one metric watched."""
        out = {unit: np.zeros((rows, self.nights), dtype=bool) for unit, rows in self.rows.items()}
        self.by_metric = {m.name: 0 for m in METRICS}
        for lo, t in self.judged_nights(history):
            for m in METRICS:
                hit = self.judge_night(m, lo, t)
                self.by_metric[m.name] += int(hit.sum())
                out[m.unit][:, t] |= hit
        return out


#: A trajectory this long can be watched 3 nights ahead; the first night the watch list judges.
LONG_TREND = MIN_NIGHT = 7


def score(fleet: Fleet, watched: dict[str, np.ndarray]) -> tuple[list[list[str]], float]:
    """Per-kind recall and lead time over failures with a full window of history, and the overall precision."""
    table = []
    pooled: dict[bool, list[int]] = {True: [], False: []}
    longer: list[int] = []
    for kind in KINDS:
        leads = []
        for f in fleet.failures:
            if f.kind is not kind or not (WINDOW + LOOKAHEAD // 2 <= f.night < fleet.nights):
                continue
            since = max(0, f.night - LOOKAHEAD)
            seen = np.flatnonzero(_named(watched, kind.unit)[f.row, since : f.night])
            leads.append(int(f.night - since - seen[0]) if len(seen) else 0)
            if kind.visible and f.night - f.onset >= LONG_TREND:
                longer.append(leads[-1])
        pooled[kind.visible] += leads
        table.append(_recall_row(kind.name, "trend" if kind.visible else "none", leads))
    table.append(_recall_row("all with a trend", "trend", pooled[True]))
    table.append(_recall_row(f"  of them, trend >= {LONG_TREND} nights", "trend", longer))
    table.append(_recall_row("all without one", "none", pooled[False]))
    true = total = 0
    doomed = {unit: {} for unit in fleet.rows}
    for f in fleet.failures:
        for unit in {f.kind.unit, "port" if f.kind.unit == "cable" else f.kind.unit}:
            doomed[unit][f.row] = f.night
    for unit, grid in watched.items():
        for row, t in zip(*np.nonzero(grid), strict=True):
            total += 1
            night = doomed[unit].get(int(row))
            true += night is not None and t < night <= t + LOOKAHEAD
    return table, (true / total if total else float("nan"))


def score_young(fleet: Fleet, history: int) -> list[list[str]]:
    """Per-kind recall and lead time when the nightly began ``history`` nights before each failure: the
    failing part and all its peers have only those nights of readings."""
    table = []
    pooled: dict[bool, list[int]] = {True: [], False: []}
    longer: list[int] = []
    for kind in KINDS:
        units = {kind.unit, "port"} if kind.unit == "cable" else {kind.unit}
        leads = []
        for f in fleet.failures:
            if f.kind is not kind or not (history <= f.night < fleet.nights):
                continue
            start, lead = f.night - history, 0
            for t in range(start + watch_trend.MIN_POINTS - 1, f.night):
                lo = max(start, t - WINDOW + 1)
                if any(fleet.judge_night(m, lo, t)[f.row] for m in METRICS if m.unit in units):
                    lead = f.night - t
                    break
            leads.append(lead)
            if kind.visible and f.night - f.onset >= LONG_TREND:
                longer.append(lead)
        pooled[kind.visible] += leads
        table.append(_recall_row(kind.name, "trend" if kind.visible else "none", leads))
    table.append(_recall_row("all with a trend", "trend", pooled[True]))
    table.append(_recall_row(f"  of them, trend >= {LONG_TREND} nights", "trend", longer))
    table.append(_recall_row("all without one", "none", pooled[False]))
    return table


def _named(watched: dict[str, np.ndarray], unit: str) -> np.ndarray:
    """The nights a failing unit was named: a cable also through its port's counters (one port per cable)."""
    return watched[unit] | watched["port"] if unit == "cable" else watched[unit]


def _recall_row(name: str, warning: str, leads: list[int]) -> list[str]:
    """One row of the recall table from the lead times (0: never watched before the failure)."""
    n = len(leads)
    got = sorted(lead for lead in leads if lead >= 1)
    return [
        name,
        warning,
        str(n),
        _pct(len(got), n),
        _pct(sum(lead >= 3 for lead in leads), n),
        f"{statistics.median(got):g}" if got else "-",
        f"{np.percentile(got, 10):.0f}" if got else "-",
    ]


def _pct(part: int, whole: int) -> str:
    return f"{100 * part / whole:.0f} % ({part}/{whole})" if whole else "-"


def _table(headers: list[str], rows: list[list[str]]) -> str:
    rows = [headers, *rows]
    widths = [max(len(r[i]) for r in rows) for i in range(len(headers))]
    lines = ["  ".join(c.ljust(widths[i]) for i, c in enumerate(r)).rstrip() for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def false_entries(
    fleet: Fleet, watched: dict[str, np.ndarray], history: int | None = None
) -> list[list[str]]:
    """Watch entries per 1,000 component-nights (and per 1,000 GPU-nights) on a fleet without failures."""
    judged = len(fleet.judged_nights(history))
    rows, total = [], 0
    for unit, grid in watched.items():
        count = int(grid.sum())
        total += count
        rows.append([unit, str(count), f"{1000 * count / (fleet.rows[unit] * judged):.3f}"])
    rows.append(["all, per GPU-night", str(total), f"{1000 * total / (fleet.gpus * judged):.3f}"])
    return rows


MODELS = {"gpu": "NVIDIA H100 80GB HBM3", "port": "MT4129", "cable": "T-F4GS-BV0", "host": "8x H100"}


def as_series(fleet: Fleet, keep: int) -> list[Series]:
    """The fleet's newest ``keep`` nights as the watch list's Series, one per metric and component."""
    nights = tuple(float(n) for n in range(fleet.nights))[-keep:]
    out = []
    for m in METRICS:
        model = MODELS[m.unit]
        for row, values in enumerate(fleet.values[m.name][:, -keep:].tolist()):
            out.append(
                Series(f"{m.unit}:{row}", m.name, model, nights, tuple(values), m.shape, m.worse, m.limit)
            )
    return out


def judge_timing(gpus: int, nights: int, seed: int, keep: int) -> dict[str, float]:
    """Time ``judge_fleet`` over a healthy fleet's history as Series (``keep`` newest nights), in a child
    process; the memory figures are described in docs/watch-simulation.md."""
    fleet = Fleet(gpus, nights, np.random.default_rng(seed), noise_model())
    series = as_series(fleet, keep)
    del fleet
    gc.collect()
    rss = int(Path("/proc/self/statm").read_text().split()[1]) * resource.getpagesize() / 2**20
    start = time.perf_counter()
    walked = sum(sum(s.values) != 0 for s in series)  # the baseline: touch every value once
    walk = time.perf_counter() - start
    start = time.perf_counter()
    found = judge_fleet(series)
    judge = time.perf_counter() - start
    max_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    tracemalloc.start()
    judge_fleet(series)
    peak = tracemalloc.get_traced_memory()[1] / 2**20
    tracemalloc.stop()
    shared = {id(s.nights): sys.getsizeof(s.nights) for s in series}
    held = sum(shared.values()) + sum(
        sys.getsizeof(s) + sys.getsizeof(s.values) + sum(map(sys.getsizeof, s.values)) for s in series
    )
    out = {
        "series": len(series),
        "values": sum(len(s.values) for s in series),
        "walk_s": walk,
        "judge_s": judge,
    }
    out |= {"watched": len(found), "series_mib": held / 2**20, "rss_mib": rss, "judge_peak_mib": peak}
    return out | {"max_rss_mib": max_rss, "nonzero": walked}


#: One threshold moved at a time around the shipped values: how each was chosen (docs/watch-simulation.md).
SWEEP = (("MIN_Z", (3.0, 6.0, 10.0)), ("MIN_RISE_Z", (1.0, 2.0, 3.0, 4.0)), ("MIN_TAU", (0.2, 0.4, 0.6)))
SWEEP += (("MIN_MOVES", (2, 3, 5)), ("CAUTION", (0.5, 0.25, 0.1)), ("HORIZON", (14.0, 30.0, 60.0)))


def sweep(args: argparse.Namespace, noise: Noise) -> None:
    """Recall (>= 3 nights, trend kinds pooled) and false entries per 1,000 GPU-nights as each threshold moves."""
    sick = Fleet(args.gpus, args.nights, np.random.default_rng(args.seed), noise, failures=args.failure_scale)
    healthy = Fleet(args.gpus, args.nights, np.random.default_rng(args.seed + 1000), noise)
    rows = []
    for name, values in SWEEP:
        shipped = getattr(watch_trend, name)
        for value in values:
            setattr(watch_trend, name, value)
            table, precision = score(sick, sick.watched())
            pooled = next(r for r in table if r[0] == "all with a trend")
            false = false_entries(healthy, healthy.watched())[-1][2]
            mark = " (shipped)" if value == shipped else ""
            rows.append([f"{name} = {value:g}{mark}", pooled[4], pooled[5], f"{precision:.1%}", false])
        setattr(watch_trend, name, shipped)
    headers = ["threshold", "recall >=3 nights", "lead median", "precision", "false per 1,000 GPU-nights"]
    print(_table(headers, rows))


RECALL_HEADERS = [
    "kind",
    "warning",
    "failures",
    "recall >=1 night",
    "recall >=3 nights",
    "lead median",
    "lead p10",
]
TIMING_HEADERS = ["Series held", "step", "seconds", "Series MiB", "judge peak MiB", "RSS / max RSS MiB"]


def print_timing(args: argparse.Namespace) -> None:
    """The judge_fleet timing table, each case in a child process of its own."""
    rows = []
    for keep in (args.nights, WINDOW):
        command = [sys.executable, __file__, "--timing-child", "--gpus", str(args.gpus), "--keep", str(keep)]
        command += ["--nights", str(args.nights), "--seed", str(args.seed)]
        t = json.loads(subprocess.run(command, capture_output=True, text=True, check=True).stdout)
        label = f"{keep} nights x {t['series']} series"
        rows.append(
            [label, "walk every value (baseline)", f"{t['walk_s']:.2f}", f"{t['series_mib']:.0f}", "", ""]
        )
        rss = f"{t['rss_mib']:.0f} / {t['max_rss_mib']:.0f}"
        rows.append([label, "judge_fleet", f"{t['judge_s']:.2f}", "", f"{t['judge_peak_mib']:.0f}", rss])
    print(f"\njudge_fleet over a healthy {args.gpus}-GPU fleet's {args.nights}-night history")
    print(_table(TIMING_HEADERS, rows))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--gpus", type=int, default=1024)
    parser.add_argument("--nights", type=int, default=90)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--failure-scale", type=float, default=1.0, help="failures at this many x Llama 3's rate"
    )
    parser.add_argument(
        "--sweep", action="store_true", help="move each threshold in turn and print the table"
    )
    parser.add_argument(
        "--history-nights",
        type=int,
        help="also score a young nightly: begun this many nights before each failure (a healthy fleet's"
        " history starting afresh every this many nights)",
    )
    parser.add_argument("--timing-child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--keep", type=int, default=90, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.timing_child:
        print(json.dumps(judge_timing(args.gpus, args.nights, args.seed, args.keep)))
        return 0
    noise = noise_model()
    if args.sweep:
        sweep(args, noise)
        return 0
    print(
        f"fleet: {args.gpus} GPUs, {args.gpus // 8} hosts, {args.nights} nights, seed {args.seed},", end=" "
    )
    print(f"failures at {args.failure_scale:g} x Llama 3's rate")
    start = time.perf_counter()
    sick = Fleet(args.gpus, args.nights, np.random.default_rng(args.seed), noise, failures=args.failure_scale)
    table, precision = score(sick, sick.watched())
    print(_table(RECALL_HEADERS, table))
    print(
        f"precision (watched component-nights followed by its failure within {LOOKAHEAD} nights): {precision:.1%}"
    )
    healthy = Fleet(args.gpus, args.nights, np.random.default_rng(args.seed + 1000), noise)
    print("\nhealthy fleet, false watch entries (components watched per night)")
    entries = false_entries(healthy, healthy.watched())
    print(_table(["component", "entries", "per 1,000 component-nights"], entries))
    print("by metric: " + ", ".join(f"{k} {v}" for k, v in healthy.by_metric.items() if v))
    if args.history_nights:
        young = args.history_nights
        print(f"\nyoung nightly: begun {young} nights before each failure")
        print(_table(RECALL_HEADERS, score_young(sick, young)))
        print(f"\nhealthy fleet, its history starting afresh every {young} nights, false watch entries")
        entries = false_entries(healthy, healthy.watched(young), young)
        print(_table(["component", "entries", "per 1,000 component-nights"], entries))
        print("by metric: " + ", ".join(f"{k} {v}" for k, v in healthy.by_metric.items() if v))
    print(f"(simulation and nightly judgement: {time.perf_counter() - start:.1f} s)")
    print_timing(args)
    print("\nnoise sources:")
    for key, source in noise.sources.items():
        print(f"  {key} = {noise[key]:.4g}: {source}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
