"""Fixtures shared by all test layers: the sshd test bed of tests/support/testbed.py."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.testbed import TestBed, prerequisite_problem


def _in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in {"true", "1", "yes"}


@pytest.fixture
def testbed_available() -> None:
    """Gate for tests that need the bed's prerequisites (root, sshd, unshare): where they are missing,
    the test fails under CI=true, so the integration suite never passes by skipping, and is skipped
    with the reason elsewhere."""
    problem = prerequisite_problem()
    if problem:
        if _in_ci():
            pytest.fail(f"the sshd test bed cannot run under CI: {problem}")
        pytest.skip(f"the sshd test bed cannot run here: {problem}")


@pytest.fixture
def testbed(testbed_available: None, tmp_path: Path) -> Iterator[TestBed]:
    """A TestBed in this test's tmp dir, stopped at teardown (also when the test fails; a process
    left behind then fails the teardown)."""
    bed = TestBed(tmp_path / "testbed")
    try:
        yield bed
    finally:
        bed.stop()
