"""The Blackwell profiles: B200/B300 8-GPU nodes and GB200/GB300 NVL72 trays.

Each value either comes from a source the profile's header names or is left to the fleet, and the file
says which: a null without a word of why would read as an oversight. The NVL72 profiles are what turns a
tray in no NVLink domain from a SKIP into a FAIL, shown here on published tray outputs
(tests/fixtures/captured/nvlink_fabric, SOURCE there).
"""

from __future__ import annotations

import pytest

from diagnose.checks import gpu_imex, gpu_nvlink_domain
from diagnose.config.profile_files import available_profiles, load_profile
from diagnose.core.model import CommandOutput
from tests.support.paths import CAPTURED
from tests.support.rulekit import profile

BLACKWELL = ("b200-8x-ndr400", "b300-8x-xdr800", "gb200-nvl72", "gb300-nvl72")


@pytest.mark.parametrize("name", BLACKWELL)
def test_every_null_says_why(name: str) -> None:
    loaded = load_profile(name)
    assert name in available_profiles()
    lines = loaded.path.read_text().splitlines()
    header = [line for line in lines if line.startswith("#")]
    assert any("Sources:" in line or "Source:" in line for line in header), "the header names its sources"
    for key, value in loaded.vars.items():
        if value is None:
            (line,) = [line for line in lines if line.strip().startswith(f"{key}:")]
            assert "#" in line, f"{name}: {key} is null without saying why"


def test_the_nvl72_trays_expect_a_domain_and_the_8_gpu_nodes_do_not() -> None:
    expected = {name: load_profile(name).vars for name in BLACKWELL}
    assert [expected[n].get("expected_nvlink_domain_gpus") for n in BLACKWELL] == [None, None, 72, 72]
    assert [expected[n]["expected_gpu_count"] for n in BLACKWELL] == [8, 8, 4, 4]
    assert [expected[n]["expected_link_rate_gbps"] for n in BLACKWELL] == [400, 800, None, None]


def _fabric(fixture: str) -> dict[str, object]:
    text = (CAPTURED / "nvlink_fabric" / fixture).read_text()
    vars_ = profile("gb200-nvl72", host="t")
    return gpu_nvlink_domain.parse({"nvidia_smi_qx": CommandOutput(stdout=text, exit_code=0)}, vars_)


def test_nvl72_profile_judges_what_the_hgx_profile_skips() -> None:
    tray, hgx = _fabric("gb200_tray_p6e_qx_fabric.xml"), _fabric("b200_hgx_gpu0_qx_fabric.xml")
    assert gpu_nvlink_domain.judge(tray, profile("gb200-nvl72", host="t")).status == "PASS"
    assert gpu_nvlink_domain.judge(hgx, profile("b200-8x-ndr400", host="t")).status == "SKIP"
    assert gpu_nvlink_domain.judge(hgx, profile("gb200-nvl72", host="t")).status == "FAIL"


def test_nvl72_profile_requires_imex_where_the_hgx_profile_does_not() -> None:
    absent = {
        "imex_daemon": CommandOutput(
            stdout="systemctl inactive\nprocess none\naddresses 10.0.0.1\n", exit_code=0
        ),
        "imex_nodes": CommandOutput(stderr="sh: 1: nvidia-imex-ctl: not found", exit_code=127),
        "imex_channels": CommandOutput(stdout="", exit_code=0),
    }
    facts = gpu_imex.parse(absent, profile("gb300-nvl72", host="t"))
    assert gpu_imex.judge(facts, profile("gb300-nvl72", host="t")).status == "FAIL"
    assert gpu_imex.judge(facts, profile("b300-8x-xdr800", host="t")).status == "SKIP"
