"""ib.devices — the RDMA devices NCCL would open are there: ``/dev/infiniband`` and ``ibv_devinfo``.

``/dev/infiniband/uverbsN`` is what libibverbs opens, one per HCA; ``rdma_cm`` alone means the RDMA core is
loaded but no HCA driver registered a device (a cloud VM without a fabric looks exactly like that).
``ibv_devinfo`` then says which fabric each device belongs to, so an AWS host with 32 EFA devices is told
apart both from an InfiniBand host and from a host with no RDMA at all.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

from diagnose.config.profiles import no_fabric_reason, profile_label
from diagnose.core.check import Check, Command, Facts
from diagnose.core.model import CommandOutput, Outcome
from diagnose.core.units import counted
from diagnose.core.vars import Vars
from diagnose.parsers.ibv_devinfo import parse_dev_infiniband, parse_ibv_devinfo
from diagnose.parsers.rdma import (
    NO_RAIL_REMEDIATION,
    describe_kind,
    natural_key,
    normalise_kind,
    profile_rails,
    set_aside,
)

IBV_DEVINFO = Command("ibv_devinfo", "ibv_devinfo", tool="ibv_devinfo", timeout=15, required=False)


def parse(outputs: Mapping[str, CommandOutput], host_vars: Vars) -> Facts:
    listing = outputs["dev_infiniband"]
    facts: Facts = {"dev": parse_dev_infiniband(listing.stdout, listing.exit_code)}
    verbs = outputs["ibv_devinfo"]
    if verbs.not_found:
        facts.update(verbs_state="missing", devices=[], ports=[])
    elif verbs.timed_out or verbs.error:
        facts.update(verbs_state="timeout" if verbs.timed_out else "error", devices=[], ports=[])
    else:
        facts.update(verbs_state="ok", **verbs.parsed(parse_ibv_devinfo))
    return facts


def _device_summary(devices: list[dict]) -> str:
    kinds = Counter(d["fabric"] for d in devices)
    return ", ".join(f"{n} {describe_kind(k)}" for k, n in kinds.most_common())


def _dev_summary(dev: dict) -> str:
    if not dev["present"]:
        return "no /dev/infiniband"
    if not dev["uverbs"]:
        if not dev["entries"]:
            return "/dev/infiniband is empty (no uverbs device)"
        return f"/dev/infiniband holds only {', '.join(dev['entries'])} (no uverbs device)"
    return f"/dev/infiniband has {counted(len(dev['uverbs']), 'uverbs device')}"


def absence(facts: Facts, host_vars: Vars) -> str | None:
    """Why the other ib.* checks have nothing to judge on this host: no RDMA device at all."""
    if facts["dev"]["uverbs"] or facts["devices"]:
        return None
    return f"no RDMA device on {host_vars.host or 'this host'} ({_dev_summary(facts['dev'])})"


def judge(facts: Facts, host_vars: Vars) -> Outcome:
    host = host_vars.host or "this host"
    dev, devices = facts["dev"], facts["devices"]
    kind = normalise_kind(host_vars.str("expected_link_layer"))
    expected = host_vars.int("expected_hca_count")
    seen = _dev_summary(dev)
    observed = f"{seen}; ibv_devinfo: {_device_summary(devices) or 'no device'}"
    wanted = (
        f"{expected} {describe_kind(kind) if kind else 'RDMA'} ports"
        if expected
        else ("no RDMA fabric" if expected == 0 else "any RDMA ports")
    )
    reason = no_fabric_reason(host_vars)
    if reason:
        if not devices and not dev["uverbs"]:
            return Outcome("SKIP", f"no HCA on {host} ({seen}); {reason}", observed, wanted)
        return Outcome(
            "SKIP", f"{host} has RDMA devices ({observed}) but {reason}; not judged", observed, wanted
        )
    if not dev["present"]:
        return Outcome(
            "FAIL",
            f"no /dev/infiniband on {host}: no RDMA device is visible, so NCCL can only use TCP sockets",
            observed,
            wanted,
            remediation="Load the HCA driver stack (mlx5_ib and ib_uverbs from MLNX_OFED/DOCA-OFED or the "
            "distribution's rdma-core; efa on AWS) and check that the HCAs show in lspci; in a container, "
            "pass /dev/infiniband through.",
        )
    if not dev["uverbs"]:
        return Outcome(
            "FAIL",
            f"{seen} on {host}: the RDMA core is loaded but no HCA driver registered a verbs device",
            observed,
            wanted,
            remediation="Load ib_uverbs and the HCA driver (mlx5_ib, or efa on AWS); check dmesg for "
            "firmware or PCIe errors on the HCAs.",
        )
    if facts["verbs_state"] == "missing":
        return Outcome(
            "ERROR",
            f"ibv_devinfo is missing on {host} ({seen}); cannot tell which HCAs NCCL would see",
            observed,
            wanted,
            remediation=f"Install ibverbs-utils (Debian/Ubuntu) or libibverbs-utils (RHEL) on {host}.",
        )
    if facts["verbs_state"] != "ok":
        return Outcome(
            "ERROR", f"ibv_devinfo did not answer on {host} ({facts['verbs_state']})", observed, wanted
        )
    ports, others = profile_rails(facts["ports"], kind, host_vars)
    label = describe_kind(kind) if kind else "RDMA"
    aside = set_aside(others)
    if not ports and others:
        return Outcome(
            "FAIL",
            f"{host} has no compute {label} device{aside}; {profile_label(host_vars)} expects {expected}",
            observed,
            wanted,
            remediation=NO_RAIL_REMEDIATION,
            action="replace_hca",
        )
    if not ports:
        found = _device_summary(devices) or "no device"
        return Outcome(
            "FAIL",
            f"{host} has no {label} device: ibv_devinfo lists {found}; {profile_label(host_vars)} expects {label}",
            observed,
            wanted,
            remediation="Check that the profile matches the hardware (p5-efa for AWS EFA hosts, an "
            "InfiniBand profile for ConnectX HCAs in IB mode) or set the HCA ports' link type with mlxconfig.",
        )
    names = sorted({p["device"] for p in ports}, key=natural_key)
    if expected is not None and len(ports) < expected:
        return Outcome(
            "FAIL",
            f"ibv_devinfo lists {len(ports)} {label} ports on {host} ({', '.join(names)}), expected "
            f"{expected}{aside}",
            observed,
            wanted,
            action="replace_hca",  # the driver is up and registered the others: this adapter is missing
        )
    return Outcome(
        "PASS",
        f"{len(ports)} {label} ports on {len(names)} devices ({', '.join(names)}); {seen}{aside}",
        observed,
        wanted,
    )


CHECK = Check(
    id="ib.devices",
    checklist="1, 2",
    summary="/dev/infiniband has uverbs devices and ibv_devinfo lists the expected HCAs",
    commands=(Command("dev_infiniband", "ls -1 /dev/infiniband", timeout=10), IBV_DEVINFO),
    parse=parse,
    judge=judge,
    remediation="Make every HCA visible to libibverbs: driver loaded (mlx5_ib / efa), ib_uverbs loaded, "
    "/dev/infiniband/uverbsN present, and `ibv_devinfo` listing each device.",
    no_hardware=no_fabric_reason,
    absence=absence,
    action="check_config",
)
