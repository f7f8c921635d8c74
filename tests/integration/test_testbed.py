"""The sshd test bed itself, seen through real SSH clients (paramiko and OpenSSH's ssh).

Every other integration and end-to-end test trusts that a test host shows what its HostSpec says
and nothing of the others; these tests check exactly that, plus the failure modes the engine must
meet (changed host key, refused key, unreachable and silent ports, a hanging tool) and that the bed
leaves no process behind.
"""

from __future__ import annotations

import os
import resource
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import paramiko
import pytest
import yaml

from tests.support import testbed as testbed_module
from tests.support.bedhosts import command_lines
from tests.support.nshost import hold_pid_namespace, memlock_ceiling_kib, pids_in
from tests.support.paths import REPO
from tests.support.testbed import (
    NO_REPLY_RC,
    SYSFS_INFINIBAND,
    TOOLS_DIR,
    HostSpec,
    Reply,
    TestBed,
    TestbedError,
    TestHost,
)
from tests.support.toolbundle import make_bundle

pytestmark = pytest.mark.integration

PORT_RANGE = "/proc/sys/net/ipv4/ip_local_port_range"


def connect(bed: TestBed, host: TestHost, **kwargs: object) -> paramiko.SSHClient:
    """A paramiko client that trusts only the bed's known_hosts, as the engine's connections do."""
    client = paramiko.SSHClient()
    client.load_host_keys(str(bed.known_hosts))
    client.set_missing_host_key_policy(paramiko.RejectPolicy())
    options: dict[str, object] = {
        "port": host.port,
        "username": host.user,
        "key_filename": str(bed.client_key),
        "look_for_keys": False,
        "allow_agent": False,
        "timeout": 10,
        "banner_timeout": 10,
        "auth_timeout": 10,
    }
    options.update(kwargs)
    try:
        client.connect(host.address, **options)
    except BaseException:
        client.close()
        raise
    return client


def run(client: paramiko.SSHClient, command: str, timeout: float = 30) -> tuple[int, str, str]:
    _, stdout, stderr = client.exec_command(command, timeout=timeout)
    out = stdout.read().decode()
    err = stderr.read().decode()
    return stdout.channel.recv_exit_status(), out, err


def sh(bed: TestBed, host: TestHost, command: str) -> tuple[int, str, str]:
    with connect(bed, host) as client:
        return run(client, command)


