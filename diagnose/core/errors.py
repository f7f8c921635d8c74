"""Errors that stop a run before any host is touched (exit code 2)."""

from __future__ import annotations

from pathlib import Path


class ConfigError(Exception):
    """Bad inventory, playbook, profile or command-line value.

    Rendered as one line, ``file:line: message``, because operators fix these in an editor and the
    line number is what they need first.
    """

    def __init__(self, message: str, path: str | Path | None = None, line: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.path = str(path) if path is not None else None
        self.line = line

    def __str__(self) -> str:
        where = self.path or ""
        if where and self.line is not None:
            where = f"{where}:{self.line}"
        return f"{where}: {self.message}" if where else self.message
