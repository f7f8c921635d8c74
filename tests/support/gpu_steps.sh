# Shared by the scripts a lent GPU machine runs under tests/support/gpuhosts.py (gpu_campaign.sh,
# gpu_holders.sh): the shortened acceptance playbook and the step that records one command's output.
# Source it after setting $out.

# shortened_playbook FILE NAME [EXTRA_BENCHMARK_LINE...]: the acceptance playbook cut to a ten-minute call
# (all checks, an all_reduce sweep 1 MiB-256 MiB, the training probe, GPU stress with a 0.5-minute burn-in
# and 5 s of memtest), with extra `benchmarks:` keys (e.g. "kv_transfer: true").
shortened_playbook() {
    local file=$1 name=$2
    shift 2
    {
        echo "name: $name"
        echo "description: the acceptance playbook, shortened for a lent machine's ten-minute calls"
        echo 'checks: ["*"]'
        echo "benchmarks:"
        printf '  %s\n' "enabled: true" "workload: dense" "min_bytes: 1M" "max_bytes: 256M" "step_factor: 4" \
            "warmup_iters: 2" "iters: 5" "tool: torch" "straggler_isolation: false" "training_probe: true" \
            "stress: true" "$@"
        echo "vars:"
        printf '  %s\n' "foreign_processes_status: FAIL" "burnin_minutes: 0.5" "memtest_seconds: 5"
    } >"$file"
}

say() { echo "+ $*" >&2; }

step() {  # step NAME COMMAND...: the command's output to $out/NAME_terminal.txt, its exit status after it
    local name=$1
    shift
    say "$name: $*"
    { echo "\$ $*"; "$@"; echo "[exit $?]"; } >"$out/${name}_terminal.txt" 2>&1
    tail -n 3 "$out/${name}_terminal.txt" >&2
}
