"""Fixtures shared by all test layers: the sshd test bed of tests/support/testbed.py."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.prerequisites import require
from tests.support.testbed import TestBed, prerequisite_problem


@pytest.fixture
def testbed_available() -> None:
    """Gate for tests that need the bed's prerequisites (root, sshd, unshare): where they are missing,
    the test fails under CI and is skipped elsewhere (tests/support/prerequisites.py)."""
    require("the sshd test bed", prerequisite_problem())


@pytest.fixture
def testbed(testbed_available: None, tmp_path: Path) -> Iterator[TestBed]:
    """A TestBed in this test's tmp dir, stopped at teardown (also when the test fails; a process
    left behind then fails the teardown)."""
    bed = TestBed(tmp_path / "testbed")
    try:
        yield bed
    finally:
        bed.stop()
