#!/usr/bin/env bash
# Runs on one lent GPU machine split into hosts by tests/support/gpuhosts.py ({inventory} written by it):
#
#   pair INVENTORY OUT     two hosts (node1 GPU 0, node2 GPU 1): a healthy run, then the same run with an
#                          idle process outside both hosts holding HOLD_GIB (default 120) GiB of GPU 1
#   p2p INVENTORY OUT      one host with both GPUs, NCCL_P2P_DISABLE=1 and NCCL_SHM_DISABLE=1 in its login
#                          (set by gpuhosts' --host-env): the sweep and the training probe on a slow path
#
# Each run's output goes to OUT/<case>_terminal.txt (`$` line first, `[exit N]` last) and its folder to
# OUT/<case>/; the holder's own lines to OUT/holder.txt.
set -u
act=$1 inventory=$2 out=$3
mkdir -p "$out"
playbook=$out/holders.yaml
. "$(dirname "$0")/gpu_steps.sh"
shortened_playbook "$playbook" holders-gpu "kv_transfer: true"
common=(-i "$inventory" --playbook "$playbook" --format json,html)

if [ "$act" = pair ]; then
    step healthy python3 -m diagnose run "${common[@]}" -o "$out/healthy"
    python3 - "${HOLD_GIB:-120}" >"$out/holder.txt" 2>&1 <<'PY' &
import sys, time
import torch
held = torch.empty(int(float(sys.argv[1]) * 2**30), dtype=torch.uint8, device="cuda:1")
free, total = torch.cuda.mem_get_info(1)
print({"held_bytes": held.numel(), "free": free, "total": total, "time": time.time()}, flush=True)
time.sleep(900)
PY
    holder=$!
    sleep 15
    nvidia-smi --query-gpu=index,memory.used,memory.total,utilization.gpu --format=csv >>"$out/holder.txt"
    step holder python3 -m diagnose run "${common[@]}" -o "$out/holder"
    kill "$holder"
    wait "$holder" 2>/dev/null
    exit 0
fi
step p2p python3 -m diagnose run "${common[@]}" -e diagnose_profile=single-node-nvlink -o "$out/p2p"
