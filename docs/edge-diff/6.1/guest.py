"""Issue #34's 6.1 trace: boot a Debian kernel under TCG with extra kernel
parameters (GUEST_APPEND, added to QEMU's -append) and one of

  python guest.py clock RELEASE     # the guest's TSC and sched_clock lines, and
                                    # spinners' charged runtime against CLOCK_MONOTONIC
  python guest.py limit RELEASE     # busybox spinners in a cgroup, unlimited and under
                                    # cpu.max: usage_usec against their sum_exec_runtime
  python guest.py stat RELEASE SCENARIO OUT   # the controller's run of SCENARIO with
                                    # sched_stat_runtime and sched_switch traced (OUT, gzipped)
  python guest.py poll RELEASE SCENARIO       # the same, cpu.stat polled every 50 ms
  python guest.py diff ARGS...      # `throttlelab diff ARGS...` in such a guest

e.g. GUEST_APPEND="tsc_early_khz=2596138 tsc=reliable" python guest.py clock 6.1
"""
import os
import sys

from throttlelab import vm

_qemu_command = vm.qemu_command


def qemu_command(*a, **kw):
    cmd = _qemu_command(*a, **kw)
    i = cmd.index("-append")
    cmd[i + 1] += " " + os.environ.get("GUEST_APPEND", "")
    return cmd


vm.qemu_command = qemu_command

# The guest's clocks, then 1 and 2 unlimited spinners for 3 s: their
# sum_exec_runtime (/proc/PID/schedstat, the rq clock update_curr charges)
# against CLOCK_MONOTONIC (/proc/timer_list's "now at").
CLOCK_SH = r'''
echo "clocksource $(cat /sys/devices/system/clocksource/clocksource0/current_clocksource)"
dmesg | grep -i -E "tsc:|sched_clock|clocksource: Switched|Unstable clock" | sed 's/^\[ *[0-9.]*\] //'
now() { grep -m1 "now at" /proc/timer_list | awk '{print $3}'; }
for n in 1 2; do
  i=0; pids=""
  while [ $i -lt $n ]; do ( while :; do :; done ) & pids="$pids $!"; i=$((i+1)); done
  sleep 0.2
  t0=$(now); s0=0; for p in $pids; do s=$(cut -d' ' -f1 /proc/$p/schedstat); s0=$((s0+s)); done
  sleep 3
  t1=$(now); s1=0; for p in $pids; do s=$(cut -d' ' -f1 /proc/$p/schedstat); s1=$((s1+s)); done
  kill $pids
  echo "spinners=$n mono_ns=$((t1-t0)) charged_ns=$((s1-s0)) charged/(n*mono)=$(( (s1-s0)*1000/(n*(t1-t0)) ))e-3"
done
'''

# Two spinners in a cgroup under cpu.max QUOTA PERIOD (v2) for 3 s: cpu.stat's
# usage_usec against their sum_exec_runtime (/proc/PID/schedstat) and CLOCK_MONOTONIC.
LIMIT_SH = r'''
now() { grep -m1 "now at" /proc/timer_list | awk '{print $3}'; }
usage() { awk '/usage_usec/{print $2}' $1/cpu.stat; }
echo +cpu > /sys/fs/cgroup/cgroup.subtree_control
for max in "max 100000" "150000 100000"; do
 for where in flat leaf; do
  g=/sys/fs/cgroup/spin$$; mkdir $g; echo "$max" > $g/cpu.max; t=$g
  if [ $where = leaf ]; then echo +cpu > $g/cgroup.subtree_control; t=$g/leaf; mkdir $t; fi
  pids=""
  for i in 1 2; do ( echo 0 > $t/cgroup.procs; while :; do :; done ) & pids="$pids $!"; done
  sleep 0.3
  u0=$(usage $g); l0=$(usage $t); t0=$(now); s0=0
  for p in $pids; do s=$(cut -d' ' -f1 /proc/$p/schedstat); s0=$((s0+s)); done
  sleep 3
  u1=$(usage $g); l1=$(usage $t); t1=$(now); s1=0
  for p in $pids; do s=$(cut -d' ' -f1 /proc/$p/schedstat); s1=$((s1+s)); done
  kill $pids; sleep 0.2
  echo "cpu.max=$max tasks=$where mono_us=$(((t1-t0)/1000)) usage_usec=$((u1-u0)) tasks_usage_usec=$((l1-l0)) sum_exec_runtime_us=$(((s1-s0)/1000)) $(grep -E 'nr_throttled|throttled_usec' $g/cpu.stat | tr '\n' ' ')"
  [ $where = leaf ] && rmdir $t; rmdir $g
 done
done
'''

