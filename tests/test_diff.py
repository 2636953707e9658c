"""``throttlelab diff``: the kernel's bandwidth events against the simulator's,
period by period. The alignment and first-divergence logic on hand-worked
streams; the kernel's trace texts as tracefs prints them (the host's
tracepoints, a guest's kprobes); then diff itself on the host (root) and on
Debian's 6.12 in QEMU (root, QEMU)."""

from __future__ import annotations

import json
import re

from helpers import cli
from test_real import needs_real
from test_vm import needs_vm
from throttlelab import diff, vm
from throttlelab.diff import Event, Stream

MS = 1_000_000
PERIOD = 20 * MS
KINDS = diff.KINDS


def stream(*events: Event, kinds: tuple[str, ...] = KINDS) -> Stream:
    return Stream(sorted(events, key=lambda e: e.t_ns), kinds)


def periods(*starts_ms: float) -> list[Event]:
    return [Event(round(t * MS), "refill", None, 40 * MS) for t in starts_ms]


# A hand-worked case: 20 ms periods from 5 ms on, 2 CPUs, two spinners under
# 40 ms of quota. Both sides grant a 5 ms slice on each CPU at the first
# tick of each period and again 5 ms later; in the period from 45 ms the
# kernel's CPU 1 runs out 16.2 ms in and is throttled until the next refill,
# where the simulator's CPU 1 got its last slice in time.
def spinners(throttled_cpu1_in_period_3: bool, shift_us: float = 0.0) -> Stream:
    events = periods(5, 25, 45, 65)
    for start in (5, 25, 45, 65):
        for cpu in (0, 1):
            for k in range(4):
                events.append(Event(round((start + 0.1 + 5 * k) * MS + shift_us * 1e3), "assign", cpu, 5 * MS))
    if throttled_cpu1_in_period_3:
        events.append(Event(round(61.2 * MS), "throttle", 1))
        events.append(Event(round(65.01 * MS), "unthrottle", 1))
        events.append(Event(round(65.0 * MS), "distribute", None, 2 * MS))
    return stream(*events)


def test_identical_streams_do_not_diverge_and_every_period_is_alike():
    first, alike = diff.first_divergence(spinners(False), spinners(False), PERIOD)
    assert first is None
    # Periods 0 (before the first refill) to 4.
    assert alike["assign"] == [5, 5] and alike["throttle"] == [5, 5]


def test_the_first_divergence_is_the_throttle_only_the_kernel_has():
    first, alike = diff.first_divergence(spinners(True), spinners(False), PERIOD)
    assert first is not None
    # Period 3 starts at the third refill (45 ms); the throttle is 16.2 ms in.
    assert (first.period, first.kind, first.cpu) == (3, "throttle", 1)
    assert first.why == "1 throttle in the kernel, 0 in the simulator"
    assert (first.kernel_start_ns, first.sim_start_ns) == (45 * MS, 45 * MS)
    # Both sides' events of the period before and of this one.
    assert [e for e in first.kernel if e.kind == "throttle"] == [Event(round(61.2 * MS), "throttle", 1)]
    assert min(e.t_ns for e in first.kernel) == 25 * MS and max(e.t_ns for e in first.kernel) < 65 * MS
    # The unthrottle at 65.01 ms belongs to the next period, which differs too.
    assert alike["throttle"] == [4, 5] and alike["unthrottle"] == [4, 5] and alike["distribute"] == [4, 5]


def test_times_are_held_within_the_tolerance_from_each_sides_period_start():
    late = spinners(False, shift_us=200)
    assert diff.first_divergence(spinners(False), late, PERIOD, tolerance_us=250)[0] is None
    first, _ = diff.first_divergence(spinners(False), late, PERIOD, tolerance_us=150)
    assert first is not None and (first.period, first.kind, first.cpu) == (1, "assign", 0)
    assert first.why == "assign at +0.100 ms in the kernel, +0.300 ms in the simulator"
    # A period that starts late carries its events with it: alike.
    shifted = stream(*[Event(e.t_ns + 100_000, e.kind, e.cpu, e.amount_ns) if e.t_ns >= 25 * MS else e
                       for e in spinners(False).events])
    first, _ = diff.first_divergence(spinners(False), shifted, PERIOD, tolerance_us=150)
    assert first is None
    first, _ = diff.first_divergence(spinners(False), shifted, PERIOD, tolerance_us=50)
    assert first is not None and (first.period, first.kind) == (2, "refill")
    assert first.why == "the period starts -0.100 ms apart (kernel - simulator)"


