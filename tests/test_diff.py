"""``throttlelab diff``: the kernel's bandwidth events against the simulator's,
period by period. The alignment and first-divergence logic on hand-worked
streams; the kernel's trace texts as tracefs prints them (the host's
tracepoints, a guest's kprobes); then diff itself on the host (root) and on
Debian's 6.12 in QEMU (root, QEMU)."""

from __future__ import annotations

import json
import os

import pytest

from helpers import cli
from test_real import needs_real
from test_vm import needs_vm
from throttlelab import diff
from throttlelab.diff import Event, Stream

MS = 1_000_000
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
    first, alike = diff.first_divergence(spinners(False), spinners(False))
    assert first is None
    # Periods 0 (before the first refill) to 4.
    assert alike["assign"] == [5, 5] and alike["throttle"] == [5, 5]


def test_the_first_divergence_is_the_throttle_only_the_kernel_has():
    first, alike = diff.first_divergence(spinners(True), spinners(False))
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
    assert diff.first_divergence(spinners(False), late, tolerance_us=250)[0] is None
    first, _ = diff.first_divergence(spinners(False), late, tolerance_us=150)
    assert first is not None and (first.period, first.kind, first.cpu) == (1, "assign", 0)
    assert first.why == "assign at +0.100 ms in the kernel, +0.300 ms in the simulator"
    # A period that starts late carries its events with it: alike.
    shifted = stream(*[Event(e.t_ns + 100_000, e.kind, e.cpu, e.amount_ns) if e.t_ns >= 25 * MS else e
                       for e in spinners(False).events])
    first, _ = diff.first_divergence(spinners(False), shifted, tolerance_us=150)
    assert first is None
    first, _ = diff.first_divergence(spinners(False), shifted, tolerance_us=50)
    assert first is not None and (first.period, first.kind) == (2, "refill")
    assert first.why == "the period starts -0.100 ms apart (kernel - simulator)"


def test_amounts_and_missing_periods_diverge():
    small = stream(*[Event(e.t_ns, e.kind, e.cpu, 4 * MS if e.kind == "assign" and e.t_ns > 60 * MS else e.amount_ns)
                     for e in spinners(False).events])
    first, _ = diff.first_divergence(spinners(False), small)
    assert first is not None and (first.period, first.kind, first.cpu) == (3, "assign", 0)
    assert first.why == "assign of 5,000.0 us in the kernel, 4,000.0 us in the simulator"
    shorter = stream(*[e for e in spinners(False).events if e.t_ns < 65 * MS])
    first, _ = diff.first_divergence(spinners(False), shorter)
    assert first is not None and (first.period, first.kind) == (4, "refill")
    assert first.why == "the kernel has 4 refills, the other 3"


def test_a_kind_one_side_cannot_see_is_not_compared():
    # The host's tracepoints see no grants: a kernel stream without them is
    # not a divergence from a simulator that has them.
    no_grants = stream(*[e for e in spinners(False).events if e.kind != "assign"],
                       kinds=("refill", "slack_timer", "throttle", "unthrottle"))
    first, alike = diff.first_divergence(no_grants, spinners(False))
    assert first is None and "assign" not in alike


HOST_TRACE = """\
# throttlelab bandwidth trace
# no probes: /sys/kernel/tracing/kprobe_events does not exist (no CONFIG_KPROBE_EVENTS)
# tracer: nop
#
 throttlelab-rea-900     [000] d..2.   100.000100: hrtimer_start: hrtimer=00000000aaaa function=sched_cfs_period_timer expires=100005000000 softexpires=100005000000 mode=ABS|PINNED
          <idle>-0       [001] d.h2.   100.001000: hrtimer_expire_entry: hrtimer=00000000bbbb function=sched_cfs_period_timer now=100001000000
          <idle>-0       [000] d.h1.   100.003990: hrtimer_start: hrtimer=00000000cccc function=tick_nohz_handler expires=100003990000 softexpires=100003990000 mode=ABS|PINNED|HARD
          <idle>-0       [000] d.h1.   100.004000: hrtimer_expire_entry: hrtimer=00000000cccc function=tick_nohz_handler now=100004007000
          <idle>-0       [000] d.h2.   100.005002: hrtimer_expire_entry: hrtimer=00000000aaaa function=sched_cfs_period_timer now=100005002000
          <idle>-0       [000] d.h2.   100.005010: hrtimer_start: hrtimer=00000000aaaa function=sched_cfs_period_timer expires=100025000000 softexpires=100025000000 mode=ABS|PINNED
 throttlelab-wor-901     [001] d..2.   100.021200: sched_switch: prev_comm=throttlelab-wor prev_pid=901 prev_prio=120 prev_state=R ==> next_comm=swapper/1 next_pid=0 next_prio=120
 throttlelab-wor-902     [001] d..2.   100.021300: sched_switch: prev_comm=throttlelab-wor prev_pid=902 prev_prio=120 prev_state=R+ ==> next_comm=swapper/1 next_pid=0 next_prio=120
 throttlelab-wor-903     [000] d..2.   100.022000: sched_switch: prev_comm=throttlelab-wor prev_pid=903 prev_prio=120 prev_state=S ==> next_comm=swapper/0 next_pid=0 next_prio=120
 throttlelab-wor-904     [000] d..2.   100.023000: sched_switch: prev_comm=throttlelab-wor prev_pid=904 prev_prio=120 prev_state=R+ ==> next_comm=kworker/0:1 next_pid=77 next_prio=120
     kworker/0:1-77      [000] d..2.   100.023500: sched_switch: prev_comm=kworker/0:1 prev_pid=77 prev_prio=120 prev_state=I ==> next_comm=throttlelab-wor next_pid=904 next_prio=120
 throttlelab-rea-900     [000] d..2.   100.024000: hrtimer_start: hrtimer=00000000dddd function=sched_cfs_slack_timer expires=100029000000 softexpires=100029000000 mode=REL
          <idle>-0       [000] d.h2.   100.025001: hrtimer_expire_entry: hrtimer=00000000aaaa function=sched_cfs_period_timer now=100025001000
             pip-700     [001] d..2.   100.025050: sched_switch: prev_comm=pip prev_pid=700 prev_prio=130 prev_state=R ==> next_comm=throttlelab-wor next_pid=902 next_prio=120
 throttlelab-wor-902     [001] d..2.   100.025100: sched_switch: prev_comm=throttlelab-wor prev_pid=902 prev_prio=120 prev_state=R ==> next_comm=throttlelab-wor next_pid=901 next_prio=120
          <idle>-0       [001] d.h2.   100.029001: hrtimer_expire_entry: hrtimer=00000000dddd function=sched_cfs_slack_timer now=100029001000
          <idle>-0       [000] d.h2.   100.045001: hrtimer_expire_entry: hrtimer=00000000aaaa function=sched_cfs_period_timer now=100045001000
"""


