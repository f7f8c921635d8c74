# Shell functions for one test host of tests/support/testbed.py. Each host's generated init.sh sources this
# file and calls the functions below; it runs as PID 1 of the host's private mount and pid namespaces
# (unshare --mount --pid --fork --propagation private). Every mount made here vanishes with the
# namespace, so the machine itself is never changed. Plain POSIX sh and util-linux on purpose:
# 64 hosts start on a 2-core machine, and a process exec here costs ~1 ms where a Python start
# costs ~70 ms.

set -eu

SCRATCH=
OVERLAYS=0
DEVICES=

die() {
    echo "testbed-ns: $*" >&2
    exit 1
}

# ns_scratch DIR: a private tmpfs on DIR for staging the /dev tree, overlay upper dirs and the binds
# kept aside while a directory is covered. It exists only in this namespace.
ns_scratch() {
    SCRATCH=$1
    mount -t tmpfs -o mode=700 testbed-scratch "$SCRATCH"
}

# ns_proc: a procfs of this pid namespace, so `ps` in a session shows only this host's processes.
# Where the kernel refuses a fresh procfs the machine's /proc stays, which changes nothing the
# checks read.
ns_proc() {
    if ! mount -t proc -o nosuid,nodev,noexec proc /proc 2>/dev/null; then
        echo "testbed-ns: kept the machine's /proc" >&2
    fi
}

# _node DIR NAME MAJOR MINOR: a character device node; where a device cgroup refuses mknod, bind the
# machine's node of that name, or leave an empty file (a fake /dev/infiniband entry needs no driver).
_node() {
    if mknod -m 666 "$1/$2" c "$3" "$4" 2>/dev/null; then
        return 0
    fi
    : >"$1/$2"
    if [ -c "/dev/$2" ]; then
        mount --bind "/dev/$2" "$1/$2"
    fi
}

# ns_dev noib | ns_dev ib [NAME MAJOR MINOR]...: replace /dev with a small tmpfs holding what sshd
# and shells use. With "ib", /dev/infiniband holds those devices (MAJOR "-": a plain file); with
# "noib" it does not exist, whatever the machine has. The tree is built aside and moved over /dev
# in one step.
ns_dev() {
    d=$SCRATCH/dev
    mkdir "$d"
    mount -t tmpfs -o mode=755,nosuid testbed-dev "$d"
    _node "$d" null 1 3
    _node "$d" zero 1 5
    _node "$d" full 1 7
    _node "$d" random 1 8
    _node "$d" urandom 1 9
    _node "$d" tty 5 0
    _node "$d" ptmx 5 2
    ln -s /proc/self/fd "$d/fd"
    ln -s /proc/self/fd/0 "$d/stdin"
    ln -s /proc/self/fd/1 "$d/stdout"
    ln -s /proc/self/fd/2 "$d/stderr"
    mkdir "$d/pts" "$d/shm"
    mount --bind /dev/pts "$d/pts"
    mount -t tmpfs -o mode=1777,nosuid,nodev testbed-shm "$d/shm"
    ib=$1
    shift
    if [ "$ib" = ib ]; then
        mkdir -m 755 "$d/infiniband"
        while [ $# -ge 3 ]; do
            if [ "$2" = - ]; then
                : >"$d/infiniband/$1"
            else
                _node "$d/infiniband" "$1" "$2" "$3"
            fi
            shift 3
        done
    fi
    for n in $DEVICES; do
        if [ -e "/dev/$n" ]; then
            : >"$d/$n"
            mount --bind "/dev/$n" "$d/$n"
        fi
    done
    mount --move "$d" /dev
}

# ns_devices NAME...: nodes of the machine's /dev that the next ns_dev shows in the host's /dev too
# (a GPU host's share: nvidia0, nvidiactl, nvidia-uvm, ...), bound, as a container runtime does.
ns_devices() {
    DEVICES="$*"
}

# ns_hostname NAME: the host's own name, in its UTS namespace (no hostname(1) needed).
ns_hostname() {
    printf '%s\n' "$1" >/proc/sys/kernel/hostname
}

# ns_private_tmp [KEEP]...: a tmpfs over /tmp, as separate machines have their own; each KEEP (a directory
# under /tmp the host still needs: the bed's work directory, this scratch included; the Python the hosts'
# logins run when it lives under /tmp, as in a CI checkout) is bound into it first. Built aside and moved
# over /tmp in one step.
ns_private_tmp() {
    new=$SCRATCH/tmp
    mkdir "$new"
    mount -t tmpfs -o mode=1777,nosuid,nodev testbed-tmp "$new"
    for keep in "$@"; do
        mkdir -p "$new${keep#/tmp}"
        mount --rbind "$keep" "$new${keep#/tmp}"
    done
    mount --move "$new" /tmp
}

# ns_overlay DIR ENTRY...: make missing paths appear under the existing directory DIR in this
# namespace only. ENTRY is d:REL (a directory) or f:REL (an empty file, a mount point for a later
# ns_bind); directories come first. An overlay keeps DIR's content and puts the new paths on top;
# mounts below DIR, which an overlay would hide, are bound back. Where the kernel refuses an overlay
# (procfs as the lower layer, a too deep stack), a tmpfs covers DIR and every entry of DIR is bound
# back onto it.
ns_overlay() {
    dir=$1
    shift
    OVERLAYS=$((OVERLAYS + 1))
    s=$SCRATCH/overlay$OVERLAYS
    mkdir -p "$s/upper" "$s/work" "$s/keep"
    for e in "$@"; do
        case $e in
        d:*) mkdir -p "$s/upper/${e#d:}" ;;
        f:*) : >"$s/upper/${e#f:}" ;;
        *) die "bad overlay entry $e" ;;
        esac
    done
    below=$(while read -r _ _ _ _ mp _; do
        case $mp in
        "$dir"/*) echo "$mp" ;;
        esac
    done </proc/self/mountinfo)
    mount --rbind "$dir" "$s/keep"
    if mount -t overlay -o "lowerdir=$dir,upperdir=$s/upper,workdir=$s/work" testbed-overlay "$dir" 2>/dev/null; then
        for mp in $below; do
            mount --bind "$s/keep${mp#"$dir"}" "$mp"
        done
        return 0
    fi
    mount -t tmpfs -o mode=755 testbed-cover "$dir"
    for e in "$s/keep"/* "$s/keep"/.[!.]* "$s/keep"/..?*; do
        if [ ! -e "$e" ] && [ ! -L "$e" ]; then
            continue
        fi
        n=$dir/${e##*/}
        if [ -L "$e" ]; then
            cp -P "$e" "$n"
        elif [ -d "$e" ]; then
            mkdir "$n"
            mount --rbind "$e" "$n"
        else
            : >"$n"
            mount --bind "$e" "$n"
        fi
    done
    cp -a "$s/upper/." "$dir/"
}

