"""A rank that fails is reported with its own exception, not torchrun's banner (issue 33).

On a lent 4-GPU node, `CUDA_VISIBLE_DEVICES=0 diagnose run` launched four ranks; ranks 1..3 failed on a GPU
they could not see, and the results said only what torchrun's banner says ("error_file: <N/A> | traceback :
To enable traceback see: ..."). Here a real torchrun with gloo on this machine's CPU (the local connection)
runs a program whose rank 1 touches a GPU this build of torch does not have, as those ranks did.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from diagnose.connectors import LocalConnection
from diagnose.core.hosts import Host
from diagnose.core.vars import Vars
from diagnose.launchers.base import LaunchSpec
from diagnose.launchers.torchrun import launch

pytestmark = pytest.mark.integration

#: Rank 0 opens its progress file first, as the shipped programs do (common.Progress); rank 1 fails after
#: joining the group (its traceback carries torch's [rank1] prefix), rank 0 then fails in the barrier as a
#: consequence ("Connection closed by peer"), which must not be reported as the cause.
PROGRAM = """import os
import sys
import torch
import torch.distributed as dist

if os.environ["RANK"] == "0":
    open(sys.argv[sys.argv.index("--results") + 1], "a").close()
dist.init_process_group("gloo")
if dist.get_rank() == 1:
    torch.zeros(1).to(f"cuda:{os.environ['LOCAL_RANK']}")
dist.barrier()
"""


def test_the_failed_rank_is_named_with_its_own_exception(tmp_path: Path) -> None:
    program = tmp_path / "touch_gpu.py"
    program.write_text(PROGRAM)
    host = Host("here", vars=Vars({"bench_python": sys.executable}, host="here"))
    connection = LocalConnection(host)
    connection.open()
    spec = LaunchSpec(
        run_id="rankfail",
        tag="main",
        hosts=[host],
        connections={"here": connection},
        nproc=2,
        backend="gloo",
        program_args=[],
        expected_rows=[("all_reduce", 4096)],
        row_budget_s=lambda collective, nbytes: 60.0,
        out_dir=tmp_path / "out",
        startup_timeout_s=60.0,
        program=program,
    )
    outcome = launch(spec)
    assert outcome.status == "failed", outcome.message
    assert outcome.message == (
        "the benchmark failed on here: here: rank 1: AssertionError: Torch not compiled with CUDA enabled "
        "(then rank 0 failed too)"
    )
    assert "error_file" not in outcome.message and "Connection closed" not in outcome.message
