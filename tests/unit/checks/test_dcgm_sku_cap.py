"""gpu.dcgm held to the level a SKU's profile allows (dcgm_diag_max_level), and saying so.

The Blackwell profiles cap DCGM at level 1 (their comments give the reports behind it); an acceptance
playbook asks for level 3. What runs, what the estimate books and what the message says must agree.
"""

from __future__ import annotations

from diagnose.checks import gpu_dcgm
from diagnose.core.hosts import Host
from diagnose.core.model import CommandOutput
from diagnose.engine.estimate import dcgm_s
from tests.support.paths import CAPTURED
from tests.support.rulekit import profile


def test_a_capped_sku_runs_level_one_and_the_estimate_books_it() -> None:
    b200 = profile("b200-8x-ndr400", host="b1", dcgm_diag_level=3)
    assert gpu_dcgm.level_of(b200) == 1
    (command,) = gpu_dcgm.commands_for(b200)
    assert "dcgmi diag -r 1 -j" in command.script and "-r 3" not in command.script
    seconds, said = dcgm_s(Host("b1", vars=b200), [gpu_dcgm.CHECK])
    assert seconds == 30.0 and "DCGM level 1" in said
    h100 = profile("h100-8x-ndr400", host="h1", dcgm_diag_level=3)
    assert gpu_dcgm.level_of(h100) == 3 and gpu_dcgm.cap_note(h100) == ""


def test_the_message_says_which_level_was_asked_and_which_ran() -> None:
    b200 = profile("gb200-nvl72", host="t1", dcgm_diag_level=3)
    missing = CommandOutput(stdout=(CAPTURED / "dcgm_diag/missing.txt").read_text(), exit_code=0)
    outcome = gpu_dcgm.judge(gpu_dcgm.parse({"dcgm_diag": missing}, b200), b200)
    assert outcome.status == "SKIP"
    assert outcome.message.endswith("(level 3 asked, level 1 run: dcgm_diag_max_level 1 for this SKU)")
    lifted = profile("gb200-nvl72", host="t1", dcgm_diag_level=3, dcgm_diag_max_level=None)
    assert gpu_dcgm.level_of(lifted) == 3


def test_a_cap_of_zero_turns_dcgm_off() -> None:
    off = profile("b300-8x-xdr800", host="b3", dcgm_diag_level=2, dcgm_diag_max_level=0)
    assert gpu_dcgm.level_of(off) == 0 and gpu_dcgm.commands_for(off) == ()
