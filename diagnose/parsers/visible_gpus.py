"""Which of a host's GPUs a CUDA program started there sees: ``CUDA_VISIBLE_DEVICES`` against ``nvidia-smi -L``.

nvidia-smi lists every GPU the host (or the container, or the Slurm step's cgroup) can open; a CUDA program
sees only those ``CUDA_VISIBLE_DEVICES`` names, in the order it names them, and numbers them from 0. The
benchmark ranks inherit the variable from the environment the host's commands run in (diagnose's own for the
local connection, the login environment over SSH, the container's in a pod, the step's under srun), so
launching one rank per GPU that nvidia-smi lists starts ranks on GPUs that do not exist for them.

How CUDA reads the variable, and how this module mirrors it:

* unset: every GPU nvidia-smi lists; set and empty: none;
* each comma-separated entry is a position in the listing (``2``), a GPU UUID or a unique prefix of one
  (``GPU-8f3e``), or a MIG instance's UUID (``MIG-…``, counted as the GPU that holds it);
* the first entry that matches nothing (``7`` on a 4-GPU host, ``-1``, a typo) ends the list: it and every
  entry after it are ignored, so ``7`` alone leaves no GPU at all. A repeated entry is treated the same way.

``NVIDIA_VISIBLE_DEVICES`` is the NVIDIA container runtime's: it chose which GPUs a container was given when
the container started, so inside one nvidia-smi already lists only those, and on a bare host it changes
nothing for CUDA. Slurm's ``SLURM_STEP_GPUS`` / ``SLURM_JOB_GPUS`` name the allocation, which Slurm also
writes into ``CUDA_VISIBLE_DEVICES``. These are recorded and named, never applied a second time.

Index entries follow nvidia-smi's (PCI bus) order: CUDA's default order puts the fastest GPU first, which is
the same order on a node of one GPU model; on a node with mixed models, name GPUs by UUID.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from diagnose.core.check import Command

CUDA_VARIABLE = "CUDA_VISIBLE_DEVICES"
#: The variables read from the host's environment, in the order their values are named.
VARIABLES = (CUDA_VARIABLE, "NVIDIA_VISIBLE_DEVICES", "SLURM_STEP_GPUS", "SLURM_JOB_GPUS")

#: The variables as the environment the host's commands (and so the benchmark ranks) run in holds them; grep
#: prints each whole ``NAME=value`` line, so no value passes through a shell.
ENV_COMMAND = Command(
    "gpu_visibility",
    "env | grep -E '^(" + "|".join(VARIABLES) + ")=' || true",
    timeout=10,
    required=False,
    auxiliary=True,
)

_GPU_LINE = re.compile(r"^GPU (?P<index>\d+): (?P<name>.*?) \(UUID: (?P<uuid>GPU-[^)\s]+)\)\s*$")
_MIG_LINE = re.compile(r"^\s+MIG .*\(UUID: (?P<uuid>MIG-[^)\s]+)\)\s*$")


def parse_visibility_env(text: str) -> dict[str, str]:
    """``{name: value}`` of the variables ``ENV_COMMAND`` printed (a variable set to nothing is ``""``)."""
    found: dict[str, str] = {}
    for line in text.splitlines():
        name, sep, value = line.partition("=")
        if sep and name in VARIABLES and name not in found:
            found[name] = value.strip()
    return found


def parse_smi_list(text: str) -> list[dict[str, Any]]:
    """``nvidia-smi -L``: ``[{index, name, uuid, mig: [MIG UUIDs]}]`` in the listed order."""
    gpus: list[dict[str, Any]] = []
    for line in text.splitlines():
        gpu = _GPU_LINE.match(line)
        if gpu:
            gpus.append({"index": int(gpu["index"]), "name": gpu["name"], "uuid": gpu["uuid"], "mig": []})
            continue
        mig = _MIG_LINE.match(line)
        if mig and gpus:
            gpus[-1]["mig"].append(mig["uuid"])
    return gpus


def _match(entry: str, gpus: Sequence[Mapping[str, Any]]) -> int | None:
    """The position in ``gpus`` that one entry names, or None when it names none (or more than one)."""
    if re.fullmatch(r"\d+", entry):
        return int(entry) if int(entry) < len(gpus) else None
    if entry.startswith("GPU-"):
        hits = [i for i, g in enumerate(gpus) if str(g.get("uuid") or "").lower().startswith(entry.lower())]
    elif entry.startswith("MIG-"):
        hits = [i for i, g in enumerate(gpus) if any(m.lower() == entry.lower() for m in g.get("mig") or [])]
    else:
        hits = []
    return hits[0] if len(hits) == 1 else None


def resolve_visible(env: Mapping[str, str], gpus: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Which of ``gpus`` (nvidia-smi's, in its order, each with ``index`` and, where listed, ``uuid`` and
    ``mig``) a CUDA program sees under ``env``.

    Without ``nvidia-smi -L`` no UUID is known: a UUID entry is then ``unresolved`` and the set is taken as
    every GPU (what was assumed before the variable was read), rather than a finding nobody could check.

    ``visible``: their nvidia-smi indexes in CUDA's order (CUDA device i is ``visible[i]``); ``hidden``:
    the indexes it does not see; ``stopped_at``: the entry that matched nothing, where CUDA stopped reading
    (None when every entry matched); ``ignored``: that entry and those after it; ``variable`` and ``value``:
    the variable that restricts the set (None when none is set); ``env``: every variable read.
    """
    indexes = [int(g["index"]) for g in gpus]
    value = env.get(CUDA_VARIABLE)
    visible: list[int] = []
    stopped_at: str | None = None
    ignored: list[str] = []
    entries = [e.strip() for e in value.split(",")] if value and value.strip() else []
    listed = any(g.get("uuid") for g in gpus)
    unresolved = next((e for e in entries if e.startswith(("GPU-", "MIG-")) and not listed), None)
    if value is None or unresolved:
        visible = list(indexes)
    else:
        for at, entry in enumerate(entries):
            position = _match(entry, gpus)
            if position is None or indexes[position] in visible:
                stopped_at, ignored = entry, entries[at:]
                break
            visible.append(indexes[position])
    return {
        "variable": CUDA_VARIABLE if value is not None else None,
        "value": value,
        "visible": visible,
        "hidden": [i for i in indexes if i not in visible],
        "stopped_at": stopped_at,
        "ignored": ignored,
        "unresolved": unresolved,
        "env": {name: env[name] for name in VARIABLES if name in env},
    }
