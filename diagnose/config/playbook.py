"""Playbooks: which checks and benchmarks a run does, read from YAML with a strict schema.

A playbook is data: an unknown key or a value of the wrong type stops the run with the file and line,
because a misspelt threshold that is silently ignored would let a bad cluster pass. The YAML reader that
keeps lines is :mod:`diagnose.config.yaml_lines`, the typed section reads :mod:`diagnose.config.schema`;
hardware profiles are read by :mod:`diagnose.config.profile_files`, and :mod:`diagnose.targets.resolve`
puts inventory, playbook and profile together.
"""

from __future__ import annotations

import fnmatch
import glob
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from diagnose.config.packaged import looks_like_path, packaged, yaml_names
from diagnose.config.schema import Section, check_profile_variables, is_int
from diagnose.config.yaml_lines import YamlList, YamlMap, parse_yaml, read_text
from diagnose.core.errors import ConfigError

DEFAULT_PLAYBOOK = "acceptance"
PROFILE_VARIABLE = "diagnose_profile"

COLLECTIVES = ("all_reduce", "reduce_scatter", "all_gather", "all_to_all", "broadcast", "sendrecv")
# The collectives that dominate each kind of training step: data-parallel gradient all-reduce (dense);
# FSDP's sharded parameters gathered and gradients reduce-scattered; MoE adds the expert all-to-all.
WORKLOADS: dict[str, tuple[str, ...]] = {
    "dense": ("all_reduce",),
    "fsdp": ("all_reduce", "reduce_scatter", "all_gather"),
    "moe": ("all_reduce", "reduce_scatter", "all_gather", "all_to_all"),
}
TOOLS = ("torch", "nccl-tests")

_SIZE_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


@dataclass(frozen=True)
class BenchmarkPlan:
    """The collective sweep of a playbook: which collectives, which message sizes, how many iterations.

    ``enabled`` is false when the playbook keeps the settings but switches the stage off.
    """

    enabled: bool
    workload: str
    collectives: tuple[str, ...]
    min_bytes: int
    max_bytes: int
    step_factor: int
    warmup_iters: int
    iters: int
    tool: str
    straggler_isolation: bool
    timeout_s: float | None
    # Benchmarks beyond the collective sweep (diagnose.probes.registry), each switched on by its own key.
    training_probe: bool = False
    kv_transfer: bool = False
    fleet_probes: bool = False
    stress: bool = False
    perftest: bool = False
    perftest_latency: bool = False

    def sizes(self) -> list[int]:
        """Message sizes of the sweep, as nccl-tests' ``-b/-e/-f`` walk them: min, min×f, ... ≤ max."""
        sizes, size = [], self.min_bytes
        while size <= self.max_bytes:
            sizes.append(size)
            size *= self.step_factor
        return sizes


@dataclass(frozen=True)
class NightlyPlan:
    """Settings for unattended runs: the time they may take, run retention, the regression threshold."""

    time_budget_s: float
    keep_runs: int | None  # None: no limit by count
    keep_days: float | None  # None: no limit by age
    busbw_drop_pct: float


@dataclass(frozen=True)
class Playbook:
    """A parsed playbook. ``path`` is where it was read from; relative ``custom_checks`` start there."""

    name: str
    path: Path
    description: str = ""
    profile: str | None = None
    checks: tuple[str, ...] = ("*",)
    custom_checks: tuple[str, ...] = ()
    vars: Mapping[str, Any] = field(default_factory=dict)
    benchmarks: BenchmarkPlan | None = None
    nightly: NightlyPlan | None = None
    # Where things were written, keyed (section, item): ("checks", "ib.*"), ("vars", "command_timeout_s"),
    # so errors found after loading (a glob matching nothing, a bad variable) still name the line.
    lines: Mapping[tuple[str, str], int] = field(default_factory=dict, repr=False, compare=False)


def parse_size(value: Any) -> int:
    """Bytes from an int or a string with a binary suffix: ``1M`` = 1048576, ``8G``, ``512K``, ``64``."""
    if is_int(value):
        if value < 1:
            raise ValueError(f"a size must be at least 1 byte, got {value}")
        return value
    if isinstance(value, str):
        text = value.strip().upper().removesuffix("IB").removesuffix("B")
        unit = text[-1:] if text[-1:] in _SIZE_UNITS else ""
        digits = text[: len(text) - len(unit)].strip()
        if digits.isdigit() and int(digits) >= 1:
            return int(digits) * _SIZE_UNITS[unit]
    raise ValueError(
        f"a size must be a positive integer or a number with K, M, G or T (binary: 1M = 1048576), got {value!r}"
    )


