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
# `record-cmd` off), noruntime (nocmd without sched_stat_runtime), nosys (nocmd
# without epoll's syscall tracepoints), sched4 (nocmd with neither: the four
# tracepoints the BPF variants attach to), only-sched_switch, only-sched_waking,
# only-sched_stat_runtime, only-sched_process_fork, only-sched_process_exit (that
# one event alone, `record-cmd` off: what each event type costs), capture (its reader at SCHED_FIFO),
# capture-nice (the same started at nice -10 without CAP_SYS_NICE: its reader
# falls back to nice -10, as the capture did before);
# the in-kernel filters (docs/capture.md, "Filtering in the kernel"): tfilter
# (nocmd, each event with a tracefs `filter` keeping the cgroup's pids: a
# switch from or to one, the waking of one), eventpid (nocmd, `set_event_pid`
# the cgroup's pids with `event-fork`), and BPF programs on the same
# tracepoints (tp_btf; scripts/bpf_cost/): bpf-empty, bpf-eswitch (an empty
# program on sched_switch alone), bpf-filter, bpf-ring, bpf-agg; and, for
# what another container pays, tfilter-other, eventpid-other and
# bpf-filter-other (the capture's target a sibling cgroup, not stress-ng's). tfilter and eventpid are set up 0.5 s after stress-ng starts (its
# pids are known then); the others before.
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
    [ -n "${OTHER_PID:-}" ] && { kill "$OTHER_PID"; wait "$OTHER_PID"; } 2>/dev/null
    [ -n "${OTHER_CG:-}" ] && sleep 0.2 && rmdir "$OTHER_CG"
    cgroup_remove
    [ -d "$INST" ] && rmdir "$INST"
    rm -rf "$WORK"
}
trap cleanup EXIT

stress() { stress_switch $((SECONDS_RUN + 2)) "$WORK/stress.log"; }
# How long stress-ng's switch stressor ran, s (its metrics' real time).
stress_ran() { awk '$4 == "switch" && $5 ~ /^[0-9]+$/ {print $6}' "$WORK/stress.log"; }

# The BPF variants' object and loader, built once (clang, bpftool, libbpf-dev).
BPF_DIR="$(cd "$(dirname "$0")" && pwd)/bpf_cost"
case " $MODES " in *" bpf-"*)
    command -v clang >/dev/null && command -v bpftool >/dev/null && [ -f /usr/include/bpf/libbpf.h ] ||
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q clang bpftool libbpf-dev >/dev/null
    bpftool btf dump file /sys/kernel/btf/vmlinux format c > "$WORK/vmlinux.h"
    clang -O2 -g -target bpf -D__TARGET_ARCH_x86 -I"$WORK" -c "$BPF_DIR/capture_cost.bpf.c" -o "$WORK/capture_cost.bpf.o"
    cc -O2 "$BPF_DIR/bpf_cost.c" -o "$WORK/bpf_cost" -lbpf
    ;;
esac

# What another container pays for a capture (the modes ending in -other):
# the capture's target is then a sibling cgroup with one sleeping process,
# and stress-ng runs outside it.
case " $MODES " in *"-other "*)
    OTHER_CG="${CG_DIRS[0]%/*}/capture-cost-other-$$"
    mkdir -p "$OTHER_CG"
    sh -c 'echo $$ > "$1/cgroup.procs"; exec sleep 100000' sh "$OTHER_CG" &
    OTHER_PID=$!
    ;;
esac

# The threads in the cgroup, one a line.
cgroup_tids() { cat "${CG_DIRS[0]}/tasks" 2>/dev/null || cat "${CG_DIRS[0]}/cgroup.threads"; }

# Filters keeping what the capture needs of pids $@ (tfilter): a switch from or
# to one (a switch from an untraced thread to a traced one too), the waking of
# one (its waker is common_pid), the runtime of one, its forks and its exit.
pid_filters() {
    local sw="" one="" par="" p
    for p in "$@"; do
        sw="${sw:+$sw || }prev_pid == $p || next_pid == $p"
        one="${one:+$one || }pid == $p"
        par="${par:+$par || }parent_pid == $p"
    done
    echo "$sw" > "$INST/events/sched/sched_switch/filter"
    for e in sched_waking sched_stat_runtime sched_process_exit; do echo "$one" > "$INST/events/sched/$e/filter"; done
    echo "$par" > "$INST/events/sched/sched_process_fork/filter"
}

