"""The fabric and NVSwitch parsers of issue 26 against real captured outputs (the runner of tests/support/facts.py).

Cases live in ``tests/facts/<parser>/<case>.json``; their outputs in ``tests/fixtures/captured/{mlxlink,sxid,
link_events}``, each named with its origin in that folder's SOURCE.
"""

from __future__ import annotations

from diagnose.parsers.link_events import parse_hca_pci, parse_link_events
from diagnose.parsers.mlxlink import ber, parse_mlxlink, temperature
from diagnose.parsers.sxid import parse_sxid
from tests.support.facts import Parse, fact_suite
from tests.support.paths import TESTS

FOLDERS = ("mlxlink", "sxid", "link_events")

PARSERS: dict[str, Parse] = {
    "mlxlink": lambda text, rc: parse_mlxlink(text),
    "sxid": lambda text, rc: parse_sxid(text),
    "link_events": lambda text, rc: parse_link_events(text),
}


test_case, test_every_parser_has_cases, test_every_fixture_is_used_and_sourced = fact_suite(
    PARSERS, FOLDERS, also_read=(TESTS / "unit" / "checks" / "test_fabric_rules.py",)
)


def test_mlxlink_values() -> None:
    """mlxlink's spellings: 15E-255 is a BER with nothing counted, 0 [0..0] a cable without a sensor."""
    assert ber("2E-9") == 2e-9 and ber("15E-255") < 1e-250 and ber("N/A") is None
    assert temperature("54 [-5..75]") == {"value": 54.0, "low": -5.0, "high": 75.0}
    assert temperature("0 [0..0]") is None and temperature("N/A") is None


def test_hca_pci_map() -> None:
    assert parse_hca_pci("mlx5_0 0000:18:00.0\nmlx5_bond_0 0000:01:00.0\n") == {
        "0000:18:00.0": "mlx5_0",
        "0000:01:00.0": "mlx5_bond_0",
    }