# ns_bind SOURCE TARGET: show the file SOURCE at TARGET in this namespace only.
ns_bind() {
    mount --bind "$1" "$2"
}

# ns_tools SOURCE DIR: a tmpfs on DIR (first on root's login PATH) holding copies of the host's fake
# tools, so they shadow the machine's tools of the same name. A copy on a tmpfs, not a bind of
# SOURCE, keeps the tools executable even where the work directory is mounted noexec.
ns_tools() {
    mount -t tmpfs -o mode=755,nosuid,nodev testbed-tools "$2"
    cp -a "$1/." "$2/"
}

# ns_memlock KIB|unlimited|keep: the locked-memory limit (soft and hard) sshd and every session
# inherit. `ulimit -l` is a shell builtin, so the login's value can only come from here. Raising it
# above the inherited hard limit needs CAP_SYS_RESOURCE; "keep" (the bed's choice where that is
# missing) leaves the machine's limit.
ns_memlock() {
    if [ "$1" != keep ]; then
        ulimit -l "$1" || die "ulimit -l $1 refused (raising the limit needs CAP_SYS_RESOURCE)"
    fi
}

# ns_sshd SSHD CONFIG: run sshd in the foreground and live as long as both it and the test bed do.
# Standard input is a pipe whose write end only the test bed holds: it reads EOF when the bed closes
# it or the bed's process dies for any reason, and then sshd is killed. Once this shell (PID 1)
# exits, the kernel kills every process left in the namespace: sessions, hanging tools, detached
# children. With a third word "outlive" the host outlives its sshd (a node whose sshd died keeps
# running what it started) until the bed closes the pipe. (fd 3 because dash redirects only single-digit fds, and gives background jobs
# /dev/null as their standard input.)
ns_sshd() {
    exec 3<&0 </dev/null
    "$1" -D -e -f "$2" 3<&- &
    sshd=$!
    {
        read -r _ <&3 || :
        kill -KILL "$sshd" 2>/dev/null || :
    } &
    exec 3<&-
    wait "$sshd" || :
    if [ "${3:-}" = outlive ]; then
        wait || :
    fi
}
