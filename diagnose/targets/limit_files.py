"""``--limit @FILE``: the file of host patterns Ansible's retry form names, read into lines (file → text).

:meth:`diagnose.targets.model.Inventory.select` matches the lines; this module reads them and words the
errors of a term, so that one from a file names the file and line an operator opens to fix it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from diagnose.core.errors import ConfigError


@dataclass(frozen=True)
class LimitLine:
    """One host pattern of a ``--limit @FILE`` and where it is written."""

    text: str
    path: Path
    line: int


def read_limit_file(raw: str) -> list[LimitLine]:
    """The host patterns of ``--limit @raw``, one a line; blank lines and ``#`` comments are skipped.

    ``raw`` is as typed: relative to the current folder, ``~`` expanded, as the shell would for a bare path.
    A file naming no host is an error rather than an empty selection: read as "no limit" it would run on
    every host, read as "nothing" it would judge none, and either would be a surprise.
    """
    path = Path(raw).expanduser()
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"--limit @{raw}: no such file") from None
    except OSError as err:
        raise ConfigError(f"--limit @{raw}: cannot read it: {err.strerror or err}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"--limit @{raw}: not UTF-8 text") from None
    lines = [
        LimitLine(stripped, path, number)
        for number, line in enumerate(text.splitlines(), start=1)
        if (stripped := line.strip()) and not stripped.startswith("#")
    ]
    if not lines:
        raise ConfigError(f"--limit @{raw}: the file names no hosts (it is empty or only comments)")
    return lines


def term_error(message: str, pattern: str, origin: LimitLine | None) -> ConfigError:
    """A term's error: at its file and line when it came from ``@FILE``, else after the whole pattern."""
    if origin is None:
        return ConfigError(f"--limit {pattern!r}: {message}")
    return ConfigError(message, origin.path, origin.line)
