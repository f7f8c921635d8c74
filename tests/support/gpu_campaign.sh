#!/usr/bin/env bash
# An acceptance campaign on one lent GPU machine split into two hosts (tests/support/gpuhosts.py runs this
# with the hosts up and {inventory} written). Two acts, each one device call:
#
#   first INVENTORY OUT   a foreign bf16 loop on GPU 1 (node2's, started outside both hosts), the first pass
#                         (node2 fails), the loop stopped (the repair), `campaign repaired`, `campaign next`
#                         (node2 alone, then the full-scale collective), status and certificate
#   soak INVENTORY OUT    the ledger of the first act (OUT/history.sqlite3, copied there beforehand), a soak
#                         of two rounds; the controller SIGKILLed between them and started again
#
# Every command's output goes to OUT/<step>_terminal.txt; the history database is OUT/history.sqlite3.
set -u
act=$1 inventory=$2 out=$3
mkdir -p "$out"
history=$out/history.sqlite3
playbook=$out/campaign.yaml
. "$(dirname "$0")/gpu_steps.sh"
shortened_playbook "$playbook" campaign-gpu
common=(-i "$inventory" --playbook "$playbook" --history "$history" --format json,html)

if [ "$act" = first ]; then
    python3 bench/gemm_baseline.py --gpu 1 --hog 600 >"$out/hog.txt" 2>&1 &
    hog=$!
    sleep 12
    step run1 python3 -m diagnose run "${common[@]}" --campaign gpu -o "$out/run1"
    step status1 python3 -m diagnose campaign status gpu --history "$history"
    kill "$hog"
    wait "$hog" 2>/dev/null
    sleep 3
    step repaired python3 -m diagnose campaign repaired gpu node2 --note "stopped the foreign bf16 loop" \
        --history "$history"
    step next_check python3 -m diagnose campaign next gpu "${common[@]}" --check
    step next python3 -m diagnose campaign next gpu "${common[@]}" -o "$out/next"
    step status2 python3 -m diagnose campaign status gpu --history "$history"
    step certificate python3 -m diagnose campaign certificate gpu --history "$history" -o "$out/cert"
    exit 0
fi

# soak: round 1 at once, round 2 one interval later; SIGKILL once round 1 is in the ledger
soak=(-e "soak_hours=${SOAK_HOURS:-0.13}" -e "soak_interval_minutes=${SOAK_INTERVAL:-3.9}")
rounds() { python3 -c "import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute(
    'SELECT COUNT(*) FROM campaign_soak').fetchone()[0])" "$history"; }
say "soak: started"
python3 -m diagnose campaign next gpu "${common[@]}" "${soak[@]}" -o "$out/soak_a" >"$out/soak_a_terminal.txt" 2>&1 &
controller=$!
for _ in $(seq 240); do
    [ "$(rounds)" -ge 1 ] && break
    sleep 1
done
sleep 5
say "soak: SIGKILL $controller after $(rounds) round(s)"
kill -9 "$controller"
wait "$controller" 2>/dev/null
echo "[SIGKILL after $(rounds) finished round(s) at $(date -u +%FT%TZ)]" >>"$out/soak_a_terminal.txt"
step soak_b python3 -m diagnose campaign next gpu "${common[@]}" "${soak[@]}" -o "$out/soak_b"
step soak_status python3 -m diagnose campaign status gpu --history "$history"
python3 -c "import sqlite3,sys,json; print(json.dumps([list(r) for r in sqlite3.connect(sys.argv[1]).execute(
    'SELECT round, run_id, started, verdict FROM campaign_soak ORDER BY round')]))" "$history" >"$out/soak_rounds.json"
