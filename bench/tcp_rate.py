"""TCP throughput between two hosts, several streams at once: the line rate of a fabric that has no
datasheet (the veth between two namespaced hosts of tests/support/gpuhosts.py), from which a user sets
``line_rate_gbps`` as they would from a NIC's rated speed.

    python bench/tcp_rate.py serve --port 5201 --streams 4            # on the receiving host
    python bench/tcp_rate.py send HOST --port 5201 --streams 4 --seconds 10

The receiver prints one line: streams, bytes, seconds and Gb/s (10^9 bit/s) over the time the streams
were open together. Memory-to-memory, no disk.
"""

from __future__ import annotations

import argparse
import socket
import threading
import time

CHUNK = 1 << 20


def serve(port: int, streams: int) -> None:
    listener = socket.create_server(("0.0.0.0", port), backlog=streams)
    received = [0] * streams
    ends = [0.0] * streams
    conns = [listener.accept()[0] for _ in range(streams)]
    start = time.monotonic()

    def drain(index: int, conn: socket.socket) -> None:
        buffer = bytearray(CHUNK)
        while (n := conn.recv_into(buffer)) > 0:
            received[index] += n
        ends[index] = time.monotonic()

    threads = [threading.Thread(target=drain, args=(i, c)) for i, c in enumerate(conns)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    seconds = max(ends) - start
    total = sum(received)
    print(f"streams={streams} bytes={total} seconds={seconds:.2f} gbit_per_s={total * 8 / seconds / 1e9:.2f}")


def send(host: str, port: int, streams: int, seconds: float) -> None:
    payload = bytes(CHUNK)
    conns = [socket.create_connection((host, port)) for _ in range(streams)]
    deadline = time.monotonic() + seconds

    def pump(conn: socket.socket) -> None:
        while time.monotonic() < deadline:
            conn.sendall(payload)
        conn.close()

    threads = [threading.Thread(target=pump, args=(c,)) for c in conns]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=("serve", "send"))
    parser.add_argument("host", nargs="?", default="")
    parser.add_argument("--port", type=int, default=5201)
    parser.add_argument("--streams", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=10.0)
    args = parser.parse_args()
    if args.mode == "serve":
        serve(args.port, args.streams)
    else:
        send(args.host, args.port, args.streams, args.seconds)


if __name__ == "__main__":
    main()
