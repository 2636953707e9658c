//! The machine's work speed from run to run: with `machine.work_speed_cv`,
//! each run phase's CPU time is its own log-normal draw (`noise::spread_ns`
//! on the thread's `Stream::Work`, indexed by its run phases), with the
//! phase's `run_us` as the mean; absent, every run takes exactly `run_us`
//! (docs/fidelity.md, "The worker's runs, run by run").

mod common;

use common::group_slices as slices;

use throttlelab_core::noise::{spread_ns, Stream};

/// One thread that runs 10 ms and sleeps 10 ms, alone on a quiet CPU: each
/// run is one slice, from its switch-in to its switch-out asleep.
const RUN_SLEEP: &str = r#"
[kernel]
profile = "6.18"
[[cgroup]]
name = "app"
[[task]]
name = "rs"
cgroup = "app"
phases = [{ run_us = 10000 }, { sleep_us = 10000 }]
"#;

fn run_sleep(extra: &[&str]) -> Result<throttlelab_core::Scenario, throttlelab_core::ScenarioError> {
    common::load_quiet_one_cpu("work-speed", RUN_SLEEP, extra)
}

#[test]
fn without_the_key_every_run_takes_its_run_us() {
    let (_, records) = common::traced(&run_sleep(&[]).unwrap(), true);
    let runs = slices(&records);
    // 1 s of 20 ms cycles: 50 runs, the last cut by the end.
    assert_eq!(runs.len(), 50, "{runs:?}");
    assert!(runs[..49].iter().all(|&(_, ns)| ns == 10_000_000), "{runs:?}");
}

#[test]
fn each_run_takes_its_own_draw_of_the_spread() {
    let (_, records) = common::traced(&run_sleep(&["machine.work_speed_cv=0.02"]).unwrap(), true);
    let runs = slices(&records);
    let tid = runs[0].0;
    // Hand-worked: run k lasts draw k of the thread's stream, mean 10 ms, cv 2 %.
    let want: Vec<u64> = (0..10).map(|k| spread_ns(7, Stream::Work(tid), k, 10_000_000, 0.02)).collect();
    let got: Vec<u64> = runs[..10].iter().map(|&(_, ns)| ns).collect();
    assert_eq!(got, want);
    // And they spread: not all the same, and none far off (6 sd is 12 %).
    assert!(got.iter().any(|&ns| ns != got[0]));
    assert!(got.iter().all(|&ns| (8_800_000..11_200_000).contains(&ns)), "{got:?}");
}

#[test]
fn a_spread_of_zero_is_none_and_a_bad_one_is_refused() {
    let (_, a) = common::traced(&run_sleep(&[]).unwrap(), true);
    let (_, b) = common::traced(&run_sleep(&["machine.work_speed_cv=0"]).unwrap(), true);
    assert_eq!(slices(&a), slices(&b));
    for bad in ["machine.work_speed_cv=-0.01", "machine.work_speed_cv=0.5", "machine.work_speed_cv=nan", "machine.work_speed_cv=\"x\""] {
        let e = run_sleep(&[bad]).unwrap_err();
        assert_eq!(e.key, "machine.work_speed_cv", "{bad}: {e:?}");
    }
}