def test_amounts_and_missing_periods_diverge():
    small = stream(*[Event(e.t_ns, e.kind, e.cpu, 4 * MS if e.kind == "assign" and e.t_ns > 60 * MS else e.amount_ns)
                     for e in spinners(False).events])
    first, _ = diff.first_divergence(spinners(False), small, PERIOD)
    assert first is not None and (first.period, first.kind, first.cpu) == (3, "assign", 0)
    assert first.why == "assign of 5,000.0 us in the kernel, 4,000.0 us in the simulator"
    # The simulator's timer missing its expiry at 45 ms (the kernel's late
    # past a period, the other way round): that period is the divergence,
    # and the next pair up again.
    skipped = stream(*[e for e in spinners(False).events if not (e.kind == "refill" and e.t_ns == 45 * MS)])
    first, alike = diff.first_divergence(spinners(False), skipped, PERIOD)
    assert first is not None and (first.period, first.kind) == (3, "refill")
    assert first.why == "a refill only the kernel has, at 45.000 ms (none in the simulator within half a period)"
    assert alike["refill"] == [4, 4], "periods 0, 1, 2 and 4 paired"
    # The kernel's timer runs on after the run's end (its workers gone): the
    # periods that start after it are not compared.
    shorter = stream(*[e for e in spinners(False).events if e.t_ns < 65 * MS])
    assert diff.first_divergence(spinners(False), shorter, PERIOD)[0].why.startswith("a refill only the kernel has, at 65.000 ms")
    assert diff.first_divergence(spinners(False), shorter, PERIOD, until_ns=60 * MS)[0] is None


def test_a_kind_one_side_cannot_see_is_not_compared():
    # The host's tracepoints see no grants: a kernel stream without them is
    # not a divergence from a simulator that has them.
    no_grants = stream(*[e for e in spinners(False).events if e.kind != "assign"],
                       kinds=("refill", "slack_timer", "throttle", "unthrottle"))
    first, alike = diff.first_divergence(no_grants, spinners(False), PERIOD)
    assert first is None and "assign" not in alike


HOST_TRACE = """\
# throttlelab bandwidth trace
# no probes: /sys/kernel/tracing/kprobe_events does not exist (no CONFIG_KPROBE_EVENTS)
# tracer: nop
#
 throttlelab-rea-900     [000] d..2.   100.000100: hrtimer_start: hrtimer=00000000aaaa function=sched_cfs_period_timer expires=100005000000 softexpires=100005000000 mode=ABS|PINNED
          <idle>-0       [001] d.h2.   100.001000: hrtimer_expire_entry: hrtimer=00000000bbbb function=sched_cfs_period_timer now=100001000000
          <idle>-0       [000] d.h1.   100.003990: hrtimer_start: hrtimer=00000000cccc function=tick_nohz_handler expires=100003990000 softexpires=100003990000 mode=ABS|PINNED|HARD
 throttlelab-wor-904     [000] d.h1.   100.004000: hrtimer_expire_entry: hrtimer=00000000cccc function=tick_nohz_handler now=100004007000
          <idle>-0       [001] d.h1.   100.003990: hrtimer_start: hrtimer=00000000eeee function=tick_nohz_handler expires=100003990000 softexpires=100003990000 mode=ABS|PINNED|HARD
          <idle>-0       [001] d.h1.   100.009000: hrtimer_expire_entry: hrtimer=00000000eeee function=tick_nohz_handler now=100009000000
          <idle>-0       [000] d.h2.   100.005002: hrtimer_expire_entry: hrtimer=00000000aaaa function=sched_cfs_period_timer now=100005002000
          <idle>-0       [000] d.h2.   100.005010: hrtimer_start: hrtimer=00000000aaaa function=sched_cfs_period_timer expires=100025000000 softexpires=100025000000 mode=ABS|PINNED
 throttlelab-wor-901     [001] d..2.   100.021200: sched_switch: prev_comm=throttlelab-wor prev_pid=901 prev_prio=120 prev_state=R ==> next_comm=swapper/1 next_pid=0 next_prio=120
 throttlelab-wor-902     [001] d..2.   100.021300: sched_switch: prev_comm=throttlelab-wor prev_pid=902 prev_prio=120 prev_state=R+ ==> next_comm=swapper/1 next_pid=0 next_prio=120
 throttlelab-wor-903     [000] d..2.   100.022000: sched_switch: prev_comm=throttlelab-wor prev_pid=903 prev_prio=120 prev_state=S ==> next_comm=swapper/0 next_pid=0 next_prio=120
 throttlelab-wor-904     [000] d..2.   100.023000: sched_switch: prev_comm=throttlelab-wor prev_pid=904 prev_prio=120 prev_state=R+ ==> next_comm=kworker/0:1 next_pid=77 next_prio=120
     kworker/0:1-77      [000] d..2.   100.023500: sched_switch: prev_comm=kworker/0:1 prev_pid=77 prev_prio=120 prev_state=I ==> next_comm=throttlelab-wor next_pid=904 next_prio=120
 throttlelab-wor-903     [001] d.h2.   100.023900: hrtimer_start: hrtimer=00000000ffff function=sched_cfs_period_timer expires=100030000000 softexpires=100030000000 mode=ABS|PINNED
 throttlelab-rea-900     [000] d..2.   100.024000: hrtimer_start: hrtimer=00000000dddd function=sched_cfs_slack_timer expires=100029000000 softexpires=100029000000 mode=REL
          <idle>-0       [000] d.h2.   100.025001: hrtimer_expire_entry: hrtimer=00000000aaaa function=sched_cfs_period_timer now=100025001000
             pip-700     [001] d..2.   100.025050: sched_switch: prev_comm=pip prev_pid=700 prev_prio=130 prev_state=R ==> next_comm=throttlelab-wor next_pid=902 next_prio=120
 throttlelab-wor-902     [001] d..2.   100.025100: sched_switch: prev_comm=throttlelab-wor prev_pid=902 prev_prio=120 prev_state=R ==> next_comm=throttlelab-wor next_pid=901 next_prio=120
          <idle>-0       [001] d.h2.   100.029001: hrtimer_expire_entry: hrtimer=00000000dddd function=sched_cfs_slack_timer now=100029001000
 throttlelab-wor-903     [001] d.h2.   100.030001: hrtimer_expire_entry: hrtimer=00000000ffff function=sched_cfs_period_timer now=100030001000
          <idle>-0       [000] d.h2.   100.045001: hrtimer_expire_entry: hrtimer=00000000aaaa function=sched_cfs_period_timer now=100045001000
"""


