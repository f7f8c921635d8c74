"""Cause lines on the terminal (issue 36, item 6): a long cause prints its whole message and what to do,
wrapped at words under the message's column; a cause of several hosts names none of them in its message.

unknown_host_keys.json: `diagnose run --skip-benchmarks` on two sshd bed hosts (tests/support/testbed.py,
hostkit.healthy_h100) whose inventory named an empty diagnose_known_hosts_file."""

from __future__ import annotations

import json
from typing import Any

from diagnose.render.causes import cause_lines, causes_of
from tests.support.paths import FIXTURES


def _fixture(name: str) -> dict[str, Any]:
    return json.loads((FIXTURES / "results" / name).read_text())


def test_a_long_cause_prints_its_whole_message_and_fix_wrapped_at_words() -> None:
    """The unknown-host-key cause was cut at `set ansible_host_key_…` before its fix."""
    (cause,) = causes_of(_fixture("unknown_host_keys.json"))
    lines = cause_lines([cause], "x", width=100)
    assert len(lines) > 1 and all(len(line) <= 100 for line in lines), lines
    column = lines[0].index("unreachable")
    assert all(line[:column].strip() == "" for line in lines[1:]), "continuations sit under the message"
    words = " ".join(" ".join(line[column:].split()) for line in lines)
    assert "set ansible_host_key_checking=false / --accept-unknown-host-keys → fix the configuration" in words
    assert "…" not in words
    wide = cause_lines([cause], "x", width=400)
    assert len(wide) == 1 and wide[0].endswith("→ fix the configuration")


def test_a_cause_of_several_hosts_names_none_of_them_in_its_message() -> None:
    """The recorded message names node1's address and port; the line is labelled node[1-2]."""
    document = _fixture("unknown_host_keys.json")
    (cause,) = causes_of(document)
    assert cause.hosts_text == "node[1-2]" and "127.0.0.1:" in cause.message
    assert cause.summary.startswith("unreachable: host key for <host> is not in known_hosts"), cause.summary
    line = " ".join(cause_lines([cause], "x", width=300))
    assert "127.0.0.1" not in line and "node1" not in line.split("host.reachable")[1]
    one = dict(document, checks=[r for r in document["checks"] if r.get("host") != "node2"])
    (alone,) = causes_of(one)
    assert "host key for 127.0.0.1:" in alone.summary, "a cause of one host keeps its own address"
