"""``nvidia-smi nvlink --status`` (link state and speed) and ``nvidia-smi nvlink -e`` (error counters).

``--status`` prints one block per GPU: ``GPU 0: NVIDIA H200 (UUID: GPU-…)`` then ``Link 0: 26.562 GB/s``
per link (Hopper; ``25 GB/s`` on A100 drivers, ``53.125 GB/s`` on Blackwell) or ``Link 3: <inactive>``.
A GPU without NVLink prints its header and no Link line, or the driver says "NVLink is not supported".

``-e`` has had two layouts: ``Link 0: Replay Errors: 0`` (one counter per line, Ampere/Hopper drivers)
and a ``Link 0:`` line followed by indented ``Name: value`` lines (Blackwell drivers, with many more
counters). Both are read into ``{counter_name: value}`` per link, names in snake_case, so a judge can
pick counters by kind (replay, recovery, CRC) whatever the driver calls them.
"""

from __future__ import annotations

import functools
import re
from typing import Any

_GPU = re.compile(r"^GPU (?P<index>\d+): (?P<name>.*?)(?: \(UUID: (?P<uuid>[^)]+)\))?\s*$")
_STATUS = re.compile(r"^\s+Link (?P<link>\d+): (?P<value>.+?)\s*$")
_SPEED = re.compile(r"^(?P<speed>\d+(?:\.\d+)?) GB/s$")
_COUNTER_INLINE = re.compile(r"^\s+Link (?P<link>\d+): (?P<name>[^:]+): (?P<value>-?\d+)\s*$")
_LINK_ONLY = re.compile(r"^\s+Link (?P<link>\d+):\s*$")
_COUNTER_NESTED = re.compile(r"^\s+(?P<name>[A-Za-z][^:]*?)\s*: (?P<value>-?\d+)\b")

NOT_SUPPORTED = ("not supported", "no nvlink", "unable to retrieve nvlink")


_NOT_WORD = re.compile(r"[^a-z0-9]+")


@functools.lru_cache(maxsize=1024)
def snake(name: str) -> str:
    """A counter's name in snake_case. Cached: a node prints the same few names for each of its hundreds
    of links, and this was most of the parser's time."""
    return _NOT_WORD.sub("_", name.strip().lower()).strip("_")


def parse_nvlink_status(text: str) -> dict[str, Any]:
    """Facts: ``gpus`` [{index, name, uuid, links: [{link, active, speed_gbps}]}] and ``supported``
    (False when the driver says NVLink is not supported or no GPU lists a link)."""
    gpus: list[dict[str, Any]] = []
    for line in text.splitlines():
        gpu = _GPU.match(line)
        if gpu:
            gpus.append(
                {
                    "index": int(gpu.group("index")),
                    "name": gpu.group("name"),
                    "uuid": gpu.group("uuid"),
                    "links": [],
                }
            )
            continue
        status = _STATUS.match(line)
        if status and gpus:
            value = status.group("value")
            speed = _SPEED.match(value)
            gpus[-1]["links"].append(
                {
                    "link": int(status.group("link")),
                    "active": speed is not None,
                    "speed_gbps": float(speed.group("speed")) if speed else None,
                }
            )
    lowered = text.lower()
    supported = any(g["links"] for g in gpus) and not any(s in lowered for s in NOT_SUPPORTED)
    return {"gpus": gpus, "supported": supported}


def parse_nvlink_errors(text: str) -> dict[str, Any]:
    """Facts: ``counters`` {gpu index (str): {link (str): {counter: value}}}, keyed by strings so the
    facts survive JSON (the engine keeps the before/after snapshots in results)."""
    counters: dict[str, dict[str, dict[str, int]]] = {}
    gpu: str | None = None
    link: str | None = None
    for line in text.splitlines():
        header = _GPU.match(line)
        if header:
            gpu, link = header.group("index"), None
            counters[gpu] = {}
            continue
        if gpu is None:
            continue
        inline = _COUNTER_INLINE.match(line)
        if inline:
            counters[gpu].setdefault(inline.group("link"), {})[snake(inline.group("name"))] = int(
                inline.group("value")
            )
            continue
        only = _LINK_ONLY.match(line)
        if only:
            link = only.group("link")
            counters[gpu].setdefault(link, {})
            continue
        nested = _COUNTER_NESTED.match(line)
        if nested and link is not None:
            counters[gpu][link][snake(nested.group("name"))] = int(nested.group("value"))
    return {"counters": counters}


def counter_kind(name: str) -> str | None:
    """Which of the three judged kinds a counter is: replay, recovery or crc (None: not judged)."""
    if "replay" in name:
        return "replay"
    if "recovery" in name and "successful" not in name:
        return "recovery"
    if "crc" in name:
        return "crc"
    return None
