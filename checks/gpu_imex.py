"""gpu.imex — on an NVL72 tray the IMEX daemon runs, its domain lists every peer READY, and channels exist.

A process on one tray reaches GPU memory on another tray of the rack by importing it through IMEX (the
nvidia-imex daemon on every tray, each configured with the addresses of all its peers). With the daemon
stopped, or a peer not connected, NCCL's multi-node NVLink transport cannot map the remote buffers: jobs that
span trays fail or fall back to the network, while every single-tray test passes. A workload also needs an
IMEX channel device (/dev/nvidia-caps-imex-channels/channelN) to import anything at all.

``nvidia-imex-ctl -N`` prints each configured node with its state and a matrix of who is connected to whom;
a node that is not READY, a cell that is not C (Connected, in the legend the tool prints) or a Domain State
other than UP names the missing peer by its address. The facts feed ``nvlink.rack``, which names the tray.

The daemon is looked for by its process name (``pgrep -x``), not its command line: the shell that runs a
host's batch of commands carries ``nvidia-imex`` in its own command line and would match ``pgrep -f``.

Hosts with no IMEX and a profile that expects no NVLink domain SKIP, so runs on HGX and older hosts keep
their results.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from diagnose.config.profiles import no_gpu_reason, no_gpu_required, profile_label
from diagnose.core.check import Check, Command, Facts
from diagnose.core.model import CommandOutput, Outcome
from diagnose.core.vars import Vars
from diagnose.parsers.nvlink_fabric import parse_imex_nodes, unconnected

CHANNELS_DIR = "/dev/nvidia-caps-imex-channels"
DAEMON_SCRIPT = (
    "if command -v systemctl >/dev/null 2>&1; then "
    'echo "systemctl $(systemctl is-active nvidia-imex 2>/dev/null)"; '
    'else echo "systemctl missing"; fi; '
    "if ! command -v pgrep >/dev/null 2>&1; then echo 'process unknown'; "
    "elif pgrep -x nvidia-imex >/dev/null 2>&1; then echo 'process running'; "
    "else echo 'process none'; fi; "
    'echo "addresses $(hostname -I 2>/dev/null)"'
)
COMMANDS = (
    Command("imex_daemon", DAEMON_SCRIPT, timeout=10, required=False),
    Command("imex_nodes", "nvidia-imex-ctl -N", tool="nvidia-imex-ctl", timeout=20, required=False),
    Command("imex_channels", f"ls -1 {CHANNELS_DIR} 2>/dev/null || true", timeout=10, required=False),
)
REMEDIATION = (
    "Start IMEX on every tray of the rack (`systemctl enable --now nvidia-imex`, its version equal to the "
    "driver's), with /etc/nvidia-imex/nodes_config.cfg listing the address of every tray of the rack; a peer "
    "that is not READY or not Connected is down, unreachable on the IMEX port or missing from its own "
    "config. Create the channels the workload uses (a Kubernetes DRA driver does it per workload; otherwise "
    "the NVreg_CreateImexChannel0 module option or mknod under /dev/nvidia-caps-imex-channels)."
)
WANTED = "IMEX daemon running, every configured peer READY and Connected, Domain State UP, channels present"


def parse_daemon(text: str) -> dict[str, Any]:
    """``systemd``: the unit's state or None without systemd; ``process``: True/False, None unknown;
    ``addresses``: the host's own addresses, which tell its own node from its peers in the node table."""
    systemd: str | None = None
    process: bool | None = None
    addresses: list[str] = []
    for line in text.splitlines():
        word, _, rest = line.strip().partition(" ")
        if word == "systemctl":
            systemd = None if rest.strip() in ("", "missing") else rest.strip()
        elif word == "process":
            process = {"running": True, "none": False}.get(rest.strip())
        elif word == "addresses":
            addresses = rest.split()
    return {"systemd": systemd, "process": process, "addresses": addresses}


def commands_for(host_vars: Vars) -> tuple[Command, ...]:
    """IMEX is looked at only where the profile expects a multi-node NVLink domain: every other host pays
    nothing for this check."""
    return COMMANDS if host_vars.int("expected_nvlink_domain_gpus") else ()


def parse(outputs: Mapping[str, CommandOutput], host_vars: Vars) -> Facts:
    daemon = outputs.get("imex_daemon")
    facts: Facts = parse_daemon(daemon.stdout if daemon is not None else "")
    nodes = outputs.get("imex_nodes")
    if nodes is None or nodes.not_found or (not nodes.ok and not nodes.stdout.strip()):
        facts["ctl"] = None
        facts["ctl_error"] = None if nodes is None or nodes.not_found else (nodes.stderr.strip() or "failed")
    else:
        facts["ctl"] = parse_imex_nodes(nodes.stdout)
        facts["ctl_error"] = None
    channels = outputs.get("imex_channels")
    names = (channels.stdout if channels is not None else "").split()
    facts["channels"] = sorted(n for n in names if n.startswith("channel"))
    return facts


