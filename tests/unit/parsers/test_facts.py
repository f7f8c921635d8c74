"""Every host-fact parser against real captured outputs, one case file per output (pyinfra style).

A case is ``tests/facts/<parser>/<case>.json``, run by :func:`tests.support.facts.check_case`: adding an odd
firmware's output is adding a file, not code.
"""

from __future__ import annotations

from diagnose.parsers.gpudirect import parse_driver_version_file, parse_kernel_release, parse_modules
from diagnose.parsers.ibstat import parse_ibstat
from diagnose.parsers.ibv_devinfo import parse_dev_infiniband, parse_ibv_devinfo
from diagnose.parsers.nccl_env import parse_nccl_env
from diagnose.parsers.nccl_version import parse_nccl_libs, parse_torch_probe
from diagnose.parsers.nvidia_presence import parse_nvidia_presence
from diagnose.parsers.nvidia_smi import parse_smi_summary, parse_topo
from diagnose.parsers.os_release import parse_os_release
from diagnose.parsers.visible_gpus import parse_smi_list, parse_visibility_env
from tests.support.facts import Parse, fact_suite

PARSERS: dict[str, Parse] = {
    "ibstat": lambda text, rc: parse_ibstat(text),
    "ibv_devinfo": lambda text, rc: parse_ibv_devinfo(text),
    "dev_infiniband": parse_dev_infiniband,
    "smi_summary": lambda text, rc: parse_smi_summary(text),
    "topo": lambda text, rc: parse_topo(text),
    "modules": lambda text, rc: parse_modules(text),
    "nvidia_version": parse_driver_version_file,
    "kernel_release": lambda text, rc: parse_kernel_release(text),
    "torch_probe": parse_torch_probe,
    "nccl_libs": lambda text, rc: parse_nccl_libs(text),
    "nccl_env": lambda text, rc: parse_nccl_env(text),
    "os_release": lambda text, rc: parse_os_release(text),
    "smi_list": lambda text, rc: parse_smi_list(text),
    "visibility_env": lambda text, rc: parse_visibility_env(text),
    "nvidia_presence": lambda text, rc: parse_nvidia_presence(text),
}


test_case, test_every_parser_has_cases, test_every_fixture_is_used_and_sourced = fact_suite(PARSERS)
