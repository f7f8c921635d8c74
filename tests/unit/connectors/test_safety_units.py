"""The pure parts of the safety rules: capped capture, batch framing under any chunking, redaction,
host settings, and the engine rule that a check whose commands did not complete is an ERROR."""

from __future__ import annotations

import json
import random

import pytest

from diagnose.catalog.loading import load_catalog
from diagnose.config.host_settings import first_problem, parse_bench_env
from diagnose.connectors import env_prefix
from diagnose.core.check import Check, Command
from diagnose.core.model import CommandOutput
from diagnose.core.redact import MASK, is_secret_name, redact_argv, redact_assignments, redact_extra_vars
from diagnose.core.streams import Capped, FramedStream
from diagnose.core.vars import Vars
from diagnose.engine.evaluate import evaluate_check
from tests.support.paths import CAPTURED

TOKEN = "@@diagnose-0123456789abcdef"
POD_FIXTURE = "healthy_sriov_rdma_pod.json"


# ------------------------------------------------------------------------------------------- capture


def test_capped_keeps_head_and_tail_and_says_how_much_was_cut() -> None:
    capped = Capped(1000)
    capped.add(b"HEAD" + b"x" * 496)
    for _ in range(10_000):
        capped.add(b"y" * 100)
    capped.add(b"z" * 496 + b"TAIL")
    text = capped.text()
    assert text.startswith("HEAD") and text.endswith("TAIL")
    assert capped.total == 1_001_000 and capped.cut == 1_000_000
    assert "1000000 bytes cut from the middle of 1001000 bytes" in text
    assert len(text) < 1200


def test_capped_under_the_limit_is_the_output_unchanged() -> None:
    capped = Capped(100)
    for chunk in (b"ab", b"", b"cd\n", b"e"):
        capped.add(chunk)
    assert capped.text() == "abcd\ne" and capped.cut == 0


def _framed(commands: list[tuple[str, str, str]], trailer: str = "") -> bytes:
    lines = [f"{TOKEN} SID 4242\n"]
    for key, body, end in commands:
        lines += [f"{TOKEN} OUT {key}\n", body, f"\n{TOKEN} END {key} {end}\n"]
    return ("".join(lines) + trailer).encode()


@pytest.mark.parametrize("seed", range(25))
def test_framing_is_the_same_for_any_chunking(seed: int) -> None:
    rng = random.Random(seed)
    other = "@@diagnose-fedcba9876543210"  # output cannot know the batch's random token
    forged = f"output that imitates {TOKEN} END a 0\n{other} END a 1\nno newline at the end"
    data = _framed([("a", forged, "0 timeout"), ("b", "y" * 5000, "3 "), ("c", "", "0 ")], trailer="junk")
    stream = FramedStream(TOKEN, limit=1 << 20)
    position = 0
    while position < len(data):
        size = rng.choice([1, 2, 7, 64, 700, 4096])
        stream.feed(data[position : position + size])
        position += size
    stream.close()
    assert stream.session == 4242
    assert stream.finished("a") == (forged, "0 timeout")
    assert stream.finished("b") == ("y" * 5000, "3 ")
    assert stream.finished("c") == ("", "0 ")


def test_a_marker_in_the_middle_of_a_line_is_output() -> None:
    stream = FramedStream(TOKEN)
    stream.feed(f"{TOKEN} OUT a\nx {TOKEN} END a 0\n".encode())
    assert stream.finished("a") is None and stream.current == "a"


def test_each_command_has_its_own_cap() -> None:
    stream = FramedStream(TOKEN, limit=1024)
    stream.feed(f"{TOKEN} OUT loud\n".encode())
    for _ in range(1000):
        stream.feed(b"z" * 1000 + b"\n")
    stream.feed(f"\n{TOKEN} END loud 0 \n{TOKEN} OUT quiet\nfine\n{TOKEN} END quiet 0 \n".encode())
    loud, _ = stream.finished("loud") or ("", "")
    assert "bytes cut from the middle" in loud and len(loud) < 1300
    assert stream.finished("quiet") == ("fine", "0 ")


def test_an_unfinished_section_is_not_finished() -> None:
    stream = FramedStream(TOKEN)
    stream.feed(f"{TOKEN} OUT a\npartial output".encode())
    stream.close()
    assert stream.finished("a") is None


# ------------------------------------------------------------------------------------ env and settings


@pytest.mark.parametrize("name", ["C;touch /tmp/x;D", "$(id)", "`id`", "A B", "1X", "", "X-Y", "a\nb"])
def test_env_prefix_refuses_names_that_are_not_posix(name: str) -> None:
    with pytest.raises(ValueError, match="not a valid environment variable name"):
        env_prefix({name: "1"})


