"""Site checks written as testinfra modules, run against the same inventory hosts as the built-in checks.

A playbook's ``custom_checks`` names plain testinfra modules (``def test_x(host): ...``); they run unchanged
in one pytest subprocess with the testinfra plugin, and each test × host becomes a result
``custom.<module>::<test>`` with the assertion message. Connection details come from the inventory as for
the built-in checks: every SSH host gets a ``Host`` block in a generated ssh_config (address, port, user,
key, known_hosts, host key strictness, and ``ProxyJump`` / ``ProxyCommand`` with the other options of
``ansible_ssh_common_args`` / ``ansible_ssh_extra_args`` as diagnose.connectors.ssh_args reads them) under an alias that
maps the result back to the inventory name;
``ansible_connection: local`` hosts run through testinfra's local backend. ``~/.ssh/config`` is still read,
after the inventory's values, as Ansible does. A jump host gets a ``Host`` block of its own name (OpenSSH
reads the same file for the jump login) with the target's key and known_hosts and the same strictness, so
the custom checks reach a host behind a bastion exactly as the built-in checks do.

Outcomes are read from pytest's JUnit XML rather than its console output, which is meant for people.
"""

from __future__ import annotations

import os
import re
import sys
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import paramiko

from diagnose.catalog.stage_ids import CUSTOM_PREFIX
from diagnose.connectors.ssh_args import SSHArgsError
from diagnose.connectors.ssh_login import Proxy, SSHLogin, choose_proxy, ssh_login
from diagnose.core.hosts import Host
from diagnose.core.model import CheckResult
from diagnose.core.process import TIMEOUT, ProgramError, run_program

CHECKLIST = "custom"
DEFAULT_TIMEOUT_S = 600.0
_MESSAGE_LIMIT = 2000
_PARAM = re.compile(r"^(?P<name>[^\[]+)\[(?P<param>.+)\]$")


def _alias(index: int, host: Host) -> str:
    """An ssh_config Host alias no site config is likely to match, unique per inventory host."""
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", host.name)
    return f"diagnose-{index}-{safe}"


def _user_config_for(address: str) -> dict[str, Any]:
    """What ~/.ssh/config says for a name, as the built-in checks read it (paramiko, via Fabric).

    The Host blocks here are named by alias, so the user's ``Host`` patterns (matched against the name
    on the command line) never see the inventory name: what they give must be written out here.
    """
    path = Path("~/.ssh/config").expanduser()
    if not path.is_file():
        return {}
    try:
        return dict(paramiko.SSHConfig.from_path(str(path)).lookup(address))
    except Exception:  # an unreadable config: the built-in checks report it on host.reachable
        return {}


def _proxy_of(login: SSHLogin, looked: dict[str, Any], address: str) -> Proxy:
    """The proxy the built-in checks would use (diagnose.connectors.ssh_login), from the same values."""
    try:
        return choose_proxy(login.args, looked, (address, str(looked.get("hostname") or address)))
    except SSHArgsError:
        return Proxy()  # the built-in checks refuse the host, naming the bad spec


def _ssh_block(alias: str, host: Host, accept_unknown: bool, known_hosts: str | None) -> list[str]:
    login = ssh_login(host.vars, known_hosts)
    args = login.args
    looked = _user_config_for(host.address)
    lines = [f"Host {alias}", f"  HostName {looked.get('hostname') or host.address}", "  BatchMode yes"]
    port = login.port or looked.get("port")
    if port:
        lines.append(f"  Port {port}")
    user = login.user or looked.get("user")
    if user:
        lines.append(f"  User {user}")
    lines += _auth_lines(login, accept_unknown, looked)
    if login.connect_timeout:
        lines.append(f"  ConnectTimeout {max(1, round(login.connect_timeout))}")
    if args.server_alive_interval:
        lines.append(f"  ServerAliveInterval {max(1, round(args.server_alive_interval))}")
    if args.compression:
        lines.append("  Compression yes")
    proxy = _proxy_of(login, looked, host.address)
    if proxy.jump:
        lines.append(f"  ProxyJump {','.join(str(hop) for hop in proxy.jump)}")
    elif proxy.command is not None:
        lines.append(f"  ProxyCommand {proxy.command}")  # OpenSSH expands %h %p %r %n itself
    elif proxy.off:
        lines.append("  ProxyJump none")  # first value wins: the included ~/.ssh/config adds none
    return lines