def refuses(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
    except ConnectionRefusedError:
        return True
    return False


def processes_mentioning(text: bytes) -> list[bytes]:
    """Command lines of live processes that contain ``text`` (every host's init and sshd name their
    work directory)."""
    found = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                cmdline = Path(entry.path, "cmdline").read_bytes()
            except OSError:
                continue
            if text in cmdline:
                found.append(cmdline)
    return found


def test_port_range_is_per_host(testbed: TestBed) -> None:
    narrow, wide = testbed.add_many(
        [HostSpec("narrow", port_range="60000\t60100\n"), HostSpec("wide", port_range="1024\t65535\n")]
    )
    machine = Path(PORT_RANGE).read_text()

    assert sh(testbed, narrow, f"cat {PORT_RANGE}") == (0, "60000\t60100\n", "")
    assert sh(testbed, wide, f"cat {PORT_RANGE}") == (0, "1024\t65535\n", "")
    assert Path(PORT_RANGE).read_text() == machine


def test_infiniband_directory_present_empty_or_absent(testbed: TestBed) -> None:
    machine_has_ib = os.path.exists("/dev/infiniband")
    fabric, empty, none = testbed.add_many(
        [
            HostSpec("fabric", infiniband=["uverbs0", "uverbs1", "umad0", "rdma_cm"]),
            HostSpec("empty", infiniband=[]),
            HostSpec("none"),
        ]
    )

    rc, out, _ = sh(testbed, fabric, "ls /dev/infiniband && test -c /dev/infiniband/uverbs1 && echo char")
    assert (rc, out.split()) == (0, ["rdma_cm", "umad0", "uverbs0", "uverbs1", "char"])
    assert sh(testbed, empty, "ls -A /dev/infiniband") == (0, "", "")
    rc, out, err = sh(testbed, none, "ls /dev/infiniband")
    assert rc == 2
    assert "No such file or directory" in err
    # The private /dev still has what sessions need.
    assert sh(testbed, none, "echo hi >/dev/null && head -c 4 /dev/urandom | wc -c")[1].strip() == "4"
    assert os.path.exists("/dev/infiniband") == machine_has_ib


def test_tools_shadow_real_ones_and_answer_by_arguments(testbed: TestBed) -> None:
    smi = {
        "topo -m": Reply("\tGPU0\tGPU1\nGPU0\t X \tNV18\n"),
        "-L": Reply("GPU 0: NVIDIA H200\n"),
    }
    faked, plain = testbed.add_many(
        [
            HostSpec(
                "faked",
                tools={
                    "uname": Reply("FakeOS\n"),
                    "nvidia-smi": smi,
                    "ibstat": Reply(stdout="", stderr="ibpanic: [1] couldn't init\n", rc=3),
                    "args": '#!/bin/sh\necho "$# args: $*"\n',
                },
            ),
            HostSpec("plain"),
        ]
    )

    assert sh(testbed, faked, "uname") == (0, "FakeOS\n", "")
    assert sh(testbed, faked, "command -v uname") == (0, f"{TOOLS_DIR}/uname\n", "")
    assert sh(testbed, plain, "uname") == (0, "Linux\n", "")
    assert sh(testbed, faked, "nvidia-smi topo -m") == (0, smi["topo -m"].stdout, "")
    assert sh(testbed, faked, "nvidia-smi -L") == (0, "GPU 0: NVIDIA H200\n", "")
    rc, out, err = sh(testbed, faked, "nvidia-smi -q")
    assert (rc, out) == (NO_REPLY_RC, "")
    assert "no reply for arguments: -q" in err
    assert sh(testbed, faked, "ibstat") == (3, "", "ibpanic: [1] couldn't init\n")
    assert sh(testbed, faked, "args a 'b c'") == (0, "2 args: a b c\n", "")
    assert not os.path.exists(f"{TOOLS_DIR}/uname")


# Every counter file under the host's /sys/class/infiniband with its value, one per line.
COUNTERS_GLOB = (
    f'for f in {SYSFS_INFINIBAND}/*/ports/*/counters/*; do printf \'%s %s\\n\' "$f" "$(cat $f)"; done'
)


def test_memlock_limit_is_per_host_and_inherited_by_sessions(testbed: TestBed) -> None:
    """`ulimit -l` is a builtin: the value a login shows is what sshd was started with."""
    low, default = testbed.add_many([HostSpec("low", memlock_kib=64), HostSpec("default")])
    ceiling = memlock_ceiling_kib()

    assert sh(testbed, low, "sh -c 'ulimit -S -l; ulimit -H -l'") == (0, "64\n64\n", "")
    shown = "unlimited" if ceiling is None else str(ceiling)
    assert sh(testbed, default, "sh -c 'ulimit -S -l; ulimit -H -l'") == (0, f"{shown}\n{shown}\n", "")


def test_memlock_above_the_machine_hard_limit_is_refused_or_really_granted(testbed: TestBed) -> None:
    """No skip: a machine with a ceiling must refuse more (the dev container's 8192 KiB), one without (root with
    CAP_SYS_RESOURCE, as in CI) must really give a host more than its own hard limit."""
    ceiling = memlock_ceiling_kib()
    if ceiling is not None:
        with pytest.raises(TestbedError, match=r"ulimit -l \d+ refused"):
            testbed.add(HostSpec("high", memlock_kib=ceiling * 2))
        return
    hard = resource.getrlimit(resource.RLIMIT_MEMLOCK)[1]
    wanted = 64 << 20 if hard == resource.RLIM_INFINITY else hard // 1024 * 2
    high = testbed.add(HostSpec("high", memlock_kib=wanted))
    assert sh(testbed, high, "sh -c 'ulimit -S -l; ulimit -H -l'") == (0, f"{wanted}\n{wanted}\n", "")


def test_processes_of_a_host_whose_pid_namespace_was_not_captured_are_an_error(testbed: TestBed) -> None:
    """An empty namespace would list no process, and every "nothing left running" check would pass."""
    host = testbed.add(HostSpec("unseen"))
    assert command_lines(host, "sshd"), "the host's own sshd is seen in its namespace"
    captured, host.pid_namespace = host.pid_namespace, None
    try:
        with pytest.raises(AssertionError, match="did not capture its pid namespace"):
            command_lines(host, "sshd")
    finally:
        host.pid_namespace = captured


def test_a_host_whose_pid_namespace_cannot_be_captured_is_refused_and_leaves_nothing(
    testbed: TestBed, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The capture fails where the namespace's first process is not there to be read (gone, or not yet
    forked): the bed must refuse the host, since a host it cannot look into would pass every "nothing left
    running" check, and must stop what it started for it."""
    namespaces: list[str] = []

    def lost(holder: int) -> None:
        held = hold_pid_namespace(holder)  # the real capture, to look at what was started
        assert held is not None, "the host started and its namespace was there to capture"
        namespaces.append(held[0])
        os.close(held[1])

    monkeypatch.setattr(testbed_module, "hold_pid_namespace", lost)
    with pytest.raises(TestbedError, match="'uncaptured': its pid namespace could not be captured"):
        testbed.add(HostSpec("uncaptured"))
    assert "uncaptured" not in testbed.hosts
    assert namespaces and pids_in(set(namespaces)) == [], "the refused host's processes were stopped"


def test_the_bed_runs_from_a_tool_bundle_whatever_the_callers_path(
    testbed_available: None, tmp_path: Path
) -> None:
    """On a lent GPU machine the programs the bed calls are in a tool bundle (DIAGNOSE_TESTBED_BIN), not on the
    PATH: the bed must find every one there, its own ssh-keygen and ssh as well as the hosts' sshd."""
    bundle = make_bundle(tmp_path / "bundle", ("sshd", "ssh", "ssh-keygen"))
    script = (
        "import sys\n"
        "from pathlib import Path\n"
        "from tests.support.testbed import HostSpec, TestBed, prerequisite_problem\n"
        "assert prerequisite_problem() is None, prerequisite_problem()\n"
        "with TestBed(Path(sys.argv[1])) as bed:\n"
        "    host = bed.add(HostSpec('bundled'))\n"
        "    done = bed.ssh(host, 'echo answered')\n"
        "    print(bed.ssh_argv(host, '')[0], done.stdout.strip(), done.returncode)\n"
    )
    env = {
        **os.environ,
        "PATH": str(tmp_path / "nothing-here"),
        "DIAGNOSE_TESTBED_BIN": str(bundle),
        "PYTHONPATH": str(REPO),
    }
    done = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path / "bed")],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [str(bundle / "ssh"), "answered", "0"]