def test_the_hosts_tracepoints_give_timers_and_throttling_seen_from_switches():
    s = diff.kernel_stream(HOST_TRACE, start_ns=100_000_000_000, end_ns=100_040_000_000, period_ns=PERIOD)
    assert s.overruns == 0
    assert s.kinds == ("refill", "throttle", "unthrottle", "slack_timer")
    # Ours: the period timer our controller armed (not another group's, bbbb,
    # nor ffff, armed by an interrupt while a worker was current);
    # the expiry at 45 ms is past the run's end. Two threads off CPU 1
    # runnable until after the refill at 25 ms are one throttle, from the
    # first that left to the first back (the second back is the same one);
    # one asleep (S), and one preempted by a kworker and back before any
    # expiry, are not.
    assert s.events == [
        Event(5_002_000, "refill"), Event(21_200_000, "throttle", 1), Event(25_001_000, "refill"),
        Event(25_050_000, "unthrottle", 1), Event(29_001_000, "slack_timer"),
    ]
    assert "throttle and unthrottle seen from sched_switch" in s.notes[-1]
    # The tick that interrupted a worker was 17 us late; an idle CPU's waking late is not counted.
    assert diff.tick_latency_us(diff.worker_ticks(HOST_TRACE)) == 17.0


def test_a_pid_the_comm_cache_lost_or_kept_stale_is_named_by_the_events_fields():
    # A busy host evicts our processes from saved_cmdlines: their lines read
    # "<...>-PID", or the comm a pid had before its exec, "python-PID" (hold 1
    # of docs/edge-cases: every expiry of the group's timer was lost, "a
    # refill only the simulator has"). The switches name the pids.
    lost = re.sub(r"^ throttlelab-wor-", "           <...>-", HOST_TRACE, flags=re.M)
    lost = re.sub(r"^ throttlelab-rea-", "          python-", lost, flags=re.M)
    assert "throttlelab-rea-900" not in lost
    named = lost.replace("# tracer: nop\n", "# tracer: nop\n          <idle>-0       [000] d..2.    99.999000: sched_switch: "
                         "prev_comm=swapper/0 prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=throttlelab-rea next_pid=900 next_prio=120\n")
    whole = diff.kernel_stream(HOST_TRACE, start_ns=100_000_000_000, end_ns=100_040_000_000, period_ns=PERIOD)
    s = diff.kernel_stream(named, start_ns=100_000_000_000, end_ns=100_040_000_000, period_ns=PERIOD)
    assert s.events == whole.events and Event(5_002_000, "refill") in s.events
    assert diff.tick_latency_us(diff.worker_ticks(named)) == 17.0
    # Nothing names the controller: its timers are not ours.
    assert "refill" not in [e.kind for e in diff.kernel_stream(lost, start_ns=100_000_000_000, end_ns=100_040_000_000, period_ns=PERIOD).events]


# HOST_TRACE's timers as a busy host printed them: tracefs' cache of pids'
# names had lost the controller's (another process's name on its pid) and a
# worker's ("<...>"); the sched_switch lines before name them.
STALE_NAMES_TRACE = """\
 default-executo-900     [000] d..2.   100.000050: sched_switch: prev_comm=throttlelab-rea prev_pid=900 prev_prio=120 prev_state=S ==> next_comm=throttlelab-wor next_pid=904 next_prio=120
 default-executo-900     [000] d..2.   100.000100: hrtimer_start: hrtimer=00000000aaaa function=sched_cfs_period_timer expires=100005000000 softexpires=100005000000 mode=ABS|PINNED
          <idle>-0       [000] d.h1.   100.003990: hrtimer_start: hrtimer=00000000cccc function=tick_nohz_handler expires=100003990000 softexpires=100003990000 mode=ABS|PINNED|HARD
           <...>-904     [000] d.h1.   100.004000: hrtimer_expire_entry: hrtimer=00000000cccc function=tick_nohz_handler now=100004007000
          <idle>-0       [000] d.h2.   100.005002: hrtimer_expire_entry: hrtimer=00000000aaaa function=sched_cfs_period_timer now=100005002000
"""


