"""Rank 0's ``nvidia-smi --query-gpu ... -lms`` beside the GPU stress program's phases: clocks, power,
temperatures and error counters of every GPU of the host, read while the GPUs work.

Shipped beside :mod:`diagnose.shipped.stress` (its launch copies this file next to the program, as it does
``common.py``), so it uses nothing but the standard library. The burn-in keeps every sample for its
plot and rules; the gemm and hbm phases keep each GPU's median clock, power and power limit
(:func:`phase_readings`), which the judge scales its floor by and cites.
"""

from __future__ import annotations

import shutil
import statistics
import subprocess
import threading
import time
from typing import Any

#: Rank 0's nvidia-smi sampler: the fields of one sample, then a shorter list for drivers that refuse one.
SAMPLE_FIELDS = (
    "pci.bus_id",
    "clocks.sm",
    "clocks.mem",
    "temperature.gpu",
    "temperature.memory",
    "power.draw",
    "clocks_throttle_reasons.active",
    "utilization.gpu",
    "ecc.errors.uncorrected.volatile.total",
    "remapped_rows.pending",
    "enforced.power.limit",
    "clocks.max.sm",
)
BASIC_SAMPLE_FIELDS = SAMPLE_FIELDS[:8]
#: Tried in order until nvidia-smi accepts one (a driver that refuses one field refuses the whole query):
#: every field, then without the ECC and remap counters, then the basic list alone.
FIELD_LISTS = (SAMPLE_FIELDS, BASIC_SAMPLE_FIELDS + SAMPLE_FIELDS[10:], BASIC_SAMPLE_FIELDS)
#: What each gemm and hbm entry carries from rank 0's samples over its phase (the median): key → field.
#: The judge scales its floor by the power limit and cites clock and power in its verdicts.
PHASE_READINGS = {
    "sm_clock_mhz": "clocks.sm",
    "max_sm_clock_mhz": "clocks.max.sm",
    "power_w": "power.draw",
    "power_limit_w": "enforced.power.limit",
}
#: A gemm or hbm phase lasts a second or two: sample often enough for a median of several readings.
PHASE_SAMPLE_MS = 200


class Sampler:
    """Rank 0's ``nvidia-smi --query-gpu ... -lms`` running beside the burn-in (and through the gemm and
    hbm phases), its lines kept with the controller-independent time they were read at."""

    def __init__(self, interval_ms: int) -> None:
        self.interval_ms = interval_ms
        self.fields: tuple[str, ...] = ()
        self.lines: list[tuple[float, list[str]]] = []
        self.problem: str | None = None
        self.process: subprocess.Popen[str] | None = None
        self.thread: threading.Thread | None = None
        self.lock = threading.Lock()

    def start(self) -> None:
        if shutil.which("nvidia-smi") is None:
            self.problem = "nvidia-smi not found: no clocks, temperatures or power sampled"
            return
        for fields in FIELD_LISTS:
            command = [
                "nvidia-smi",
                f"--query-gpu={','.join(fields)}",
                "--format=csv,noheader,nounits",
                "-lms",
                str(self.interval_ms),
            ]
            process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            try:
                process.wait(timeout=1.5)
            except subprocess.TimeoutExpired:  # still sampling: this field list is accepted
                self.process, self.fields = process, fields
                self.thread = threading.Thread(target=self.read, daemon=True)
                self.thread.start()
                self.problem = None
                return
            said = (process.stdout.read() if process.stdout else "").strip()
            self.problem = f"nvidia-smi refused the query: {said[:200]}"

    def read(self) -> None:
        assert self.process is not None and self.process.stdout is not None
        for line in self.process.stdout:
            values = [v.strip() for v in line.split(",")]
            if len(values) == len(self.fields):
                with self.lock:
                    self.lines.append((round(time.time(), 3), values))

    def take(self) -> list[tuple[float, list[str]]]:
        with self.lock:
            taken, self.lines = self.lines, []
        return taken

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.process.kill()


def per_gpu_samples(
    lines: list[tuple[float, list[str]]], fields: tuple[str, ...], buses: list[str | None]
) -> dict[str, list[list[Any]]]:
    """Sampler lines by the bus id of this host's GPUs: ``[time, value, ...]`` in ``fields`` order after
    the bus id; numbers as numbers, ``[N/A]`` as None, the clock-event mask as its integer."""
    wanted = {b.upper()[-12:]: b for b in buses if b}
    out: dict[str, list[list[Any]]] = {b: [] for b in wanted.values()}
    for stamp, values in lines:
        bus = wanted.get(values[0].upper()[-12:])
        if bus is None:
            continue
        row: list[Any] = [stamp]
        for text in values[1:]:
            try:
                row.append(int(text, 16) if text.lower().startswith("0x") else float(text))
            except ValueError:  # [N/A], [Not Supported]; remapped_rows.pending prints Yes / No
                row.append({"yes": 1, "no": 0}.get(text.lower()))
        out[bus].append(row)
    return out


def phase_readings(samples: list[list[Any]], fields: tuple[str, ...]) -> dict[str, float]:
    """One GPU's :data:`PHASE_READINGS` over a phase: the median of each field it sampled (``samples`` as
    :func:`per_gpu_samples` gives them, time first in place of the bus id); fields missing or never
    read (``[N/A]``) are left out."""
    out = {}
    for key, name in PHASE_READINGS.items():
        if name not in fields:
            continue
        index = fields.index(name)
        values = [row[index] for row in samples if len(row) > index and isinstance(row[index], float)]
        if values:
            out[key] = round(statistics.median(values), 1)
    return out