def test_sysfs_infiniband_is_per_host_and_changes_while_the_host_runs(testbed: TestBed) -> None:
    tree = {
        "mlx5_0/ports/1/state": "4: ACTIVE\n",
        "mlx5_0/ports/1/link_layer": "InfiniBand\n",
        "mlx5_0/ports/1/counters/link_downed": "0\n",
        "mlx5_0/ports/1/counters/symbol_error": "0\n",
    }
    machine_has_it = os.path.exists(SYSFS_INFINIBAND)
    fabric, empty, plain = testbed.add_many(
        [
            HostSpec("fabric", sysfs_infiniband=tree),
            HostSpec("empty", sysfs_infiniband={}),
            HostSpec("plain"),
        ]
    )

    rc, out, _ = sh(testbed, fabric, COUNTERS_GLOB)
    assert rc == 0
    assert out.splitlines() == [
        f"{SYSFS_INFINIBAND}/mlx5_0/ports/1/counters/link_downed 0",
        f"{SYSFS_INFINIBAND}/mlx5_0/ports/1/counters/symbol_error 0",
    ]
    assert sh(testbed, fabric, f"cat {SYSFS_INFINIBAND}/mlx5_0/ports/1/state")[1] == "4: ACTIVE\n"
    assert sh(testbed, empty, f"ls -A {SYSFS_INFINIBAND}") == (0, "", "")
    # A host without a tree of its own shows the machine's (absent on a machine without RDMA devices);
    # /sys/class's other entries stay visible on every host.
    assert (sh(testbed, plain, f"test -e {SYSFS_INFINIBAND}")[0] == 0) == machine_has_it
    assert sorted(sh(testbed, fabric, "ls /sys/class/net")[1].split()) == sorted(os.listdir("/sys/class/net"))

    # A flap while the host runs: the next read on the host sees it, in the same session too.
    with connect(testbed, fabric) as client:
        before = run(client, f"cat {SYSFS_INFINIBAND}/mlx5_0/ports/1/counters/link_downed")
        fabric.set_ib_counter("mlx5_0", 1, "link_downed", 1)
        after = run(client, f"cat {SYSFS_INFINIBAND}/mlx5_0/ports/1/counters/link_downed")
    assert (before[1], after[1]) == ("0\n", "1\n")
    assert fabric.ib_counter("mlx5_0", 1, "link_downed") == 1
    assert sh(testbed, empty, f"ls -A {SYSFS_INFINIBAND}") == (0, "", "")
    assert os.path.exists(SYSFS_INFINIBAND) == machine_has_it
    with pytest.raises(TestbedError, match="no /sys/class/infiniband/mlx5_9"):
        fabric.set_ib_counter("mlx5_9", 1, "link_downed", 1)
    with pytest.raises(TestbedError, match="machine's"):
        plain.set_ib_counter("mlx5_0", 1, "link_downed", 1)