def test_a_pid_is_named_by_its_sched_switch_not_by_tracefs_cache_of_names():
    s = diff.kernel_stream(STALE_NAMES_TRACE, start_ns=100_000_000_000, end_ns=100_040_000_000, period_ns=PERIOD)
    assert [e for e in s.events if e.kind == "refill"] == [Event(5_002_000, "refill")]
    assert diff.tick_latency_us(diff.worker_ticks(STALE_NAMES_TRACE)) == 17.0


OVERRUN_TRACE = """\
 throttlelab-rea-900     [000] d..2.   100.000100: hrtimer_start: hrtimer=00000000aaaa function=sched_cfs_period_timer expires=100010000000 softexpires=100010000000 mode=ABS|PINNED
          <idle>-0       [000] d.h2.   100.010001: hrtimer_expire_entry: hrtimer=00000000aaaa function=sched_cfs_period_timer now=100010001000
          <idle>-0       [000] d.h2.   100.010005: hrtimer_expire_exit: hrtimer=00000000aaaa
          <idle>-0       [000] d.h2.   100.010006: hrtimer_start: hrtimer=00000000aaaa function=sched_cfs_period_timer expires=100020000000 softexpires=100020000000 mode=ABS
          <idle>-0       [000] d.h2.   100.035000: hrtimer_expire_entry: hrtimer=00000000aaaa function=sched_cfs_period_timer now=100035000000
          <idle>-0       [000] d.h2.   100.035004: hrtimer_expire_exit: hrtimer=00000000aaaa
          <idle>-0       [000] d.h2.   100.035005: hrtimer_start: hrtimer=00000000aaaa function=sched_cfs_period_timer expires=100040000000 softexpires=100040000000 mode=ABS
          <idle>-0       [000] d.h2.   100.040001: hrtimer_expire_entry: hrtimer=00000000aaaa function=sched_cfs_period_timer now=100040001000
          <idle>-0       [000] d.h2.   100.040003: hrtimer_expire_exit: hrtimer=00000000aaaa
 throttlelab-wor-901     [001] d.h2.   100.080000: hrtimer_start: hrtimer=00000000aaaa function=sched_cfs_period_timer expires=100090000000 softexpires=100090000000 mode=ABS|PINNED
"""


def test_a_timer_late_past_a_period_counts_its_overrun_and_a_restart_after_idle_none():
    """Expiries at 10 and 35 ms of a 10 ms period timer: the one 15 ms late
    covered the periods to 30 and 40 ms (its re-arm, right after its
    expire_exit, moved the expiry by two); at 40 ms the group was idle and
    the timer stopped (no re-arm), and its restart at 80 ms counts nothing."""
    s = diff.kernel_stream(OVERRUN_TRACE, start_ns=100_000_000_000, end_ns=100_100_000_000, period_ns=10 * MS)
    assert [e.t_ns for e in s.events if e.kind == "refill"] == [10_001_000, 35_000_000, 40_001_000]
    assert s.overruns == 1


