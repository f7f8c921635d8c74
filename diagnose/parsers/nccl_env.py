"""The NCCL settings a job on this host starts with, and the names they may refer to.

NCCL reads its variables from the environment, then from ``$NCCL_CONF_FILE`` (or ``~/.nccl.conf`` when that
is unset), then from ``/etc/nccl.conf``, and a value already set is never overwritten: the environment wins
over the user's file, which wins over the system file. Lines starting with ``#`` and lines without ``=`` are
ignored, as NCCL ignores them. The command also lists ``/sys/class/net`` and ``/sys/class/infiniband`` so a
rule can tell whether ``NCCL_SOCKET_IFNAME`` and ``NCCL_IB_HCA`` name anything this host has.
"""

from __future__ import annotations

import re
from typing import Any

CONF_MARK = "@@nccl-conf"
ABSENT_MARK = "@@nccl-conf-absent"
IFACES_MARK = "@@net-interfaces"
RDMA_MARK = "@@rdma-devices"

# Run through the login shell, so variables set in /etc/profile.d or ~/.profile count, as they do for a
# job started from a login; falls back to plain sh where the login shell is not POSIX (csh, fish).
_INNER = (
    'env | grep "^NCCL_"; '
    'for f in "${NCCL_CONF_FILE:-$HOME/.nccl.conf}" /etc/nccl.conf; do '
    f'if [ -r "$f" ]; then echo "{CONF_MARK} $f"; cat "$f"; echo; else echo "{ABSENT_MARK} $f"; fi; done'
)
NCCL_ENV_SCRIPT = (
    f"s='{_INNER}'\n"
    '"${SHELL:-/bin/sh}" -lc "$s" </dev/null 2>/dev/null || sh -c "$s"\n'
    f"echo {IFACES_MARK}; ls -1 /sys/class/net 2>/dev/null\n"
    f"echo {RDMA_MARK}; ls -1 /sys/class/infiniband 2>/dev/null\n"
    "true\n"
)

_ASSIGNMENT = re.compile(r"^(?P<name>NCCL_[A-Za-z0-9_]+)=(?P<value>.*)$")


def _conf_values(lines: list[str]) -> dict[str, str]:
    """A conf file as NCCL reads it: ``NAME=value`` lines, ``#`` lines skipped, first ``=`` splits."""
    values: dict[str, str] = {}
    for line in lines:
        if not line or line.startswith("#") or "=" not in line:
            continue
        name, _, value = line.partition("=")
        values.setdefault(name, value)
    return values


def parse_nccl_env(text: str) -> dict[str, Any]:
    """Facts: ``environment``, ``files`` [{path, present, values}], ``effective`` {VAR: value},
    ``origin`` {VAR: "environment" | file path}, ``interfaces`` and ``rdma_devices`` (None if unlisted)."""
    environment: dict[str, str] = {}
    files: list[dict[str, Any]] = []
    interfaces: list[str] | None = None
    rdma: list[str] | None = None
    section = "env"
    body: list[str] = []

    def close_file() -> None:
        if section == "file" and files:
            files[-1]["values"] = _conf_values(body)

    for raw in text.splitlines():
        line = raw.rstrip("\n")
        if line.startswith(ABSENT_MARK + " "):
            close_file()
            files.append({"path": line[len(ABSENT_MARK) + 1 :], "present": False, "values": {}})
            section, body = "absent", []
        elif line.startswith(CONF_MARK + " "):
            close_file()
            files.append({"path": line[len(CONF_MARK) + 1 :], "present": True, "values": {}})
            section, body = "file", []
        elif line == IFACES_MARK:
            close_file()
            section, interfaces = "ifaces", []
        elif line == RDMA_MARK:
            close_file()
            section, rdma = "rdma", []
        elif section == "env":
            match = _ASSIGNMENT.match(line)
            if match:
                environment[match.group("name")] = match.group("value")
        elif section == "file":
            body.append(line)
        elif section == "ifaces" and interfaces is not None and line.strip():
            interfaces.append(line.strip())
        elif section == "rdma" and rdma is not None and line.strip():
            rdma.append(line.strip())
    close_file()

    effective = dict(environment)
    origin = dict.fromkeys(environment, "environment")
    for entry in files:
        for name, value in entry["values"].items():
            if name not in effective:
                effective[name] = value
                origin[name] = entry["path"]
    return {
        "environment": environment,
        "files": files,
        "effective": effective,
        "origin": origin,
        "interfaces": interfaces,
        "rdma_devices": rdma,
    }


def parse_name_filter(value: str) -> dict[str, Any]:
    """``NCCL_SOCKET_IFNAME`` / ``NCCL_IB_HCA`` syntax: ``^`` excludes, ``=`` matches exactly, otherwise
    each comma-separated entry is a prefix; ``:port`` suffixes (``mlx5_0:1``) name a port of a device."""
    text = value.strip()
    exclude = text.startswith("^")
    if exclude:
        text = text[1:]
    exact = text.startswith("=")
    if exact:
        text = text[1:]
    names = [part.strip().split(":")[0] for part in text.split(",") if part.strip()]
    return {"exclude": exclude, "exact": exact, "names": names}


def unmatched_names(value: str, available: list[str]) -> list[str]:
    """The entries of an include-filter that match nothing the host has (empty for exclude-filters)."""
    spec = parse_name_filter(value)
    if spec["exclude"]:
        return []
    missing = []
    for name in spec["names"]:
        hit = name in available if spec["exact"] else any(a.startswith(name) for a in available)
        if not hit:
            missing.append(name)
    return missing
