"""The fan-out's open files and threads: what a run needs, the soft limits raised, refusals and capped forks."""

from __future__ import annotations

import os
import resource

import pytest

from diagnose.core.errors import ConfigError
from diagnose.core.hosts import Host
from diagnose.core.vars import Vars
from diagnose.engine.limits import (
    IN_FLIGHT_FDS,
    SPARE_FDS,
    SPARE_THREADS,
    make_room,
    need_of,
    plan_limits,
)

INF = resource.RLIM_INFINITY
PLENTY = (1 << 20, 1 << 20)


def hosts(count: int, **values: str) -> list[Host]:
    return [Host(f"node{i}", vars=Vars(values)) for i in range(count)]


def test_ssh_hosts_hold_a_socket_and_a_thread_each_and_forks_never_exceed_hosts() -> None:
    need = need_of(hosts(1000), forks=4096)
    assert (need.hosts, need.held_fds, need.held_threads, need.forks) == (1000, 1000, 1000, 1000)
    assert need.fds(need.forks) == 1000 + IN_FLIGHT_FDS * 1000 + SPARE_FDS
    assert need.threads(need.forks) == 1000 + 1000 + SPARE_THREADS


def test_a_proxy_command_adds_its_pipes_and_local_hosts_hold_nothing() -> None:
    proxied = need_of(hosts(10, ansible_ssh_common_args="-o ProxyCommand='nc %h %p'"), forks=10)
    assert proxied.held_fds == 10 * 4
    local = need_of(hosts(10, ansible_connection="local"), forks=10)
    assert (local.held_fds, local.held_threads) == (0, 0)


def test_a_soft_limit_too_low_is_raised_to_the_need_not_to_the_hard_limit() -> None:
    need = need_of(hosts(4096), forks=1024)
    plan = plan_limits(need, nofile=(1024, 1 << 20), nproc=PLENTY)
    assert plan.nofile == need.fds(1024)
    assert (plan.nproc, plan.forks, plan.note) == (None, 1024, None)


def test_limits_that_already_hold_the_run_are_left_alone() -> None:
    plan = plan_limits(need_of(hosts(64), forks=32), nofile=(INF, INF), nproc=(INF, INF))
    assert (plan.nofile, plan.nproc, plan.forks, plan.note) == (None, None, 32, None)


def test_forks_are_capped_with_the_reason_when_only_the_connections_fit() -> None:
    need = need_of(hosts(16384), forks=4096)
    plan = plan_limits(need, nofile=(1024, 20000), nproc=PLENTY)
    held = 16384 + SPARE_FDS
    assert plan.forks == (20000 - held) // IN_FLIGHT_FDS
    assert plan.nofile == held + IN_FLIGHT_FDS * plan.forks <= 20000
    assert plan.note is not None
    assert plan.note.startswith(f"--forks 4096 capped to {plan.forks}:")
    assert "hard limit is 20000 (ulimit -Hn, nofile)" in plan.note


def test_threads_cap_the_forks_too() -> None:
    need = need_of(hosts(100), forks=100)
    plan = plan_limits(need, nofile=PLENTY, nproc=(150, 200))
    assert plan.forks == 200 - 100 - SPARE_THREADS
    assert plan.nproc == 200
    assert plan.note is not None and "threads" in plan.note


def test_connections_beyond_the_hard_limit_are_refused_in_one_line() -> None:
    with pytest.raises(ConfigError) as refused:
        plan_limits(need_of(hosts(30000), forks=32), nofile=(1024, 20000), nproc=PLENTY)
    message = str(refused.value)
    assert "\n" not in message
    assert message.startswith("30000 hosts (30000 over SSH) need about")
    assert "hard limit is 20000" in message and "--limit" in message


def test_make_room_raises_this_process_soft_limit() -> None:
    """No skip where the hard limit is low: the host count is fitted under it, the soft limit below it."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    held = len(os.listdir("/proc/self/fd"))  # what this test runner holds counts against the limit too
    count = 2000 if hard == INF else min(2000, hard - IN_FLIGHT_FDS - SPARE_FDS - held - 8)
    assert count > 0, f"a hard limit of {hard} open files leaves no room for a host"
    need = count + IN_FLIGHT_FDS + SPARE_FDS
    lowered = min(soft, need // 2)
    resource.setrlimit(resource.RLIMIT_NOFILE, (lowered, hard))
    try:
        plan = make_room(hosts(count), forks=1)
        assert resource.getrlimit(resource.RLIMIT_NOFILE) == (plan.nofile, hard)
        assert plan.nofile is not None and need + held - 8 <= plan.nofile <= need + held + 8
        assert plan.nofile > lowered
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
