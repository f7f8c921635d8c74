"""Keep secrets out of the record: results.json, the reports, the evidence, stdout and stderr.

A run records how it was started (``run.argv``, the nccl-tests command line) because the acceptance record
must be reproducible; an ``-e api_token=...`` or a ``bench_env`` holding ``HF_TOKEN`` would then land in
every file and every copy of the PDF. Values of variables whose names look secret are replaced by
:data:`MASK` wherever a command line is recorded; inventory variables are never recorded at all.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Sequence
from typing import Any

import yaml

MASK = "REDACTED"
# Anywhere in a name: api_token, githubToken, db_password, client_secret, aws_credentials.
_SECRET_PART = re.compile(r"passw(or)?d|token|secret|credential|private_?key|api_?key", re.IGNORECASE)
# As a whole word of the name: ansible_ssh_pass, ansible_become_pass, ssh_key, KEY.
_SECRET_WORD = {"pass", "pwd", "key", "auth", "passphrase"}
# ``name=value``, ``name: value``, ``"name": "value"`` in text that does not parse.
_ASSIGNMENT = re.compile(r"""([A-Za-z_][A-Za-z0-9_]*)(["']?\s*[:=]\s*)("[^"]*"|'[^']*'|[^\s,}]*)""")


def is_secret_name(name: str) -> bool:
    """Whether a variable's name says its value is a secret (password, pass, token, secret, key, ...)."""
    if _SECRET_PART.search(name):
        return True
    return any(word.lower() in _SECRET_WORD for word in re.split(r"[^A-Za-z0-9]+|(?<=[a-z])(?=[A-Z])", name))


#: The last word of a name whose value says where a secret is kept, not the secret itself
#: (``ansible_ssh_private_key_file``, ``vault_password_file``): a dry run shows it, as the operator must
#: check it.
_PATH_WORDS = {"file", "path", "dir", "directory", "filename"}


def names_a_path(name: str) -> bool:
    """Whether a variable's name says its value is a file or folder (``..._file``, ``..._path``)."""
    words = [w for w in re.split(r"[^A-Za-z0-9]+|(?<=[a-z])(?=[A-Z])", name) if w]
    return bool(words) and words[-1].lower() in _PATH_WORDS


def looks_like_path(value: object) -> bool:
    """A value that reads as a path (``/``, ``~`` or ``.`` first, or a ``/`` inside, no blank): a secret
    handed to a ``_file`` variable by mistake does not, and stays hidden."""
    if not isinstance(value, str) or not value or any(c.isspace() for c in value):
        return False
    return value.startswith(("/", "~", ".")) or "/" in value


def hides(name: str, value: object) -> bool:
    """Whether a dry run must mask this value: its name looks secret, unless the name and the value both
    say it is only where the secret lies (a key file's path is what the operator checks, not a secret)."""
    if not is_secret_name(name):
        return False
    return not (names_a_path(name) and looks_like_path(value))


def _redact_mapping(data: Any) -> Any:
    if isinstance(data, dict):
        return {k: MASK if is_secret_name(str(k)) else _redact_mapping(v) for k, v in data.items()}
    if isinstance(data, list):
        return [_redact_mapping(v) for v in data]
    return data


def redact_assignments(words: Sequence[str]) -> list[str]:
    """``K=V`` words with a secret-looking K get their value masked (``-x HF_TOKEN=...`` for mpirun)."""
    out = []
    for word in words:
        key, sep, _ = word.partition("=")
        out.append(f"{key}={MASK}" if sep and is_secret_name(key) else word)
    return out


def _mask_text(text: str) -> str:
    return _ASSIGNMENT.sub(lambda m: f"{m[1]}{m[2]}{MASK}" if is_secret_name(m[1]) else m[0], text)


def redact_text(text: str) -> str:
    """Free text (a line of a script shown on stderr) with the value after each secret-named ``name=`` or
    ``name:`` masked."""
    return _mask_text(text)


def redact_extra_vars(text: str) -> str:
    """One ``-e`` argument with the values of secret-named variables masked.

    ``@file`` names a file and stays; a JSON/YAML mapping is re-dumped as JSON; ``k=v k2=v2`` stays shell
    words; text that parses as neither keeps its shape with what follows each secret-looking name masked.
    """
    stripped = text.strip()
    if stripped.startswith("@"):
        return text
    if stripped.startswith("{"):
        try:
            data = yaml.safe_load(stripped)
        except yaml.YAMLError:
            return _mask_text(text)
        return json.dumps(_redact_mapping(data), separators=(",", ":"), default=str)
    try:
        words = shlex.split(text)
    except ValueError:  # unbalanced quotes
        return _mask_text(text)
    if not all("=" in word for word in words):  # not key=value words: keep the shape, mask by pattern
        return _mask_text(text)
    redacted = redact_assignments(words)
    return text if redacted == words else shlex.join(redacted)


def _is_extra_vars_flag(arg: str) -> bool:
    """``--extra-vars`` or an abbreviation argparse accepts for it (``--extra``, ``--ex``)."""
    return len(arg) > 3 and arg.startswith("--") and "--extra-vars".startswith(arg)


def redact_argv(argv: Sequence[str]) -> list[str]:
    """A command line as it may be recorded: every ``-e``/``--extra-vars`` value passed through
    :func:`redact_extra_vars`, in each spelling argparse accepts (``-e X``, ``-eX``, ``--extra-vars=X``)."""
    out: list[str] = []
    expect_value = False
    for arg in argv:
        if expect_value:
            out.append(redact_extra_vars(arg))
            expect_value = False
        elif arg == "-e" or _is_extra_vars_flag(arg):
            out.append(arg)
            expect_value = True
        elif "=" in arg and _is_extra_vars_flag(arg.split("=", 1)[0]):
            flag, value = arg.split("=", 1)
            out.append(f"{flag}={redact_extra_vars(value)}")
        elif arg.startswith("-e") and not arg.startswith("--") and len(arg) > 2:
            out.append("-e" + redact_extra_vars(arg[2:]))
        else:
            out.append(arg)
    return out
