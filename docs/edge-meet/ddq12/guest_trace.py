"""ddq12 (docs/fidelity.md, "Delayed dequeue against 6.12, event by event"): boot
Debian's 6.12 under TCG and trace, with kprobes, every dequeue and enqueue of a
fair task and entity (whether `dequeue_entity` delayed it, `sched_delayed`
before and after, vruntime, deadline and vlag), the throttles and unthrottles
(with `h_nr_queued` / `h_nr_delayed`), beside sched_switch, sched_waking,
sched_wakeup and sched_migrate_task.

  python guest_trace.py trace SCENARIO OUT N   # N runs: OUT/trace-I.txt.gz, OUT/run-I.json

A traced boot takes both CPUs for a minute or two (TCG); for traces of mechanism only.
"""
import os
import sys
from pathlib import Path

from throttlelab import vm

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "sisutil9"))
import guest_trace as sis  # noqa: E402  (sisutil9's; GUEST_SMP is read there)

# Probes, `NAME|DEFINITION` (kprobe group ddq); a name whose definition the
# kernel refuses is reported and skipped. `dequeue_task_fair` and
# `enqueue_task_fair` name the task (pid, its address `p`: `&p->se` is `p` plus
# a constant, which the first dequeue_task_fair -> dequeue_entity pair gives);
# `dequeue_entity` is the one that delays (ret 0) or finishes (flags 0x200).
PROBES = [
    "dtf|p:ddq/dtf dequeue_task_fair p=p:x64 pid=p->pid:s32 cpu=rq->cpu:s32 flags=flags:x32 delayed=p->se.sched_delayed:u8",
    "dtf_ret|r:ddq/dtf_ret dequeue_task_fair pid=p->pid:s32 ret=$retval:u8 delayed=p->se.sched_delayed:u8 onrq=p->se.on_rq:u8",
    "de|p:ddq/de dequeue_entity se=se:x64 cpu=cfs_rq->rq->cpu:s32 flags=flags:x32 myq=se->my_q:x64 delayed=se->sched_delayed:u8 vr=se->vruntime:u64 dl=se->deadline:u64 w=se->load.weight:u64 nr=cfs_rq->nr_running:u32 curr=cfs_rq->curr:x64",
    "de_ret|r:ddq/de_ret dequeue_entity se=se:x64 ret=$retval:u8 delayed=se->sched_delayed:u8 vlag=se->vlag:s64",
    "etf|p:ddq/etf enqueue_task_fair p=p:x64 pid=p->pid:s32 cpu=rq->cpu:s32 flags=flags:x32 delayed=p->se.sched_delayed:u8 onrq=p->se.on_rq:u8 vr=p->se.vruntime:u64 vlag=p->se.vlag:s64",
    "etf_ret|r:ddq/etf_ret enqueue_task_fair pid=p->pid:s32 delayed=p->se.sched_delayed:u8 vr=p->se.vruntime:u64 dl=p->se.deadline:u64 vlag=p->se.vlag:s64",
    "throttle|r:ddq/throttle throttle_cfs_rq cpu=cfs_rq->rq->cpu:s32 ok=$retval:u8 nq=cfs_rq->h_nr_queued:u32 nd=cfs_rq->h_nr_delayed:u32 nr=cfs_rq->nr_running:u32",
    "unthrottle|p:ddq/unthrottle unthrottle_cfs_rq cpu=cfs_rq->rq->cpu:s32 nq=cfs_rq->h_nr_queued:u32 nd=cfs_rq->h_nr_delayed:u32 nr=cfs_rq->nr_running:u32",
    # Each pick and put of an entity (not in the default set: DDQ12_PROBES=...,sne,ppe).
    "sne|p:ddq/sne set_next_entity se=se:x64 cpu=cfs_rq->rq->cpu:s32 myq=se->my_q:x64 vr=se->vruntime:u64 dl=se->deadline:u64 nr=cfs_rq->nr_running:u32",
    "ppe|p:ddq/ppe put_prev_entity se=prev:x64 cpu=cfs_rq->rq->cpu:s32 myq=prev->my_q:x64 onrq=prev->on_rq:u8 vr=prev->vruntime:u64 dl=prev->deadline:u64 nr=cfs_rq->nr_running:u32",
    "str|p:ddq/str select_task_rq_fair pid=p->pid:s32 prev=prev_cpu:s32 flags=wake_flags:s32",
    "str_ret|r:ddq/str_ret select_task_rq_fair pid=p->pid:s32 cpu=$retval:s32",
]

# sisutil9's run script, with this probe group, the kprobe's error said, and
# $EXTRA_EVENTS traced besides.
TRACE_SH = (sis.TRACE_SH.replace("events/sis/", "events/ddq/")
            .replace('2> /dev/null; then', '2> /tmp/err; then')
            .replace('echo "# no probe $def"', 'echo "# no probe $def: $(cat /tmp/err)"')
            .replace("for e in sched_switch sched_waking sched_wakeup sched_wakeup_new sched_migrate_task; do "
                     "echo 1 > $T/events/sched/$e/enable; done",
                     "for e in sched/sched_switch sched/sched_waking sched/sched_wakeup sched/sched_wakeup_new "
                     "sched/sched_migrate_task $EXTRA_EVENTS; do echo 1 > $T/events/$e/enable; done"))
assert "events/ddq/" in TRACE_SH and "/tmp/err)" in TRACE_SH and "$EXTRA_EVENTS" in TRACE_SH, "sisutil9's script changed"


def wanted(probe: str) -> bool:
    names = os.environ.get("DDQ12_PROBES")
    name = probe.split("|")[0]
    return name not in ("sne", "ppe") if names is None else name in names.split(",")


if __name__ == "__main__":
    k = vm.kernel("6.12", lambda s: print(s, file=sys.stderr))
    if sys.argv[1] == "trace":  # trace SCENARIO OUT RUNS
        runs = int(sys.argv[4])
        # DDQ12_PROBES="dtf,de_ret": only those (empty: the tracepoints alone);
        # DDQ12_EVENTS: more tracepoints (e.g. timer/hrtimer_expire_entry).
        extra = os.environ.get("DDQ12_EVENTS", "")
        sis.trace(k, Path(sys.argv[2]), Path(sys.argv[3]), runs, [p for p in PROBES if wanted(p)], TRACE_SH,
                  180 + 60 * runs, env=f"EXTRA_EVENTS='{extra}'")
