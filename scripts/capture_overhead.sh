#!/usr/bin/env bash
# What capturing costs a switch-heavy workload (docs/capture.md, "Overhead"):
# `stress-ng --switch 2` alone, captured by `throttlelab capture`, and recorded
# by `trace-cmd record` with the same events, runs alternating, ROUNDS of each.
# Prints one line per run: mode, bogo ops/s, trace events recorded, lost.
#
#   sudo bash scripts/capture_overhead.sh [SECONDS [ROUNDS]]    (default 60 3)
#
# The capture's and trace-cmd's own CPU time (user, sys) is printed as cpu_s.
# Needs root, cgroup v1 or v2, and stress-ng and trace-cmd (Debian's packages,
# installed if missing). Each traced run is in a mount namespace of its own,
# where tracefs is mounted for it, so the host's mounts are left alone.
set -euo pipefail
SECONDS_RUN="${1:-60}"
ROUNDS="${2:-3}"
THROTTLELAB="${THROTTLELAB:-throttlelab}"
for tool in stress-ng:stress-ng trace-cmd:trace-cmd; do
    command -v "${tool%%:*}" >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${tool#*:}" >/dev/null
done

ROOT=/sys/fs/cgroup
NAME="capture-overhead-$$"
if [ -f "$ROOT/cgroup.controllers" ]; then
    DIRS=("$ROOT/$NAME")
else
    DIRS=("$ROOT/cpu/$NAME" "$ROOT/cpuacct/$NAME")
fi
for d in "${DIRS[@]}"; do mkdir "$d"; done
WORK="$(mktemp -d)"
cleanup() {
    for d in "${DIRS[@]}"; do
        for p in $(cat "$d/cgroup.procs" 2>/dev/null); do kill -9 "$p" 2>/dev/null || true; done
    done
    sleep 0.5
    for d in "${DIRS[@]}"; do rmdir "$d" 2>/dev/null || true; done
    rm -rf "$WORK"
}
trap cleanup EXIT

# stress-ng in the cgroup, for SECONDS_RUN + 2 s; its bogo ops/s (real time) on stdout.
stress() {
    local procs=""
    for d in "${DIRS[@]}"; do procs="$procs $d/cgroup.procs"; done
    sh -c "for f in $procs; do echo \$\$ > \$f; done; exec stress-ng --switch 2 -t $((SECONDS_RUN + 2)) --metrics-brief" \
        2>&1 | awk '/switch / && $4 ~ /^[0-9.]+$/ {print $(NF-1)}'
}

EVENTS=(-e sched:sched_switch -e sched:sched_waking -e sched:sched_process_fork -e sched:sched_process_exit
        -e sched:sched_stat_runtime -e syscalls:sys_enter_epoll_wait -e syscalls:sys_enter_epoll_pwait
        -e syscalls:sys_enter_epoll_pwait2)

for round in $(seq "$ROUNDS"); do
    for mode in alone throttlelab trace-cmd; do
        out=""
        case "$mode" in
            alone) ops="$(stress)" ;;
            throttlelab)
                stress > "$WORK/ops" &
                sleep 1
                /usr/bin/time -f "cpu_s %U %S" unshare -m --propagation private "$THROTTLELAB" capture --cgroup "${DIRS[0]}" \
                    --duration "$SECONDS_RUN" -o "$WORK/c.toml" > "$WORK/out" 2>&1 || true
                wait
                ops="$(cat "$WORK/ops")"
                out="$(grep -E '^(trace_events|lost_events|trace_buffer_kb) =' "$WORK/c.toml" | tr '\n' ' ')"
                out="$out$(grep cpu_s "$WORK/out") $(grep -c warning "$WORK/out" || true) warnings"
                ;;
            trace-cmd)
                stress > "$WORK/ops" &
                sleep 1
                /usr/bin/time -f "cpu_s %U %S" unshare -m --propagation private sh -c "mount -t tracefs nodev /sys/kernel/tracing &&
                    cd $WORK && timeout -s INT $SECONDS_RUN trace-cmd record -q -C mono -b 8192 ${EVENTS[*]} -o $WORK/t.dat" \
                    > "$WORK/out" 2>&1 || true
                wait
                ops="$(cat "$WORK/ops")"
                out="$(grep -E '^ *(entries|overrun):' "$WORK/out" | awk '{s[$1]+=$2} END {for (k in s) printf "%s %d ", k, s[k]}')"
                out="$out$(grep cpu_s "$WORK/out")"
                rm -f "$WORK/t.dat"*
                ;;
        esac
        echo "round $round $mode ops/s $ops $out"
    done
done