def test_env_prefix_quotes_every_value() -> None:
    assert env_prefix({"A": "$(id) `id` ';"}) == "export A='$(id) `id` '\"'\"';'; "


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("A=1, B = two ,C=", {"A": "1", "B": "two", "C": ""}),
        (
            "NCCL_SOCKET_IFNAME=^lo,docker0,NCCL_DEBUG=INFO",
            {"NCCL_SOCKET_IFNAME": "^lo,docker0", "NCCL_DEBUG": "INFO"},
        ),
        ({"NCCL_IB_HCA": "mlx5_0", "N": 3}, {"NCCL_IB_HCA": "mlx5_0", "N": "3"}),
        ("", {}),
        (None, {}),
    ],
)
def test_bench_env_forms(value: object, expected: dict[str, str]) -> None:
    assert parse_bench_env(value) == expected


@pytest.mark.parametrize("value", ["A=1,$(id)=2", "B,A=1", {"X;Y": "1"}, {"9A": "1"}])
def test_bench_env_refuses_bad_entries(value: object) -> None:
    with pytest.raises(ValueError, match="bench_env"):
        parse_bench_env(value)


@pytest.mark.parametrize(
    ("variable", "value", "words"),
    [
        ("ansible_port", "abc", "integer"),
        ("ansible_port", "0", "between 1 and 65535"),
        ("ansible_host", "a b", "host name"),
        ("ansible_host", "-oProxyCommand=x", "host name"),
        ("ansible_user", "root\nProxyCommand x", "login name"),
        ("ansible_ssh_private_key_file", 'k"', "path"),
        ("ansible_python_interpreter", "py\nthon", "path"),
        ("ansible_connection", "docker", "not supported"),
        ("command_timeout_s", "-1", "at least"),
        ("max_output_bytes", "12", "at least 1024"),
        ("bench_env", "K;=1", "bench_env name"),
    ],
)
def test_host_settings_name_the_variable_and_host(variable: str, value: str, words: str) -> None:
    problem = first_problem(Vars({variable: value}, host="node7"))
    assert problem is not None
    name, message = problem
    assert name == variable and words in message and "node7" in message


def test_ordinary_settings_pass() -> None:
    values = {
        "ansible_host": "10.0.0.7",
        "ansible_port": 2222,
        "ansible_user": "svc.diag",
        "ansible_connection": "ssh",
        "ansible_python_interpreter": "/opt/conda/envs/train/bin/python",
        "nccl_tests_mpi_host": "node7-ib",
        "bench_env": "NCCL_IB_HCA=mlx5_0:1,NCCL_SOCKET_IFNAME=^lo,docker0",
        "max_output_bytes": 8388608,
    }
    assert first_problem(Vars(values, host="node7")) is None


# ------------------------------------------------------------------------------------------- redaction


@pytest.mark.parametrize(
    "name",
    [
        "api_token",
        "HF_TOKEN",
        "ansible_ssh_pass",
        "ansible_become_pass",
        "ansible_password",
        "db_passwd",
        "client_secret",
        "aws_credentials",
        "api_key",
        "ssh_key",
        "githubToken",
        "ansible_ssh_private_key_file",
    ],
)
def test_secret_names(name: str) -> None:
    assert is_secret_name(name)


@pytest.mark.parametrize("name", ["expected_mtu", "bench_env", "keyboard", "bypass", "passive", "monkey"])
def test_not_secret_names(name: str) -> None:
    assert not is_secret_name(name)


def test_redact_argv_covers_every_spelling_of_extra_vars() -> None:
    secret = "hunter2"
    argv = [
        "run",
        "-e",
        f"api_token={secret} x=1",
        f"-eansible_ssh_pass={secret}",
        "--extra-vars",
        f'{{"db_password": "{secret}", "a": 1}}',
        f"--extra={'client_secret'}={secret}",
        "-e",
        "@vars.yml",
        "--limit",
        "gpu",
    ]
    redacted = redact_argv(argv)
    assert secret not in " ".join(redacted)
    assert "x=1" in redacted[2] and "@vars.yml" in redacted and redacted[-2:] == ["--limit", "gpu"]


@pytest.mark.parametrize("text", ["{api_token: [unclosed", "api_token='unclosed quote", 'a=1 "token": "x"'])
def test_unparsable_extra_vars_still_hide_the_secret(text: str) -> None:
    redacted = redact_extra_vars(text)
    assert MASK in redacted and "'unclosed" not in redacted and '"x"' not in redacted


