//! `throttled_usec` of a runqueue throttled while empty, by release: one
//! thread runs 3 ms of a 2 ms quota and blocks, so its runqueue throttles
//! with nothing queued; it wakes 2 ms later into the throttled group and
//! waits for the refill at 10 ms. Before 6.5 the throttled time runs from
//! the throttle (3 ms); from 6.5 (3ab150d011da) it starts when the task
//! arrives (5 ms); 6.18 starts it when the task leaves for the limbo list,
//! the same instant here.

use throttlelab_core::{load, Sim, SimOptions};

mod common;

fn scenario(profile: &str) -> String {
    format!(
        r#"
name = "empty-throttle"
duration_s = 0.012
{machine}[kernel]
profile = "{profile}"
slice_us = 5000
pool_lock_hold_ns = 0
[[cgroup]]
name = "app"
period_us = 10000
quota_us = 2000
period_timer_offset_us = 0
[[task]]
name = "t"
cgroup = "app"
loop = 1
phases = [{{ run_us = 3000 }}, {{ sleep_us = 2000 }}, {{ run_us = 100 }}]
"#,
        machine = common::QUIET_ONE_CPU
    )
}

fn throttled(profile: &str) -> (u64, u64) {
    let s = load(&scenario(profile), &[]).unwrap();
    let (out, _) = Sim::new(&s, SimOptions::default()).run();
    let app = &out.cgroups["app"];
    (app.nr_throttled, app.throttled_usec)
}

#[test]
fn empty_throttle_counts_from_the_throttle_before_6_5() {
    assert_eq!(throttled("5.14"), (1, 7_000));
}

#[test]
fn empty_throttle_counts_from_the_first_arrival_since_6_5() {
    for profile in ["6.6", "6.12", "6.18"] {
        assert_eq!(throttled(profile), (1, 5_000), "profile {profile}");
    }
}

