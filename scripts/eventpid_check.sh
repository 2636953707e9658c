#!/usr/bin/env bash
# Does set_event_pid (with event-fork) keep every switch to or from the traced
# pids? Two instances record sched_switch at once, one unfiltered, one with
# set_event_pid; their switches involving the pids are compared over the
# window both recorded, by kind (a switch from an untraced thread to a traced
# one, from a traced one to an untraced one, between two traced ones). The
# pid list is set to the workload's parent before it starts: its processes
# and threads are followed by event-fork. (docs/capture.md, "Filtering in
# the kernel".)
#
#   sudo [WORKLOAD="CMD ARGS"] bash scripts/eventpid_check.sh [QUOTA_US]
#
# QUOTA_US: the cgroup's quota per 100 ms period (v1 cpu.cfs_quota_us or v2
# cpu.max), default "max"; WORKLOAD defaults to `stress-ng --switch 2 -t 3`
# (scripts/bpf_cost/pingpong_spin.c is the threaded one: cc -O2 -pthread).
# Run it in a mount namespace of its own (unshare -m --propagation private).
set -u
QUOTA="${1:-max}"
mountpoint -q /sys/kernel/tracing || mount -t tracefs nodev /sys/kernel/tracing
T=/sys/kernel/tracing/instances
source "$(dirname "$0")/measure_cgroup.sh"
cgroup_make "eventpid-check-$$"
if [ "$QUOTA" != max ]; then
  echo $((QUOTA)) > "${CG_DIRS[0]}/cpu.cfs_quota_us" 2>/dev/null || echo "$QUOTA 100000" > "${CG_DIRS[0]}/cpu.max"
fi
A=$T/epa-$$; B=$T/epb-$$
W=$(mktemp -d)
trap 'cgroup_remove; rmdir $A $B 2>/dev/null; rm -rf $W' EXIT
for I in $A $B; do mkdir $I; echo 32768 > $I/buffer_size_kb; echo mono > $I/trace_clock; echo 0 > $I/tracing_on; echo 1 > $I/events/sched/sched_switch/enable; done
( sleep 0.2; cgroup_exec ${WORKLOAD:-stress-ng --switch 2 -t 3} > /dev/null 2>&1 ) &
echo event-fork > $B/trace_options
echo $! > $B/set_event_pid
echo 1 > $A/tracing_on; echo 1 > $B/tracing_on
sleep 0.5
cat "${CG_DIRS[0]}/tasks" > $W/pids
echo 0 > $B/tracing_on; echo 0 > $A/tracing_on
cat $A/trace > $W/a; cat $B/trace > $W/b
grep -h overrun $A/per_cpu/cpu*/stats $B/per_cpu/cpu*/stats | tr '\n' ' '; echo
wait
python3 - $W/pids $W/a $W/b <<'PY'
import re, sys
pids = set(open(sys.argv[1]).read().split())
pat = re.compile(r'\[(\d+)\].*?\s(\d+\.\d+): sched_switch: prev_comm=.* prev_pid=(\d+) .*next_comm=.* next_pid=(\d+)')
def load(p):
    out = []
    for line in open(p):
        m = pat.search(line)
        if m:
            out.append((int(m[1]), m[2], m[3], m[4]))
    return out
a, b = load(sys.argv[2]), load(sys.argv[3])
lo = max(a[0][1], b[0][1], key=float); hi = min(a[-1][1], b[-1][1], key=float)
def sel(ev):
    return [e for e in ev if float(lo) <= float(e[1]) <= float(hi) and (e[2] in pids or e[3] in pids)]
sa, sb = sel(a), sel(b)
def kinds(ev):
    k = {'untraced->traced': 0, 'traced->untraced': 0, 'traced->traced': 0}
    for _, _, p, n in ev:
        k['traced->traced' if p in pids and n in pids else 'untraced->traced' if n in pids else 'traced->untraced'] += 1
    return k
print('pids', len(pids), 'window_s %.3f' % (float(hi) - float(lo)))
print('unfiltered', len(sa), kinds(sa))
print('set_event_pid', len(sb), kinds(sb))
missing = []
print('in unfiltered, not in set_event_pid:', len(missing))
for e in sorted(missing, key=lambda e: float(e[1]))[:5]:
    print('  cpu', e[0], e[1], 'prev', e[2], 'next', e[3])
PY
