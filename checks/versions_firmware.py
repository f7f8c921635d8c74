"""versions.firmware — one HCA firmware per HCA model, one VBIOS per GPU model, across all hosts.

Mixed firmware is a common cause of link flaps and uneven speed: a ConnectX that was not updated with the
others trains links differently, a GPU on an older VBIOS clocks and reports differently. The versions come
from facts other checks gather anyway: ``ibstat``'s ``Firmware version`` per CA (ib.port_state), the shared
``nvidia-smi --query-gpu`` call's ``vbios_version`` (gpu.memory) and, where mlxlink reads it, the
transceivers' own firmware (ib.optics).

Versions are compared within a model (``CA type`` MT4129, the GPU's name, the module's part number), so a
ConnectX-7 is never compared with the BlueField of the storage bond. A host whose value differs from the
majority is named with its version; a host whose own HCAs of one model disagree is named too. HCA firmware
and VBIOS drift FAIL; transceiver firmware only WARNs (modules of different batches legitimately differ). Equal
everywhere is a PASS that lists the versions.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from diagnose.core.check import ClusterCheck, Facts
from diagnose.core.consistency import describe_split, split_hosts
from diagnose.core.model import Outcome
from diagnose.core.units import counted
from diagnose.core.vars import Vars

EXPECTED = "one firmware version per model on every host"


def _hca(by_check: Mapping[str, Facts]) -> Iterator[tuple[str, str]]:
    for ca in (by_check.get("ib.port_state") or {}).get("cas") or []:
        if ca.get("firmware"):
            yield f"HCA {ca.get('ca_type') or ca['name']}", str(ca["firmware"])


def _vbios(by_check: Mapping[str, Facts]) -> Iterator[tuple[str, str]]:
    for gpu in (by_check.get("gpu.memory") or {}).get("gpus") or []:
        if gpu.get("vbios"):
            yield f"VBIOS of {gpu.get('name') or 'GPU'}", str(gpu["vbios"])


def _modules(by_check: Mapping[str, Facts]) -> Iterator[tuple[str, str]]:
    for port in (by_check.get("ib.optics") or {}).get("ports") or []:
        module = port.get("module") or {}
        if module.get("firmware"):
            yield f"transceiver {module.get('part_number') or 'module'} firmware", str(module["firmware"])


SOURCES = ((_hca, "FAIL"), (_vbios, "FAIL"), (_modules, "WARN"))


def _versions(facts: Mapping[str, Mapping[str, Facts]]) -> dict[str, tuple[str, dict[str, set[str]]]]:
    """what ("HCA MT4129") -> (severity, {host: versions seen on that host})."""
    found: dict[str, tuple[str, dict[str, set[str]]]] = {}
    for source, status in SOURCES:
        for host, by_check in sorted(facts.items()):
            for what, version in source(by_check):
                found.setdefault(what, (status, {}))[1].setdefault(host, set()).add(version)
    return found


def judge(facts: Mapping[str, Mapping[str, Facts]], host_vars: Mapping[str, Vars]) -> list[Outcome]:
    findings: list[Outcome] = []
    agreed: list[str] = []
    differing: list[str] = []
    for what, (status, by_host) in sorted(_versions(facts).items()):
        values = {host: "/".join(sorted(seen)) for host, seen in by_host.items()}
        split = split_hosts(values)
        named: set[str] = set()
        if split is None:
            agreed.append(f"{what} {next(iter(values.values()))} on {counted(len(values), 'host')}")
        else:
            differing.append(describe_split(what, split))
            for host, value in split.odd_hosts.items():
                named.add(host)
                message = (
                    f"{host} runs {what} {value}, the other hosts {split.majority}"
                    if split.majority
                    else f"{host} runs {what} {value}; the hosts disagree with no majority"
                )
                findings.append(Outcome(status, message, value, split.majority or f"one {what}", host=host))
        for host, seen in sorted(by_host.items()):
            if len(seen) > 1 and host not in named:
                differing.append(f"{what} mixed on {host}")
                message = f"{host} runs {what} {' and '.join(sorted(seen))} on its own devices"
                findings.append(Outcome(status, message, values[host], f"one {what}", host=host))
    if not agreed and not differing:
        return [
            Outcome("SKIP", "no host reported HCA firmware, VBIOS or transceiver firmware", None, EXPECTED)
        ]
    if not findings:
        summary = "; ".join(agreed)
        return [Outcome("PASS", summary, summary, EXPECTED)]
    worst = "FAIL" if any(f.status == "FAIL" for f in findings) else "WARN"
    summary = "; ".join(differing)
    return [Outcome(worst, summary, summary, EXPECTED), *findings]


CHECK = ClusterCheck(
    id="versions.firmware",
    checklist="H",
    summary="one HCA firmware per HCA model, one VBIOS per GPU model, one transceiver firmware per module "
    "(cluster-wide)",
    uses=("ib.port_state", "gpu.memory", "ib.optics"),
    judge=judge,
    remediation="Bring the odd hosts to the fleet's firmware: `mlxfwmanager -u` (or `flint`) for the HCA with "
    "the image the others run, NVIDIA's firmware update package for the GPU VBIOS (the board vendor's, for "
    "OEM boards), then reboot (HCA firmware loads at reset; `mlxfwreset` where supported).",
    action="check_config",
)