def test_absent_tool_is_command_not_found(testbed: TestBed) -> None:
    host = testbed.add(HostSpec("bare", tools={"uname": None, "ibstat": None}))

    rc, _, err = sh(testbed, host, "uname")
    assert (rc, "command not found" in err) == (127, True)
    rc, _, err = sh(testbed, host, "ibstat")
    assert (rc, "command not found" in err) == (127, True)


def test_files_are_private_to_their_host(testbed: TestBed) -> None:
    files = {
        "/etc/nccl.conf": "NCCL_P2P_DISABLE=1\n",
        "/root/.nccl.conf": "NCCL_IB_DISABLE=1\n",
        "/etc/os-release": 'PRETTY_NAME="Fake Linux 1"\n',
        "/proc/driver/nvidia/version": "NVRM version: NVIDIA UNIX x86_64 Kernel Module  570.133.20\n",
        "/opt/diagnose-testbed/probe/deep.txt": "deep\n",
    }
    odd, other = testbed.add_many([HostSpec("odd", files=files), HostSpec("other")])

    for path, content in files.items():
        assert sh(testbed, odd, f"cat {path}") == (0, content, ""), path
    for path in files:
        rc, out, _ = sh(testbed, other, f"cat {path}")
        if os.path.exists(path):
            assert (rc, out) == (0, Path(path).read_text()), path
        else:
            assert rc == 1, path
    # The overlays keep the directories' real content around the new files.
    assert sh(testbed, odd, "test -f /etc/passwd && test -d /proc/driver/nvidia && echo ok")[1] == "ok\n"
    assert not os.path.exists("/opt/diagnose-testbed")


def test_login_environment_comes_from_setenv(testbed: TestBed) -> None:
    tuned, default = testbed.add_many(
        [
            HostSpec("tuned", env={"NCCL_P2P_DISABLE": "1", "NCCL_SOCKET_IFNAME": "eth9 ib0"}),
            HostSpec("default"),
        ]
    )

    env = sh(testbed, tuned, "env")[1].splitlines()
    assert "NCCL_P2P_DISABLE=1" in env
    assert "NCCL_SOCKET_IFNAME=eth9 ib0" in env
    assert not [line for line in sh(testbed, default, "env")[1].splitlines() if line.startswith("NCCL_")]


def test_hanging_tool_hangs_until_the_bed_stops(testbed: TestBed) -> None:
    host = testbed.add(HostSpec("stuck", tools={"ibstat": Reply("CA 'mlx5_0'\n", hang=True)}))

    with connect(testbed, host) as client:
        _, stdout, _ = client.exec_command("ibstat", timeout=2)
        assert stdout.readline() == "CA 'mlx5_0'\n"
        with pytest.raises(TimeoutError):
            stdout.read()
    sleepers = [pid for pid in testbed.leftover_pids() if Path(f"/proc/{pid}/comm").read_text() == "sleep\n"]
    assert sleepers

    testbed.stop()
    assert not testbed.leftover_pids()


