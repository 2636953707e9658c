//! Trace-driven tasks (#6, 004 Algorithm 1): measurement windows run in 50 ms
//! slices; the delay is the response time beyond the trace's own length.

use throttlelab_core::{load, simulate};

fn scenario(hogs: u32) -> String {
    format!(
        r#"name = "trace"
[machine]
cpus = 2
[[task]]
name = "critical"
class = "critical"
windows = [[0, 10, 0.5], [10, 20, 1.5]]
[[task]]
name = "hogs"
threads = {hogs}
loop = 1
phases = [{{ run_us = 30_000_000 }}]
"#
    )
}

#[test]
fn an_uncontended_trace_runs_on_time() {
    let out = simulate(&load(&scenario(0), &[]).unwrap());
    let t = &out.tasks["critical"];
    assert_eq!(t.threads, 2, "a rate of 1.5 needs 2 threads");
    assert_eq!(t.class.as_deref(), Some("critical"));
    // 0.5 x 10 s + 1.5 x 10 s of CPU.
    assert!((t.cpu_usec as f64 - 20e6).abs() < 0.01 * 20e6, "{t:?}");
    let delay = t.delay_s.expect("a trace task reports its delay");
    assert!((0.0..0.1).contains(&delay), "{delay}");
}

#[test]
fn contention_delays_a_trace() {
    let out = simulate(&load(&scenario(4), &[]).unwrap());
    let delay = out.tasks["critical"].delay_s.unwrap();
    assert!(delay > 1.0, "4 hogs on 2 CPUs must delay the trace: {delay}");
}

#[test]
fn malformed_windows_are_refused() {
    let e = load(&scenario(0).replace("[10, 20, 1.5]", "[5, 20, 1.5]"), &[]).unwrap_err();
    assert_eq!(e.key, "task.critical.windows[1]");
    let e = load(&scenario(0).replace("[[0, 10, 0.5]", "[[0, 10, -1]"), &[]).unwrap_err();
    assert!(e.message.contains("cpu_rate"), "{e}");
    let both = scenario(0).replace("class = \"critical\"", "class = \"critical\"\nphases = [{ run_us = 5 }]");
    assert!(load(&both, &[]).unwrap_err().message.contains("not both"));
}

/// 004 Fig. 8, HCU on 4 CPUs: critical tasks wait far less under
/// SCHED_DEADLINE (a runtime per trace window) than in a cgroup with 95 % of
/// the shares (paper: 3-40x), and less there than under plain CFS.
#[test]
fn deadline_isolates_critical_tasks_better_than_shares() {
    let critical_delay = |text: &str| {
        let out = simulate(&load(text, &[]).unwrap());
        let d: Vec<f64> =
            out.tasks.values().filter(|t| t.class.as_deref() == Some("critical")).map(|t| t.delay_s.unwrap()).collect();
        d.iter().sum::<f64>() / d.len() as f64
    };
    let cfs = critical_delay(include_str!("../../../python/throttlelab/scenarios/thiyyakat-hcu-cfs.toml"));
    let cgroup = critical_delay(include_str!("../../../python/throttlelab/scenarios/thiyyakat-hcu-cgroup.toml"));
    let deadline = critical_delay(include_str!("../../../python/throttlelab/scenarios/thiyyakat-hcu-deadline.toml"));
    assert!(cgroup >= 3.0 * deadline, "cgroup {cgroup} s, deadline {deadline} s");
    assert!(cfs > cgroup, "cfs {cfs} s, cgroup {cgroup} s");
}
