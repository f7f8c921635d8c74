"""Building blocks of a test host in its own namespaces, shared by the sshd bed (tests/support/testbed.py) and
the Slurm bed (tests/support/slurmbed.py): the words their namespace scripts take (/dev/infiniband nodes,
overlays for missing mount points, memlock), the host's /sys/class/infiniband tree, and the pid namespaces
that tell which processes belong to a host.
"""

from __future__ import annotations

import contextlib
import os
import re
import resource
import shlex
from collections.abc import Mapping
from pathlib import Path


def infiniband_nodes(names: list[str] | None) -> list[str]:
    """ns_dev arguments: "noib", or "ib" then (name, major, minor) per device, with the real numbers
    for uverbs/umad/issm/rdma_cm so ``ls -l`` looks like a real host; other names become plain files."""
    if names is None:
        return ["noib"]
    args = ["ib"]
    for name in names:
        if "/" in name or not name or name.startswith("."):
            raise ValueError(f"bad /dev/infiniband name {name!r}")
        numbered = re.fullmatch(r"(uverbs|umad|issm)(\d+)", name)
        if numbered:
            base = {"umad": 0, "issm": 64, "uverbs": 192}[numbered.group(1)]
            args += [name, "231", str(base + int(numbered.group(2)))]
        elif name == "rdma_cm":
            args += [name, "10", "58"]
        else:
            args += [name, "-", "-"]
    return args


def sysfs_relative(relative: str) -> str:
    """A path under /sys/class/infiniband, refused if it is absolute or climbs out."""
    normal = os.path.normpath(relative)
    if not relative or relative.startswith("/") or normal != relative or normal.split("/")[0] == "..":
        raise ValueError(f"/sys/class/infiniband entry must be a normalized relative path: {relative!r}")
    return normal


def write_sysfs_tree(root: Path, entries: Mapping[str, str]) -> None:
    """The host's /sys/class/infiniband as plain directories and files (real ones are a symlink per
    device into /sys/devices; the checks only glob and read through them)."""
    root.mkdir()
    for relative, content in sorted(entries.items()):
        path = root / sysfs_relative(relative)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content)


def memlock_ceiling_kib() -> int | None:
    """The highest ``ulimit -l`` (KiB) a host can get here; None: unlimited.

    Raising RLIMIT_MEMLOCK above the hard limit needs CAP_SYS_RESOURCE in the machine's own user
    namespace; some containers (the dev container: hard limit 8192 KiB) drop it even for root, and then
    no host can be made ``unlimited`` for real. Tests that judge memlock read this to know what a
    healthy host shows.
    """
    hard = resource.getrlimit(resource.RLIMIT_MEMLOCK)[1]
    if hard == resource.RLIM_INFINITY or _has_capability(_CAP_SYS_RESOURCE):
        return None
    return hard // 1024


_CAP_SYS_RESOURCE = 24


def _has_capability(bit: int) -> bool:
    with contextlib.suppress(OSError, ValueError, StopIteration):
        status = Path("/proc/self/status").read_text().splitlines()
        effective = next(line for line in status if line.startswith("CapEff:"))
        return bool(int(effective.split()[1], 16) >> bit & 1)
    return False


def memlock_word(kib: int | None) -> str:
    """ns_memlock's argument: KiB, "unlimited", or "keep" (the machine's limit, where unlimited is refused)."""
    if kib is None:
        return "unlimited" if memlock_ceiling_kib() is None else "keep"
    if isinstance(kib, bool) or not isinstance(kib, int) or kib < 0:
        raise ValueError(f"memlock_kib must be a number of KiB or None, got {kib!r}")
    return str(kib)


def check_target(target: str, workdir: Path) -> None:
    """Refuse a file target a host cannot have bound: relative, under /dev, a directory, or above the bed."""
    if not target.startswith("/") or os.path.normpath(target) != target:
        raise ValueError(f"file target must be an absolute normalized path: {target!r}")
    if target == "/dev" or target.startswith("/dev/"):
        raise ValueError(f"{target}: /dev is private to each host; use HostSpec.infiniband")
    if os.path.isdir(target):
        raise ValueError(f"file target {target} is a directory")
    if str(workdir).startswith(target + "/"):
        raise ValueError(f"file target {target} contains the bed's work directory")


def overlays(wanted: Mapping[str, str], workdir: Path) -> list[tuple[str, list[str]]]:
    """Group missing paths by their nearest existing ancestor, merging an ancestor's groups into it,
    so each directory gets one overlay: ``[(dir, ["d:rel", "f:rel", ...]), ...]``, shallow first."""
    groups: dict[str, dict[str, str]] = {}
    for path, kind in wanted.items():
        if os.path.lexists(path):
            continue
        parent = os.path.dirname(path)
        missing = [(path, kind)]
        while not os.path.lexists(parent):
            missing.append((parent, "d"))
            parent = os.path.dirname(parent)
        if parent == "/":
            raise ValueError(f"{path}: only / exists above it; the bed will not overlay /")
        root = str(workdir)
        if root == parent or root.startswith(parent + "/"):
            raise ValueError(f"{path}: {parent} contains the bed's work directory; use another workdir")
        entries = groups.setdefault(parent, {})
        for item, item_kind in missing:
            entries[os.path.relpath(item, parent)] = item_kind
    for parent in sorted(groups, key=len, reverse=True):
        for other in groups:
            if other != parent and parent.startswith(other.rstrip("/") + "/"):
                prefix = os.path.relpath(parent, other)
                for rel, kind in groups.pop(parent).items():
                    groups[other][f"{prefix}/{rel}"] = kind
                break
    result = []
    for parent in sorted(groups, key=len):
        entries = groups[parent]
        ordered = sorted(entries, key=lambda rel: (entries[rel] != "d", rel.count("/"), rel))
        result.append((parent, [f"{entries[rel]}:{rel}" for rel in ordered]))
    return result


def shell_join(*words: str) -> str:
    """One line of a namespace script: the words quoted for the shell."""
    return " ".join(shlex.quote(word) for word in words)


def hold_pid_namespace(holder: int) -> tuple[str, int] | None:
    """The pid namespace of the first process inside the host (the child of ``unshare``), and an open
    fd on it. The fd keeps the namespace's inode number from being given to another namespace (of a
    bed in a parallel test) after this one dies, so a bed's leftover pids never include strangers."""
    try:
        children = Path(f"/proc/{holder}/task/{holder}/children").read_text().split()
        if not children:
            return None
        fd = os.open(f"/proc/{children[0]}/ns/pid", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    return f"pid:[{os.fstat(fd).st_ino}]", fd


def pids_in(namespaces: set[str]) -> list[int]:
    """Machine pids of the live processes in these pid namespaces (as ``readlink /proc/<pid>/ns/pid`` names them)."""
    if not namespaces:
        return []
    found = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if os.readlink(f"/proc/{entry.name}/ns/pid") in namespaces:
                    found.append(int(entry.name))
    return sorted(found)
