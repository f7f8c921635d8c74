"""The batch framing: many commands in one remote shell, each with its own output, exit code and timeout."""

from __future__ import annotations

import subprocess

import pytest

from diagnose.connectors import batch_script, parse_batch_output
from diagnose.connectors.base import framed_outputs
from diagnose.core import streams
from diagnose.core.check import Command
from diagnose.core.streams import FramedStream

TOKEN = "@@diagnose-test"


def run_batch_locally(commands: list[Command], timeout_cap: float | None = None) -> dict:
    script = batch_script(commands, TOKEN, timeout_cap)
    done = subprocess.run(["/bin/sh", "-c", script], capture_output=True, text=True, timeout=60)
    return parse_batch_output(done.stdout, done.stderr, commands, TOKEN)


def test_outputs_exit_codes_and_stderr_stay_apart() -> None:
    out = run_batch_locally(
        [
            Command("a", "echo one; echo two >&2; exit 3"),
            Command("b", "printf 'no newline'"),
            Command("c", "printf 'blank lines\\n\\n\\n'"),
        ]
    )
    assert (out["a"].stdout, out["a"].stderr, out["a"].exit_code) == ("one\n", "two\n", 3)
    assert out["b"].stdout == "no newline" and out["b"].ok
    assert out["c"].stdout == "blank lines\n\n\n"


def test_missing_tool_is_exit_127() -> None:
    out = run_batch_locally([Command("x", "no-such-tool-here --version", tool="no-such-tool-here")])
    assert out["x"].not_found and not out["x"].timed_out


def test_a_hanging_command_is_cut_and_the_next_one_still_runs() -> None:
    out = run_batch_locally([Command("hang", "sleep 60", timeout=1), Command("after", "echo alive")])
    assert out["hang"].timed_out
    assert out["after"].stdout == "alive\n"


def test_timeout_cap_lowers_long_timeouts() -> None:
    out = run_batch_locally([Command("hang", "sleep 60", timeout=300)], timeout_cap=1)
    assert out["hang"].timed_out


def test_output_that_imitates_a_marker_cannot_end_a_section() -> None:
    out = run_batch_locally([Command("fake", "echo '@@diagnose-other END fake'; echo real")])
    assert out["fake"].stdout == "@@diagnose-other END fake\nreal\n"


def test_a_truncated_batch_marks_the_missing_commands() -> None:
    commands = [Command("a", "echo a"), Command("b", "echo b")]
    done = subprocess.run(["/bin/sh", "-c", batch_script(commands, TOKEN)], capture_output=True, text=True)
    cut = done.stdout[: done.stdout.index(f"{TOKEN} OUT b")]
    out = parse_batch_output(cut, done.stderr, commands, TOKEN)
    assert out["a"].stdout == "a\n"
    assert out["b"].error and not out["b"].ok


def test_each_command_of_a_batch_keeps_how_long_it_ran(monkeypatch: pytest.MonkeyPatch) -> None:
    """A batch arrives as one stream; each command's time is from its OUT marker to its END marker as they
    arrive (``-v`` shows it: a hung nvidia-smi is found by it). The clock is the test's."""
    moments = {"t": 0.0}
    monkeypatch.setattr(streams.time, "monotonic", lambda: moments["t"])
    commands = [Command("a", "echo a"), Command("slow", "echo slow")]
    out, err = FramedStream(TOKEN), FramedStream(TOKEN)
    for line, moment in (
        (f"{TOKEN} OUT a\n", 100.0),
        (f"a\n\n{TOKEN} END a 0 timeout\n", 100.25),
        (f"{TOKEN} OUT slow\n", 100.25),
        (f"slow\n\n{TOKEN} END slow 0 timeout\n", 103.75),
    ):
        moments["t"] = moment
        out.feed(line.encode())
    out.close()
    err.close()
    outputs = framed_outputs(out, err, commands)
    assert (outputs["a"].duration_s, outputs["slow"].duration_s) == (0.25, 3.5)
    assert outputs["slow"].stdout == "slow\n" and outputs["slow"].exit_code == 0


def test_a_command_boundary_is_one_write_per_stream() -> None:
    """Each write of the batch shell is a packet on the wire: one command's END marker and the next one's
    OUT marker are one printf on each stream, the SID line goes with the first OUT marker."""
    commands = [Command(key, f"echo {key}") for key in "abc"]
    script = batch_script(commands, TOKEN)
    assert script.count("printf ") == 2 * (len(commands) + 1)
    out = run_batch_locally(commands)
    assert [out[key].stdout for key in "abc"] == ["a\n", "b\n", "c\n"]
