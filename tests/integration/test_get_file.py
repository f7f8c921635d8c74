"""Files come home through the exec stream byte for byte (profiler traces are gzip), on the local
connection and over a real sshd test host; a file over the limit is refused before anything is written."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from diagnose.connectors import LocalConnection, connect
from diagnose.core.hosts import Host
from tests.support.bedhosts import hosts_of
from tests.support.testbed import HostSpec, TestBed

pytestmark = pytest.mark.integration


def _payload() -> bytes:
    # Every byte value, NULs and newlines included, and enough of it to cross many read chunks.
    return bytes(range(256)) * 4096 + os.urandom(100_000)


def test_local_copy_is_byte_exact(tmp_path: Path) -> None:
    source = tmp_path / "trace.json.gz"
    source.write_bytes(_payload())
    target = tmp_path / "home" / "trace.json.gz"
    target.parent.mkdir()
    size = LocalConnection(Host("here")).get_file(str(source), target, max_bytes=10 << 20)
    assert size == source.stat().st_size
    assert target.read_bytes() == source.read_bytes()


def test_too_large_or_missing_leaves_nothing(tmp_path: Path) -> None:
    source = tmp_path / "big.bin"
    source.write_bytes(b"x" * 5000)
    connection = LocalConnection(Host("here"))
    target = tmp_path / "big.copy"
    with pytest.raises(OSError, match="too large: 5000 bytes"):
        connection.get_file(str(source), target, max_bytes=4096)
    with pytest.raises(OSError, match="could not copy"):
        connection.get_file(str(tmp_path / "absent"), target, max_bytes=4096)
    assert not target.exists() and not target.with_name("big.copy.part").exists()


def test_copy_over_ssh_is_byte_exact(tmp_path: Path) -> None:
    with TestBed(tmp_path / "bed") as bed:
        bed.add(HostSpec("node1"))
        connection = connect(hosts_of(bed)[0])
        connection.open()
        try:
            remote = tmp_path / "remote.bin"
            remote.write_bytes(_payload())
            target = tmp_path / "local.bin"
            connection.get_file(str(remote), target, max_bytes=10 << 20)
            assert target.read_bytes() == remote.read_bytes()
        finally:
            connection.close()
