"""sisutil9 (docs/fidelity.md, "SIS_UTIL's hint, traced in a 6.12 guest"): boot
Debian's 6.12 under TCG and trace, with kprobes, who writes SIS_UTIL's hint
(`sd_llc_shared->nr_idle_scan`, read through the LLC domain's `sd->shared`),
when, with what value, and every wake-up's `select_task_rq_fair` (the CPUs
`idle_cpu` was asked about in it, which show whether `select_idle_cpu`
scanned), beside the scheduler's tracepoints.

  python guest_trace.py info                 # the guest's topology, sched domains, symbols
  python guest_trace.py trace SCENARIO OUT N # N runs of SCENARIO traced: OUT/trace-I.txt.gz, OUT/run-I.json

GUEST_SMP (e.g. "2,sockets=1,cores=2") replaces QEMU's `-smp 2`.
A traced boot uses both CPUs for about a minute: run it under tl-measure.
"""
import gzip
import os
import sys
from pathlib import Path

from throttlelab import vm

_qemu_command = vm.qemu_command


def qemu_command(*a, **kw):
    cmd = _qemu_command(*a, **kw)
    smp = os.environ.get("GUEST_SMP")
    if smp:
        cmd[cmd.index("-smp") + 1] = smp
    return cmd


vm.qemu_command = qemu_command

# What the kernel sees of the machine: the LLC (cache index3), the sched
# domains (debugfs: name, flags, imbalance_pct, intervals, busy_factor), the
# sched features, and which functions the compiler kept as symbols.
INFO_SH = r'''
mount -t debugfs none /sys/kernel/debug 2>/dev/null
for c in 0 1; do
  echo "cpu$c llc=$(cat /sys/devices/system/cpu/cpu$c/cache/index3/shared_cpu_list 2>/dev/null) pkg=$(cat /sys/devices/system/cpu/cpu$c/topology/physical_package_id) core=$(cat /sys/devices/system/cpu/cpu$c/topology/core_id) core_cpus=$(cat /sys/devices/system/cpu/cpu$c/topology/core_cpus_list)"
  for d in /sys/kernel/debug/sched/domains/cpu$c/domain*; do
    echo "  $d: $(for f in name flags imbalance_pct min_interval max_interval busy_factor; do printf '%s=%s ' $f "$(cat $d/$f 2>/dev/null)"; done)"
  done
done
grep -m1 'model name' /proc/cpuinfo; grep -m1 vendor_id /proc/cpuinfo
echo "features: $(cat /sys/kernel/debug/sched/features)"
for s in select_task_rq_fair select_idle_sibling select_idle_cpu select_idle_core idle_cpu available_idle_cpu \
  update_idle_cpu_scan update_sd_lb_stats update_sg_lb_stats sched_balance_find_src_group find_busiest_group \
  sched_balance_rq load_balance sched_balance_domains rebalance_domains sched_balance_newidle newidle_balance \
  _nohz_idle_balance nohz_idle_balance nohz_balancer_kick kick_ilb sched_balance_softirq sched_balance_trigger \
  should_we_balance wake_affine; do
  grep -q " [tT] $s$" /proc/kallsyms && echo "symbol $s" || echo "no symbol $s"
done
'''

# Probes, each `NAME|DEFINITION` (kprobe group sis); the first definition a
# name's kernel takes is kept. sd->shared is the LLC domain's
# sched_domain_shared (sd_init), the one select_idle_cpu reads per CPU.
PROBES = [
    # A balance of a domain: who (cpu, idle type: 0 busy, 1 idle, 2 newly idle), the
    # domain's span, the hint before; at return the hint after and balance_interval.
    "lb|p:sis/lb sched_balance_rq cpu=this_cpu:s32 idle=idle:s32 w=sd->span_weight:u32 scan=sd->shared->nr_idle_scan:s32",
    "lb_ret|r:sis/lb_ret sched_balance_rq cpu=this_cpu:s32 idle=idle:s32 w=sd->span_weight:u32 scan=sd->shared->nr_idle_scan:s32 bi=sd->balance_interval:u32 moved=$retval:s32",
    # The wake-up: the task, its previous CPU, its recent_used_cpu before and after
    # (select_idle_sibling sets it to prev once past the idle target/prev checks).
    "wake|p:sis/wake select_task_rq_fair pid=p->pid:s32 prev=prev_cpu:s32 flags=wake_flags:s32 recent=p->recent_used_cpu:s32",
    "wake_ret|r:sis/wake_ret select_task_rq_fair pid=p->pid:s32 recent=p->recent_used_cpu:s32 cpu=$retval:s32",
    "sis|p:sis/sis select_idle_sibling pid=p->pid:s32 prev=prev:s32 target=target:s32",
    "sis_ret|r:sis/sis_ret select_idle_sibling pid=p->pid:s32 cpu=$retval:s32",
    "sic|p:sis/sic select_idle_cpu pid=p->pid:s32 target=target:s32 scan=sd->shared->nr_idle_scan:s32",
    "sic_ret|r:sis/sic_ret select_idle_cpu pid=p->pid:s32 cpu=$retval:s32",
    # Every idle test (available_idle_cpu calls it): inside a wake-up, the CPUs looked at.
    "idle|p:sis/idle idle_cpu cpu=cpu:s32",
    "idle_ret|r:sis/idle_ret idle_cpu cpu=cpu:s32 idle=$retval:s32",
    "kick|p:sis/kick kick_ilb flags=flags:u32",
    "nohz|p:sis/nohz _nohz_idle_balance cpu=this_rq->cpu:s32 flags=flags:u32",
    "throttle|r:sis/throttle throttle_cfs_rq cpu=cfs_rq->rq->cpu:s32 ok=$retval:u8",
    "unthrottle|p:sis/unthrottle unthrottle_cfs_rq cpu=cfs_rq->rq->cpu:s32",
]