def test_mpirun_assignments() -> None:
    assert redact_assignments(["-x", "HF_TOKEN=abc", "-x", "NCCL_DEBUG=INFO"]) == [
        "-x",
        f"HF_TOKEN={MASK}",
        "-x",
        "NCCL_DEBUG=INFO",
    ]


# ------------------------------------------------------------- the engine rule: unfinished is ERROR


def _catalog_checks() -> list[Check]:
    return [entry for entry in load_catalog() if isinstance(entry, Check)]


@pytest.mark.parametrize("check", _catalog_checks(), ids=lambda c: c.id)
@pytest.mark.parametrize(
    "output",
    [
        CommandOutput(error="the batch ended before this command finished"),
        CommandOutput(stdout="half an out", timed_out=True, exit_code=124),
    ],
    ids=["cut", "timed-out"],
)
def test_a_check_whose_commands_did_not_complete_is_an_error(check: Check, output: CommandOutput) -> None:
    # A pod host, so that the pod checks have their commands too (on SSH hosts they run none), with DCGM's
    # diagnostics on (level 0, the default, runs no command) and an NVLink domain expected (the NVL72 checks
    # ask nothing of hosts where none is).
    pod = json.loads((CAPTURED / "k8s_pod" / POD_FIXTURE).read_text())
    host_vars = Vars(
        {
            "diagnose_profile": "h100-8x-ndr400",
            "expected_hca_count": 8,
            "diagnose_k8s_pod": pod,
            "dcgm_diag_level": 1,
            "expected_nvlink_domain_gpus": 72,
        },
        host="node1",
    )
    commands = check.host_commands(host_vars)
    assert commands, f"{check.id} runs no command"
    outputs = {c.key: output for c in commands}
    result, facts = evaluate_check(check, outputs, host_vars, None)
    assert result.status == "ERROR", (check.id, result.message)
    assert facts is None


def _multi_command_checks() -> list[Check]:
    return [c for c in _catalog_checks() if len([x for x in c.commands if not x.auxiliary]) > 1]


@pytest.mark.parametrize("check", _multi_command_checks(), ids=lambda c: c.id)
def test_one_unfinished_command_is_enough(check: Check) -> None:
    """The first command completed and looked fine; the next one was cut: still no verdict."""
    host_vars = Vars({"expected_nvlink_domain_gpus": 72}, host="node1")  # the NVL72 checks' commands too
    commands = [c for c in check.host_commands(host_vars) if not c.auxiliary]
    outputs = {c.key: CommandOutput(stdout="", exit_code=0) for c in check.host_commands(host_vars)}
    outputs[commands[-1].key] = CommandOutput(error="connection lost")
    result, _ = evaluate_check(check, outputs, host_vars, None)
    assert result.status == "ERROR" and "connection lost" in result.message


def test_an_auxiliary_command_that_hangs_leaves_the_verdict_to_the_rest() -> None:
    """nvidia-smi hangs on the GPU that fell off the bus; the Xid 79 in the kernel log is still a FAIL."""
    xid = next(c for c in _catalog_checks() if c.id == "gpu.xid")
    auxiliary = [c for c in xid.commands if c.auxiliary]
    assert auxiliary, "gpu.xid's GPU map is auxiliary"
    log = (
        "# clock 1795000000 200.0\n# source dmesg\n"
        "[  100.000000] NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python, GPU has fallen off the bus.\n"
    )
    outputs = {c.key: CommandOutput(stdout=log, exit_code=0) for c in xid.commands}
    for command in auxiliary:
        outputs[command.key] = CommandOutput(timed_out=True, exit_code=124)
    result, _ = evaluate_check(xid, outputs, Vars({}, host="node1"), None)
    assert result.status == "FAIL", result.message
    assert "79" in result.message


def test_commands_are_declared_with_keys_unique_per_check() -> None:
    for check in _catalog_checks():
        keys = [c.key for c in check.commands]
        assert len(keys) == len(set(keys)), check.id
        assert all(isinstance(c, Command) for c in check.commands)


def test_verbose_command_lines_mask_secret_assignments(caplog: pytest.LogCaptureFixture) -> None:
    """``-v`` shows the first line of each script a host ran: a secret assigned there never reaches stderr."""
    from diagnose.connectors.local import LocalConnection
    from diagnose.core.hosts import Host

    with caplog.at_level("DEBUG", logger="diagnose.commands"):
        assert LocalConnection(Host("n1")).run("HF_TOKEN=hunter2 NCCL_DEBUG=INFO true", timeout=10).ok
    (line,) = [r.getMessage() for r in caplog.records if r.name == "diagnose.commands"]
    assert "hunter2" not in line and f"HF_TOKEN={MASK} NCCL_DEBUG=INFO true" in line
