"""nccl.env — no NCCL setting left behind that disables a transport or names hardware the host lacks.

Read as NCCL reads it: the login environment, then ``$NCCL_CONF_FILE`` or ``~/.nccl.conf``, then
``/etc/nccl.conf``, the first value of a variable winning. The usual leftovers of a debugging session are
``NCCL_P2P_DISABLE=1`` (GPUs stop using NVLink among themselves), ``NCCL_SHM_DISABLE=1`` and
``NCCL_IB_DISABLE=1`` (inter-node traffic over TCP); ``NCCL_SOCKET_IFNAME`` / ``NCCL_IB_HCA`` copied from
another cluster name interfaces or HCAs this host does not have; and NCCL silently caps
``NCCL_SOCKET_NTHREADS`` × ``NCCL_NSOCKS_PERTHREAD`` at 64 sockets.
"""

from __future__ import annotations

from collections.abc import Mapping

from diagnose.config.profiles import fabric_expected, no_gpu_reason
from diagnose.core.check import Check, Command, Facts
from diagnose.core.model import CommandOutput, Outcome
from diagnose.core.vars import Vars
from diagnose.parsers.nccl_env import NCCL_ENV_SCRIPT, parse_nccl_env, unmatched_names

MAX_SOCKETS = 64  # NCCL's MAX_SOCKETS in net_socket.cc
MAX_SOCKET_THREADS = 16  # NCCL's MAX_THREADS


def parse(outputs: Mapping[str, CommandOutput], host_vars: Vars) -> Facts:
    return parse_nccl_env(outputs["nccl_env"].stdout)


def _int(value: str | None) -> int | None:
    """NCCL parses its integer variables with strtoll(…, 0): ``0x10`` is 16, anything else is ignored."""
    if value is None:
        return None
    try:
        return int(value.strip(), 0)
    except ValueError:
        return None


def _where(facts: Facts, name: str) -> str:
    origin = facts["origin"].get(name, "environment")
    return "the environment" if origin == "environment" else origin


def judge(facts: Facts, host_vars: Vars) -> Outcome:
    host = host_vars.host or "this host"
    env = facts["effective"]
    fabric = fabric_expected(host_vars)
    failures: list[str] = []
    warnings: list[str] = []

    def setting(name: str) -> str:
        return f"{name}={env[name]} (from {_where(facts, name)})"

    if _int(env.get("NCCL_P2P_DISABLE")):
        failures.append(
            f"{setting('NCCL_P2P_DISABLE')}: GPUs copy through host memory instead of NVLink/PCIe P2P"
        )
    if _int(env.get("NCCL_SHM_DISABLE")):
        warnings.append(f"{setting('NCCL_SHM_DISABLE')}: no shared-memory transport between local processes")
    if _int(env.get("NCCL_IB_DISABLE")):
        text = f"{setting('NCCL_IB_DISABLE')}: inter-node traffic goes over TCP sockets"
        (failures if fabric else warnings).append(text)
    threads = _int(env.get("NCCL_SOCKET_NTHREADS"))
    per_thread = _int(env.get("NCCL_NSOCKS_PERTHREAD"))
    if threads and threads > MAX_SOCKET_THREADS:
        warnings.append(f"{setting('NCCL_SOCKET_NTHREADS')}: NCCL caps it at {MAX_SOCKET_THREADS}")
    if threads and per_thread and threads * per_thread > MAX_SOCKETS:
        warnings.append(
            f"NCCL_SOCKET_NTHREADS x NCCL_NSOCKS_PERTHREAD = {threads} x {per_thread} = {threads * per_thread} "
            f"> {MAX_SOCKETS}: NCCL lowers NSOCKS_PERTHREAD to {MAX_SOCKETS // min(threads, MAX_SOCKET_THREADS)}"
        )
    ifname = env.get("NCCL_SOCKET_IFNAME")
    if ifname and facts["interfaces"] is not None:
        missing = unmatched_names(ifname, facts["interfaces"])
        if missing:
            failures.append(
                f"{setting('NCCL_SOCKET_IFNAME')} names {', '.join(missing)}, which {host} lacks "
                f"(interfaces: {', '.join(facts['interfaces'])})"
            )
    hca = env.get("NCCL_IB_HCA")
    if hca and facts["rdma_devices"] is not None:
        missing = unmatched_names(hca, facts["rdma_devices"])
        if missing:
            have = ", ".join(facts["rdma_devices"]) or "no RDMA device"
            text = f"{setting('NCCL_IB_HCA')} names {', '.join(missing)}, which {host} lacks (has {have})"
            (failures if fabric else warnings).append(text)
    shown = {k: v for k, v in env.items() if k != "NCCL_VERSION"}
    observed = ", ".join(f"{k}={v}" for k, v in sorted(shown.items())) or "no NCCL_* setting"
    wanted = "no transport disabled, names that exist on the host, at most 64 sockets"
    reason = no_gpu_reason(host_vars)
    if reason and (failures or warnings):
        return Outcome("SKIP", f"NCCL settings on {host} not judged: {reason}", observed, wanted)
    if failures:
        return Outcome(
            "FAIL",
            f"{host}: " + "; ".join(failures + warnings),
            observed,
            wanted,
            remediation="Remove the setting from the file or profile script it comes from (named above), "
            "or correct the names to this host's interfaces (/sys/class/net) and HCAs (/sys/class/infiniband).",
        )
    if warnings:
        return Outcome(
            "WARN",
            f"{host}: " + "; ".join(warnings),
            observed,
            wanted,
            remediation="Remove debugging leftovers from the NCCL environment and config files named above.",
        )
    return Outcome(
        "PASS", f"no NCCL setting on {host} disables a transport or names missing hardware", observed, wanted
    )


CHECK = Check(
    id="nccl.env",
    checklist="3",
    summary="NCCL environment and /etc/nccl.conf, ~/.nccl.conf: nothing disabled, no missing interface or HCA",
    commands=(Command("nccl_env", NCCL_ENV_SCRIPT, timeout=15),),
    parse=parse,
    judge=judge,
    remediation="Keep NCCL's environment and config files free of transport-disabling leftovers.",
    action="check_config",
)
