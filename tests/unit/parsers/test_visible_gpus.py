"""Which GPUs CUDA sees (issue 33): ``CUDA_VISIBLE_DEVICES`` read against nvidia-smi's GPUs as CUDA reads it.

The GPUs are real listings: the lent H200 pair's ``nvidia-smi -L`` lines (their UUIDs) and a 2x A100 split
into MIG instances (tests/fixtures/captured/nvidia_smi/SOURCE).
"""

from __future__ import annotations

from diagnose.parsers.visible_gpus import parse_smi_list, resolve_visible
from tests.support.hostkit import captured, smi_listing

H200 = parse_smi_list(smi_listing(captured("nvlink/h200x2_status.txt")))
A100_MIG = parse_smi_list(captured("nvidia_smi/a100x2_mig_list.txt"))
#: The lent H100 node's eight GPUs as the summary table gives them (index only, no UUID).
EIGHT = [{"index": i} for i in range(8)]


def seen(value: str | None, gpus: list = EIGHT, **env: str) -> dict:
    return resolve_visible({**({"CUDA_VISIBLE_DEVICES": value} if value is not None else {}), **env}, gpus)


def test_unset_sees_every_gpu_and_names_no_variable() -> None:
    facts = seen(None)
    assert (facts["visible"], facts["hidden"], facts["variable"], facts["stopped_at"]) == (
        list(range(8)),
        [],
        None,
        None,
    )


def test_indexes_keep_cuda_order_and_leave_the_rest_out_of_scope() -> None:
    facts = seen("0")
    assert (facts["visible"], facts["hidden"]) == ([0], [1, 2, 3, 4, 5, 6, 7])
    assert seen("3, 1")["visible"] == [3, 1], (
        "CUDA device 0 is the first GPU named, spaces around entries aside"
    )


def test_the_first_entry_naming_no_gpu_ends_the_list() -> None:
    alone = seen("7", gpus=EIGHT[:4])
    assert (alone["visible"], alone["stopped_at"], alone["ignored"]) == ([], "7", ["7"])
    middle = seen("0,7,1", gpus=EIGHT[:4])
    assert (middle["visible"], middle["hidden"], middle["ignored"]) == ([0], [1, 2, 3], ["7", "1"])
    assert seen("-1")["visible"] == [] and seen("-1")["stopped_at"] == "-1"
    assert seen("1,1")["visible"] == [1] and seen("1,1")["stopped_at"] == "1"


def test_set_and_empty_hides_every_gpu() -> None:
    facts = seen("")
    assert (facts["visible"], facts["hidden"], facts["stopped_at"]) == ([], list(range(8)), None)


def test_uuids_and_their_unique_prefixes_name_gpus() -> None:
    assert seen("GPU-886dfc56-d6a4-1cd4-1e44-e94461cc483e", gpus=H200)["visible"] == [1]
    assert seen("GPU-886d,GPU-7d58", gpus=H200)["visible"] == [1, 0]
    ambiguous = seen("GPU-", gpus=H200)
    assert (ambiguous["visible"], ambiguous["stopped_at"]) == ([], "GPU-")


def test_a_mig_instance_counts_as_the_gpu_that_holds_it() -> None:
    facts = seen("MIG-d5a46a2e-1d77-575d-99e3-1f96c8555a2e", gpus=A100_MIG)
    assert (facts["visible"], facts["hidden"]) == ([1], [0])


def test_a_uuid_without_nvidia_smi_list_is_unresolved_not_a_finding() -> None:
    facts = seen("GPU-886d", gpus=[{"index": 0}, {"index": 1}])
    assert (facts["visible"], facts["stopped_at"], facts["unresolved"]) == ([0, 1], None, "GPU-886d")


def test_the_container_and_slurm_variables_are_named_never_applied_again() -> None:
    """Inside a container nvidia-smi already lists only the GPUs NVIDIA_VISIBLE_DEVICES gave it; Slurm
    writes its allocation into CUDA_VISIBLE_DEVICES, which is what counts."""
    facts = seen(None, gpus=EIGHT[:2], NVIDIA_VISIBLE_DEVICES="3,5", SLURM_STEP_GPUS="3,5")
    assert (facts["visible"], facts["variable"]) == ([0, 1], None)
    assert facts["env"] == {"NVIDIA_VISIBLE_DEVICES": "3,5", "SLURM_STEP_GPUS": "3,5"}
    slurm = seen("0", gpus=EIGHT[:2], SLURM_STEP_GPUS="5")
    assert slurm["visible"] == [0] and slurm["env"]["SLURM_STEP_GPUS"] == "5"


def test_mig_listing_parses_each_instance_under_its_gpu() -> None:
    assert [len(g["mig"]) for g in A100_MIG] == [2, 2]
    assert A100_MIG[1]["mig"][0] == "MIG-d5a46a2e-1d77-575d-99e3-1f96c8555a2e"
