"""A key file is read once per run for all the hosts that offer it; what paramiko must read itself (an
encrypted key, a key with a certificate beside it, not a key at all) is left to it."""

from __future__ import annotations

from pathlib import Path

import paramiko

from diagnose.connectors.ssh_common import PrivateKeyCache


def test_a_key_file_is_read_once_and_again_after_it_changes(tmp_path: Path) -> None:
    path = tmp_path / "id_rsa"
    paramiko.RSAKey.generate(2048).write_private_key_file(str(path))
    cache = PrivateKeyCache()
    first = cache.load(str(path))
    assert isinstance(first, paramiko.RSAKey)
    assert cache.load(str(path)) is first
    path.write_text(path.read_text() + "\n")  # same key, new file version
    again = cache.load(str(path))
    assert again is not first and again == first


def test_files_paramiko_must_read_itself_are_left_to_it(tmp_path: Path) -> None:
    key = paramiko.RSAKey.generate(2048)
    encrypted = tmp_path / "encrypted"
    key.write_private_key_file(str(encrypted), password="secret")
    with_cert = tmp_path / "with_cert"
    key.write_private_key_file(str(with_cert))
    (tmp_path / "with_cert-cert.pub").write_text("ssh-rsa-cert-v01@openssh.com AAAA\n")
    not_a_key = tmp_path / "notes"
    not_a_key.write_text("hello\n")
    cache = PrivateKeyCache()
    for path in (encrypted, with_cert, not_a_key, tmp_path / "missing"):
        assert cache.load(str(path)) is None