# The capture's events (crates/throttlelab-real/src/capture.rs) in an instance
# of its own, overwriting, not read; $1: record-cmd (0/1), $2: with sched_stat_runtime (0/1),
# $3: with epoll's syscall tracepoints (0/1; default 1).
instance() {
    mkdir "$INST"
    echo 8192 > "$INST/buffer_size_kb"
    echo mono > "$INST/trace_clock"
    [ "$1" = 1 ] || echo norecord-cmd > "$INST/trace_options"  # an instance has no options/record-cmd file
    for e in sched_switch sched_waking sched_process_fork sched_process_exit; do echo 1 > "$INST/events/sched/$e/enable"; done
    [ "$2" = 1 ] && echo 1 > "$INST/events/sched/sched_stat_runtime/enable"
    [ "${3:-1}" = 1 ] && for s in epoll_wait epoll_pwait epoll_pwait2; do
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
            kernel|nocmd|noruntime|nosys|sched4)
                case "$mode" in
                    kernel) instance 1 1 ;; nocmd) instance 0 1 ;; noruntime) instance 0 0 ;;
                    nosys) instance 0 1 0 ;; sched4) instance 0 0 0 ;;
                esac
                ops="$(stress)"
                events="$(written)"
                rmdir "$INST"
                ;;
            only-*)
                # One event alone, record-cmd off (as the capture sets it).
                mkdir "$INST"
                echo 8192 > "$INST/buffer_size_kb"
                echo mono > "$INST/trace_clock"
                echo norecord-cmd > "$INST/trace_options"
                echo 1 > "$INST/events/sched/${mode#only-}/enable"
                ops="$(stress)"
                events="$(written)"
                rmdir "$INST"
                ;;
            tfilter|eventpid|tfilter-other|eventpid-other)
                instance 0 1
                echo 0 > "$INST/tracing_on"
                stress > "$WORK/ops" &
                stressing=$!
                sleep 0.5
                case "$mode" in *-other) pids="$OTHER_PID" ;; *) pids="$(cgroup_tids)" ;; esac
                if [ "${mode%-other}" = tfilter ]; then
                    pid_filters $pids
                else
                    echo event-fork > "$INST/trace_options"
                    echo "$pids" > "$INST/set_event_pid"
                fi
                echo 1 > "$INST/tracing_on"
                wait "$stressing"
                ops="$(cat "$WORK/ops")"
                events="$(written)"
                rmdir "$INST"
                ;;
            bpf-*)
                variant="${mode#bpf-}"
                target="${CG_DIRS[0]}"
                case "$mode" in *-other) variant="${variant%-other}"; target="$OTHER_CG" ;; esac
                # At nice -10, as the capture's reader.
                nice -n -10 "$WORK/bpf_cost" "$WORK/capture_cost.bpf.o" "$variant" "$target" > "$WORK/bpf" 2> "$WORK/bpf.err" &
                loader=$!
                sleep 1
                ops="$(stress)"
                kill -INT "$loader"
                wait "$loader"
                events="$(cat "$WORK/bpf" "$WORK/bpf.err" | tr '\n' ' ')"
                ;;
            capture|capture-nice)
                # capture-nice: started at nice -10, CAP_SYS_NICE dropped, so SCHED_FIFO is refused.
                # capture: started at SCHED_FIFO 1 (its reader's policy; the spill's writer takes the reader's):
                # on the idle host a SCHED_OTHER process started beside stress-ng --switch 2 is starved for
                # seconds (Python's import 0.2-11 s, 5 s more to read the cgroup: docs/capture.md, "A late
                # start"), and the capture's window then begins late, over a stress-ng not yet captured.
                # CAPTURE_FIFO=0 starts it as a user would.
                nocap=()
                [ "${CAPTURE_FIFO:-1}" = 1 ] && nocap=(chrt -f 1)
                [ "$mode" = capture-nice ] && nocap=(nice -n -10 setpriv --inh-caps -sys_nice --bounding-set -sys_nice)
                rm -f "$WORK/c.toml"
                stress > "$WORK/ops" &
                stressing=$!
                sleep 1
                # stress-ng's processes stopped (state T) 5 s into the capture: none, unless something stops them.
                # And how late the capture's window began: its tracefs instance made, s after the command.
                started="$(date +%s.%N)"
                (until ls -d /sys/kernel/tracing/instances/throttlelab-capture-* >/dev/null 2>&1; do sleep 0.05; done
                 awk -v a="$started" -v b="$(date +%s.%N)" 'BEGIN {printf "%.2f", b - a}' > "$WORK/late") &
                watching=$!
                (sleep 5; for p in $(cgroup_tids); do awk '{print $3}' "/proc/$p/stat" 2>/dev/null; done | grep -c T > "$WORK/stopped") &
                /usr/bin/time -f "cpu_s %U %S maxrss_kb %M wall_s %e" "${nocap[@]}" "$THROTTLELAB" capture --cgroup "${CG_DIRS[0]}" \
                    --duration "$SECONDS_RUN" -o "$WORK/c.toml" > "$WORK/out" 2>&1
                rc=$?
                kill "$watching" 2>/dev/null  # a capture that failed before making its instance
                wait "$stressing"
                wait
                ops="$(cat "$WORK/ops")"
                ran="stress_s $(stress_ran) stopped $(cat "$WORK/stopped") late_s $(cat "$WORK/late" 2>/dev/null)"
                # The capture's own lines (its warnings; its error when it failed), kept in the log.
                grep '^throttlelab:' "$WORK/out" | sed 's/^/  /'
                if [ "$rc" != 0 ] || [ ! -s "$WORK/c.toml" ]; then
                    # A failed capture says so on its line (no event count: the table skips it), never a missing file.
                    events="failed rc $rc: $(grep '^throttlelab: error' "$WORK/out" | tail -1) $ran $(grep cpu_s "$WORK/out")"
                else
                    events="$(awk -F' = ' '$1 == "trace_events" {r = $2} $1 == "lost_events" {l = $2} END {print r + l}' "$WORK/c.toml")"
                    events="$events $(grep -E '^(lost_events|trace_buffer_kb|reader_[a-z_]+|spill_[a-z_]+|writer_policy) =' "$WORK/c.toml" | tr '\n' ' ')$ran $(grep cpu_s "$WORK/out")"
                fi
                ;;
        esac
        [ "$mode" = alone ] && events="stress_s $(stress_ran)"
        echo "round $round $mode ops/s $ops events $events"
    done
done