# The scenario run by the controller with the scheduler's own tracepoints on:
# sched_stat_runtime (each charge update_curr makes: the thread and its delta_exec)
# and sched_switch, the trace sent back gzipped (stat.txt.gz).
STAT_SH = r'''
mount -t tracefs none /sys/kernel/tracing 2>/dev/null
T=/sys/kernel/tracing; echo mono > $T/trace_clock; echo 8192 > $T/buffer_size_kb
echo 1 > $T/events/sched/sched_stat_runtime/enable; echo 1 > $T/events/sched/sched_switch/enable
echo 1 > $T/tracing_on
/throttlelab/throttlelab-real /throttlelab/scenario.toml > /tmp/run.json || exit $?
echo 0 > $T/tracing_on
cat /tmp/run.json
echo "throttlelab-guest: file stat.txt.gz $(gzip -c $T/trace | base64 | tr -d '\n')"
'''

# The scenario run by the controller while the script polls, every 50 ms, its
# group's and its leaf's cpu.stat usage_usec and its threads' sum_exec_runtime.
POLL_SH = r'''
now() { grep -m1 "now at" /proc/timer_list | awk '{print $3}'; }
/throttlelab/throttlelab-real /throttlelab/scenario.toml > /tmp/run.json &
run=$!
until ls -d /sys/fs/cgroup/throttlelab-$run/app > /dev/null 2>&1; do sleep 0.05; done
g=/sys/fs/cgroup/throttlelab-$run/app
while kill -0 $run 2> /dev/null; do
  t=$(now); u=$(awk '/usage_usec/{print $2}' $g/cpu.stat 2> /dev/null)
  l=$(cat $g/*/cpu.stat 2> /dev/null | awk '/usage_usec/{s+=$2} END {print s}')
  x=0; for f in $(cat $g/*/cgroup.threads $g/cgroup.threads 2> /dev/null); do s=$(cut -d' ' -f1 /proc/$f/schedstat 2> /dev/null); x=$((x+${s:-0})); done
  echo "poll $t $u $l $x $(ls $g | tr '\n' ' ')"
  sleep 0.05
done
cat /tmp/run.json
'''

if __name__ == "__main__":
    if sys.argv[1] in ("clock", "limit"):
        k = vm.kernel(sys.argv[2], lambda s: print(s, file=sys.stderr))
        lines, _ = vm.script(k, CLOCK_SH if sys.argv[1] == "clock" else LIMIT_SH, 60, accel="tcg")
        print(f"# GUEST_APPEND={os.environ.get('GUEST_APPEND', '')!r}")
        print("\n".join(lines))
    elif sys.argv[1] == "poll":  # poll RELEASE SCENARIO
        from pathlib import Path

        k = vm.kernel(sys.argv[2], lambda s: print(s, file=sys.stderr))
        lines, _ = vm.script(k, POLL_SH, 60, accel="tcg", files={Path("/throttlelab/scenario.toml"): Path(sys.argv[3]).read_bytes()})
        print("\n".join(lines))
    elif sys.argv[1] == "stat":  # stat RELEASE SCENARIO OUT
        from pathlib import Path

        k = vm.kernel(sys.argv[2], lambda s: print(s, file=sys.stderr))
        files = {Path("/throttlelab/scenario.toml"): Path(sys.argv[3]).read_bytes()}
        lines, sent = vm.script(k, STAT_SH, 60, accel="tcg", files=files)
        print("\n".join(lines))
        Path(sys.argv[4]).write_bytes(sent["stat.txt.gz"])
    else:
        from throttlelab.cli import main

        sys.argv = ["throttlelab", *sys.argv[1:]]
        sys.exit(main())
