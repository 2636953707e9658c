# Sourced by the measuring scripts (capture_*.sh, capture_replay_check.sh): a
# cgroup of their own to run a program in, in v2's one hierarchy or in v1's
# cpu and cpuacct (cpuacct.usage), made, entered and removed one way.

# cgroup_make NAME: make the cgroup; CG_DIRS holds its directories, the cpu
# controller's first.
cgroup_make() {
    if [ -f /sys/fs/cgroup/cgroup.controllers ]; then
        CG_DIRS=("/sys/fs/cgroup/$1")
    else
        CG_DIRS=("/sys/fs/cgroup/cpu/$1" "/sys/fs/cgroup/cpuacct/$1")
    fi
    local d
    for d in "${CG_DIRS[@]}"; do mkdir -p "$d"; done
}

# cgroup_exec CMD [ARGS...]: exec CMD in the cgroup (the shell enters it
# first, so CMD's children are born inside).
cgroup_exec() {
    local procs=() d
    for d in "${CG_DIRS[@]}"; do procs+=("$d/cgroup.procs"); done
    sh -c 'n=$1; shift; while [ "$n" -gt 0 ]; do echo $$ > "$1"; shift; n=$((n - 1)); done; exec "$@"' \
        sh "${#procs[@]}" "${procs[@]}" "$@"
}

# cgroup_remove: kill what runs in the cgroup and remove it.
cgroup_remove() {
    local d p
    for d in "${CG_DIRS[@]}"; do
        for p in $(cat "$d/cgroup.procs" 2>/dev/null); do kill -9 "$p" 2>/dev/null || true; done
    done
    sleep 0.5
    for d in "${CG_DIRS[@]}"; do rmdir "$d" 2>/dev/null || true; done
}

# stress_switch SECONDS [LOG]: `stress-ng --switch 2` in the cgroup; its bogo
# ops/s (real time) on stdout, and its whole output in LOG if given (the
# real time it ran: a stress-ng ended early shows a full rate over less time).
stress_switch() {
    cgroup_exec stress-ng --switch 2 -t "$1" --metrics-brief 2>&1 | tee "${2:-/dev/null}" | awk '$4 == "switch" && $5 ~ /^[0-9]+$/ {print $9}'
}
