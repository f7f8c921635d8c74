"""``dcgmi diag -r <level> -j``: DCGM's diagnostics, each test's result per GPU with its warnings.

DCGM 4 prints one JSON document: ``"DCGM Diagnostic" → test_categories[] → tests[]``, each test with
``results`` (one per entity: ``entity_group`` GPU, ``entity_id``, ``status``, ``warnings`` of
``{warning, error_id, error_category, error_severity}``, ``info``) and a ``test_summary`` whose status is
the test's and whose warnings are all of them, those tied to no GPU included (an internal error of the
test); ``metadata`` (``version``, ``Driver Version Detected``) and ``entity_groups`` beside it, and
``runtime_error`` where the diagnostic could not run. DCGM 3 put everything under ``"DCGM GPU
Diagnostic"`` and named GPUs by ``gpu_ids``/``gpu_id``. Both are read. Statuses are ``Pass``, ``Fail``,
``Warn``, ``Skip`` and ``Not Run`` (DCGM 3 also upper case).

The command runs dcgmi under its own ``timeout`` (the level's budget, see :func:`dcgm_script`) and frames
the output: ``# level N budget S`` first, ``# rc N`` last (dcgmi's exit status: 0, or the low byte of a
DCGM status such as 226 for "ran and found an error"; 124/137 when the budget stopped it), and
``# missing dcgmi`` alone on a host without DCGM. dcgmi's stderr stays apart, so the JSON is never cut by
a warning line; any text before the document (DCGM 3's "Successfully ran diagnostic for group.") is skipped.
"""

from __future__ import annotations

import json
import re
import shlex
from typing import Any

from diagnose.core.check import ParseError

MISSING = "# missing dcgmi"
HUNG_RCS = (124, 137)
_LEVEL = re.compile(r"^# level (?P<level>\d+) budget (?P<budget>\d+)\s*$", re.MULTILINE)
_RC = re.compile(r"^# rc (?P<rc>\d+)\s*$", re.MULTILINE)
_ROOTS = ("DCGM Diagnostic", "DCGM GPU Diagnostic")
KILL_GRACE_S = 5


def dcgm_script(level: int, budget_s: int) -> str:
    """The shell that runs ``dcgmi diag -r <level> -j``, stopped after ``budget_s`` seconds.

    The budget is dcgmi's own, inside the command: a hung dcgmi ends here with exit 124, the frame says
    so and the check names the level and the time, where the batch's timeout would only say "timed out".
    """
    run = f"dcgmi diag -r {int(level)} -j"
    return (
        f"command -v dcgmi >/dev/null 2>&1 || {{ echo {shlex.quote(MISSING)}; exit 0; }}; "
        f"echo '# level {int(level)} budget {int(budget_s)}'; "
        f"if command -v timeout >/dev/null 2>&1; then timeout -k {KILL_GRACE_S} {int(budget_s)} {run}; "
        f'else {run}; fi; rc=$?; echo; echo "# rc $rc"; exit 0'
    )


def _status(value: Any) -> str:
    text = str(value or "").strip().lower()
    return {"pass": "Pass", "fail": "Fail", "warn": "Warn", "skip": "Skip", "not run": "Not Run"}.get(
        text, str(value or "").strip() or "unknown"
    )


def _warnings(value: Any) -> list[dict[str, Any]]:
    """DCGM 4's warning objects; DCGM 3 also wrote bare strings and a single object."""
    items = value if isinstance(value, list) else [value] if value else []
    out = []
    for item in items:
        if isinstance(item, dict):
            out.append(
                {
                    "warning": str(item.get("warning", "")).strip(),
                    "error_id": item.get("error_id"),
                    "error_category": item.get("error_category"),
                    "error_severity": item.get("error_severity"),
                }
            )
        elif str(item).strip():
            out.append(
                {
                    "warning": str(item).strip(),
                    "error_id": None,
                    "error_category": None,
                    "error_severity": None,
                }
            )
    return out


def _info(value: Any) -> list[str]:
    items = value if isinstance(value, list) else [value] if value else []
    return [str(i) for i in items if str(i).strip()]


