"""rel61 (docs/fidelity.md, "6.1's releases grid, traced (rel61)"): boot Debian's 6.1
under TCG and trace its wake-ups beside the scheduler's tracepoints, with
sisutil9's run script. 6.1 has no BTF arguments for kprobes (CONFIG_PROBE_EVENTS_BTF_ARGS
came with 6.6), so the probes fetch x86-64 argument registers: select_task_rq_fair's
prev_cpu (%si) and the CPU chosen, every idle_cpu() test (inside a wake-up: the CPUs
looked at, which show whether select_idle_cpu scanned), load_balance's CPU and idle
type (%di, %cx: 0 busy, 1 idle, 2 newly idle), throttle and unthrottle.

  python guest_trace.py info                  # features, domains, symbols of the guest
  python guest_trace.py trace SCENARIO OUT N  # N runs: OUT/trace-I.txt.gz, OUT/run-I.json

A traced boot takes both CPUs for a minute or two: for traces of mechanism only.
"""
import sys
from pathlib import Path

from throttlelab import vm

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "sisutil9"))
import guest_trace as sis  # noqa: E402

PROBES = [
    "wake|p:sis/wake select_task_rq_fair prev=%si:s32 flags=%dx:s32",
    "wake_ret|r:sis/wake_ret select_task_rq_fair cpu=$retval:s32",
    "idle|p:sis/idle idle_cpu cpu=%di:s32",
    "idle_ret|r:sis/idle_ret idle_cpu idle=$retval:s32",
    "lb|p:sis/lb load_balance cpu=%di:s32 idle=%cx:s32",
    "throttle|r:sis/throttle throttle_cfs_rq ok=$retval:u8",
    "unthrottle|p:sis/unthrottle unthrottle_cfs_rq",
]

if __name__ == "__main__":
    k = vm.kernel("6.1", lambda s: print(s, file=sys.stderr))
    if sys.argv[1] == "info":
        lines, _ = vm.script(k, sis.INFO_SH.replace("sched_balance_rq load_balance", "load_balance"), 120, accel="tcg")
        print("\n".join(lines))
    elif sys.argv[1] == "trace":  # trace SCENARIO OUT RUNS
        sis.trace(k, Path(sys.argv[2]), Path(sys.argv[3]), int(sys.argv[4]), PROBES, sis.TRACE_SH, 120 + 30 * int(sys.argv[4]))