def _auth_lines(login: SSHLogin, accept_unknown: bool, looked: dict[str, Any] | None = None) -> list[str]:
    """Keys, known_hosts and host key strictness: the same for a target and for its jump hosts
    (``looked``: the target's own ~/.ssh/config entry, which its alias would not pick up)."""
    looked = looked or {}
    lines = []
    named = [*login.key_files, *looked.get("identityfile", [])]
    keys = list(dict.fromkeys(os.path.expanduser(k) for k in named))
    for one in keys:
        lines.append(f'  IdentityFile "{one}"')
    if keys:
        lines.append("  IdentitiesOnly yes")
    configured = str(looked.get("userknownhostsfile") or "").split()
    known = [*login.known_hosts_files, *configured]
    if known:
        files = " ".join(f'"{os.path.expanduser(k)}"' for k in known)
        lines.append(f"  UserKnownHostsFile {files} ~/.ssh/known_hosts")
    # Same policy as the built-in checks: a new host only when told, a changed key never.
    lines.append(
        "  StrictHostKeyChecking "
        + ("accept-new" if accept_unknown or login.host_key_checking is False else "yes")
    )
    return lines


def _jump_blocks(hosts: Sequence[Host], accept_unknown: bool, known_hosts: str | None) -> list[str]:
    """One ``Host`` block per jump host name, for the login OpenSSH makes to it with the same file.

    Only keys and host-key rules are set: address, user and port come from the ProxyJump spec or from
    the user's ~/.ssh/config for that name, as they would for OpenSSH. The first target naming a jump
    host decides its block (ssh_config keeps the first value).
    """
    lines: list[str] = []
    seen: set[str] = set()
    for host in hosts:
        if host.connection == "local":
            continue
        login = ssh_login(host.vars, known_hosts)
        for hop in _proxy_of(login, _user_config_for(host.address), host.address).jump:
            if hop.host in seen:
                continue
            seen.add(hop.host)
            lines += [f"Host {hop.host}", "  BatchMode yes"]
            lines += [*_auth_lines(login, accept_unknown), ""]
    return lines


def write_ssh_config(
    hosts: Sequence[Host], path: Path, accept_unknown: bool = False, known_hosts: str | None = None
) -> dict[str, list[str]]:
    """Write the ssh_config for the SSH hosts; return pytest id -> the inventory hosts it stands for.

    Every ``ansible_connection: local`` host is this machine, so they share testinfra's one local id.
    """
    lines: list[str] = []
    ids: dict[str, list[str]] = {}
    for index, host in enumerate(hosts):
        if host.connection == "local":
            ids.setdefault("local", []).append(host.name)
            continue
        alias = _alias(index, host)
        lines += [*_ssh_block(alias, host, accept_unknown, known_hosts), ""]
        ids[f"ssh://{alias}"] = [host.name]
    lines += _jump_blocks(hosts, accept_unknown, known_hosts)
    user_config = Path("~/.ssh/config").expanduser()
    if user_config.is_file():
        lines += ["Match all", f'  Include "{user_config}"', ""]
    path.write_text("\n".join(lines))
    return ids


def _hostspecs(ids: dict[str, list[str]]) -> list[str]:
    """testinfra host specs; ``controlpersist=0`` so no ssh master process outlives the run."""
    return ["local://" if pytest_id == "local" else f"{pytest_id}?controlpersist=0" for pytest_id in ids]


def _test_name(case: ET.Element, module: str) -> tuple[str, str | None]:
    """(``Class::test`` or ``test``, the pytest host id) of one JUnit testcase."""
    name = case.get("name", "")
    match = _PARAM.match(name)
    param = match.group("param") if match else None
    base = match.group("name") if match else name
    classname = case.get("classname", "")
    last = classname.rsplit(".", 1)[-1]
    if last and last != module:
        base = f"{last}::{base}"
    return base, param


def _outcome(case: ET.Element) -> tuple[str, str]:
    for tag, status in (("failure", "FAIL"), ("error", "ERROR"), ("skipped", "SKIP")):
        node = case.find(tag)
        if node is not None:
            message = node.get("message") or tag
            detail = [line.strip() for line in (node.text or "").splitlines() if line.strip()]
            # pytest's message for an error is generic ("collection failure"); its last line says why.
            last = detail[-1].removeprefix("E").strip() if detail else ""
            if last and last not in message:
                message = f"{message}: {last}"
            return status, message[:_MESSAGE_LIMIT]
    return "PASS", "passed"