# --------------------------------------------------------------------------------------------------- playbook

_PLAYBOOK_KEYS = (
    "name",
    "description",
    "profile",
    "checks",
    "custom_checks",
    "vars",
    "benchmarks",
    "nightly",
)
_BENCHMARK_KEYS = (
    "enabled",
    "workload",
    "collectives",
    "min_bytes",
    "max_bytes",
    "step_factor",
    "warmup_iters",
    "iters",
    "tool",
    "straggler_isolation",
    "timeout_s",
    "training_probe",
    "kv_transfer",
    "fleet_probes",
    "stress",
    "perftest",
    "perftest_latency",
)
_NIGHTLY_KEYS = ("time_budget_s", "keep_runs", "keep_days", "busbw_drop_pct")


def available_playbooks() -> list[str]:
    """Names of the playbooks shipped with the package (``acceptance``, ``nightly``, ...)."""
    return yaml_names(packaged())


def load_playbook(name_or_path: str | Path | None = None) -> Playbook:
    """A packaged playbook by bare name (``acceptance``), or a playbook file by path; default acceptance."""
    name = DEFAULT_PLAYBOOK if name_or_path is None else str(name_or_path)
    if isinstance(name_or_path, Path) or looks_like_path(name):
        path = Path(name).expanduser()
        return parse_playbook(read_text(path, "playbook"), path)
    resource = packaged() / f"{name}.yaml"
    if not resource.is_file():
        raise ConfigError(
            f"unknown playbook {name!r}; packaged playbooks: {', '.join(available_playbooks()) or 'none'} "
            "(or give a path to a .yaml file)"
        )
    return parse_playbook(resource.read_text(encoding="utf-8"), Path(str(resource)))


def parse_playbook(text: str, path: Path) -> Playbook:
    """Parse and validate playbook text; ``path`` names it in errors and anchors ``custom_checks``."""
    data = parse_yaml(text, path)
    if not isinstance(data, YamlMap):
        raise ConfigError(
            "a playbook must be a YAML mapping (name:, checks:, ...)", path, getattr(data, "line", 1)
        )
    top = Section(data, path, "", _PLAYBOOK_KEYS)
    lines: dict[tuple[str, str], int] = {}
    for key in ("checks", "custom_checks"):
        if isinstance(data.get(key), YamlList):
            lines.update(
                {(key, item): line for item, line in zip(data[key], data[key].item_lines, strict=True)}
            )
    profile = top.string("profile")
    if profile is not None and not profile.strip():
        raise top.error("profile", "must name a profile")
    variables = top.mapping("vars") or YamlMap()
    lines.update({("vars", str(key)): line for key, line in variables.key_lines.items()})
    if "profile" in data:
        lines[("", "profile")] = data.value_lines["profile"]
    if PROFILE_VARIABLE in variables:
        raise ConfigError(
            f"vars: set the default profile with the top-level 'profile:' key, not {PROFILE_VARIABLE}",
            path,
            variables.key_lines[PROFILE_VARIABLE],
        )
    return Playbook(
        name=top.string("name", path.stem),
        path=path,
        description=top.string("description", ""),
        profile=profile,
        checks=top.strings("checks", ("*",)),
        custom_checks=top.strings("custom_checks", ()),
        vars=check_profile_variables(variables, path, "vars", unknown_allowed=True),
        benchmarks=_benchmark_plan(top.mapping("benchmarks"), path),
        nightly=_nightly_plan(top.mapping("nightly"), path),
        lines=lines,
    )


