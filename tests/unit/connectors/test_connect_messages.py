"""What an operator reads when a host will not talk SSH, on real sockets of this machine."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import pytest

from diagnose.connectors import ConnectError, connect
from diagnose.core.hosts import Host
from diagnose.core.vars import Vars


@pytest.fixture
def closing_port() -> Iterator[int]:
    """A listener that accepts and closes at once, as sshd does past MaxStartups."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    server.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                client, _ = server.accept()
            except TimeoutError:
                continue
            client.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield server.getsockname()[1]
    stop.set()
    thread.join()
    server.close()


def test_a_host_closing_before_the_banner_says_so_not_timed_out(closing_port: int) -> None:
    host = Host("n1", vars=Vars({"ansible_host": "127.0.0.1", "ansible_port": closing_port}, "n1"))
    with pytest.raises(ConnectError) as caught:
        connect(host, accept_unknown_host_keys=True).open()
    message = str(caught.value)
    assert "closed the connection before sending the SSH banner" in message
    assert "timed out" not in message
