#!/usr/bin/env bash
# What capturing costs a switch-heavy workload (docs/capture.md, "Overhead"):
# `stress-ng --switch 2` alone, captured by `throttlelab capture`, and recorded
# by `perf record -a` with the same events (Debian 12's trace-cmd 3.1 crashes
# on `record` on the 6.18 host), runs alternating, ROUNDS of each.
# Prints one line per run: mode, bogo ops/s, trace events recorded, lost.
#
#   sudo bash scripts/capture_overhead.sh [SECONDS [ROUNDS [MODES]]]    (default 60 3)
#
# MODES (quoted, space-separated): alone, throttlelab, perf (default all three).
# Run it from a directory outside /work/wt: tl-measure stops the processes
# there whose environment lacks TL_MEASURE, and stress-ng rewrites its own.
#
# The capture's and perf's own CPU time (user, sys) is printed as cpu_s.
# Needs root, cgroup v1 or v2, perf, and stress-ng (Debian's package,
# installed if missing). Run it in a mount namespace of its own (unshare -m
# --propagation private), where tracefs is mounted for it.
set -uo pipefail
SECONDS_RUN="${1:-60}"
ROUNDS="${2:-3}"
MODES="${3:-alone throttlelab perf}"
THROTTLELAB="${THROTTLELAB:-throttlelab}"
for tool in stress-ng:stress-ng; do
    command -v "${tool%%:*}" >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${tool#*:}" >/dev/null
done

# perf resolves the tracepoints in tracefs: mount it here if the host has not
# (run this script in a mount namespace of its own: unshare -m --propagation private).
mountpoint -q /sys/kernel/tracing || mount -t tracefs nodev /sys/kernel/tracing

source "$(dirname "$0")/measure_cgroup.sh"
cgroup_make "capture-overhead-$$"
WORK="$(mktemp -d)"
cleanup() {
    cgroup_remove
    rm -rf "$WORK"
}
trap cleanup EXIT

# stress-ng in the cgroup, for SECONDS_RUN + 2 s; its bogo ops/s (real time) on stdout.
stress() { stress_switch $((SECONDS_RUN + 2)); }

EVENTS=(-e sched:sched_switch -e sched:sched_waking -e sched:sched_process_fork -e sched:sched_process_exit
        -e sched:sched_stat_runtime -e syscalls:sys_enter_epoll_wait -e syscalls:sys_enter_epoll_pwait
        -e syscalls:sys_enter_epoll_pwait2)

for round in $(seq "$ROUNDS"); do
    for mode in $MODES; do
        out=""
        case "$mode" in
            alone) ops="$(stress)" ;;
            throttlelab)
                stress > "$WORK/ops" &
                sleep 1
                /usr/bin/time -f "cpu_s %U %S maxrss_kb %M" unshare -m --propagation private "$THROTTLELAB" capture --cgroup "${CG_DIRS[0]}" \
                    --duration "$SECONDS_RUN" -o "$WORK/c.toml" > "$WORK/out" 2>&1 || true
                wait
                ops="$(cat "$WORK/ops")"
                out="$(grep -E '^(trace_events|lost_events|trace_buffer_kb|reader_[a-z_]+) =' "$WORK/c.toml" | tr '\n' ' ')"
                out="$out$(grep cpu_s "$WORK/out") $(grep -c warning "$WORK/out" || true) warnings"
                ;;
            perf)
                stress > "$WORK/ops" &
                sleep 1
                /usr/bin/time -f "cpu_s %U %S" perf record -q -a -k mono -m 2048 ${EVENTS[*]} -o "$WORK/perf.data" \
                    -- sleep "$SECONDS_RUN" > "$WORK/out" 2>&1 || true
                wait
                ops="$(cat "$WORK/ops")"
                out="samples $(perf report -i "$WORK/perf.data" --stats 2>/dev/null | awk '/SAMPLE events:/ {print $3; exit}') $(grep -i lost "$WORK/out" | tr '\n' ' ')"
                out="$out$(grep cpu_s "$WORK/out")"
                rm -f "$WORK/perf.data"*
                ;;
        esac
        echo "round $round $mode ops/s $ops $out"
    done
done