def _benchmark_plan(data: YamlMap | None, path: Path) -> BenchmarkPlan | None:
    if data is None:
        return None
    section = Section(data, path, "benchmarks.", _BENCHMARK_KEYS)
    workload = section.string("workload", "dense")
    if workload not in WORKLOADS:
        raise section.error("workload", f"must be one of {', '.join(WORKLOADS)}, got {workload!r}")
    collectives = section.strings("collectives", WORKLOADS[workload])
    item_lines = data["collectives"].item_lines if data.get("collectives") else []
    for index, name in enumerate(collectives):
        line = item_lines[index] if item_lines else section.line("collectives")
        if name not in COLLECTIVES:
            message = f"unknown collective {name!r} (allowed: {', '.join(COLLECTIVES)})"
            raise ConfigError(f"benchmarks.collectives: {message}", path, line)
        if name in collectives[:index]:
            raise ConfigError(f"benchmarks.collectives: lists {name} twice", path, line)
    if not collectives:
        raise section.error("collectives", "is empty; leave it out to use the workload's collectives")
    sizes = {}
    for key, default in (("min_bytes", "1M"), ("max_bytes", "1G")):
        try:
            sizes[key] = parse_size(data.get(key) if data.get(key) is not None else default)
        except ValueError as err:
            raise section.error(key, str(err)) from None
    if sizes["min_bytes"] > sizes["max_bytes"]:
        raise section.error(
            "max_bytes", f"({sizes['max_bytes']} bytes) is below min_bytes ({sizes['min_bytes']})"
        )
    tool = section.string("tool", "torch")
    if tool not in TOOLS:
        raise section.error("tool", f"must be one of {', '.join(TOOLS)}, got {tool!r}")
    return BenchmarkPlan(
        enabled=section.boolean("enabled", True),
        workload=workload,
        collectives=collectives,
        min_bytes=sizes["min_bytes"],
        max_bytes=sizes["max_bytes"],
        step_factor=section.integer("step_factor", 2, minimum=2),
        warmup_iters=section.integer("warmup_iters", 5, minimum=0),
        iters=section.integer("iters", 20, minimum=1),
        tool=tool,
        straggler_isolation=section.boolean("straggler_isolation", True),
        timeout_s=section.number("timeout_s", None),
        training_probe=section.boolean("training_probe", False),
        kv_transfer=section.boolean("kv_transfer", False),
        fleet_probes=section.boolean("fleet_probes", False),
        stress=section.boolean("stress", False),
        perftest=section.boolean("perftest", False),
        perftest_latency=section.boolean("perftest_latency", False),
    )


def with_tool(playbook: Playbook, tool: str | None) -> Playbook:
    """The playbook measuring its collectives with ``tool`` (``run --tool``), so that a site with
    nccl-tests built can use it without writing a playbook of its own. A playbook that measures nothing
    is refused rather than run without the measurement the operator asked for."""
    if tool is None:
        return playbook
    if tool not in TOOLS:
        raise ConfigError(f"--tool: must be one of {', '.join(TOOLS)}, got {tool!r}")
    plan = playbook.benchmarks
    if plan is None or not plan.enabled or not plan.collectives:
        raise ConfigError(
            f"--tool {tool}: the playbook {playbook.name} measures no collectives; choose one that does "
            "(acceptance, nightly, ...) or leave --tool out"
        )
    return replace(playbook, benchmarks=replace(plan, tool=tool))


def _nightly_plan(data: YamlMap | None, path: Path) -> NightlyPlan | None:
    if data is None:
        return None
    section = Section(data, path, "nightly.", _NIGHTLY_KEYS)
    drop = section.number("busbw_drop_pct", 10.0)
    if drop >= 100:
        raise section.error("busbw_drop_pct", f"must be below 100 (a percentage), got {drop:g}")
    return NightlyPlan(
        time_budget_s=section.number("time_budget_s", 1800.0),
        keep_runs=section.integer("keep_runs", 30, minimum=1, nullable=True),
        keep_days=section.number("keep_days", 90.0, nullable=True),
        busbw_drop_pct=drop,
    )


def custom_check_paths(playbook: Playbook) -> list[Path]:
    """The testinfra modules named by ``custom_checks``, each glob resolved from the playbook's folder.

    A glob that matches no file is an error: the site meant those checks to run.
    """
    found: list[Path] = []
    for pattern in playbook.custom_checks:
        full = playbook.path.parent / Path(pattern).expanduser()
        matches = sorted(Path(p) for p in glob.glob(str(full), recursive=True) if Path(p).is_file())
        if not matches:
            raise ConfigError(
                f"custom_checks {pattern!r} matches no file (looked in {playbook.path.parent})",
                playbook.path,
                playbook.lines.get(("custom_checks", pattern)),
            )
        found.extend(m for m in matches if m not in found)
    return found


def check_unknown_patterns(playbook: Playbook, known_ids: Iterable[str]) -> None:
    """Reject a ``checks`` entry that names no check of the catalog: a typo would silently skip a check."""
    ids = list(known_ids)
    for pattern in playbook.checks:
        glob_pattern = pattern.removeprefix("!")
        if not any(fnmatch.fnmatchcase(check_id, glob_pattern) for check_id in ids):
            raise ConfigError(
                f"checks entry {pattern!r} matches no check in the catalog",
                playbook.path,
                playbook.lines.get(("checks", pattern)),
            )
