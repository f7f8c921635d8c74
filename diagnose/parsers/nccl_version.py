"""Which NCCL a job on this host would load, and where that answer came from.

The order is the order of authority: the benchmark interpreter's ``torch.cuda.nccl.version()`` is the NCCL
that PyTorch jobs really run (pip wheels bundle their own); a system ``libnccl.so.2`` found by the dynamic
linker is what nccl-tests and MPI programs load, its version read from the file the SONAME link resolves
to (``libnccl.so.2 -> libnccl.so.2.28.3``); the package database is the last resort.
"""

from __future__ import annotations

import re
from typing import Any

# The probe prints: torch version, torch's CUDA, torch.cuda.nccl.version(), the interpreter path.
TORCH_PROBE = (
    "import sys\n"
    "try:\n"
    "    import torch\n"
    "except Exception as exc:\n"
    '    print("no-torch", type(exc).__name__, sys.executable)\n'
    "else:\n"
    "    try:\n"
    "        nccl = torch.cuda.nccl.version()\n"
    "    except Exception:\n"
    "        nccl = None\n"
    "    print(torch.__version__, torch.version.cuda, nccl, sys.executable)\n"
)

_PROBE = re.compile(r"^(?P<torch>\S+) (?P<cuda>\S+) (?P<nccl>\([^)]*\)|\d+|None) (?P<python>\S.*)$")
_NO_TORCH = re.compile(r"^no-torch (?P<error>\S+) (?P<python>\S.*)$")
_RESOLVED = re.compile(r"^resolved (?P<path>\S+)$")
_SONAME_VERSION = re.compile(r"libnccl\.so\.(?P<v>\d+\.\d+\.\d+)$")
_LDCONFIG = re.compile(r"^(?P<name>libnccl\.so\S*) \(.*\) => (?P<path>\S+)$")
_DPKG = re.compile(r"^libnccl2\t(?P<v>\S+)$")
_RPM = re.compile(r"^libnccl-(?P<v>\d+\.\d+\.\d+\S*)$")
_VERSION = re.compile(r"^(?P<v>\d+\.\d+\.\d+)")


def nccl_code_to_version(code: int) -> str:
    """NCCL_VERSION_CODE: 2708 for 2.7.8 (before 2.9), 21805 for 2.18.5 (from 2.9 on)."""
    if code >= 10000:
        return f"{code // 10000}.{code % 10000 // 100}.{code % 100}"
    return f"{code // 1000}.{code % 1000 // 100}.{code % 100}"


def parse_torch_probe(text: str, exit_code: int | None) -> dict[str, Any]:
    """Facts: ``torch``, ``torch_cuda``, ``nccl`` (dotted), ``python``, ``error`` (why there is no answer)."""
    empty: dict[str, Any] = {"torch": None, "torch_cuda": None, "nccl": None, "python": None, "error": None}
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    for line in reversed(lines):
        match = _PROBE.match(line)
        if match:
            nccl = match.group("nccl")
            if nccl.startswith("("):
                numbers = re.findall(r"\d+", nccl)[:3]
                version = ".".join(numbers) if len(numbers) == 3 else None
            elif nccl.isdigit():
                version = nccl_code_to_version(int(nccl))
            else:
                version = None
            cuda = match.group("cuda")
            return {
                "torch": match.group("torch"),
                "torch_cuda": None if cuda == "None" else cuda,
                "nccl": version,
                "python": match.group("python"),
                "error": None if version else "torch has no NCCL (a CPU build, or CUDA not usable)",
            }
        match = _NO_TORCH.match(line)
        if match:
            return {
                **empty,
                "python": match.group("python"),
                "error": f"torch not importable ({match.group('error')})",
            }
    if exit_code == 127:
        return {**empty, "error": "the interpreter was not found"}
    return {**empty, "error": f"the probe printed nothing usable (exit code {exit_code})"}


def parse_nccl_libs(text: str) -> dict[str, Any]:
    """Facts: ``ldconfig`` entries, ``resolved`` versions from SONAME targets, ``dpkg`` and ``rpm`` versions."""
    ldconfig: list[dict[str, str]] = []
    resolved: list[str] = []
    dpkg = rpm = None
    for raw in text.splitlines():
        line = raw.strip()
        if match := _LDCONFIG.match(line):
            ldconfig.append({"name": match.group("name"), "path": match.group("path")})
        elif match := _RESOLVED.match(line):
            version = _SONAME_VERSION.search(match.group("path"))
            if version and version.group("v") not in resolved:
                resolved.append(version.group("v"))
        elif match := _DPKG.match(raw.rstrip("\n")):
            dpkg = match.group("v")
        elif match := _RPM.match(line):
            rpm = match.group("v")
    return {"ldconfig": ldconfig, "resolved": resolved, "dpkg": dpkg, "rpm": rpm}


def choose_nccl_version(torch_facts: dict[str, Any], libs: dict[str, Any]) -> dict[str, Any]:
    """The NCCL version by the module docstring's order, with ``source`` and a readable ``where``."""
    facts: dict[str, Any] = {
        "version": None,
        "source": None,
        "where": None,
        "torch": torch_facts.get("torch"),
        "torch_cuda": torch_facts.get("torch_cuda"),
        "python": torch_facts.get("python"),
        "torch_error": torch_facts.get("error"),
        "system": libs,
    }
    if torch_facts.get("nccl"):
        facts.update(
            version=torch_facts["nccl"],
            source="torch",
            where=f"torch.cuda.nccl.version() in {torch_facts.get('python') or 'the benchmark interpreter'}",
        )
    elif libs["resolved"]:
        paths = ", ".join(sorted({e["path"] for e in libs["ldconfig"]})) or "ldconfig"
        facts.update(version=libs["resolved"][0], source="ldconfig", where=f"system library {paths}")
    elif libs["dpkg"] and (match := _VERSION.match(libs["dpkg"])):
        facts.update(version=match.group("v"), source="dpkg", where=f"package libnccl2 {libs['dpkg']}")
    elif libs["rpm"] and (match := _VERSION.match(libs["rpm"])):
        facts.update(version=match.group("v"), source="rpm", where=f"package libnccl {libs['rpm']}")
    return facts


def system_nccl_versions(libs: dict[str, Any]) -> list[str]:
    """Every NCCL version the system (not torch) offers, for a note beside torch's."""
    found = list(libs.get("resolved", []))
    for package in (libs.get("dpkg"), libs.get("rpm")):
        match = _VERSION.match(package or "")
        if match and match.group("v") not in found:
            found.append(match.group("v"))
    return found
