//! SCHED_DEADLINE (#6): CBS bandwidth among CPU hogs, and admission control.

use throttlelab_core::{load, simulate};

/// One deadline task (30 ms every 100 ms) among 8 CPU hogs on 2 CPUs; `dl`
/// replaces the deadline task's phases and thread count.
fn scenario(threads: u32, phases: &str, on_refused: &str) -> String {
    format!(
        r#"name = "dl"
duration_s = 5
[machine]
cpus = 2
hz = 250
[kernel]
profile = "6.18"
[[task]]
name = "hogs"
threads = 8
phases = [{{ run_us = 100_000_000 }}]
[[task]]
name = "dl"
threads = {threads}
policy = "deadline"
runtime_us = 30_000
deadline_us = 100_000
period_us = 100_000
on_refused = "{on_refused}"
phases = {phases}
"#
    )
}

/// A greedy deadline task gets exactly its reservation, 0.30 of a CPU.
#[test]
fn greedy_deadline_task_gets_its_bandwidth() {
    let out = simulate(&load(&scenario(1, "[{ run_us = 100_000_000 }]", "error"), &[]).unwrap());
    let dl = &out.tasks["dl"];
    let share = dl.cpu_usec as f64 / 5e6;
    assert!((share - 0.30).abs() <= 0.01, "{share}");
    assert_eq!(dl.deadline_misses, Some(0));
    assert_eq!(dl.admission_refusals, Some(0));
    // The hogs share the rest of the two CPUs.
    assert!(out.tasks["hogs"].cpu_usec as f64 > 0.98 * (2.0 * 5e6 - dl.cpu_usec as f64));
}

/// A periodic job of 30 ms every 100 ms runs at once, every period, on time.
#[test]
fn periodic_deadline_jobs_meet_their_deadlines() {
    let out = simulate(&load(&scenario(1, "[{ run_us = 30_000 }, { timer_us = 100_000 }]", "error"), &[]).unwrap());
    let dl = &out.tasks["dl"];
    assert!((dl.work_usec as f64 / 5e6 - 0.30).abs() <= 0.01, "{dl:?}");
    assert_eq!(dl.deadline_misses, Some(0));
}

/// Seven such tasks need 2.1 CPUs of 2 x 95 %: the seventh is refused and
/// keeps retrying as a fair thread; with on_refused = "error" the run fails.
#[test]
fn admission_control_refuses_the_seventh() {
    let out = simulate(&load(&scenario(7, "[{ run_us = 100_000_000 }]", "retry"), &[]).unwrap());
    let dl = &out.tasks["dl"];
    // Tried at 0 s and every 100 ms up to the end at 5 s, refused every time.
    assert_eq!(dl.admission_refusals, Some(51));
    assert_eq!(dl.deadline_misses, Some(0));
    let e = load(&scenario(7, "[{ run_us = 100_000_000 }]", "error"), &[]).unwrap_err();
    assert_eq!(e.key, "task.dl");
    assert!(e.message.contains("admission refused"), "{e}");
}

#[test]
fn malformed_deadline_parameters_are_refused() {
    let base = scenario(1, "[{ run_us = 1000 }]", "retry");
    let cases = [
        ("runtime_us = 30_000", "runtime_us = 300_000", "task.dl.runtime_us"),
        ("period_us = 100_000", "period_us = 50", "task.dl.runtime_us"),
        ("on_refused = \"retry\"", "on_refused = \"retry\"\ncpus = \"0\"", "task.dl.cpus"),
        ("runtime_us = 30_000", "", "task.dl.runtime_us"),
    ];
    for (from, to, key) in cases {
        let e = load(&base.replace(from, to), &[]).unwrap_err();
        assert_eq!(e.key, key, "{to}: {e}");
    }
    let normal = base.replace("policy = \"deadline\"", "policy = \"normal\"");
    assert_eq!(load(&normal, &[]).unwrap_err().key, "task.dl.runtime_us");
    let e = load(&base.replace("on_refused = \"retry\"", "on_refused = \"maybe\""), &[]).unwrap_err();
    assert!(e.message.contains("unknown variant"), "{e}");
}

/// A refused thread runs in the fair class until a deadline thread leaves,
/// then is admitted and gets its reservation from there on.
#[test]
fn a_retrying_thread_is_admitted_when_bandwidth_frees() {
    let text = r#"name = "retry"
duration_s = 4
[machine]
cpus = 1
[[task]]
name = "first"
policy = "deadline"
runtime_us = 60_000
period_us = 100_000
loop = 1
phases = [{ run_us = 600_000 }]
[[task]]
name = "second"
policy = "deadline"
runtime_us = 60_000
period_us = 100_000
phases = [{ run_us = 100_000_000 }]
[[task]]
name = "hog"
phases = [{ run_us = 100_000_000 }]
"#;
    let out = simulate(&load(text, &[]).unwrap());
    let (first, second) = (&out.tasks["first"], &out.tasks["second"]);
    // `first` is done after 10 periods of 60 ms; `second` was refused every
    // 100 ms until then, then holds 60 % of the CPU for the remaining ~3 s.
    let done = first.finished_s.unwrap();
    assert!((0.9..1.1).contains(&done), "{done}");
    let refusals = second.admission_refusals.unwrap();
    assert!((9..=12).contains(&refusals), "{refusals}");
    assert!(second.cpu_usec as f64 > 0.6 * (4.0 - done) * 1e6, "{second:?}");
    assert_eq!(second.deadline_misses, Some(0));
}

/// From 6.12 each CPU's fair server (50 ms / 1 s) counts in admission, so
/// deadline tasks get 90 % of the CPUs, not 95 %. Measured on the 6.18 host
/// (2 CPUs): two 900 ms / 1 s reservations fit, two of 950 ms do not (one is
/// refused), and of six 310 ms ones five fit.
#[test]
fn the_fair_servers_take_their_share_of_admission() {
    let refused = |profile: &str, threads: u32, runtime_ms: u64| {
        let text = format!(
            "name = \"a\"\nduration_s = 0.5\n[machine]\ncpus = 2\n[kernel]\nprofile = \"{profile}\"\n[[task]]\nname = \"dl\"\nthreads = {threads}\npolicy = \"deadline\"\nruntime_us = {}\nperiod_us = 1_000_000\nretry_ms = 1000\nphases = [{{ run_us = 1_000 }}, {{ sleep_us = 100_000 }}]\n",
            runtime_ms * 1000
        );
        simulate(&load(&text, &[]).unwrap()).tasks["dl"].admission_refusals.unwrap()
    };
    assert_eq!(refused("6.18", 2, 900), 0);
    assert_eq!(refused("6.18", 2, 950), 1);
    assert_eq!(refused("6.18", 6, 310), 1);
    assert_eq!(refused("6.12", 2, 950), 1, "6.12's fair servers");
    assert_eq!(refused("6.6", 2, 950), 0, "before 6.12: 95 %");
    assert_eq!(refused("6.6", 6, 310), 0);
}