TRACE_SH = r'''
mount -t debugfs none /sys/kernel/debug 2>/dev/null
mount -t tracefs none /sys/kernel/tracing 2>/dev/null
T=/sys/kernel/tracing
echo "features: $(cat /sys/kernel/debug/sched/features)"
for d in /sys/kernel/debug/sched/domains/cpu0/domain*; do echo "$d: $(cat $d/name) $(cat $d/flags)"; done
echo mono > $T/trace_clock; echo 16384 > $T/buffer_size_kb
while IFS='|' read name def; do
  [ -z "$name" ] && continue
  if echo "$def" >> $T/kprobe_events 2> /dev/null; then echo "# probe $def"; echo 1 > $T/events/sis/$name/enable
  else echo "# no probe $def"; fi
done < /throttlelab/probes
for e in sched_switch sched_waking sched_wakeup sched_wakeup_new sched_migrate_task; do echo 1 > $T/events/sched/$e/enable; done
i=1
while [ $i -le $RUNS ]; do
  echo > $T/trace
  echo 1 > $T/tracing_on
  /throttlelab/throttlelab-real /throttlelab/scenario.toml --set seed=$i > /tmp/run.json || exit $?
  echo 0 > $T/tracing_on
  echo "run $i: $(grep -h overrun $T/per_cpu/cpu*/stats | tr '\n' ' ')"
  echo "throttlelab-guest: file run-$i.json $(base64 /tmp/run.json | tr -d '\n')"
  echo "throttlelab-guest: file trace-$i.txt.gz $(gzip -c $T/trace | base64 | tr -d '\n')"
  i=$((i+1))
done
'''

def trace(k, scenario: Path, out: Path, runs: int, probes: list[str], trace_sh: str, limit_s: float, env: str = "") -> None:
    """Boot `k` once and run `trace_sh` for `runs` runs of `scenario` with
    `probes` (and `env`, more exports): the guest's lines printed and kept in
    OUT/guest.txt, the files it sent in OUT."""
    out.mkdir(parents=True, exist_ok=True)
    files = {
        Path("/throttlelab/scenario.toml"): scenario.read_bytes(),
        Path("/throttlelab/probes"): "".join(p + "\n" for p in probes).encode(),
    }
    sh = f"export RUNS={runs} THROTTLELAB_START_DELAY_MS=500 THROTTLELAB_TICK_LATENCY=0 {env}\n" + trace_sh
    lines, sent = vm.script(k, sh, limit_s, accel="tcg", files=files)
    print("\n".join(lines))
    (out / "guest.txt").write_text("\n".join(lines) + "\n")
    for name, data in sent.items():
        (out / name).write_bytes(data)


if __name__ == "__main__":
    k = vm.kernel("6.12", lambda s: print(s, file=sys.stderr))
    if sys.argv[1] == "info":
        lines, _ = vm.script(k, INFO_SH, 120, accel="tcg")
        print(f"# GUEST_SMP={os.environ.get('GUEST_SMP', '')!r}")
        print("\n".join(lines))
    elif sys.argv[1] == "trace":  # trace SCENARIO OUT RUNS
        print(f"# GUEST_SMP={os.environ.get('GUEST_SMP', '')!r}")
        trace(k, Path(sys.argv[2]), Path(sys.argv[3]), int(sys.argv[4]), PROBES, TRACE_SH, 120 + 30 * int(sys.argv[4]))