GUEST_TRACE = """\
# throttlelab bandwidth trace
# probe assign: p __assign_cfs_rq_runtime cpu=cfs_rq->rq->cpu:s32 rr=cfs_rq->runtime_remaining:s64 pool=cfs_b->runtime:u64 target=target_runtime:u64
# probe assign_ret: r __assign_cfs_rq_runtime cpu=cfs_rq->rq->cpu:s32 rr=cfs_rq->runtime_remaining:s64 pool=cfs_b->runtime:u64 ok=$retval:s32
# probe return: p __return_cfs_rq_runtime cpu=cfs_rq->rq->cpu:s32 rr=cfs_rq->runtime_remaining:s64 pool=cfs_rq->tg->cfs_bandwidth.runtime:u64
# probe throttle: r throttle_cfs_rq cpu=cfs_rq->rq->cpu:s32 rr=cfs_rq->runtime_remaining:s64 ok=$retval:u8
# probe unthrottle: p unthrottle_cfs_rq cpu=cfs_rq->rq->cpu:s32 rr=cfs_rq->runtime_remaining:s64
# probe refill: r __refill_cfs_bandwidth_runtime pool=cfs_b->runtime:u64
# probe distribute: p distribute_cfs_runtime pool=cfs_b->runtime:u64
# probe distribute_ret: r distribute_cfs_runtime pool=cfs_b->runtime:u64 throttled=$retval:u8
# no probe period: do_sched_cfs_period_timer overrun=overrun:s32: No such file or directory
# tracer: nop
#
 throttlelab-wor-50      [000] d..3.    10.000500: assign: (__assign_cfs_rq_runtime+0x0/0x90) cpu=0 rr=-120000 pool=40000000 target=5000000
 throttlelab-wor-50      [000] d..3.    10.000501: assign_ret: (__account_cfs_rq_runtime+0x55/0x60 <- __assign_cfs_rq_runtime) cpu=0 rr=5000000 pool=34880000 ok=1
 throttlelab-wor-51      [001] d..3.    10.001000: return: (__return_cfs_rq_runtime+0x0/0x80) cpu=1 rr=3500000 pool=34880000
 throttlelab-wor-51      [001] d..3.    10.001100: return: (__return_cfs_rq_runtime+0x0/0x80) cpu=1 rr=800000 pool=37380000
 throttlelab-wor-50      [000] d..3.    10.002000: throttle: (check_cfs_rq_runtime+0x30/0x40 <- throttle_cfs_rq) cpu=0 rr=-3000 ok=1
 throttlelab-wor-50      [000] d..3.    10.002100: throttle: (check_cfs_rq_runtime+0x30/0x40 <- throttle_cfs_rq) cpu=0 rr=2000 ok=0
 throttlelab-rea-49      [001] d..1.     9.000000: hrtimer_start: hrtimer=00000000aaaa function=sched_cfs_period_timer expires=9005000000 softexpires=9005000000 mode=ABS|PINNED
          <idle>-0       [001] d.h2.    10.005000: hrtimer_expire_entry: hrtimer=00000000aaaa function=sched_cfs_period_timer now=10005000000
          <idle>-0       [001] d.h2.    10.005001: distribute: (distribute_cfs_runtime+0x0/0x300) pool=40000000
          <idle>-0       [000] d.h2.    10.005020: unthrottle: (unthrottle_cfs_rq+0x0/0x300) cpu=0 rr=3001
          <idle>-0       [001] d.h2.    10.005030: distribute_ret: (sched_cfs_period_timer+0x90/0x200 <- distribute_cfs_runtime) pool=39994000 throttled=0
"""


def test_a_guests_kprobes_give_grants_returns_and_distribution():
    s = diff.kernel_stream(GUEST_TRACE, start_ns=10_000_000_000, end_ns=11_000_000_000)
    assert s.kinds == KINDS
    assert s.events == [
        # The grant is what runtime_remaining gained: 5 ms + the 120 us of debt.
        Event(500_000 + 1_000, "assign", 0, 5_120_000),
        # All but min_cfs_rq_runtime (1 ms) goes back; 0.8 ms keeps it all.
        Event(1_000_000, "return", 1, 2_500_000),
        # throttle_cfs_rq returned false the second time: runtime turned up.
        Event(2_000_000, "throttle", 0),
        # The period timer's expiry (its refill is inlined in it).
        Event(5_000_000, "refill"),
        Event(5_020_000, "unthrottle", 0),
        Event(5_030_000, "distribute", None, 6_000),
    ]
    assert s.notes == ["no probe period: do_sched_cfs_period_timer overrun=overrun:s32: No such file or directory"]


INLINED_TRACE = """\
# throttlelab bandwidth trace
# symbols: __account_cfs_rq_runtime throttle_cfs_rq unthrottle_cfs_rq __refill_cfs_bandwidth_runtime
# no probe return: __return_cfs_rq_runtime cpu=cfs_rq->rq->cpu:s32 rr=cfs_rq->runtime_remaining:s64: Invalid argument (os error 22)
# probe assign: p __account_cfs_rq_runtime cpu=cfs_rq->rq->cpu:s32 rr=cfs_rq->runtime_remaining:s64 delta=delta_exec:u64 thr=cfs_rq->throttled:s32
# probe assign_ret: r __account_cfs_rq_runtime cpu=cfs_rq->rq->cpu:s32 rr=cfs_rq->runtime_remaining:s64
# probe throttle_entry: p throttle_cfs_rq cpu=cfs_rq->rq->cpu:s32 rr=cfs_rq->runtime_remaining:s64
# probe throttle: r throttle_cfs_rq cpu=cfs_rq->rq->cpu:s32 rr=cfs_rq->runtime_remaining:s64 ok=$retval:u8
# probe unthrottle: p unthrottle_cfs_rq cpu=cfs_rq->rq->cpu:s32 rr=cfs_rq->runtime_remaining:s64
# probe refill: r __refill_cfs_bandwidth_runtime pool=cfs_b->runtime:u64
 throttlelab-wor-50      [000] d..3.    10.000100: assign: (__account_cfs_rq_runtime+0x0/0x90) cpu=0 rr=3000000 delta=1000000 thr=0
 throttlelab-wor-50      [000] d..3.    10.000101: assign_ret: (update_curr+0x1a0/0x200 <- __account_cfs_rq_runtime) cpu=0 rr=2000000
 throttlelab-wor-50      [000] d.h3.    10.004100: assign: (__account_cfs_rq_runtime+0x0/0x90) cpu=0 rr=2000000 delta=2100000 thr=0
 throttlelab-wor-50      [000] d.h3.    10.004101: assign_ret: (update_curr+0x1a0/0x200 <- __account_cfs_rq_runtime) cpu=0 rr=5000000
 throttlelab-wor-50      [000] d..3.    10.005000: assign: (__account_cfs_rq_runtime+0x0/0x90) cpu=0 rr=5000000 delta=1500000 thr=0
 throttlelab-wor-50      [000] d..3.    10.005001: assign_ret: (update_curr+0x1a0/0x200 <- __account_cfs_rq_runtime) cpu=0 rr=3500000
 throttlelab-rea-49      [001] d..1.    10.008000: refill: (tg_set_cfs_bandwidth+0x3eb/0x450 <- __refill_cfs_bandwidth_runtime) pool=40000000
 throttlelab-wor-50      [000] d..3.    10.009000: assign: (__account_cfs_rq_runtime+0x0/0x90) cpu=0 rr=1000000 delta=1200000 thr=0
 throttlelab-wor-50      [000] d..3.    10.009001: assign_ret: (update_curr+0x1a0/0x200 <- __account_cfs_rq_runtime) cpu=0 rr=-200000
 throttlelab-wor-50      [000] d..3.    10.009002: throttle_entry: (throttle_cfs_rq+0x0/0x300) cpu=0 rr=-200000
 throttlelab-wor-50      [000] d..3.    10.009003: throttle: (check_cfs_rq_runtime+0x30/0x40 <- throttle_cfs_rq) cpu=0 rr=-200000 ok=1
 throttlelab-wor-50      [000] d.h3.    10.009500: assign: (__account_cfs_rq_runtime+0x0/0x90) cpu=0 rr=-200000 delta=100000 thr=1
 throttlelab-wor-50      [000] d.h3.    10.009501: assign_ret: (update_curr+0x1a0/0x200 <- __account_cfs_rq_runtime) cpu=0 rr=-300000
          <idle>-0       [000] d.h2.    10.010010: unthrottle: (unthrottle_cfs_rq+0x0/0x300) cpu=0 rr=300001
"""


