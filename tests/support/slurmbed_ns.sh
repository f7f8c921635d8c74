# Shell functions for the Slurm test bed of tests/support/slurmbed.py, used beside tests/support/testbed_ns.sh. Each
# daemon's generated init.sh sources both and runs as PID 1 of its own UTS, mount and pid namespaces
# (unshare --uts --mount --pid --fork --propagation private): the hostname, the mounts and every
# process started there (slurmstepd, job steps, health checks) vanish with the namespace.

set -eu

# ns_hostname NAME: the node's hostname, as jobs and `hostname -s` see it (the UTS namespace's own).
ns_hostname() {
    hostname "$1"
}

# ns_wait_socket PATH: wait (at most 10 s) until a daemon started in the background has made its
# socket, so the next daemon finds it on its first try.
ns_wait_socket() {
    i=0
    while [ ! -S "$1" ]; do
        i=$((i + 1))
        [ "$i" -le 1000 ] || die "no socket $1 after 10 s"
        sleep 0.01
    done
}

# ns_serve PROGRAM ARG...: run a foreground daemon and live as long as both it and the bed do. Standard
# input is a pipe whose write end only the bed holds: it reads EOF when the bed closes it or the bed's
# process dies, and then the daemon is killed. Once this shell (PID 1) exits, the kernel kills every
# process left in the namespace. (fd 3 because dash redirects only single-digit fds.)
ns_serve() {
    exec 3<&0 </dev/null
    "$@" 3<&- &
    daemon=$!
    {
        read -r _ <&3 || :
        kill -KILL "$daemon" 2>/dev/null || :
    } &
    exec 3<&-
    wait "$daemon" || :
}
