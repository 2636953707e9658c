//! A run that stops once its verdict is certain (`SimOptions::stop`), on a
//! hand-worked case: one spinner on one CPU under half a CPU (50 ms of
//! every 100 ms), for 1 s. Every period throttles, and the run can count at
//! most 10 periods (it counts 9: the 10th expiry, at 1 s, runs just after
//! the end, late by its interrupt); with a target of 30 % at most 3 of them may throttle
//! (3 / 10 meets, 4 / 10 misses), so the run stops at the 4th throttled
//! period, at the 4th period timer (0.4 s: the timer's expiries fall on
//! whole 100 ms of CLOCK_MONOTONIC, and uptime is 600 s).

use throttlelab_core::stop::Stop;
use throttlelab_core::{load, Output, Sim, SimOptions};

const SCENARIO: &str = r#"name = "half-a-cpu"
duration_s = 1
[machine]
cpus = 1
uptime_s = 600
[kernel]
profile = "6.18"
[[cgroup]]
name = "app"
period_us = 100000
quota_us = 50000
period_timer_offset_us = 0
[[task]]
name = "spin"
cgroup = "app"
phases = [{ run_us = 1_000_000_000 }]
"#;

fn run(overrides: &[&str], stop: Option<f64>) -> Output {
    let overrides: Vec<String> = overrides.iter().map(|o| o.to_string()).collect();
    let s = load(SCENARIO, &overrides).unwrap();
    let stop = stop.map(|max_throttled| Stop { cgroup: "app".into(), max_throttled });
    if let Some(stop) = &stop {
        s.check_stop(stop).unwrap();
    }
    Sim::new(&s, SimOptions { stop, ..SimOptions::default() }).run().0
}

/// The output as JSON without the `engine` block (its wall time differs).
fn json(mut out: Output) -> String {
    out.engine = None;
    serde_json::to_string(&out).unwrap()
}

#[test]
fn the_whole_run_throttles_every_period() {
    let app = &run(&[], None).cgroups["app"];
    assert_eq!((app.nr_periods, app.nr_throttled), (9, 9));
}

#[test]
fn the_run_stops_at_the_throttled_period_past_the_bound() {
    let out = run(&[], Some(0.3));
    let stopped = out.stopped.as_ref().expect("it stopped");
    assert_eq!((stopped.max_nr_periods, stopped.max_nr_throttled), (10, 3));
    let app = &out.cgroups["app"];
    assert_eq!((app.nr_periods, app.nr_throttled), (4, 4));
    assert!(app.throttled_ratio > 0.3);
    assert!((0.4..0.401).contains(&stopped.at_s), "the 4th period timer: {}", stopped.at_s);
    assert_eq!(out.duration_s, stopped.at_s, "the output covers the run up to the stop");
    let json = serde_json::to_string(&out).unwrap();
    assert!(json.contains(r#""stopped":{"cgroup":"app","max_nr_periods":10,"max_nr_throttled":3"#), "{json}");
}

#[test]
fn a_run_whose_verdict_stays_open_is_the_whole_run() {
    // Every period may throttle at 100 %: nothing is certain before the end.
    let whole = run(&[], None);
    assert_eq!(json(run(&[], Some(1.0))), json(whole.clone()));
    assert!(!serde_json::to_string(&whole).unwrap().contains("stopped"));
    // A quota the spinner never reaches: nothing throttles, the run is whole.
    let unthrottled = ["cgroup.app.quota_us=200000"];
    assert_eq!(json(run(&unthrottled, Some(0.0))), json(run(&unthrottled, None)));
}

#[test]
fn a_write_of_a_shorter_period_raises_the_bound() {
    // From 0.5 s the period is 50 ms: up to 5 + 10 periods could be counted,
    // so the bound is taken over 20 (1 s of the shortest period): 6 of 20.
    let text = format!("{SCENARIO}[[write]]\ncgroup = \"app\"\nat_ms = 500\nperiod_us = 50000\nquota_us = 25000\n");
    let s = load(&text, &[]).unwrap();
    let stop = Stop { cgroup: "app".into(), max_throttled: 0.3 };
    let out = Sim::new(&s, SimOptions { stop: Some(stop), ..SimOptions::default() }).run().0;
    let stopped = out.stopped.expect("it stopped");
    assert_eq!((stopped.max_nr_periods, stopped.max_nr_throttled), (20, 6));
    assert_eq!(out.cgroups["app"].nr_throttled, 7);
}

#[test]
fn a_stop_the_scenario_cannot_take_is_refused() {
    let s = load(SCENARIO, &[]).unwrap();
    let e = s.check_stop(&Stop { cgroup: "nope".into(), max_throttled: 0.1 }).unwrap_err();
    assert_eq!(e.to_string(), r#"stop.cgroup: no cgroup named "nope""#);
    for bad in [-0.1, 1.5, f64::NAN] {
        let e = s.check_stop(&Stop { cgroup: "app".into(), max_throttled: bad }).unwrap_err();
        assert!(e.to_string().starts_with("stop.max_throttled: must be a ratio in 0..1"), "{e}");
    }
}
