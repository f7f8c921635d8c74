"""A perftest stand-in for test hosts that have no RDMA device: ``ib_write_bw`` and ``ib_write_lat``.

Run as ``python3 perftest_standin.py bw|lat <perftest arguments>``; tests/support/perftest.py installs it
on a host as its two tools. Server and client pair the way perftest's do, over TCP: a server (no address
argument) listens on ``-p`` and waits for one client; a client connects to ``<address>:<-p>`` and, when
nothing listens there, fails with perftest's own two lines ("Couldn't connect to ..." and "Unable to init
the socket connection", exit 1), so a missing server really fails.

Once paired, both sides wait ``-D`` seconds (bandwidth) and print a real captured output
(tests/fixtures/captured/perftest/cx6_hdr_ib_*: ConnectX-6 HDR over InfiniBand, see its SOURCE): the banner
with the ``-d`` device, the header, and the captured row at the ``-s`` size (the CPU-frequency lines are
left out, as ``-F`` does). The numbers are scaled by the host's knobs in ``/etc/diagnose-perftest.json``:

* ``scale``: the capture's HDR 200 Gb/s figures times 2 for the bed's NDR 400 ports;
* ``slow``: ``{hca: factor}``, one NIC of this host slower (the pair runs at the slower end's pace);
* ``links``: ``{peer host: {hca: factor}}``, the cable between this NIC and that peer slower;
* ``name``: this host's name, which the peer's ``links`` refer to;
* ``hang``: the server accepts its client and never answers (a wedged HCA).

Latencies are divided by the same factor. Standard library only.
"""

from __future__ import annotations

import json
import re
import socket
import sys
import time
from pathlib import Path

KNOBS = Path("/etc/diagnose-perftest.json")
CAPTURES = Path(__file__).resolve().parent.parent / "fixtures" / "captured" / "perftest"
CAPTURE = {
    "bw": CAPTURES / "cx6_hdr_ib_sweep_cpufreq_mb.txt",
    "lat": CAPTURES / "cx6_hdr_ib_lat_sweep_cpufreq.txt",
}


def arguments(argv: list[str]) -> dict[str, str]:
    """The options the stand-in needs, perftest's spelling; ``address`` when a client."""
    found: dict[str, str] = {}
    i = 0
    while i < len(argv):
        word = argv[i]
        if word in ("-d", "-i", "-p", "-s", "-D", "-n"):
            found[word] = argv[i + 1]
            i += 2
            continue
        if not word.startswith("-"):
            found["address"] = word
        i += 1
    return found


def knobs() -> dict:
    try:
        return json.loads(KNOBS.read_text())
    except (OSError, ValueError):
        return {}


def hello(options: dict[str, str], mine: dict) -> dict:
    device = options.get("-d", "mlx5_0")
    return {
        "name": mine.get("name", ""),
        "device": device,
        "factor": float((mine.get("slow") or {}).get(device, 1.0)),
        "links": mine.get("links") or {},
    }


def pace(me: dict, peer: dict) -> float:
    """The pair's pace: the slower NIC, and the slower of what either end says of the cable between them."""
    mine = float((me["links"].get(peer["name"]) or {}).get(me["device"], 1.0))
    theirs = float((peer["links"].get(me["name"]) or {}).get(peer["device"], 1.0))
    return min(me["factor"], peer["factor"], mine, theirs)


def output(kind: str, options: dict[str, str], factor: float, scale: float) -> str:
    """The capture's banner and header, and its row at the requested size, scaled."""
    size = options.get("-s", "65536" if kind == "bw" else "2")
    lines = [ln for ln in CAPTURE[kind].read_text().splitlines() if not ln.startswith("Conflicting CPU")]
    header = next(i for i, ln in enumerate(lines) if "#bytes" in ln)
    head = [
        re.sub(r"(Device\s*:\s*)\S+", lambda m: m.group(1) + options.get("-d", "mlx5_0"), ln)
        for ln in lines[: header + 1]
    ]
    rows = [ln for ln in lines[header + 1 :] if ln.split() and ln.split()[0] == size]
    if not rows:
        return "\n".join(head) + "\n"
    cells = rows[0].split()
    if kind == "bw":
        peak, average, rate = (float(c) * factor * scale for c in cells[2:5])
        row = f" {cells[0]:<10} {cells[1]:<10}       {peak:.2f}            {average:.2f}\t\t   {rate:.6f}"
    else:
        times = [float(c) / factor for c in cells[2:9]]
        row = f" {cells[0]:<7} {cells[1]:<10}    " + "   ".join(f"{t:.2f}" for t in times)
    return "\n".join([*head, row, lines[-1]]) + "\n"


def serve(kind: str, options: dict[str, str], mine: dict) -> int:
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("0.0.0.0", int(options.get("-p", "18515"))))
    listener.listen(1)
    print(
        "\n************************************\n* Waiting for client to connect... *\n************************************",
        flush=True,
    )
    connection, _ = listener.accept()
    stream = connection.makefile("rw")
    peer = json.loads(stream.readline())
    if mine.get("hang"):
        time.sleep(3600)
    me = hello(options, mine)
    stream.write(json.dumps(me) + "\n")
    stream.flush()
    return finish(kind, options, pace(me, peer), mine)


def write(kind: str, options: dict[str, str], mine: dict) -> int:
    address, port = options["address"], int(options.get("-p", "18515"))
    try:
        connection = socket.create_connection((address, port), timeout=5)
    except OSError:
        sys.stderr.write(f"Couldn't connect to {address}:{port}\n Unable to init the socket connection\n")
        return 1
    connection.settimeout(None)
    stream = connection.makefile("rw")
    me = hello(options, mine)
    stream.write(json.dumps(me) + "\n")
    stream.flush()
    line = stream.readline()
    if not line:
        sys.stderr.write(" Failed to exchange data between server and clients\n")
        return 1
    return finish(kind, options, pace(me, json.loads(line)), mine)


def finish(kind: str, options: dict[str, str], factor: float, mine: dict) -> int:
    time.sleep(float(options.get("-D", "0")) if kind == "bw" else 0.2)
    sys.stdout.write(output(kind, options, factor, float(mine.get("scale", 1.0))))
    return 0


def main(argv: list[str]) -> int:
    kind, options = argv[0], arguments(argv[1:])
    mine = knobs()
    return write(kind, options, mine) if "address" in options else serve(kind, options, mine)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