def test_with_assign_inlined_grants_come_from_the_charge_and_returns_from_runtime_remaining():
    """Debian's 6.12 inlines __assign_cfs_rq_runtime, assign_cfs_rq_runtime
    and __return_cfs_rq_runtime: a charge that leaves no runtime asks for it
    (the grant is what it gained beyond the charge), throttle_cfs_rq asks for
    1 ns, and runtime_remaining that fell between two charges went back as slack."""
    s = diff.kernel_stream(INLINED_TRACE, start_ns=10_000_000_000, end_ns=11_000_000_000)
    assert s.kinds == ("refill", "assign", "return", "throttle", "unthrottle", "slack_timer")
    assert s.events == [
        # 2 ms - 2.1 ms charged = -0.1 ms, topped up to 5 ms. The charge at
        # 0.1 ms left runtime and asked for none.
        Event(4_101_000, "assign", 0, 5_100_000),
        # 3.5 ms after the charge at 5 ms, 1 ms at the next: 2.5 ms went back.
        Event(5_001_000, "return", 0, 2_500_000),
        # A cpu.max write refills (its probe's caller says so).
        Event(8_000_000, "refill", None, 40_000_000),
        # An empty pool: the charge's ask and throttle_cfs_rq's got nothing.
        Event(9_001_000, "assign", 0, 0),
        Event(9_003_000, "assign", 0, 0),
        Event(9_003_000, "throttle", 0),
        # Throttled: its charge asks for nothing; the distribution's grant is no return.
        Event(10_010_000, "unthrottle", 0),
    ]
    assert "grants from __account_cfs_rq_runtime" in s.notes[-2] and "slack returns from runtime_remaining" in s.notes[-1]


def test_the_simulators_records_become_the_same_kinds():
    records = [
        {"t_ns": 1, "cpu": 0, "tg": 1, "kind": "assign", "arg": 5_000_000, "local_ns": 5_000_000, "global_ns": 1},
        {"t_ns": 2, "cpu": 0, "tg": 1, "kind": "tick", "local_ns": 1, "global_ns": 1},
        {"t_ns": 3, "cpu": None, "tg": 1, "kind": "refill", "local_ns": None, "global_ns": 40_000_000},
        {"t_ns": 3, "cpu": 0, "tg": 1, "kind": "distribute", "arg": 100, "local_ns": 1, "global_ns": 1},
        {"t_ns": 3, "cpu": 1, "tg": 1, "kind": "distribute", "arg": 200, "local_ns": 1, "global_ns": 1},
        {"t_ns": 3, "cpu": 0, "tg": 1, "kind": "unthrottle", "local_ns": 1, "global_ns": 1},
        {"t_ns": 4, "cpu": None, "tg": 1, "kind": "slack_timer", "local_ns": None, "global_ns": 1},
        {"t_ns": 5, "cpu": 0, "tg": 2, "kind": "throttle", "local_ns": 1, "global_ns": 1},
    ]
    assert diff.sim_stream(records, tg=1).events == [
        Event(1, "assign", 0, 5_000_000), Event(3, "refill", None, 40_000_000), Event(3, "distribute", None, 300),
        Event(3, "unthrottle", 0), Event(4, "slack_timer"),
    ]


