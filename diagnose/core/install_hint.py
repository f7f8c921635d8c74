"""How to install something from where the user stands: the one wording of every "install ..." message.

Two traps make a fixed sentence wrong. The name ``diagnose`` on the package index is another project's, so
``pip install 'diagnose[bench]'`` installs something unrelated: this project is distributed as
``diagnose-cluster`` (the import package and the ``diagnose`` command keep their name). And most users run
from a source checkout, where the index is the wrong source altogether: the extra must come from that
checkout, into the environment that runs diagnose. pip records where an installed distribution came from
in its ``direct_url.json`` (PEP 610): absent for the index, a ``file://`` folder with ``dir_info`` for a
checkout (``editable`` for ``pip install -e``), a URL or VCS reference otherwise. Nothing installed at all
means a bare checkout on ``PYTHONPATH``. Each command names the interpreter that runs diagnose
(``<python> -m pip``), so the install lands in its environment whether or not a venv is activated.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from urllib.parse import unquote, urlparse

#: The distribution name on the package index (``diagnose`` there is an unrelated project).
DIST = "diagnose-cluster"
#: The extra that brings torch, which every benchmark launches.
BENCH = "bench"
#: PyTorch's own index of CPU-only wheels. The index's default Linux wheel is the CUDA build, whose CUDA
#: libraries (5.6 GB and 51 s on the machine of issue 36) a host without an NVIDIA GPU never loads.
CPU_INDEX = "https://download.pytorch.org/whl/cpu"
#: PyTorch's index of CUDA 13.0 wheels, which carries Linux aarch64 builds. On aarch64 (Grace: GH200, GB200,
#: GB300) the package index's torch is the CPU build, so ``pip install torch`` on a Grace tray gives a torch
#: without CUDA or NCCL (pytorch/pytorch issues 160162 and 168065; PyTorch's install page tells Linux aarch64
#: users to pass a CUDA index since pytorch/test-infra pull request 7652). The CPU index above holds aarch64
#: wheels too, so the CPU remedy is the same on both architectures.
CUDA_AARCH64_INDEX = "https://download.pytorch.org/whl/cu130"
#: ``uname -m`` of the 64-bit Arm machines (Linux says aarch64, some tools arm64).
ARM64 = ("aarch64", "arm64")


@dataclass(frozen=True)
class Origin:
    """Where this installation came from: ``editable`` or ``folder`` (a checkout at ``location``), ``url``
    (an archive or VCS reference at ``location``), ``index``, or ``checkout`` (not installed: run from the
    folder at ``location``)."""

    kind: str
    location: str | None = None


def origin_from(direct_url: str | None, installed: bool, checkout: Path) -> Origin:
    """The origin told by a distribution's ``direct_url.json`` text (None: the file is absent). Pure."""
    if not installed:
        return Origin("checkout", str(checkout))
    if not direct_url:
        return Origin("index")
    try:
        record = json.loads(direct_url)
    except ValueError:
        return Origin("index")
    url = str(record.get("url") or "") if isinstance(record, dict) else ""
    if not url:
        return Origin("index")
    if url.startswith("file://") and isinstance(record.get("dir_info"), dict):
        folder = unquote(urlparse(url).path)
        return Origin("editable" if record["dir_info"].get("editable") else "folder", folder)
    vcs = record.get("vcs_info")
    if isinstance(vcs, dict) and vcs.get("vcs"):
        url = f"{vcs['vcs']}+{url}"
    return Origin("url", url)


def current_origin() -> Origin:
    """Where the running diagnose came from, read from the installed distribution's metadata."""
    checkout = Path(__file__).resolve().parents[2]
    try:
        dist = metadata.distribution(DIST)
    except metadata.PackageNotFoundError:
        return origin_from(None, False, checkout)
    return origin_from(dist.read_text("direct_url.json"), True, checkout)


def install_command(extra: str = BENCH, origin: Origin | None = None, python: str | None = None) -> str:
    """The shell command that adds ``extra`` to the environment running diagnose, from where it came."""
    origin = origin or current_origin()
    python = python or sys.executable
    if origin.kind in ("editable", "checkout"):
        args = ["-e", f"{origin.location}[{extra}]"]
    elif origin.kind == "folder":
        args = [f"{origin.location}[{extra}]"]
    elif origin.kind == "url":
        args = [f"{DIST}[{extra}] @ {origin.location}"]
    else:
        args = [f"{DIST}[{extra}]"]
    return shlex.join([python, "-m", "pip", "install", *args])


def package_command(requirement: str, python: str | None = None) -> str:
    """The shell command that installs one dependency of diagnose into the environment running it."""
    return shlex.join([python or sys.executable, "-m", "pip", "install", requirement])


