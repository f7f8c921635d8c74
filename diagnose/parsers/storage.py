"""Mounts, free space and NVMe drives: ``findmnt -l``, ``df -P -k`` and ``lsblk -d -n -P``.

``findmnt -l`` lists every mount with its options (``ro`` where the kernel remounted a filesystem read-only
after errors); a path mounted twice (stacked mounts) shows the one on top last. ``df -P -k`` gives the space
left to unprivileged users (``Available``) in KiB, one line per filesystem whatever the name's length.
``lsblk -P`` prints ``KEY="value"`` pairs per block device, so a model name with spaces stays one value.
"""

from __future__ import annotations

import re
import shlex
from typing import Any

from diagnose.core.check import ParseError

FINDMNT = "findmnt -l"
LSBLK = "lsblk -d -n -P -o NAME,TYPE,SIZE,MODEL"
_TREE = re.compile(r"^[\s│├└─|`-]+")
_PAIR = re.compile(r'(?P<key>[A-Z:-]+)="(?P<value>[^"]*)"')
_NVME_DISK = re.compile(r"^nvme\d+n\d+$")


def df_command(paths: list[str]) -> str:
    """``df -P -k`` for ``/`` and every expected mount (quoted: paths come from the inventory)."""
    wanted = list(dict.fromkeys(["/", *paths]))
    return "df -P -k -- " + " ".join(shlex.quote(p) for p in wanted)


def parse_findmnt(text: str) -> dict[str, dict[str, Any]]:
    """{target: {"source", "fstype", "options" (list)}} from ``findmnt -l`` (or its tree form); the
    last line of a target is the mount on top."""
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines or lines[0].split()[:1] != ["TARGET"]:
        raise ParseError(f"no TARGET header in findmnt output: {text.strip()[:120]!r}")
    mounts: dict[str, dict[str, Any]] = {}
    for line in lines[1:]:
        words = _TREE.sub("", line).split()
        if len(words) < 4:
            continue
        target = " ".join(words[:-3])
        source, fstype, options = words[-3:]
        mounts[target] = {"source": source, "fstype": fstype, "options": options.split(",")}
    return mounts


def parse_df(text: str) -> dict[str, dict[str, Any]]:
    """{mount point: {"filesystem", "size_kib", "available_kib"}} from ``df -P -k``. Error lines for a
    path that does not exist go to stderr; only the table is read."""
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines or not lines[0].startswith("Filesystem"):
        raise ParseError(f"no Filesystem header in df output: {text.strip()[:120]!r}")
    header = lines[0].split()
    if header[1] not in ("1024-blocks", "1K-blocks"):
        raise ParseError(f"df output is not in KiB (column {header[1]!r}); the command asks for -P -k")
    table: dict[str, dict[str, Any]] = {}
    for line in lines[1:]:
        words = line.split()
        if len(words) < 6 or not words[1].isdigit():
            continue
        table[" ".join(words[5:])] = {
            "filesystem": words[0],
            "size_kib": int(words[1]),
            "available_kib": int(words[3]),
        }
    return table


def parse_lsblk_pairs(text: str) -> list[dict[str, str]]:
    """One dict per device line of ``lsblk -P`` (keys as lsblk names them), device names without /dev/."""
    devices = []
    for line in text.splitlines():
        pairs = {m.group("key"): m.group("value") for m in _PAIR.finditer(line)}
        if "NAME" in pairs:
            pairs["NAME"] = pairs["NAME"].removeprefix("/dev/")
            devices.append(pairs)
    if not devices and text.strip():
        raise ParseError(f'no NAME="..." pair in lsblk -P output: {text.strip()[:120]!r}')
    return devices


def nvme_disks(devices: list[dict[str, str]]) -> list[dict[str, str]]:
    """The NVMe namespaces among lsblk's disks (``nvme0n1``, ...), one per drive on servers."""
    return [d for d in devices if d.get("TYPE") == "disk" and _NVME_DISK.match(d["NAME"])]
