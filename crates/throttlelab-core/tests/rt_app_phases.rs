//! rt-app's `runtime` and `timer` events as phases: a runtime phase lasts
//! its wall time however little CPU it gets; a late timer does not sleep.

use throttlelab_core::{load, simulate};

/// One thread in a group limited to `quota_us` per 100 ms, with `phases`.
fn run(quota_us: &str, loops: i64, phases: &str) -> throttlelab_core::output::TaskStats {
    let text = format!(
        r#"
name = "rt-app-phases"
duration_s = 10
[machine]
cpus = 1
[[cgroup]]
name = "app"
period_us = 100000
quota_us = {quota_us}
[[task]]
name = "t"
cgroup = "app"
loop = {loops}
phases = {phases}
"#
    );
    let out = simulate(&load(&text, &[]).unwrap());
    out.tasks["t"].clone()
}

#[test]
fn a_runtime_phase_lasts_its_wall_time_whatever_cpu_it_gets() {
    // 10 rounds of 100 ms busy under half a CPU: done after 1 s and a little
    // (a round that is up while its thread is throttled ends when the thread
    // runs again, as rt-app reads the clock only while running), having had
    // about half of it; the same work as run_us needs twice the time.
    let runtime = run("50000", 10, "[{ runtime_us = 100000 }]");
    let finished = runtime.finished_s.unwrap();
    assert!((1.0..1.1).contains(&finished), "{finished}");
    assert!((450_000..560_000).contains(&runtime.cpu_usec), "{}", runtime.cpu_usec);
    let work = run("50000", 10, "[{ run_us = 100000 }]");
    assert!(work.finished_s.unwrap() > 1.9, "{:?}", work.finished_s);
    // Unlimited, it has the whole CPU for its wall time.
    let alone = run("\"max\"", 10, "[{ runtime_us = 100000 }]");
    assert!((990_000..1_010_000).contains(&alone.cpu_usec), "{}", alone.cpu_usec);
}

#[test]
fn a_timer_wakes_a_period_after_its_last_expiry() {
    // 20 ms of work every 50 ms: 20 rounds end at 1 s, the timer's 20th expiry.
    let on_time = run("\"max\"", 20, "[{ run_us = 20000 }, { timer = { period_us = 50000 } }]");
    let finished = on_time.finished_s.unwrap();
    assert!((0.999..1.001).contains(&finished), "{finished}");
}

#[test]
fn a_late_timer_does_not_sleep_and_its_mode_says_where_the_next_falls() {
    // 80 ms of work every 50 ms under 50 ms per 100 ms: every expiry is
    // missed, so neither mode sleeps and 10 rounds take the 1.6 s of CPU
    // time the quota gives at half speed, whichever the mode.
    let phases = |mode: &str| format!("[{{ run_us = 80000 }}, {{ timer = {{ period_us = 50000, mode = \"{mode}\" }} }}]");
    for mode in ["relative", "absolute"] {
        let late = run("50000", 10, &phases(mode));
        let finished = late.finished_s.unwrap();
        assert!((1.5..1.7).contains(&finished), "{mode}: {finished}");
    }
    // One late round, then on time: relative restarts the grid at the late
    // wake-up, absolute keeps the first grid and catches up.
    let mixed = |mode: &str| {
        format!(
            "[{{ run_us = 120000 }}, {{ timer = {{ period_us = 50000, mode = \"{mode}\" }} }}, \
             {{ run_us = 10000 }}, {{ timer = {{ period_us = 50000, mode = \"{mode}\" }} }}]"
        )
    };
    let relative = run("\"max\"", 1, &mixed("relative")).finished_s.unwrap();
    let absolute = run("\"max\"", 1, &mixed("absolute")).finished_s.unwrap();
    // The first expiry (50 ms) is missed at 120 ms. relative: the next falls
    // at 170 ms, a sleep; absolute: at 100 ms, missed again at 130 ms, no sleep.
    assert!((0.169..0.171).contains(&relative), "{relative}");
    assert!((0.129..0.131).contains(&absolute), "{absolute}");
}