def parse_junit(
    xml_text: str, ids: dict[str, list[str]], modules: Sequence[Path], evidence: str | None
) -> list[CheckResult]:
    """One CheckResult per test × host from pytest's JUnit XML (``junit_family=xunit1``, with ``file``).

    A testcase with no host parameter (a module that failed to import, say) stands for every host.
    """
    root = ET.fromstring(xml_text)
    stems = {Path(m).stem for m in modules}
    results: list[CheckResult] = []
    for case in root.iter("testcase"):
        file_attr = case.get("file") or ""
        module = Path(file_attr).stem if file_attr else case.get("classname", "").rsplit(".", 1)[-1]
        if module not in stems:
            module = next((s for s in stems if s in case.get("classname", "")), module)
        test, param = _test_name(case, module)
        status, message = _outcome(case)
        hosts = ids[param] if param in ids else [h for names in ids.values() for h in names]
        if param is None and status != "PASS":
            message = f"{module} could not run: {message}"
            if test == module:  # pytest names a collection error after the module
                test = ""
        for host in hosts:
            results.append(
                CheckResult(
                    id=f"{CUSTOM_PREFIX}{module}::{test}" if test else f"{CUSTOM_PREFIX}{module}",
                    host=host,
                    checklist=CHECKLIST,
                    status=status,
                    observed="passed" if status == "PASS" else message.splitlines()[0],
                    expected="the site's testinfra assertion holds",
                    message=message,
                    remediation=None,
                    evidence=evidence,
                )
            )
    return results


def run_custom_checks(
    module_paths: Sequence[Path],
    hosts: Sequence[Host],
    out_dir: Path,
    accept_unknown_host_keys: bool = False,
    known_hosts: str | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
) -> list[CheckResult]:
    """Run the testinfra modules against the hosts in one pytest subprocess; results per test × host.

    Writes ``custom/ssh_config``, ``custom/junit.xml`` and ``custom/pytest.txt`` (pytest's own output)
    under ``out_dir`` as evidence. A run that cannot finish gives an ERROR per module × host saying why.
    """
    modules = [Path(p).resolve() for p in module_paths]
    if not modules or not hosts:
        return []
    work = Path(out_dir) / "custom"
    work.mkdir(parents=True, exist_ok=True)
    ssh_config = work / "ssh_config"
    ids = write_ssh_config(hosts, ssh_config, accept_unknown_host_keys, known_hosts)
    junit = work / "junit.xml"
    ini = work / "pytest.ini"
    ini.write_text("[pytest]\njunit_family = xunit1\n")
    base = Path(os.path.commonpath([str(m.parent) for m in modules]))
    command = [
        sys.executable,
        "-m",
        "pytest",
        *map(str, modules),
        "-c",
        str(ini),
        "--rootdir",
        str(base),
        "--confcutdir",
        str(base),
        "-p",
        "no:cacheprovider",
        f"--hosts={','.join(_hostspecs(ids))}",
        f"--ssh-config={ssh_config}",
        f"--junitxml={junit}",
        "-q",
        "-rN",
    ]
    evidence = f"custom/{junit.name}"
    try:
        done = run_program(command, timeout_s, cwd=base)
        (work / "pytest.txt").write_text(done.stdout + done.stderr)
    except ProgramError as exc:
        (work / "pytest.txt").write_text(exc.output)
        if exc.reason == TIMEOUT:
            return _errors(
                modules, hosts, f"the custom checks did not finish within {timeout_s:.0f} s", evidence
            )
        return _errors(modules, hosts, f"pytest could not run: {exc}", None)
    if not junit.is_file():
        tail = (done.stdout + done.stderr).strip().splitlines()[-3:]
        return _errors(
            modules, hosts, f"pytest wrote no results (exit {done.returncode}): {' | '.join(tail)}", None
        )
    return parse_junit(junit.read_text(), ids, modules, evidence)


def _errors(
    modules: Sequence[Path], hosts: Sequence[Host], message: str, evidence: str | None
) -> list[CheckResult]:
    return [
        CheckResult(
            id=f"{CUSTOM_PREFIX}{module.stem}",
            host=host.name,
            checklist=CHECKLIST,
            status="ERROR",
            message=message,
            evidence=evidence,
        )
        for module in modules
        for host in hosts
    ]
