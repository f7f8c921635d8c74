"""Playbooks (what to run) and hardware profiles (what to expect), read from YAML that keeps its lines.

Both are data with a strict schema: an unknown key or a value of the wrong type stops the run with the
file and line, because a misspelt threshold that is silently ignored would let a bad cluster pass. The
line-keeping YAML loader lives here and is shared with the inventory reader, which builds on this module
(``diagnose.targets.inventory.resolve_hosts`` puts inventory, playbook and profile together).
"""

from __future__ import annotations

import fnmatch
import glob
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from importlib.resources import files
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from diagnose.config.profiles import PROFILE_VARIABLES
from diagnose.core.errors import ConfigError

if TYPE_CHECKING:
    from importlib.resources.abc import Traversable

PLAYBOOK_PACKAGE = "diagnose.playbooks"
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


@dataclass(frozen=True)
class Profile:
    """A hardware profile: the expected values that rules judge against."""

    name: str
    description: str
    vars: Mapping[str, Any]
    path: Path


# --------------------------------------------------------------------------------------------- YAML with lines


class YamlMap(dict):
    """A YAML mapping that remembers the line of itself, of each key and of each value (1-based).

    Schema errors found after loading (an unknown key, a value of the wrong type) must still name the
    line, so the loader keeps the positions the parser knew.
    """

    line: int | None = None

    def __init__(self) -> None:
        super().__init__()
        self.key_lines: dict[Any, int] = {}
        self.value_lines: dict[Any, int] = {}


class YamlList(list):
    """A YAML sequence that remembers its own line and the line of each item (1-based)."""

    line: int | None = None

    def __init__(self) -> None:
        super().__init__()
        self.item_lines: list[int] = []


class _LineLoader(yaml.SafeLoader):
    """SafeLoader whose mappings and sequences carry their source lines."""


def _construct_map(loader: _LineLoader, node: yaml.MappingNode) -> Iterator[YamlMap]:
    data = YamlMap()
    data.line = node.start_mark.line + 1
    yield data
    seen: dict[Any, int] = {}
    for key_node, _ in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge" or not isinstance(key_node, yaml.ScalarNode):
            continue
        key = loader.construct_object(key_node)
        line = key_node.start_mark.line + 1
        if key in seen:
            raise ConfigError(f"duplicate key {key!r} (first at line {seen[key]})", None, line)
        seen[key] = line
    loader.flatten_mapping(node)
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        try:
            hash(key)
        except TypeError:
            raise ConfigError(
                "a mapping key must be a plain value", None, key_node.start_mark.line + 1
            ) from None
        data[key] = loader.construct_object(value_node, deep=True)
        data.key_lines[key] = key_node.start_mark.line + 1
        data.value_lines[key] = value_node.start_mark.line + 1


def _construct_seq(loader: _LineLoader, node: yaml.SequenceNode) -> Iterator[YamlList]:
    data = YamlList()
    data.line = node.start_mark.line + 1
    yield data
    for item in node.value:
        data.append(loader.construct_object(item, deep=True))
        data.item_lines.append(item.start_mark.line + 1)


def _construct_unsafe(loader: _LineLoader, node: yaml.Node) -> Any:
    # Ansible's ``!unsafe`` only stops templating; we never template, so the value is the plain scalar.
    if isinstance(node, yaml.ScalarNode):
        return loader.construct_scalar(node)
    raise ConfigError("!unsafe is only supported on plain values", None, node.start_mark.line + 1)


_LineLoader.add_constructor("tag:yaml.org,2002:map", _construct_map)
_LineLoader.add_constructor("tag:yaml.org,2002:seq", _construct_seq)
_LineLoader.add_constructor("!unsafe", _construct_unsafe)


def parse_yaml(text: str, path: str | Path | None) -> Any:
    """Parse YAML text into plain values, with :class:`YamlMap`/:class:`YamlList` for collections.

    Any YAML error becomes a one-line :class:`ConfigError` at the line the parser stopped on.
    """
    try:
        return yaml.load(text, Loader=_LineLoader)
    except ConfigError as err:
        raise ConfigError(err.message, path, err.line) from None
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        context = err.context
        if (
            context
            and err.context_mark
            and err.problem_mark
            and err.context_mark.line != err.problem_mark.line
        ):
            context += f" started at line {err.context_mark.line + 1}"
        detail = " ".join(", ".join(p for p in (context, err.problem) if p).split())
        raise ConfigError(f"invalid YAML: {detail}", path, mark.line + 1 if mark else None) from None
    except yaml.YAMLError as err:
        raise ConfigError(f"invalid YAML: {' '.join(str(err).split())}", path) from None


