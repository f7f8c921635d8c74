"""NCCL's INFO log → which transport carried the data between nodes and inside each node.

What NCCL *announces* is not what it *uses*: ``Using network Socket`` is printed on a single machine with
no inter-node traffic at all (see the 4×H200 captures). The evidence is in the connection lines, one per
channel and peer, which name the transport actually set up::

    Channel 00/0 : 3[3] -> 0[0] [receive] via NET/Socket/0          (2.12+; [cudaDev])
    Channel 00 : 3[4a000] -> 6[44000] [send] via NET/IB/0/GDRDMA    (2.7–2.11; [busId])
    Ring 00 : 15[41000] -> 0[1b000] [receive] via NET/IB/0           (≤ 2.6)
    Ring 00 : 0[1b000] -> 7[41000] via direct shared memory          (≤ 2.6 SHM)

Each line is emitted by one rank on one host (``host:pid:tid [dev] NCCL INFO ...``, possibly behind an
``mpirun --tag-output`` or timestamp prefix). An edge crosses nodes when its two ranks live on different
hosts; the rank → host map comes from the caller (the launcher knows it) or, failing that, from the log
itself: init lines (``comm 0x.. rank R nranks N``) and the emitters of connection lines. A NET edge to a
rank never seen on any host of the log is counted as crossing — the log of one node of a job shows exactly
that.

On GB200/GB300 NVL72 racks the GPUs of different trays (hosts) reach each other over NVLink through the
rack's NVSwitch trays: NCCL's multi-node NVLink (MNNVL) path, ``via P2P/MNNVL`` on the connection lines, the
same text within one tray and between trays. Unlike the other P2P kinds such an edge may leave its host, so
its ends are placed only from where the ranks were seen. NCCL also says whether MNNVL is on (``comm ...
MNNVL 1``, ``MNNVL 1 cliqueId 2786 cliqueSize 4 ... nvlDomainSize 4``), whether the environment turned it off
(``NCCL_MNNVL_ENABLE set by environment to 0.``), and what each GPU's fabric registration read (``MNNVL busId
0x801000 fabric UUID ... cliqueId 0x2786 state 3 healthMask 0xaa``), which ``mnnvl`` keeps: the size of the
domain a collective ran in is what its figures are judged by, and a GPU whose fabric was not healthy
explains a slow one. The clique id is hexadecimal in both lines, with and without ``0x``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from diagnose.parsers.nvlink_fabric import health_mask_faults

_LINE = re.compile(
    r"(?:(?P<host>[^\s:\[\]]+):(?P<pid>\d+):(?P<tid>\d+)\s+)?\[(?P<dev>\d+)\]\s+NCCL\s+(?P<level>INFO|WARN)\s+(?P<msg>.*)$"
)
_EDGE = re.compile(
    r"^(?:Channel|Ring)\s+(?P<channel>\d+)(?:/\d+)?\s*:\s*(?P<src>\d+)(?:\[[0-9a-fA-Fx]+\])?\s*->\s*"
    r"(?P<dst>\d+)(?:\[[0-9a-fA-Fx]+\])?\s*(?:\[(?P<dir>send|receive)\]\s*)?via\s+(?P<via>.+?)"
    r"(?:\s+comm\s+0x[0-9a-fA-F]+.*)?\s*$"
)
_INIT = re.compile(r"comm (0x[0-9a-fA-F]+) rank (\d+) nranks (\d+)\b")
_NODES = re.compile(r"nRanks (\d+) nNodes (\d+)")
_VERSION = re.compile(r"NCCL version (\S+)")
_NETWORK = re.compile(r"Using network (.+?)\s*$")
_NVLS_CHANNELS = re.compile(r"(\d+) nvls channels")
# ``NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_3:1/RoCE [RO]; OOB bond0:10.0.0.1<0>`` and
# ``NET/Socket : Using [0]eth0:10.0.0.1<0>``: the devices behind the index in ``via NET/IB/<index>``.
_USING = re.compile(r"^NET/(?P<net>IB|Socket)\s*:\s*Using\s+(?P<devices>.*?)\s*(?:;\s*OOB\b.*)?$")
_DEVICE = re.compile(r"\[(?P<index>\d+)\](?P<name>[^\s\[;]+)")
_NET_INDEX = re.compile(r"^NET/[^/]+/(?P<index>\d+)")
_MNNVL_FABRIC = re.compile(
    r"^MNNVL busId (?P<bus>0x[0-9a-fA-F]+) fabric UUID (?P<uuid>\S+) cliqueId (?:0x)?(?P<clique>[0-9a-fA-F]+) "
    r"state (?P<state>\d+) healthMask (?P<mask>0x[0-9a-fA-F]+|\d+)"
)
_MNNVL_CLIQUE = re.compile(
    r"^MNNVL (?P<on>[01]) cliqueId (?:0x)?(?P<clique>[0-9a-fA-F]+) cliqueSize (?P<size>\d+)"
    r"(?:.*\bnvlDomainSize (?P<domain>\d+))?"
)
_COMM_MNNVL = re.compile(r"\bnNodes \d+\b.*\bMNNVL (?P<on>[01])\b")
_MNNVL_ENV = re.compile(r"^NCCL_MNNVL_ENABLE set by environment to (?P<value>[^\s.]+)")
#: NVML's fabric states, as NCCL prints them in the MNNVL fabric line.
FABRIC_STATES = {0: "Not Supported", 1: "Not Started", 2: "In Progress", 3: "Completed"}

# How NCCL spells its network transports over the years, and the name diagnose reports.
_NET_NAMES = {
    "ib": "NET/IB",
    "socket": "NET/Socket",
    "aws libfabric": "NET/OFI",
    "libfabric": "NET/OFI",
    "ofi": "NET/OFI",
}


def transport_kind(via: str) -> str:
    """Normalise the text after ``via``: ``NET/IB/0(1)/GDRDMA`` → ``NET/IB``, ``P2P/CUMEM/read`` → ``P2P/CUMEM``."""
    text = via.strip()
    lower = text.lower()
    if lower.startswith("net/"):
        name = text.split("/")[1].strip()
        key = name.lower()
        if key.startswith("ib"):  # IB, IBext, IBext_v8: NCCL's verbs transport and the SHARP plugin's
            return "NET/IB"
        return _NET_NAMES.get(key, f"NET/{name}")
    if lower.startswith("p2p/"):
        kind = text.split("/")[1].split()[0]
        return "P2P/" + {"direct": "direct", "ipc": "IPC", "cumem": "CUMEM"}.get(kind.lower(), kind)
    if lower.startswith("p2p"):
        return "P2P"
    if lower.startswith("shm") or "shared memory" in lower:
        return "SHM"
    if lower.startswith("collnet"):
        return "CollNet"
    if lower.startswith("nvls"):
        return "NVLS"
    return text.split("/")[0]


def parse_nccl_log(text: str) -> dict[str, Any]:
    """Facts of one NCCL INFO log (any number of ranks and hosts interleaved)."""
    facts: dict[str, Any] = {
        "version": None,
        "networks": [],
        "hosts": [],
        "ranks": {},  # rank -> host, from init lines of the widest communicator
        "nranks": None,
        "nccl_nodes": None,  # NCCL's own count: every rank is a "node" once P2P and SHM are off
        "edges": [],
        "nvls": False,
        "collnet": False,
        "sharp": False,
        "warnings": [],
        "net_devices": {},  # host -> {"NET/IB" | "NET/Socket": {index: device}}
        "mnnvl": None,  # multi-node NVLink, where NCCL said anything of it (see _mnnvl)
    }
    widest = 0
    hosts: list[str] = []
    for raw in text.splitlines():
        match = _LINE.search(raw)
        if match is None:
            if (version := _VERSION.search(raw)) and facts["version"] is None:
                facts["version"] = version.group(1)  # nccl-tests print it without the usual prefix
            continue
        host, msg = match.group("host"), match.group("msg")
        if host and host not in hosts:
            hosts.append(host)
        if match.group("level") == "WARN":
            if len(facts["warnings"]) < 20:
                facts["warnings"].append(msg)
            continue
        if edge := _EDGE.match(msg):
            via = edge.group("via")
            facts["edges"].append(
                {
                    "src": int(edge.group("src")),
                    "dst": int(edge.group("dst")),
                    "direction": edge.group("dir"),
                    "transport": transport_kind(via),
                    "via": via,
                    "gdrdma": "/GDRDMA" in via,
                    "host": host,
                }
            )
            continue
        if (version := _VERSION.search(msg)) and facts["version"] is None:
            facts["version"] = version.group(1)
        if using := _USING.match(msg):
            devices = facts["net_devices"].setdefault(host or "?", {}).setdefault(f"NET/{using['net']}", {})
            for device in _DEVICE.finditer(using["devices"]):
                name = device["name"]
                # IB: mlx5_0:1/IB(/SHARP) is device and port; Socket: eth0:10.0.0.1<0> is the interface
                devices[device["index"]] = name.split("/")[0] if using["net"] == "IB" else name.split(":")[0]
        if (network := _NETWORK.search(msg)) and network.group(1) not in facts["networks"]:
            facts["networks"].append(network.group(1))
        if init := _INIT.search(msg):
            rank, nranks = int(init.group(2)), int(init.group(3))
            if nranks > widest:
                widest, facts["ranks"] = nranks, {}
            if nranks == widest and host:
                facts["ranks"][rank] = host
            facts["nranks"] = widest
        if nodes := _NODES.search(msg):
            facts["nccl_nodes"] = max(facts["nccl_nodes"] or 0, int(nodes.group(2)))
        if (nvls := _NVLS_CHANNELS.search(msg)) and int(nvls.group(1)) > 0:
            facts["nvls"] = True
        if msg.startswith("Connected NVLS"):
            facts["nvls"] = True
        if re.search(r"Connected (?:all )?collnet|via COLLNET", msg, re.IGNORECASE):
            facts["collnet"] = True
        if "/SHARP" in msg:
            facts["sharp"] = True
        if msg.startswith(("MNNVL", "NCCL_MNNVL_ENABLE")) or (" MNNVL " in msg and "nNodes" in msg):
            _mnnvl(facts, host, msg)
    facts["hosts"] = hosts
    return facts


def _mnnvl(facts: dict[str, Any], host: str | None, msg: str) -> None:
    """Fold one MNNVL line into ``facts["mnnvl"]``: enabled, env, clique and domain size, per-GPU fabric."""
    mnnvl = facts["mnnvl"] = facts["mnnvl"] or {
        "enabled": None,
        "env": None,
        "clique_size": None,
        "domain_size": None,
        "fabric": [],
    }
    if fabric := _MNNVL_FABRIC.match(msg):
        mask = fabric["mask"]
        entry = {
            "host": host,
            "bus_id": fabric["bus"],
            "uuid": fabric["uuid"],
            "clique_id": int(fabric["clique"], 16),
            "state": FABRIC_STATES.get(int(fabric["state"]), fabric["state"]),
            "health_mask": int(mask, 16) if mask.startswith("0x") else int(mask),
        }
        if entry not in mnnvl["fabric"]:
            mnnvl["fabric"].append(entry)
    elif clique := _MNNVL_CLIQUE.match(msg):
        mnnvl["enabled"] = mnnvl["enabled"] or clique["on"] == "1"
        mnnvl["clique_size"] = max(mnnvl["clique_size"] or 0, int(clique["size"]))
        if clique["domain"]:
            mnnvl["domain_size"] = max(mnnvl["domain_size"] or 0, int(clique["domain"]))
    elif env := _MNNVL_ENV.match(msg):
        mnnvl["env"] = env["value"]
    elif comm := _COMM_MNNVL.search(msg):
        mnnvl["enabled"] = bool(mnnvl["enabled"]) or comm["on"] == "1"


def unhealthy_fabric(mnnvl: Mapping[str, Any] | None) -> list[str]:
    """The GPUs whose MNNVL fabric line shows a registration not Completed or a health field reading TRUE."""
    found = []
    for gpu in (mnnvl or {}).get("fabric", []):
        faults = health_mask_faults(gpu["health_mask"])
        if gpu["state"] != "Completed":
            faults.insert(0, f"state {gpu['state']}")
        if faults:
            found.append(f"{gpu['host'] or '?'} GPU {gpu['bus_id']}: " + ", ".join(faults))
    return found


def _emitter(edge: Mapping[str, Any]) -> int:
    """The rank that printed a connection line: the receiver of a [receive] line, else the sender."""
    return edge["dst"] if edge["direction"] == "receive" else edge["src"]


def summarize_transport(
    logs: Iterable[Mapping[str, Any]], rank_hosts: Mapping[int, str] | None = None
) -> dict[str, Any]:
    """What carried the data, over every parsed log of one benchmark run.

    Returns the results.json ``transport`` shape (``inter_node``, ``intra_node``, ``gdrdma``) plus the
    details a rule needs: every inter-node transport seen, the hosts that used each, whether ranks on one
    host talked over a network transport (P2P and SHM off), and per host the NICs that carried the
    inter-node traffic (``nics_used``: the index in ``via NET/IB/<i>`` looked up in that host's
    ``NET/IB : Using [i]<device>`` line).
    """
    facts = list(logs)
    hosts_of: dict[int, str] = {}
    for one in facts:
        hosts_of.update(one["ranks"])
        for edge in one["edges"]:
            if edge["host"]:
                hosts_of.setdefault(_emitter(edge), edge["host"])
                if not edge["transport"].startswith("NET/") and edge["transport"] != "P2P/MNNVL":
                    # P2P, SHM and the like never leave a host: both ends live where the line was printed
                    # (multi-node NVLink does, between the trays of an NVL72 rack).
                    hosts_of.setdefault(edge["src"], edge["host"])
                    hosts_of.setdefault(edge["dst"], edge["host"])
    if rank_hosts:
        hosts_of.update(rank_hosts)
    inter: dict[str, set[str]] = {}
    intra: list[str] = []
    gdr_inter: list[bool] = []
    net_on_one_host = False
    for one in facts:
        for edge in one["edges"]:
            src, dst = hosts_of.get(edge["src"]), hosts_of.get(edge["dst"])
            is_net = edge["transport"].startswith("NET/")
            # Without both ends placed, a network transport is taken for what it is built for.
            crosses = src != dst if src is not None and dst is not None else is_net
            if crosses:
                where = edge["host"] or hosts_of.get(_emitter(edge)) or "?"
                inter.setdefault(edge["transport"], set()).add(where)
                if is_net:
                    gdr_inter.append(edge["gdrdma"])
            else:
                if edge["transport"] not in intra:
                    intra.append(edge["transport"])
                net_on_one_host = net_on_one_host or is_net
    for one in facts:
        if one["nvls"] and "NVLS" not in intra:
            intra.append("NVLS")
        if one["collnet"] and "CollNet" not in intra:
            intra.append("CollNet")
    nets = sorted(inter, key=lambda t: (t == "NET/Socket", t))
    devices_of: dict[str, dict[str, dict[str, str]]] = {}
    for one in facts:
        for host, nets_of_host in one["net_devices"].items():
            for net, names in nets_of_host.items():
                devices_of.setdefault(host, {}).setdefault(net, {}).update(names)
    used: dict[str, set[str]] = {}
    for one in facts:
        for edge in one["edges"]:
            index = _NET_INDEX.match(edge["via"])
            if not edge["transport"].startswith("NET/") or index is None:
                continue
            src, dst = hosts_of.get(edge["src"]), hosts_of.get(edge["dst"])
            if src is not None and dst is not None and src == dst:
                continue
            where = edge["host"] or hosts_of.get(_emitter(edge)) or "?"
            known = devices_of.get(where, {}).get(
                "NET/IB" if edge["transport"] == "NET/IB" else edge["transport"]
            )
            name = (known or {}).get(index["index"], f"{edge['transport']} device {index['index']}")
            used.setdefault(where, set()).add(name)
    return {
        "inter_node": (nets[0] if nets else None),
        "intra_node": intra,
        "gdrdma": (all(gdr_inter) if gdr_inter else None),
        "inter_node_all": {t: sorted(h) for t, h in inter.items()},
        "net_within_host": net_on_one_host,
        "hosts": sorted({h for h in hosts_of.values()}),
        "version": next((f["version"] for f in facts if f["version"]), None),
        "networks": sorted({n for f in facts for n in f["networks"]}),
        "sharp": any(f["sharp"] for f in facts),
        "edges": sum(len(f["edges"]) for f in facts),
        "nics_used": {host: sorted(names) for host, names in sorted(used.items())},
        "mnnvl": _mnnvl_summary(facts),
    }


def _mnnvl_summary(facts: list[Mapping[str, Any]]) -> dict[str, Any] | None:
    """Multi-node NVLink over every log: on anywhere (None where no line said either way), turned off by the
    environment, the largest NVLink domain NCCL saw, and the GPUs whose fabric line was not healthy. None where
    no log spoke of MNNVL."""
    seen = [f["mnnvl"] for f in facts if f.get("mnnvl")]
    if not seen:
        return None
    sizes = [m["domain_size"] or m["clique_size"] for m in seen if m["domain_size"] or m["clique_size"]]
    return {
        "enabled": True
        if any(m["enabled"] for m in seen)
        else (False if any(m["enabled"] is False for m in seen) else None),
        "disabled_by_env": any(m["env"] == "0" for m in seen),
        "domain_size": max(sizes) if sizes else None,
        "unhealthy": [line for m in seen for line in unhealthy_fabric(m)],
    }
