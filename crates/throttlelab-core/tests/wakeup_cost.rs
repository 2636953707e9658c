//! The CPU a wake-up costs a thread beyond its work (`machine.wakeup_cost_us`):
//! the kernel charges a task from `set_next_entity` to the next `update_curr`,
//! so each run phase that follows a wake-up is that much longer, in CPU time,
//! runtime and quota, and does no more work (docs/fidelity.md, "A wake-up's
//! cost"). Absent or 0: none.

mod common;

use throttlelab_core::simulate;

/// One thread that runs 1 ms and sleeps 1 ms, alone on a quiet CPU, in an
/// unlimited group; `QUOTA` adds a quota to it.
const RUN_SLEEP: &str = r#"
[kernel]
profile = "6.18"
[[cgroup]]
name = "app"
period_us = 10000
[[task]]
name = "rs"
cgroup = "app"
phases = [{ run_us = 1000 }, { sleep_us = 1000 }]
"#;

fn run_sleep(extra: &[&str]) -> Result<throttlelab_core::Scenario, throttlelab_core::ScenarioError> {
    common::load_quiet_one_cpu("wakeup-cost", RUN_SLEEP, extra)
}

/// Each slice of a thread of the group: ns from its switch-in to the next switch.
fn slices(records: &[throttlelab_core::trace::Record]) -> Vec<u64> {
    common::group_slices(records).into_iter().map(|(_, ns)| ns).collect()
}

#[test]
fn without_the_key_a_run_takes_its_work() {
    let (_, records) = common::traced(&run_sleep(&[]).unwrap(), true);
    let runs = slices(&records);
    assert_eq!(runs.len(), 500, "1 s of 2 ms cycles");
    assert!(runs[..499].iter().all(|&ns| ns == 1_000_000), "{runs:?}");
    // 0 is the default, and reads the same.
    let (_, zero) = common::traced(&run_sleep(&["machine.wakeup_cost_us=0"]).unwrap(), true);
    assert_eq!(slices(&zero), runs);
}

#[test]
fn each_run_after_a_wake_up_is_longer_by_the_cost_and_does_the_same_work() {
    let (out, records) = common::traced(&run_sleep(&["machine.wakeup_cost_us=40"]).unwrap(), true);
    let runs = slices(&records);
    // Hand-worked: each cycle is 1.04 ms of run and 1 ms asleep, from the start's wake-up on
    // (the 491st run, cut by the end, has no switch after it).
    assert_eq!(runs.len(), 490, "{runs:?}");
    assert!(runs.iter().all(|&ns| ns == 1_040_000), "{runs:?}");
    let rs = &out.tasks["rs"];
    // 490 whole runs, and the 491st, begun 0.4 ms before the end, its 40 us and 360 us of work:
    // the work is the runs' own, the CPU beyond it 40 us a wake-up.
    assert_eq!(rs.work_usec, 490 * 1_000 + 360);
    assert_eq!(rs.cpu_usec - rs.work_usec, 491 * 40);
    // The group's usage (its cfs_rq's runtime, the quota's measure) is the threads' CPU.
    assert_eq!(out.cgroups["app"].usage_usec, rs.cpu_usec);
}

#[test]
fn the_cost_is_runtime_against_the_quota() {
    // 1 ms in every 2 ms is 5 ms of a 10 ms period: a quota of 5.1 ms holds it,
    // and with 100 us a wake-up (1.1 ms in every 2.1 ms: 5.24 ms a period) it no longer does.
    let quota = "cgroup.app.quota_us=5100";
    let without = simulate(&run_sleep(&[quota]).unwrap());
    assert_eq!(without.cgroups["app"].nr_throttled, 0, "{:?}", without.cgroups);
    let with = simulate(&run_sleep(&[quota, "machine.wakeup_cost_us=100"]).unwrap());
    assert!(with.cgroups["app"].nr_throttled >= 80, "{:?}", with.cgroups);
}

#[test]
fn a_cost_outside_a_tick_is_refused() {
    for bad in ["machine.wakeup_cost_us=-1", "machine.wakeup_cost_us=4000", "machine.wakeup_cost_us=nan", "machine.wakeup_cost_us=\"x\""] {
        let e = run_sleep(&[bad]).unwrap_err();
        assert_eq!(e.key, "machine.wakeup_cost_us", "{bad}: {e:?}");
    }
    assert!(run_sleep(&["machine.wakeup_cost_us=3999"]).is_ok(), "under a 4 ms tick");
}