def try_parse_yaml(text: str) -> Any:
    """The parsed YAML, or None if the text is not YAML at all (deciding whether a file is INI)."""
    try:
        return yaml.load(text, Loader=_LineLoader)
    except (yaml.YAMLError, ConfigError):
        return None


def read_text(path: Path, what: str) -> str:
    """A config file's text, or a ConfigError saying why it cannot be read (missing, a folder, binary)."""
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{what} file not found", path) from None
    except IsADirectoryError:
        raise ConfigError(f"{what} path is a folder, not a file", path) from None
    except UnicodeDecodeError as err:
        raise ConfigError(f"{what} file is not UTF-8 text ({err.reason} at byte {err.start})", path) from None
    except OSError as err:
        raise ConfigError(f"cannot read {what} file: {err.strerror or err}", path) from None


def kind_of(value: Any) -> str:
    """How an error message names the type of a value someone wrote."""
    return {
        YamlMap: "a mapping",
        YamlList: "a list",
        str: "a string",
        bool: "true/false",
        int: "a number",
        float: "a number",
    }.get(type(value), type(value).__name__)


# ------------------------------------------------------------------------------------------ schema helpers


class _Section:
    """Typed reads from one YAML mapping, each error naming the key's line; rejects unknown keys."""

    def __init__(self, data: YamlMap, path: Path, where: str, allowed: Sequence[str]) -> None:
        self.data, self.path, self.where = data, path, where
        inside = f" in {where.rstrip('.')}" if where else ""
        for key in data:
            if key not in allowed:
                raise ConfigError(
                    f"unknown key {key!r}{inside} (allowed: {', '.join(allowed)})",
                    path,
                    data.key_lines[key],
                )

    def line(self, key: str) -> int | None:
        return self.data.value_lines.get(key, self.data.line)

    def error(self, key: str, message: str) -> ConfigError:
        return ConfigError(f"{self.where}{key}: {message}", self.path, self.line(key))

    def get(
        self, key: str, check: Callable[[Any], bool], kind: str, default: Any = None, nullable: bool = False
    ) -> Any:
        """The value of ``key``; ``default`` when absent, and when null unless ``nullable`` (null = None)."""
        if key not in self.data or (self.data[key] is None and not nullable):
            return default
        if self.data[key] is None:
            return None
        value = self.data[key]
        if not check(value):
            raise self.error(key, f"must be {kind}, got {value!r}")
        return value

    def string(self, key: str, default: str | None = None) -> str | None:
        return self.get(key, lambda v: isinstance(v, str), "a string", default)

    def boolean(self, key: str, default: bool) -> bool:
        return self.get(key, lambda v: isinstance(v, bool), "true or false", default)

    def integer(self, key: str, default: int | None, minimum: int, nullable: bool = False) -> int | None:
        value = self.get(key, _is_int, "an integer", default, nullable)
        if value is not None and value < minimum:
            raise self.error(key, f"must be at least {minimum}, got {value}")
        return value

    def number(
        self, key: str, default: float | None, above: float = 0.0, nullable: bool = False
    ) -> float | None:
        value = self.get(key, _is_number, "a number", default, nullable)
        if value is not None and value <= above:
            raise self.error(key, f"must be more than {above:g}, got {value}")
        return None if value is None else float(value)

    def strings(self, key: str, default: tuple[str, ...]) -> tuple[str, ...]:
        value = self.get(key, lambda v: isinstance(v, list), "a list of strings", None)
        if value is None:
            return default
        for item, line in zip(value, value.item_lines, strict=True):
            if not isinstance(item, str) or not item:
                raise ConfigError(
                    f"{self.where}{key}: items must be non-empty strings, got {item!r}", self.path, line
                )
        return tuple(value)

    def mapping(self, key: str) -> YamlMap | None:
        return self.get(key, lambda v: isinstance(v, YamlMap), "a mapping", None)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


_KIND_CHECKS: dict[type, tuple[Callable[[Any], bool], str]] = {
    int: (_is_int, "an integer"),
    float: (_is_number, "a number"),
    bool: (lambda v: isinstance(v, bool), "true or false"),
    str: (lambda v: isinstance(v, str), "a string"),
    list: (lambda v: isinstance(v, list), "a list"),
}


def _check_profile_variables(
    values: YamlMap, path: Path, where: str, unknown_allowed: bool
) -> dict[str, Any]:
    """Type-check the expected-value variables of a profile (or a playbook's ``vars``).

    Null is allowed everywhere: it means "this value is not judged" (a profile that cannot know it).
    """
    for key, value in values.items():
        line = values.key_lines[key]
        if not isinstance(key, str) or not key:
            raise ConfigError(f"{where}: variable names must be strings, got {key!r}", path, line)
        variable = PROFILE_VARIABLES.get(key)
        if variable is None:
            if unknown_allowed:
                continue
            raise ConfigError(
                f"{where}: unknown variable {key!r} (known: {', '.join(sorted(PROFILE_VARIABLES))})",
                path,
                line,
            )
        check, kind = _KIND_CHECKS[variable.kind]
        if value is not None and not check(value):
            raise ConfigError(f"{where}: {key} must be {kind}, got {value!r}", path, values.value_lines[key])
    return dict(values)


