//! The period timer's phase and CPU, against what the host kernel did (6.18,
//! HZ=250, 2 CPUs; docs/fidelity.md, "The period timer's phase"): one spinner
//! at quota = period = 20 ms, with the timer's expiries 10.5 us before a tick.

use throttlelab_core::trace::TraceKind;
use throttlelab_core::{load, simulate, simulate_traced};

const PERIOD_US: u64 = 20_000;
/// Expiries 10.5 us before a tick: the jiffy grid sits on multiples of 4 ms.
const OFFSET_US: f64 = 19_989.5;

/// One spinner; on `cpu` "1" it runs on the CPU the timer is not on (a short
/// thread on CPU 0 arms it first, as the kernel measurement did by moving the
/// spinner after its timer had started).
fn scenario(offset_us: f64, other_cpu: bool) -> String {
    let spinner = if other_cpu {
        r#"[[task]]
name = "starter"
cgroup = "app"
cpus = "0"
loop = 1
phases = [{ run_us = 100 }]
[[task]]
name = "spin"
cgroup = "app"
cpus = "1"
start_us = 1000
phases = [{ run_us = 1_000_000_000 }]"#
    } else {
        r#"[[task]]
name = "spin"
cgroup = "app"
phases = [{ run_us = 1_000_000_000 }]"#
    };
    format!(
        r#"name = "near-tick"
duration_s = 2
[machine]
cpus = 2
hz = 250
uptime_s = 600
[kernel]
profile = "6.18"
[[cgroup]]
name = "app"
period_us = {PERIOD_US}
quota_us = {PERIOD_US}
period_timer_offset_us = {offset_us}
{spinner}
"#
    )
}

fn throttled(offset_us: f64, other_cpu: bool, seed: u64) -> u64 {
    let s = load(&scenario(offset_us, other_cpu), &[format!("seed={seed}")]).unwrap();
    simulate(&s).cgroups["app"].nr_throttled
}

#[test]
fn the_offset_places_the_period_boundaries() {
    let s = load(&scenario(7_000.0, false), &[]).unwrap();
    let (_, trace) = simulate_traced(&s);
    let refills: Vec<u64> = trace
        .records
        .iter()
        .filter(|r| r.tg == 1 && r.kind == TraceKind::Refill)
        .map(|r| r.time)
        .collect();
    assert!(refills.len() >= 90, "{} refills", refills.len());
    // CLOCK_MONOTONIC is 600 s ahead of simulated time; the timer is at most
    // its jitter (20 us) late.
    for t in refills {
        let phase = (t + 600_000_000_000 - 7_000_000) % (PERIOD_US * 1000);
        assert!(
            phase < 21_000,
            "refill at {t} ns is {phase} ns past the grid"
        );
    }
}

#[test]
fn a_timer_on_an_idle_cpu_fires_after_the_cpu_leaves_idle() {
    // Host: period timers fired 29-38 us late (p50) on an idle CPU, 8-9 us on a busy one.
    let s = load(&scenario(7_000.0, true), &[]).unwrap();
    let (_, trace) = simulate_traced(&s);
    let refills: Vec<u64> = trace.records.iter().filter(|r| r.tg == 1 && r.kind == TraceKind::Refill).map(|r| r.time).collect();
    assert!(refills.len() >= 90, "{} refills", refills.len());
    let late: Vec<u64> = refills.iter().map(|t| (t + 600_000_000_000 - 7_000_000) % (PERIOD_US * 1000)).collect();
    // idle_exit_us (25) plus the timer's jitter (below 20 us), but for
    // periods when the background ran on the timer's CPU.
    let after_idle = late.iter().filter(|&&l| (25_000..45_000).contains(&l)).count();
    assert!(after_idle * 10 >= late.len() * 9, "{late:?}");
}

#[test]
fn a_near_tick_timer_on_the_spinners_cpu_runs_first() {
    // Kernel: 0 or 1 throttled periods of 100 at 14 phases within 40 us of a tick.
    for seed in 1..=5 {
        assert!(throttled(OFFSET_US, false, seed) <= 1, "seed {seed}");
    }
}

#[test]
fn an_idle_cpus_timer_just_after_a_tick_comes_after_it() {
    // Kernel: 0 and 22 throttled of 100 with the timer 16.2 and 16.6 us after
    // the other CPU's tick; the idle CPU's timer then always comes after the
    // tick, and the spinner settles where that tick needs no runtime.
    for seed in 1..=5 {
        assert!(throttled(16.4, true, seed) <= 22, "seed {seed}");
    }
}

#[test]
fn a_near_tick_timer_on_another_cpu_races_its_ticks() {
    // Kernel: 30-80 throttled of 100 at this phase (docs/fidelity.md has the
    // simulator's smaller counts and why).
    let total: u64 = (1..=5).map(|seed| throttled(OFFSET_US, true, seed)).sum();
    assert!(total >= 5 * 5, "{total} throttled periods in 5 runs");
}

/// One spinner at quota = period = 10 ms on 6.1 (HZ=250), the edge grid's row
/// (docs/fidelity.md, spin61): 6.1's period timer expires on multiples of the
/// period (offset 0, 6.1's own) and, since the stable line took e9523a0d8189,
/// its ticks on multiples of 4 ms of CLOCK_MONOTONIC, so in every boot the
/// tick that finds the pool empty is the one 2 ms before a refill, and every
/// throttle lasts about 2 ms (the VM's 6.1.192: 2.0-2.1 ms a throttle in three
/// traced runs). With the tick's phase drawn, as before, seed 1's throttles
/// lasted 1.56 ms on average.
#[test]
fn on_6_1_a_lone_spinner_at_10_ms_throttles_for_2_ms_whatever_the_seed() {
    let on_6_1 = ["kernel.profile=6.1", "cgroup.app.period_us=10000", "cgroup.app.quota_us=10000"].map(String::from);
    for seed in 1..=6 {
        let s = load(&scenario(0.0, false), &[&on_6_1[..], &[format!("seed={seed}")]].concat()).unwrap();
        let app = &simulate(&s).cgroups["app"];
        let per_throttle_us = app.throttled_usec as f64 / app.nr_throttled as f64;
        assert!(app.nr_throttled >= 90, "seed {seed}: {} throttles", app.nr_throttled);
        assert!((1_900.0..2_100.0).contains(&per_throttle_us), "seed {seed}: {per_throttle_us:.0} us a throttle");
    }
}