def running(facts: Facts) -> bool:
    return facts["systemd"] == "active" or bool(facts["process"])


def own_node(facts: Facts) -> dict[str, Any] | None:
    """This host's entry in its node table (matched by address), None where no address matches."""
    ctl = facts["ctl"] or {"nodes": []}
    return next((n for n in ctl["nodes"] if n["address"] in facts["addresses"]), None)


def peer_faults(ctl: dict[str, Any], own: str | None = None) -> list[str]:
    """What the node table says of the peers other than ``own``: not READY, not Connected, domain not UP.

    A peer's fault is that peer's tray's, and ``nvlink.rack`` names that tray; the host check only reports it.
    """
    by_index = {n["index"]: n for n in ctl["nodes"]}
    faults = [
        f"IMEX peer {n['address']} (node #{n['index']}) {n['state']}"
        for n in ctl["nodes"]
        if n["state"] != "READY" and n["address"] != own
    ]
    for index in unconnected(ctl):
        node = by_index.get(index, {})
        if node.get("state") == "READY" and node.get("address") != own:
            faults.append(f"IMEX peer {node.get('address', '?')} (node #{index}) not Connected")
    if ctl["domain_state"] not in (None, "UP"):
        faults.append(f"IMEX Domain State {ctl['domain_state']}")
    return faults


def judge(facts: Facts, host_vars: Vars) -> Outcome:
    host = host_vars.host or "this host"
    reason = no_gpu_reason(host_vars)
    if reason:
        return Outcome("SKIP", f"IMEX not judged on {host}: {reason}", None, WANTED)
    expected = bool(host_vars.int("expected_nvlink_domain_gpus"))
    # A node table counts, not the tool: drivers install nvidia-imex-ctl on hosts that never run IMEX.
    present = running(facts) or bool(facts["ctl"] and facts["ctl"]["nodes"])
    if not expected and not present:
        return Outcome(
            "SKIP",
            f"no IMEX on {host} and {profile_label(host_vars)} expects no multi-node NVLink domain",
            None,
            WANTED,
        )
    ctl = facts["ctl"]
    own = own_node(facts)
    observed = {
        "daemon": "running" if running(facts) else f"not running (systemd {facts['systemd']})",
        "nodes": {n["address"]: n["state"] for n in ctl["nodes"]} if ctl else None,
        "domain_state": ctl["domain_state"] if ctl else None,
        "channels": len(facts["channels"]),
    }
    faults = []
    if not running(facts):
        faults.append(f"IMEX daemon not running (systemd unit {facts['systemd'] or 'unknown'})")
    if ctl is None:
        faults.append(
            f"nvidia-imex-ctl -N failed ({facts['ctl_error']})"
            if facts["ctl_error"]
            else "nvidia-imex-ctl not installed"
        )
    elif not ctl["nodes"]:
        faults.append("nvidia-imex-ctl -N lists no node")
    elif own is not None and own["state"] != "READY":
        faults.append(f"its own IMEX node {own['address']} is {own['state']}")
    elif own is None and facts["addresses"]:
        faults.append(f"none of its addresses ({', '.join(facts['addresses'])}) is in its IMEX node table")
    needed = host_vars.int("expected_imex_channels", 1 if expected else 0) or 0
    if len(facts["channels"]) < needed:
        faults.append(f"{len(facts['channels'])} IMEX channels in {CHANNELS_DIR}, {needed} needed")
    if faults:
        return Outcome("FAIL", f"{host}: " + "; ".join(faults), observed, WANTED, remediation=REMEDIATION)
    peers = peer_faults(ctl, own["address"] if own else None) if ctl else []
    nodes = len(ctl["nodes"]) if ctl else 0
    if peers:
        return Outcome(
            "PASS",
            f"{host}: IMEX running and this tray READY, {len(facts['channels'])} channels; its peers are "
            f"judged by nvlink.rack: " + "; ".join(peers),
            observed,
            WANTED,
        )
    return Outcome(
        "PASS",
        f"{host}: IMEX running, all {nodes} nodes READY and Connected, domain UP, "
        f"{len(facts['channels'])} channels",
        observed,
        WANTED,
    )


CHECK = Check(
    id="gpu.imex",
    checklist="H",
    summary="NVL72 trays: IMEX daemon running, every peer of its domain READY, IMEX channels present",
    commands=COMMANDS,
    commands_for=commands_for,
    parse=parse,
    judge=judge,
    remediation=REMEDIATION,
    no_hardware=no_gpu_required,
    folded_under="gpu.topology",
    action="check_config",
)