def same_interpreter(interpreter: str, python: str | None = None) -> bool:
    """Whether ``interpreter`` is the Python running diagnose. Paths are compared as written, not resolved:
    a venv's python is a link to the base interpreter, and the two have different packages."""
    python = python or sys.executable
    return os.path.abspath(interpreter) == os.path.abspath(python)


def cpu_torch_command(python: str = "python3") -> str:
    """The shell command that installs torch's CPU build for ``python``."""
    return shlex.join([python, "-m", "pip", "install", "torch", "--index-url", CPU_INDEX])


def cuda_aarch64_torch_command(python: str = "python3") -> str:
    """The shell command that installs torch's CUDA build on a 64-bit Arm Linux host for ``python``."""
    return shlex.join([python, "-m", "pip", "install", "torch", "--index-url", CUDA_AARCH64_INDEX])


def is_arm64(machine: str | None) -> bool:
    return (machine or "").strip().lower() in ARM64


def _aarch64_hint(interpreter: str, local: bool, python: str) -> str:
    """An aarch64 host with (or maybe with) an NVIDIA GPU: the CUDA index, since the default is CPU-only."""
    why = (
        "on aarch64 the package index's torch is the CPU build (no CUDA, no NCCL); PyTorch's CUDA builds for "
        "Arm come from its own index (cu130 needs driver 580 or later, use .../whl/cu128 with an older one)"
    )
    theirs, own = cuda_aarch64_torch_command(interpreter), cuda_aarch64_torch_command(python)
    if not local:
        return (
            f"Install torch's CUDA build for that interpreter on the host ({theirs}): {why}; or point "
            "bench_python / ansible_python_interpreter at a Python there that has it"
        )
    if same_interpreter(interpreter, python):
        return f"Install torch's CUDA build into the environment running diagnose: {own} ({why})"
    return (
        f"Install torch's CUDA build for that interpreter ({theirs}), or into diagnose's environment ({own}) "
        f"and run with -e bench_python={shlex.quote(python)}: {why}"
    )


def torch_hint(
    interpreter: str,
    local: bool,
    origin: Origin | None = None,
    python: str | None = None,
    nvidia_gpu: bool | None = None,
    machine: str | None = None,
) -> str:
    """What to do when torch cannot be imported by ``interpreter`` on a host (``local``: this machine).

    A remote host's Python is the host's business, not this package's; on this machine the bench extra is
    the fix when that Python is the one running diagnose, and otherwise either install or ``bench_python``.
    ``nvidia_gpu`` (the host's PCI bus and device nodes; None: unknown) picks the build: without an NVIDIA
    GPU the CPU wheel, since the default one is the CUDA build, gigabytes that host would never use.
    ``machine`` (the host's ``uname -m``; None: unknown) matters on 64-bit Arm, where it is the other way
    round: the default wheel is the CPU build, and a Grace tray's GPUs need PyTorch's CUDA index.
    """
    python = python or sys.executable
    if is_arm64(machine) and nvidia_gpu is not False:
        return _aarch64_hint(interpreter, local, python)
    if not local:
        what = "torch for that interpreter on the host"
        if nvidia_gpu is False:
            what = (
                f"torch's CPU build on the host, which has no NVIDIA GPU ({cpu_torch_command(interpreter)})"
            )
        return f"Install {what}, or point bench_python / ansible_python_interpreter at a Python there that has it"
    if nvidia_gpu is False:
        own = cpu_torch_command(python)
        if same_interpreter(interpreter, python):
            why = (
                "the same build the package index gives aarch64"
                if is_arm64(machine)
                else "the default build is the CUDA one, gigabytes it cannot use"
            )
            return (
                "This machine has no NVIDIA GPU: install torch's CPU build into the environment running "
                f"diagnose ({why}): {own}"
            )
        return (
            f"This machine has no NVIDIA GPU: install torch's CPU build for that interpreter "
            f"({cpu_torch_command(interpreter)}), or into diagnose's environment ({own}) and run with "
            f"-e bench_python={shlex.quote(python)}"
        )
    command = install_command(BENCH, origin, python)
    build = "" if nvidia_gpu is None else " (torch's default build, with CUDA for this machine's NVIDIA GPU)"
    unknown = (
        ""
        if nvidia_gpu is not None
        else f" (without an NVIDIA GPU, torch's CPU build: {cpu_torch_command(python)})"
    )
    if same_interpreter(interpreter, python):
        return f"Install diagnose's {BENCH} extra{build} into the environment running it: {command}{unknown}"
    return (
        f"Install torch for that interpreter, or install diagnose's {BENCH} extra{build} ({command}) and run "
        f"with -e bench_python={shlex.quote(python)}{unknown}"
    )