def _gpus(result: dict[str, Any]) -> list[int | None]:
    """The GPU ids one result speaks for: DCGM 4's entity, DCGM 3's comma list; [None] for none."""
    if "entity_id" in result:
        group = str(result.get("entity_group", "GPU"))
        return [int(result["entity_id"])] if group.upper() == "GPU" else []
    ids = str(result.get("gpu_ids", result.get("gpu_id", ""))).strip()
    return [int(i) for i in ids.split(",") if i.strip().isdigit()] or [None]


def _test(category: str, test: dict[str, Any]) -> dict[str, Any]:
    results = []
    for result in test.get("results") or []:
        if not isinstance(result, dict):
            continue
        for gpu in _gpus(result):
            results.append(
                {
                    "gpu": gpu,
                    "status": _status(result.get("status")),
                    "warnings": _warnings(result.get("warnings")),
                    "info": _info(result.get("info")),
                }
            )
    summary = test.get("test_summary") if isinstance(test.get("test_summary"), dict) else {}
    statuses = [r["status"] for r in results]
    status = _status(summary.get("status")) if summary.get("status") else _worst(statuses)
    seen = {(w["warning"], w["error_id"]) for r in results for w in r["warnings"]}
    general = [w for w in _warnings(summary.get("warnings")) if (w["warning"], w["error_id"]) not in seen]
    return {
        "category": category,
        "name": str(test.get("name", "?")),
        "status": status,
        "results": results,
        "warnings": general,
    }


_ORDER = ("Fail", "Warn", "Pass", "Skip", "Not Run")


def _worst(statuses: list[str]) -> str:
    known = [s for s in statuses if s in _ORDER]
    return min(known, key=_ORDER.index) if known else "unknown"


def _document(text: str) -> dict[str, Any] | None:
    start = text.find("{")
    if start < 0:
        return None
    try:
        value, _ = json.JSONDecoder().raw_decode(text[start:])
    except ValueError as exc:
        raise ParseError(f"dcgmi printed JSON that does not parse: {exc}") from None
    return value if isinstance(value, dict) else None


def parse_dcgm_diag(text: str) -> dict[str, Any]:
    """The framed output of :func:`dcgm_script` as facts.

    ``missing`` (no dcgmi), ``level``, ``budget_s``, ``rc``, ``hung`` (the budget stopped it), ``version``,
    ``driver``, ``runtime_error``, ``tests`` (category, name, status, per-GPU ``results`` with warnings and
    info, ``warnings`` tied to no GPU) and ``text`` (what dcgmi printed when it printed no document).
    """
    if MISSING in text:
        return {"missing": True, "tests": []}
    level = _LEVEL.search(text)
    if level is None:
        raise ParseError(f"no '# level' frame in the dcgmi command's output: {text.strip()[:200]!r}")
    rc = _RC.search(text)
    body = text[level.end() : rc.start() if rc else len(text)]
    document = _document(body)
    facts: dict[str, Any] = {
        "missing": False,
        "level": int(level.group("level")),
        "budget_s": int(level.group("budget")),
        "rc": int(rc.group("rc")) if rc else None,
        "version": None,
        "driver": None,
        "runtime_error": None,
        "tests": [],
        "text": body.strip()[:2000] if document is None else "",
    }
    facts["hung"] = facts["rc"] in HUNG_RCS
    if document is None:
        return facts
    root = next((document[k] for k in _ROOTS if isinstance(document.get(k), dict)), {})
    metadata = document.get("metadata") if isinstance(document.get("metadata"), dict) else {}
    facts["version"] = metadata.get("version") or root.get("version")
    facts["driver"] = metadata.get("Driver Version Detected") or root.get("Driver Version Detected")
    facts["runtime_error"] = root.get("runtime_error") or None
    for category in root.get("test_categories") or []:
        if isinstance(category, dict):
            name = str(category.get("category", "?"))
            facts["tests"] += [_test(name, t) for t in category.get("tests") or [] if isinstance(t, dict)]
    return facts
