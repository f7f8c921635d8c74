"""Example site check for a playbook's ``custom_checks``: a plain testinfra module, nothing diagnose-specific.

Each ``test_*`` function runs once per inventory host (testinfra's ``host`` fixture) and becomes the result
``custom.example_sysctl::<test>`` for that host, with the assertion message when it fails. Copy this file,
change the thresholds to your site's, and list it in the playbook:

    custom_checks: ["checks/custom/*.py"]
"""

from __future__ import annotations

# The Linux default range is 32768-60999; large NCCL jobs open many sockets per rank during bootstrap.
MIN_EPHEMERAL_PORTS = 28232


def test_ephemeral_port_range(host):
    low, high = (int(v) for v in host.file("/proc/sys/net/ipv4/ip_local_port_range").content_string.split())
    width = high - low + 1
    assert width >= MIN_EPHEMERAL_PORTS, (
        f"ip_local_port_range {low}-{high} leaves {width} ports, fewer than {MIN_EPHEMERAL_PORTS}"
    )


def test_no_transparent_hugepage_always_defrag(host):
    defrag = host.file("/sys/kernel/mm/transparent_hugepage/defrag")
    if not defrag.exists:
        return
    mode = defrag.content_string.split("[", 1)[-1].split("]", 1)[0]
    assert mode != "always", "transparent_hugepage/defrag is 'always': allocations stall on compaction"
