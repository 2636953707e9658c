//! A period timer that expires before its CPU's tick interrupt ends runs in
//! that interrupt, and a preemption the tick asked for waits for it (the
//! kernel reschedules on the return from the interrupt). Whatever else
//! happens meanwhile, another CPU's tick included, must not change that:
//! otherwise a run that skips ticks which cannot matter differs from one
//! that simulates every tick (issue #13).

mod common;

use throttlelab_core::load;
use throttlelab_core::trace::TraceKind;

/// Two spinners share CPU 0 under EEVDF (each tick past a slice preempts),
/// one spins on CPU 1. No jitter: both CPUs tick on every millisecond, and
/// the period timer (on CPU 0, which asked for runtime first) expires 5 us
/// after every tenth tick, inside that tick's interrupt.
const TIMER_IN_TICK: &str = r#"
name = "timer-in-tick"
duration_s = 0.1
[machine]
cpus = 2
hz = 1000
uptime_s = 600
tick_phase_us = 0
tick_jitter_us = 0
timer_jitter_us = 0
background_per_s = 0
[kernel]
profile = "6.6"
[[cgroup]]
name = "app"
period_us = 10000
quota_us = 30000
period_timer_offset_us = 5
[[task]]
name = "pair"
cgroup = "app"
threads = 2
cpus = "0"
phases = [{ run_us = 1_000_000_000 }]
[[task]]
name = "solo"
cgroup = "app"
cpus = "1"
start_us = 1000
phases = [{ run_us = 1_000_000_000 }]
"#;

#[test]
fn a_preemption_waits_for_the_period_timer_in_its_tick() {
    let s = load(TIMER_IN_TICK, &[]).unwrap();
    for skip_ticks in [true, false] {
        let (_, records) = common::traced(&s, skip_ticks);
        let refills: Vec<u64> = records.iter().filter(|r| r.kind == TraceKind::Refill).map(|r| r.time).collect();
        let switches: Vec<u64> = records
            .iter()
            .filter(|r| r.cpu == Some(0) && matches!(r.kind, TraceKind::Switch(_)))
            .map(|r| r.time)
            .collect();
        assert!(refills.len() >= 9, "{} refills", refills.len());
        // Every other tick preempts, the ones at the period boundaries too:
        // the switch comes after the timer, not at the tick.
        for refill in &refills[1..] {
            assert!(switches.contains(refill), "skip_ticks {skip_ticks}: no switch at the refill at {refill} ns");
            assert!(!switches.contains(&(refill - 5_000)), "skip_ticks {skip_ticks}: a switch at the tick before {refill} ns");
        }
    }
    assert_eq!(common::skipping_difference(&s), None);
}

/// The issue's minimal case, found by `properties::skipping_ticks_changes_nothing`:
/// the tick on CPU 0 at 533594408 ns preempts, the period timer expires in
/// its interrupt 9 us later; simulating every tick, CPU 1's tick at 533595238
/// ns came between and the switch happened at the tick instead.
#[test]
fn skipping_ticks_changes_nothing_with_a_tick_inside_another_cpus_tick_interrupt() {
    let s = load(
        r#"
name = "issue-13"
duration_s = 0.6
seed = 212
[machine]
cpus = 2
hz = 1000
background_per_s = 50
[kernel]
profile = "6.6"
slice_us = 3000
[[cgroup]]
name = "app"
period_us = 12286
quota_us = 17077
burst_us = 853
[[task]]
name = "spin"
cgroup = "app"
threads = 2
phases = [{ run_us = 10_000_000 }]
[[service]]
name = "svc"
cgroup = "app"
workers = 2
rate_per_s = 300
cost_us = 898
[[write]]
cgroup = "app"
start_ms = 7
every_ms = 37
[[task]]
name = "dl"
threads = 2
policy = "deadline"
runtime_us = 20_000
period_us = 60_000
start_spread_us = 5000
phases = [{ run_us = 898 }, { sleep_us = 3000 }]
"#,
        &[],
    )
    .unwrap();
    assert_eq!(common::skipping_difference(&s), None);
}
