"""Where the repository and the tests' data are, so no test module counts ``parents[n]`` from its own file.

FIXTURES holds captured outputs and documents (captured/, results/, traces/, inventories/, ...); FACTS holds
the parser cases, one folder per parser (see :mod:`tests.support.facts`).
"""

from __future__ import annotations

from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
REPO = TESTS.parent
FIXTURES = TESTS / "fixtures"
CAPTURED = FIXTURES / "captured"
FACTS = TESTS / "facts"
