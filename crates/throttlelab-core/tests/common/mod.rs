//! What the simulator's integration tests share: a property-test
//! configuration that is deterministic unless asked otherwise, and the check
//! that skipping ticks changes nothing.
#![allow(dead_code)] // each test binary uses its own part

use proptest::test_runner::{Config, FileFailurePersistence, RngSeed};
use throttlelab_core::trace::{Record, TraceKind, TraceOptions};
use throttlelab_core::{Output, Scenario, Sim, SimOptions};

/// One CPU at HZ=250 with nothing but the scenario's tasks on it: no jitter,
/// no background, the tick grid at 0; hand-worked timelines use it.
pub const QUIET_ONE_CPU: &str = "[machine]
cpus = 1
hz = 250
tick_jitter_us = 0
timer_jitter_us = 0
idle_exit_us = 0
background_per_s = 0
uptime_s = 600
tick_phase_us = 0
";

/// A scenario named `name` of 1 s, seed 7, on `QUIET_ONE_CPU`, with `body`'s
/// tables and the `extra` overrides (`--set`'s KEY=VALUE).
pub fn load_quiet_one_cpu(name: &str, body: &str, extra: &[&str]) -> Result<Scenario, throttlelab_core::ScenarioError> {
    let text = format!("name = \"{name}\"\nduration_s = 1\nseed = 7\n{QUIET_ONE_CPU}{body}");
    throttlelab_core::load(&text, &extra.iter().map(|k| k.to_string()).collect::<Vec<_>>())
}

/// The seed CI draws every property's cases from.
const CI_SEED: u64 = 0x7468_726f_7474_6c65; // "throttle"

/// `default_cases` cases drawn from a fixed seed, so a test run passes or
/// fails the same way every time; `PROPTEST_CASES` and `PROPTEST_RNG_SEED`
/// (as `scripts/explore.sh` sets them) override either. Cases in the
/// `.proptest-regressions` files beside each test run first in both modes.
pub fn proptest_config(default_cases: u32) -> Config {
    // Beside the test file (tests/NAME.proptest-regressions), where proptest's
    // default looks too, after warning that tests/ has no lib.rs.
    let mut config = Config { failure_persistence: Some(Box::new(FileFailurePersistence::WithSource("proptest-regressions"))), ..Config::default() };
    if std::env::var_os("PROPTEST_CASES").is_none() {
        config.cases = default_cases;
    }
    if std::env::var_os("PROPTEST_RNG_SEED").is_none() {
        config.rng_seed = RngSeed::Fixed(CI_SEED);
    }
    config
}

/// Run `s` to its end, skipping the ticks that cannot change anything or
/// simulating every one, with the bandwidth trace.
pub fn traced(s: &Scenario, skip_ticks: bool) -> (Output, Vec<Record>) {
    let options = SimOptions { trace: Some(TraceOptions::default()), every_tick: !skip_ticks, stop: None };
    let (out, t) = Sim::new(s, options).run();
    (out, t.expect("traced").records)
}

/// Each slice of a thread of the scenario's first cgroup (task group 1):
/// (its thread, ns from its switch-in to the CPU's next switch).
pub fn group_slices(records: &[Record]) -> Vec<(usize, u64)> {
    let switches: Vec<&Record> = records.iter().filter(|r| matches!(r.kind, TraceKind::Switch(_))).collect();
    switches
        .windows(2)
        .filter_map(|w| match w[0].kind {
            TraceKind::Switch(Some(tid)) if w[0].tg == 1 => Some((tid, w[1].time - w[0].time)),
            _ => None,
        })
        .collect()
}

/// How a run that skips ticks differs from one that simulates every tick:
/// the outputs, or the first record of the trace (ticks aside) that differs,
/// with its neighbours. `None` when they are identical.
pub fn skipping_difference(s: &Scenario) -> Option<String> {
    let (a, ra) = traced(s, true);
    let (b, rb) = traced(s, false);
    if (&a.cgroups, &a.tasks) != (&b.cgroups, &b.tasks) {
        return Some(format!(
            "outputs differ: skipping {:?} {:?} vs every tick {:?} {:?}",
            a.cgroups, a.tasks, b.cgroups, b.tasks
        ));
    }
    let untimed = |r: &&Record| !matches!(r.kind, TraceKind::Tick);
    let ka: Vec<_> = ra.iter().filter(untimed).map(|r| (r.time, r.cpu, r.tg, r.kind)).collect();
    let kb: Vec<_> = rb.iter().filter(untimed).map(|r| (r.time, r.cpu, r.tg, r.kind)).collect();
    let i = (0..ka.len().max(kb.len())).find(|&i| ka.get(i) != kb.get(i))?;
    let around = |v: &[(u64, Option<usize>, usize, TraceKind)]| v[i.saturating_sub(3)..(i + 3).min(v.len())].to_vec();
    Some(format!("traces differ at record {i}: skipping {:?} vs every tick {:?}", around(&ka), around(&kb)))
}
