"""How the engine turns raw outputs into results before and around a check's own rule."""

from __future__ import annotations

from diagnose.core.check import Check, Command, ParseError
from diagnose.core.model import CommandOutput, Outcome
from diagnose.core.vars import Vars
from diagnose.engine.evaluate import evaluate_check


def _parse(outputs, host_vars):
    text = outputs["tool"].stdout
    if not text.strip():
        raise ParseError("empty output")
    return {"value": int(text)}


def _judge(facts, host_vars):
    minimum = host_vars.int("minimum", 10)
    status = "PASS" if facts["value"] >= minimum else "FAIL"
    return Outcome(status, f"value {facts['value']}", facts["value"], minimum)


CHECK = Check(
    id="demo.value",
    checklist="1",
    summary="demo",
    commands=(Command("tool", "demo-tool", tool="demo-tool"),),
    parse=_parse,
    judge=_judge,
    remediation="fix it",
    no_hardware=lambda v: "profile expects no demo hardware" if v.int("expected_demo", 1) == 0 else None,
)


def test_rule_verdict_and_facts() -> None:
    result, facts = evaluate_check(
        CHECK, {"tool": CommandOutput("12\n", exit_code=0)}, Vars(host="n1"), "raw/n1/tool.txt"
    )
    assert (result.status, result.host, result.evidence, facts) == (
        "PASS",
        "n1",
        "raw/n1/tool.txt",
        {"value": 12},
    )
    result, _ = evaluate_check(CHECK, {"tool": CommandOutput("3\n", exit_code=0)}, Vars(host="n1"), None)
    assert result.status == "FAIL" and result.remediation == "fix it"


def test_missing_tool_is_error_naming_tool_and_host_unless_profile_says_no_hardware() -> None:
    missing = {"tool": CommandOutput("", "sh: demo-tool: not found", exit_code=127)}
    result, facts = evaluate_check(CHECK, missing, Vars(host="n7"), None)
    assert result.status == "ERROR" and "demo-tool" in result.message and "n7" in result.message
    assert facts is None
    result, _ = evaluate_check(CHECK, missing, Vars({"expected_demo": 0}, host="n7"), None)
    assert result.status == "SKIP" and "no demo hardware" in result.message


def test_timeout_and_lost_connection_are_errors() -> None:
    result, _ = evaluate_check(CHECK, {"tool": CommandOutput(timed_out=True)}, Vars(host="n2"), None)
    assert result.status == "ERROR" and "timed out" in result.message
    result, _ = evaluate_check(CHECK, {"tool": CommandOutput(error="connection lost")}, Vars(host="n2"), None)
    assert result.status == "ERROR" and "connection lost" in result.message


def test_unparsable_output_and_parser_bugs_are_errors_not_crashes() -> None:
    result, _ = evaluate_check(CHECK, {"tool": CommandOutput("", exit_code=0)}, Vars(host="n3"), None)
    assert result.status == "ERROR" and "empty output" in result.message
    result, _ = evaluate_check(
        CHECK, {"tool": CommandOutput("not a number", exit_code=0)}, Vars(host="n3"), None
    )
    assert result.status == "ERROR" and "ValueError" in result.message