def parse_size(value: Any) -> int:
    """Bytes from an int or a string with a binary suffix: ``1M`` = 1048576, ``8G``, ``512K``, ``64``."""
    if _is_int(value):
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
)
_NIGHTLY_KEYS = ("time_budget_s", "keep_runs", "keep_days", "busbw_drop_pct")


def _packaged(package_dir: str = "") -> Traversable:
    root = files(PLAYBOOK_PACKAGE)
    return root / package_dir if package_dir else root


def _yaml_names(folder: Traversable) -> list[str]:
    if not folder.is_dir():
        return []
    return sorted(item.name.rsplit(".", 1)[0] for item in folder.iterdir() if item.name.endswith(".yaml"))


def available_playbooks() -> list[str]:
    """Names of the playbooks shipped with the package (``acceptance``, ``nightly``, ...)."""
    return _yaml_names(_packaged())


def _looks_like_path(name: str) -> bool:
    return "/" in name or "\\" in name or name.endswith((".yaml", ".yml")) or name.startswith((".", "~"))


def load_playbook(name_or_path: str | Path | None = None) -> Playbook:
    """A packaged playbook by bare name (``acceptance``), or a playbook file by path; default acceptance."""
    name = DEFAULT_PLAYBOOK if name_or_path is None else str(name_or_path)
    if isinstance(name_or_path, Path) or _looks_like_path(name):
        path = Path(name).expanduser()
        return parse_playbook(read_text(path, "playbook"), path)
    resource = _packaged() / f"{name}.yaml"
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
    top = _Section(data, path, "", _PLAYBOOK_KEYS)
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
        vars=_check_profile_variables(variables, path, "vars", unknown_allowed=True),
        benchmarks=_benchmark_plan(top.mapping("benchmarks"), path),
        nightly=_nightly_plan(top.mapping("nightly"), path),
        lines=lines,
    )


def _benchmark_plan(data: YamlMap | None, path: Path) -> BenchmarkPlan | None:
    if data is None:
        return None
    section = _Section(data, path, "benchmarks.", _BENCHMARK_KEYS)
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
    )


def _nightly_plan(data: YamlMap | None, path: Path) -> NightlyPlan | None:
    if data is None:
        return None
    section = _Section(data, path, "nightly.", _NIGHTLY_KEYS)
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


# --------------------------------------------------------------------------------------------------- profiles


def _profile_dirs(search_dirs: Sequence[Path | Traversable] | None) -> list[Path | Traversable]:
    return list(search_dirs) if search_dirs is not None else [_packaged("profiles")]


def available_profiles(search_dirs: Sequence[Path | Traversable] | None = None) -> list[str]:
    """Profile names found in the search folders (the packaged ``playbooks/profiles/`` by default)."""
    return sorted({name for folder in _profile_dirs(search_dirs) for name in _yaml_names(folder)})


def load_profile(name: str, search_dirs: Sequence[Path | Traversable] | None = None) -> Profile:
    """A hardware profile by name (first match in ``search_dirs``), or by path to a ``.yaml`` file."""
    if _looks_like_path(name):
        path = Path(name).expanduser()
        return parse_profile(read_text(path, "profile"), path, path.stem)
    for folder in _profile_dirs(search_dirs):
        resource = folder / f"{name}.yaml"
        if resource.is_file():
            return parse_profile(resource.read_text(encoding="utf-8"), Path(str(resource)), name)
    raise ConfigError(
        f"unknown profile {name!r}; available: {', '.join(available_profiles(search_dirs)) or 'none'} "
        "(or give a path to a .yaml file)"
    )


def parse_profile(text: str, path: Path, name: str) -> Profile:
    """Parse and validate profile text: ``description`` and ``vars`` of known expected-value variables."""
    data = parse_yaml(text, path)
    if not isinstance(data, YamlMap):
        raise ConfigError(
            "a profile must be a YAML mapping (description:, vars:)", path, getattr(data, "line", 1)
        )
    section = _Section(data, path, "", ("description", "vars"))
    return Profile(
        name=name,
        description=section.string("description", ""),
        vars=_check_profile_variables(
            section.mapping("vars") or YamlMap(), path, "vars", unknown_allowed=False
        ),
        path=path,
    )