def test_the_simulators_trace_has_the_slack_timer_and_distribution(write_scenario):
    """Two spinners under a quarter of their demand: the core records the
    distribution at each refill, beside grants and throttling."""
    from throttlelab.timeline import simulate

    text = open(write_scenario(quota_us="5000", threads="2")).read()
    _, trace = simulate(text)
    kinds = {r["kind"] for r in trace["records"]}
    assert {"refill", "assign", "throttle", "unthrottle", "distribute"} <= kinds


LATE_START = """name = "late-start"
duration_s = 0.1
[machine]
cpus = 2
hz = 250
[[cgroup]]
name = "app"
period_us = 20000
quota_us = 20000
[[task]]
name = "a"
cgroup = "app"
phases = [{ run_us = 1_000_000 }]
[[task]]
name = "b"
cgroup = "app"
start_us = 2000
phases = [{ run_us = 1_000_000 }]
"""


def test_the_paired_simulators_threads_start_as_late_as_the_kernels():
    """The kernel's first worker ran 900 us after the common start (a TCG
    guest's wake-up): every task moves by it, beyond the earliest start the
    scenario asks for, and the paired simulator's first grant (the first
    thread's first charge asks for a slice) moves from the start to it."""
    resolved = json.loads(diff._native.validate(LATE_START, []))
    assert diff.start_overrides(resolved, 900.4) == ["task.a.start_us=900", "task.b.start_us=2900"]
    assert diff.start_overrides(resolved, None) == [] and diff.start_overrides(resolved, 0.0) == []
    host = {"release": "6.12.0", "hz": 250, "cgroup": "v2", "background_per_s": 0.0, "background_us": 0.0, "uptime_s": 10.0}
    first = {}
    for late in (None, 900.4):
        _, records = diff.paired_sim(LATE_START, diff.start_overrides(resolved, late), host, 1)
        first[late] = min(r["t_ns"] for r in records if r["tg"] == 1 and r["kind"] == "assign")
    assert first[None] == 0 and first[900.4] == 900_000, first


def test_diff_refuses_bad_input_in_one_line(write_scenario):
    result = cli("diff", write_scenario(quota_us="-1"))
    assert result.exit_code == 2
    assert result.stderr == "throttlelab: error: diff traces one limited cgroup; the scenario has 0 (cgroup.NAME.quota_us)\n"
    result = cli("diff", write_scenario(), "--tolerance-us", "x")
    assert result.exit_code == 2 and "--tolerance-us" in result.stderr
    result = cli("diff", write_scenario(), "--accel", "tcg")
    assert result.exit_code == 2 and "--accel needs --kernel" in result.stderr
    result = cli("diff", write_scenario(), "--kernel", "/nonexistent/bzImage")
    assert result.exit_code == 2
    assert result.stderr == "throttlelab: error: no kernel image at /nonexistent/bzImage\n"


def _held_to_cpu_stat(run: dict, kernel: bool) -> None:
    """A side's stream against its own cpu.stat: a refill per period, and
    a cfs_rq throttled at each expiry that counted a throttled period."""
    k, s = run["streams"]
    stream_, stat = (k, run["kernel"]) if kernel else (s, run["sim"])
    # The run's first and last periods are cut by its window, cpu.stat's not;
    # a timer late past a whole period counts it without a refill (overruns).
    refills = sum(e.kind == "refill" for e in stream_.events)
    assert abs(refills + stream_.overruns - stat["nr_periods"]) <= 2, (refills, stream_.overruns, stat)
    # nr_throttled: expiries that found a cfs_rq throttled.
    throttled, on = 0, set()
    for e in stream_.events:
        if e.kind == "refill":
            throttled += bool(on)
        elif e.kind == "throttle":
            on.add(e.cpu)
        elif e.kind == "unthrottle":
            on.discard(e.cpu)
    # One-sided: on the host a preemption across an expiry reads as a throttle
    # too (docs/diff.md), so the inference can count more than cpu.stat (100
    # against 97 of 99 periods on an idle host), never fewer.
    assert stat["nr_throttled"] - 2 - stream_.overruns <= throttled <= stat["nr_periods"] + 1, (throttled, stream_.overruns, stat)


