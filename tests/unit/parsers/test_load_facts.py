"""The parsers of issue 24's host checks against their outputs (the runner of tests/support/facts.py).

Cases live in ``tests/facts/{compute_apps,dcgm_diag}/<case>.json``; their outputs in
``tests/fixtures/captured/{compute_apps,dcgm_diag}``, each named with its origin in that folder's SOURCE
(compute_apps captured on the lent H100; the DCGM documents composed from DCGM's writer and public reports).
"""

from __future__ import annotations

import pytest

from diagnose.core.check import ParseError
from diagnose.parsers.compute_apps import COMPUTE_APPS, parse_compute_apps
from diagnose.parsers.dcgm_diag import dcgm_script, parse_dcgm_diag
from tests.support.facts import Parse, fact_suite
from tests.support.paths import TESTS

FOLDERS = ("compute_apps", "dcgm_diag")

PARSERS: dict[str, Parse] = {
    "compute_apps": lambda text, rc: parse_compute_apps(text),
    "dcgm_diag": lambda text, rc: parse_dcgm_diag(text),
}


test_case, test_every_parser_has_cases, test_every_fixture_is_used_and_sourced = fact_suite(
    PARSERS, FOLDERS, also_read=(TESTS / "unit" / "checks" / "test_load_rules.py",)
)


def test_compute_apps_command_is_the_captured_one() -> None:
    """The fixtures answer exactly this field list, in this order, with the header."""
    assert COMPUTE_APPS.script == (
        "nvidia-smi --query-compute-apps=gpu_uuid,gpu_bus_id,pid,process_name,used_memory --format=csv"
    )


def test_compute_apps_refuses_what_it_cannot_read() -> None:
    with pytest.raises(ParseError, match="printed nothing"):
        parse_compute_apps("")
    with pytest.raises(ParseError, match="unexpected --query-compute-apps header"):
        parse_compute_apps("No devices were found\n")


def test_dcgm_script_frames_dcgmi_under_its_own_budget() -> None:
    script = dcgm_script(3, 1800)
    assert "timeout -k 5 1800 dcgmi diag -r 3 -j" in script
    assert "echo '# level 3 budget 1800'" in script
    assert script.endswith('echo "# rc $rc"; exit 0')


def test_dcgm_output_that_is_no_document() -> None:
    """dcgmi's own error text (no JSON) is kept for the message; a frame missing is a ParseError."""
    facts = parse_dcgm_diag("# level 1 budget 180\nError: unable to connect to host engine\n\n# rc 255\n")
    assert facts["tests"] == [] and facts["rc"] == 255 and not facts["hung"]
    assert facts["text"] == "Error: unable to connect to host engine"
    with pytest.raises(ParseError, match="no '# level' frame"):
        parse_dcgm_diag("{}")
    with pytest.raises(ParseError, match="does not parse"):
        parse_dcgm_diag('# level 1 budget 180\n{"DCGM Diagnostic": \n# rc 0\n')
