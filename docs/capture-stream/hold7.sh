#!/usr/bin/env bash
# stream3's hold 2 (#40): where a capture's first seconds go on the idle host. Hold 5 (08:23 UTC) and hold 6's
# round 1 read a quarter or less of the events while stress-ng ran at its alone rate: the capture's window
# began late. 20 s of stress-ng --switch 2 captured for 15 s, 3 times; the capture's syscalls that set it up
# (strace --seccomp-bpf: only those, timed) and, every 0.25 s, its main thread's state and kernel wait channel.
#   tl-measure bash docs/capture-stream/hold7.sh
HERE="$(cd "$(dirname "$0")/../.." && pwd)"
cd /tmp
source "$HERE/scripts/measure_cgroup.sh"
cgroup_make "hold7-$$"
W="$(mktemp -d)"
trap 'cgroup_remove; rm -rf "$W"' EXIT
date -u
for round in 1 2 3; do
    cgroup_exec stress-ng --switch 2 -t 20 --metrics-brief > "$W/stress" 2>&1 &
    stressing=$!
    sleep 1
    t0=$(date +%s.%N)
    strace -f -tt --seccomp-bpf -e trace=execve,mkdir,openat,sched_setscheduler,exit_group -o "$W/strace" \
        /work/venvs/capture/bin/throttlelab capture --cgroup "${CG_DIRS[0]}" --duration 15 -o "$W/c.toml" > "$W/out" 2>&1 &
    tracer=$!
    # The capture's process (strace's child) and its main thread's state and wait channel, every 0.25 s.
    while kill -0 "$tracer" 2>/dev/null; do
        pid=$(pgrep -P "$tracer" | head -1)
        [ -n "$pid" ] && echo "$(date +%s.%N) $(awk '{print $3, $14, $15}' /proc/$pid/stat 2>/dev/null) $(cat /proc/$pid/wchan 2>/dev/null)" >> "$W/watch"
        sleep 0.25
    done
    wait "$tracer"; rc=$?
    wait "$stressing"
    echo "round $round rc $rc t0 $t0 stress: $(awk '$4 == "switch" && $5 ~ /^[0-9]+$/ {print $9 " ops/s over " $6 " s"}' "$W/stress")"
    cat "$W/out"
    grep -E '^(duration_s|trace_events|lost_events|writer_policy) =' "$W/c.toml" 2>/dev/null | tr '\n' ' '; echo
    grep -E 'execve|throttlelab-capture-[0-9]+", |buffer_size_kb|sched_switch/enable|sched_setscheduler|exit_group|c.toml' "$W/strace" | grep -v ENOENT | sed 's/^/  strace /'
    # The watch, its lines whose state or wait channel changed.
    awk '{k = $2 " " $5} k != last {print "  watch " $0; last = k}' "$W/watch" | head -40
    rm -f "$W/watch" "$W/strace" "$W/c.toml" "$W"/c.phases.gz
done
date -u