@needs_real
def test_diff_on_the_host_traces_the_kernels_timers_and_throttling(write_scenario, tmp_path):
    """Two spinners under half a CPU, 1 s on the host: the kernel's period
    timer expiries are its cpu.stat periods, the throttles seen from its
    switches its throttled periods, and the paired simulator's likewise; the
    Perfetto trace has both sides."""
    text = open(write_scenario(quota_us="5000")).read().replace("duration_s = 0.5", "duration_s = 1", 1)
    result = diff.diff(text, settle_s=0.2)
    run = result["runs"][0]
    assert run["kinds"] == ["refill", "throttle", "unthrottle", "slack_timer"]
    _held_to_cpu_stat(run, kernel=True)
    _held_to_cpu_stat(run, kernel=False)
    assert run["periods"]["kernel"] >= 90 and run["periods"]["sim"] >= 90
    # The workers' charges (sched_stat_runtime: update_curr's delta_exec, what
    # account_cfs_rq_runtime takes from their cfs_rq) are cpu.stat's usage, but
    # for the ticks that straddle the window's ends (one a CPU at each end).
    start_ns, tick_us = round(run["host"]["uptime_s"] * 1e9), 1e6 / run["host"]["hz"]
    charged_us = sum(int(f["runtime"]) for t, _cpu, _comm, _pid, event, f in diff.parse_lines(run["trace"])
                     if event == "sched_stat_runtime" and f.get("comm") == diff.WORKER_COMM
                     and start_ns <= t <= start_ns + 1_000_000_000) / 1e3
    assert abs(charged_us - run["kernel"]["usage_usec"]) <= 2 * 2 * tick_us, (charged_us, run["kernel"]["usage_usec"])
    paths = diff.write_perfetto(tmp_path, result, cpus=2)
    doc = json.loads(paths[0].read_text())
    names = {e["args"]["name"] for e in doc["traceEvents"] if e.get("name") == "process_name"}
    assert names == {"kernel", "simulator"}
    assert {e["pid"] for e in doc["traceEvents"] if e.get("name") == "throttled"} == {1, 2}


def _expiries_and_throttling(stream_: Stream, periods: int) -> int:
    """A kernel stream's period timer over a run of ``periods`` periods: one
    expiry a period, those late past whole periods counted by their overrun,
    and on each CPU throttle and unthrottle in turn; returns the expiries that
    found a cfs_rq throttled."""
    refills = sum(e.kind == "refill" for e in stream_.events)
    assert periods - 2 <= refills + stream_.overruns <= periods + 1, (refills, stream_.overruns)
    throttled, on = 0, set()
    for e in stream_.events:
        if e.kind == "refill":
            throttled += bool(on)
        elif e.kind == "throttle":
            assert e.cpu not in on, e
            on.add(e.cpu)
        elif e.kind == "unthrottle":
            assert e.cpu in on, e
            on.discard(e.cpu)
    return throttled


@needs_vm
def test_diff_on_debians_6_12_sees_grants_and_distribution(write_scenario):
    """One boot of Debian's 6.12 under QEMU (TCG): its kprobes see grants,
    slack and distribution besides the timers and throttling. Two spinners
    under a quarter of their demand for 1 s: the period timer expires once
    a period (a vCPU the busy host preempted makes it late past whole
    periods: counted by their overrun), throttles and unthrottles alternate,
    and most expiries find a cfs_rq throttled (under TCG 6.12 leaves some
    periods unthrottled: tests/test_vm.py allows 75 %); grants and
    distributions come in most periods. Two runs in the boot: the second
    sets its probes as the first did (the first's removed before its
    tracefs is unmounted)."""
    text = open(write_scenario(quota_us="5000")).read().replace("duration_s = 0.5", "duration_s = 1", 1)
    result = diff.diff(text, runs=2, on=diff.vm_traced_runs(vm.kernel("6.12", lambda _: None)), settle_s=0.5)
    run = result["runs"][0]
    assert run["host"]["release"].startswith("6.12.")
    assert set(run["kinds"]) == set(diff.KINDS), run["notes"]
    second = result["runs"][1]
    assert second["host"]["vm"]["run_in_boot"] == 2
    assert set(second["kinds"]) == set(diff.KINDS), second["notes"]
    assert not any("File exists" in note for note in second["notes"]), second["notes"]
    kernel, sim = run["streams"]
    throttled = _expiries_and_throttling(kernel, 100)
    # A late expiry's overrun periods count as throttled too (nr_throttled += overrun).
    assert throttled + kernel.overruns >= 0.75 * 100, (throttled, kernel.overruns)
    count = lambda kind: sum(e.kind == kind for e in kernel.events)  # noqa: E731
    # Each throttle asks for 1 ns first; the charges ask too, and some get runtime.
    assert count("assign") >= count("throttle") > 0
    assert any(e.kind == "assign" and e.amount_ns for e in kernel.events)
    # An expiry that finds a cfs_rq throttled distributes the refill (nothing
    # only where each is already queued for an async unthrottle): 67 of 67 and
    # 86 of 88 in two runs here.
    distributed, on = 0, set()
    for i, e in enumerate(kernel.events):
        if e.kind == "refill" and on:
            following = next((x for x in kernel.events[i + 1:] if x.kind in ("refill", "distribute")), None)
            distributed += following is not None and following.kind == "distribute"
        elif e.kind == "throttle":
            on.add(e.cpu)
        elif e.kind == "unthrottle":
            on.discard(e.cpu)
    assert distributed >= 0.9 * throttled, (distributed, throttled)
    _held_to_cpu_stat(run, kernel=False)