def test_the_hosts_tracepoints_give_timers_and_throttling_seen_from_switches():
    s = diff.kernel_stream(HOST_TRACE, start_ns=100_000_000_000, end_ns=100_040_000_000)
    assert s.kinds == ("refill", "throttle", "unthrottle", "slack_timer")
    # Ours: the period timer our controller armed (not another group's, bbbb);
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
    assert diff.tick_latency_us(HOST_TRACE) == 17.0


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
          <idle>-0       [001] d.h2.    10.005000: refill: (sched_cfs_period_timer+0x80/0x200 <- __refill_cfs_bandwidth_runtime) pool=40000000
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
        Event(5_000_000, "refill", None, 40_000_000),
        Event(5_020_000, "unthrottle", 0),
        Event(5_030_000, "distribute", None, 6_000),
    ]
    assert s.notes == ["no probe period: do_sched_cfs_period_timer overrun=overrun:s32: No such file or directory"]


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


def test_diff_refuses_a_scenario_without_one_limited_cgroup(write_scenario):
    result = cli("diff", write_scenario(quota_us="-1"))
    assert result.exit_code == 2
    assert result.stderr == "throttlelab: error: diff traces one limited cgroup; the scenario has 0 (cgroup.NAME.quota_us)\n"
    result = cli("diff", write_scenario(), "--tolerance-us", "x")
    assert result.exit_code == 2 and "--tolerance-us" in result.stderr
    result = cli("diff", write_scenario(), "--accel", "tcg")
    assert result.exit_code == 2 and "--accel needs --kernel" in result.stderr


def _held_to_cpu_stat(run: dict, kernel: bool) -> None:
    """A side's stream against its own cpu.stat: a refill per period, and a
    throttle in each throttled period."""
    k, s = run["streams"]
    stream_, stat = (k, run["kernel"]) if kernel else (s, run["sim"])
    refills = sum(e.kind == "refill" for e in stream_.events)
    assert abs(refills - stat["nr_periods"]) <= 2, (refills, stat)
    cut = diff.Periods.of(stream_)
    throttled = sum(any(e.kind == "throttle" for e in p) for p in cut.events)
    assert abs(throttled - stat["nr_throttled"]) <= 2, (throttled, stat)


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
    paths = diff.write_perfetto(tmp_path, result, cpus=2)
    doc = json.loads(paths[0].read_text())
    names = {e["args"]["name"] for e in doc["traceEvents"] if e.get("name") == "process_name"}
    assert names == {"kernel", "simulator"}
    assert {e["pid"] for e in doc["traceEvents"] if e.get("name") == "throttled"} == {1, 2}


@needs_vm
def test_diff_on_debians_6_12_sees_grants_and_distribution(write_scenario):
    """One boot of Debian's 6.12 under QEMU: its kprobes give every kind, and
    each side's stream agrees with its own cpu.stat."""
    if os.environ.get("THROTTLELAB_SKIP_VM_DIFF"):
        pytest.skip("THROTTLELAB_SKIP_VM_DIFF is set")
    path = write_scenario(quota_us="5000")
    result = cli("diff", "--json", path, "--set", "duration_s=1", "--kernel", "6.12")
    assert result.exit_code == 0, result.stderr
    run = json.loads(result.stdout)["runs"][0]
    assert run["host"]["release"].startswith("6.12.")
    assert {"assign", "return", "distribute", "throttle", "unthrottle", "refill"} <= set(run["kinds"]), run["notes"]
    assert run["tick_latency_us"] is not None