def test_changed_host_key_is_refused(testbed: TestBed) -> None:
    host = testbed.add(HostSpec("rekeyed"))
    assert sh(testbed, host, "echo ok") == (0, "ok\n", "")
    port, old_key = host.port, host.host_key

    host.change_host_key()

    assert (host.port, host.alive) == (port, True)
    assert host.host_key != old_key
    with pytest.raises(paramiko.BadHostKeyException):
        connect(testbed, host)
    result = testbed.ssh(host, "echo ok")
    assert result.returncode == 255
    assert "REMOTE HOST IDENTIFICATION HAS CHANGED" in result.stderr

    host.change_host_key(update_known_hosts=True)
    assert sh(testbed, host, "echo ok") == (0, "ok\n", "")


def test_unauthorized_key_is_refused(testbed: TestBed) -> None:
    host = testbed.add(HostSpec("locked", authorized=False))

    with pytest.raises(paramiko.AuthenticationException):
        connect(testbed, host)
    result = testbed.ssh(host, "echo ok")
    assert result.returncode == 255
    assert "Permission denied (publickey)" in result.stderr


def test_refused_and_silent_ports(testbed: TestBed) -> None:
    refused, silent = testbed.add_many([HostSpec("gone", serve="refused"), HostSpec("mute", serve="silent")])

    with pytest.raises(paramiko.ssh_exception.NoValidConnectionsError):
        connect(testbed, refused)
    started = time.monotonic()
    with pytest.raises(paramiko.SSHException, match="banner"):
        connect(testbed, silent, banner_timeout=1)
    assert time.monotonic() - started < 5
    assert refuses(refused.port)


def test_killed_host_refuses_while_others_live_and_can_restart(testbed: TestBed) -> None:
    victim, survivor = testbed.add_many([HostSpec("victim"), HostSpec("survivor")])
    key = victim.host_key

    victim.kill()

    assert not victim.alive
    assert refuses(victim.port)
    assert sh(testbed, survivor, "echo ok") == (0, "ok\n", "")
    victim.restart()
    assert (victim.alive, victim.host_key) == (True, key)
    assert sh(testbed, victim, "echo back") == (0, "back\n", "")


def test_stop_leaves_no_process_behind(testbed: TestBed) -> None:
    hosts = testbed.add_many([HostSpec(f"n{i}", tools={"hang": Reply(hang=True)}) for i in range(3)])
    clients = [connect(testbed, host) for host in hosts]
    for client in clients:
        run(client, "setsid nohup sleep 3600 >/dev/null 2>&1 & echo started")
        client.exec_command("hang")
    assert len(testbed.leftover_pids()) >= 3 * 3

    testbed.stop()

    for client in clients:
        client.close()
    assert testbed.leftover_pids() == []
    assert all(refuses(host.port) for host in hosts)
    assert processes_mentioning(str(testbed.workdir).encode()) == []


