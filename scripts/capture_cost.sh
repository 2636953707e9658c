#!/usr/bin/env bash
# Where capturing's cost goes (docs/capture.md, "Overhead"): `stress-ng
# --switch 2` alone, then with the capture's events enabled in a tracefs
# instance nobody reads (the kernel's side only: the tracepoints and the
# ring buffer, overwriting), in variants, then captured by `throttlelab
# capture` (the kernel's side and the reader's). One line per run: mode, bogo
# ops/s, events written per second, and the CPU time each event cost the
# workload (ns: the CPU time per op of 2 busy CPUs, less alone's, over the
# events per op).
#
#   sudo bash scripts/capture_cost.sh [SECONDS [ROUNDS [MODES]]]    (default 20 2)
#
# MODES (quoted, space-separated) from: alone, kernel (all the capture's
# events, the instance's options as the kernel makes them), nocmd (the same,
# `record-cmd` off), noruntime (nocmd without sched_stat_runtime), capture.
# Run it in a mount namespace of its own (unshare -m --propagation private),
# from a directory outside /work/wt (tl-measure stops processes there, and
# stress-ng rewrites its environment).
set -uo pipefail
SECONDS_RUN="${1:-20}"
ROUNDS="${2:-2}"
MODES="${3:-alone kernel nocmd noruntime capture}"
THROTTLELAB="${THROTTLELAB:-throttlelab}"
command -v stress-ng >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -q stress-ng >/dev/null
mountpoint -q /sys/kernel/tracing || mount -t tracefs nodev /sys/kernel/tracing

source "$(dirname "$0")/measure_cgroup.sh"
cgroup_make "capture-cost-$$"
INST=/sys/kernel/tracing/instances/capture-cost-$$
WORK="$(mktemp -d)"
cleanup() {
    cgroup_remove
    [ -d "$INST" ] && rmdir "$INST"
    rm -rf "$WORK"
}
trap cleanup EXIT

stress() { stress_switch $((SECONDS_RUN + 2)); }

# The capture's events (crates/throttlelab-real/src/capture.rs) in an instance
# of its own, overwriting, not read; $1: record-cmd (0/1), $2: with sched_stat_runtime (0/1).
instance() {
    mkdir "$INST"
    echo 8192 > "$INST/buffer_size_kb"
    echo mono > "$INST/trace_clock"
    [ "$1" = 1 ] || echo norecord-cmd > "$INST/trace_options"  # an instance has no options/record-cmd file
    for e in sched_switch sched_waking sched_process_fork sched_process_exit; do echo 1 > "$INST/events/sched/$e/enable"; done
    [ "$2" = 1 ] && echo 1 > "$INST/events/sched/sched_stat_runtime/enable"
    for s in epoll_wait epoll_pwait epoll_pwait2; do
        echo 1 > "$INST/events/syscalls/sys_enter_$s/enable" 2>/dev/null
        echo 'ret > 0' > "$INST/events/syscalls/sys_exit_$s/filter" 2>/dev/null && echo 1 > "$INST/events/syscalls/sys_exit_$s/enable" 2>/dev/null
    done
    true
}

# Events written into the instance (entries kept and overwritten).
written() {
    local n=0
    for s in "$INST"/per_cpu/cpu*/stats; do
        n=$((n + $(awk -F': *' '$1 == "entries" || $1 == "overrun" {s += $2} END {print s + 0}' "$s")))
    done
    echo "$n"
}

declare -A ALONE_SUM ALONE_N
for round in $(seq "$ROUNDS"); do
    for mode in $MODES; do
        events=""
        case "$mode" in
            alone) ops="$(stress)" ;;
            kernel|nocmd|noruntime)
                case "$mode" in kernel) instance 1 1 ;; nocmd) instance 0 1 ;; noruntime) instance 0 0 ;; esac
                ops="$(stress)"
                events="$(written)"
                rmdir "$INST"
                ;;
            capture)
                stress > "$WORK/ops" &
                sleep 1
                /usr/bin/time -f "cpu_s %U %S" "$THROTTLELAB" capture --cgroup "${CG_DIRS[0]}" \
                    --duration "$SECONDS_RUN" -o "$WORK/c.toml" > "$WORK/out" 2>&1 || true
                wait
                ops="$(cat "$WORK/ops")"
                events="$(awk -F' = ' '$1 == "trace_events" {r = $2} $1 == "lost_events" {l = $2} END {print r + l}' "$WORK/c.toml")"
                events="$events $(grep -E '^(lost_events|trace_buffer_kb) =' "$WORK/c.toml" | tr '\n' ' ')$(grep cpu_s "$WORK/out")"
                ;;
        esac
        echo "round $round $mode ops/s $ops events $events"
    done
done