def test_hosts_die_with_the_process_that_started_them(testbed_available: None, tmp_path: Path) -> None:
    """A test process killed outright (CI timeout, OOM) runs no finalizer; its hosts must go anyway."""
    script = (
        "import os, signal, sys\n"
        f"sys.path.insert(0, {str(REPO)!r})\n"
        "from tests.support.testbed import HostSpec, Reply, TestBed\n"
        f"bed = TestBed({str(tmp_path / 'orphan')!r})\n"
        "hosts = bed.add_many([HostSpec('a', tools={'hang': Reply(hang=True)}), HostSpec('b')])\n"
        "bed.ssh(hosts[0], 'setsid nohup hang >/dev/null 2>&1 &')\n"
        "print(' '.join(str(h.port) for h in hosts), flush=True)\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == -signal.SIGKILL, done.stderr
    ports = [int(port) for port in done.stdout.split()]
    assert len(ports) == 2

    marker = str(tmp_path / "orphan").encode()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and (survivors := processes_mentioning(marker)):
        time.sleep(0.1)
    assert not survivors
    assert all(refuses(port) for port in ports)


def test_sftp_and_parallel_sessions(testbed: TestBed) -> None:
    host = testbed.add(HostSpec("files"))

    with connect(testbed, host) as client:
        sftp = client.open_sftp()
        with sftp.open("/tmp/diagnose-testbed-sftp.txt", "w") as remote:
            remote.write("via sftp\n")
        sftp.close()
        assert run(client, "cat /tmp/diagnose-testbed-sftp.txt && rm /tmp/diagnose-testbed-sftp.txt") == (
            0,
            "via sftp\n",
            "",
        )
        channels = [client.exec_command(f"sleep 0.5; echo {i}")[1] for i in range(12)]
        assert [channel.read().decode() for channel in channels] == [f"{i}\n" for i in range(12)]


def test_add_many_fills_known_hosts(testbed: TestBed) -> None:
    hosts = testbed.add_many([HostSpec(f"node{i}") for i in range(6)])

    lines = testbed.known_hosts.read_text().splitlines()
    assert sorted(lines) == sorted(f"[127.0.0.1]:{h.port} {h.host_key}" for h in hosts)
    assert len({h.port for h in hosts}) == 6
    assert all(sh(testbed, h, "echo $SSH_CONNECTION")[1].split()[-1] == str(h.port) for h in hosts)


def test_inventories_reach_the_hosts(testbed: TestBed, tmp_path: Path) -> None:
    a, b = testbed.add_many([HostSpec("a"), HostSpec("b")])

    inventory = testbed.write_inventory(
        tmp_path / "hosts.yaml",
        extra_vars={"diagnose_profile": "h200-8x-ndr400"},
        host_vars={"b": {"expected_gpu_count": 4}},
        groups={"gpu": ["a", "b"]},
    )
    tree = yaml.safe_load(inventory.read_text())["all"]
    assert tree["vars"] == {
        "ansible_user": "root",
        "ansible_ssh_private_key_file": str(testbed.client_key),
        "diagnose_known_hosts_file": str(testbed.known_hosts),
        "diagnose_profile": "h200-8x-ndr400",
    }
    assert tree["hosts"] == {
        "a": {"ansible_host": "127.0.0.1", "ansible_port": a.port},
        "b": {"ansible_host": "127.0.0.1", "ansible_port": b.port, "expected_gpu_count": 4},
    }
    assert tree["children"] == {"gpu": {"hosts": {"a": None, "b": None}}}
    for name, host_vars in tree["hosts"].items():
        client = paramiko.SSHClient()
        client.load_host_keys(tree["vars"]["diagnose_known_hosts_file"])
        client.set_missing_host_key_policy(paramiko.RejectPolicy())
        with client:
            client.connect(
                host_vars["ansible_host"],
                port=host_vars["ansible_port"],
                username=tree["vars"]["ansible_user"],
                key_filename=tree["vars"]["ansible_ssh_private_key_file"],
                look_for_keys=False,
                allow_agent=False,
            )
            assert run(client, "echo up") == (0, "up\n", ""), name

    ini = testbed.write_inventory(tmp_path / "hosts.ini", hosts=[a], fmt="ini", groups={"gpu": ["a"]})
    assert ini.read_text() == (
        f"a ansible_host=127.0.0.1 ansible_port={a.port}\n"
        "\n[all:vars]\n"
        "ansible_user=root\n"
        f"ansible_ssh_private_key_file={testbed.client_key}\n"
        f"diagnose_known_hosts_file={testbed.known_hosts}\n"
        "\n[gpu]\na\n"
    )


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (HostSpec("rel", files={"etc/x": ""}), "absolute"),
        (HostSpec("dev", files={"/dev/infiniband/uverbs0": ""}), "infiniband"),
        (HostSpec("dir", files={"/etc": ""}), "directory"),
        (HostSpec("top", files={"/diagnose-testbed-top/x": ""}), "only / exists"),
        (HostSpec("env", env={"BAD NAME": "1"}), "variable name"),
        (HostSpec("sysfs", sysfs_infiniband={"../escape": "1"}), "normalized relative"),
        (HostSpec("lock", memlock_kib=-1), "memlock_kib"),
    ],
)
def test_bad_specs_are_rejected(testbed: TestBed, spec: HostSpec, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        testbed.add(spec)
