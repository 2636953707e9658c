//! Scenario rules that both backends rely on: what `load` refuses, and that
//! whatever it accepts runs.

use throttlelab_core::scenario::{MAX_CFS_RQS, MAX_REQUESTS, MAX_SAMPLES, MAX_THREADS};
use throttlelab_core::{load, simulate, ScenarioError};

const BASE: &str = r#"
name = "t"
duration_s = 0.05

[machine]
cpus = 4

[[cgroup]]
name = "app"
quota_us = 20000
period_us = 10000
"#;

fn with(extra: &str) -> String {
    format!("{BASE}\n{extra}")
}

fn err(text: &str) -> ScenarioError {
    load(text, &[]).expect_err("refused")
}

const SPIN: &str = "phases = [{ run_us = 1000 }]";

#[test]
fn task_cpus_must_meet_its_cgroups() {
    // The issue's case: accepted by validate, then an index out of bounds in run.
    let text = with(&format!("[[cgroup]]\nname = \"one\"\ncpus = \"0\"\n[[task]]\nname = \"w\"\ncgroup = \"one\"\ncpus = \"1\"\n{SPIN}"));
    let e = err(&text);
    assert_eq!(e.key, "task.w.cpus");
    assert_eq!(e.message, "no CPU of 1 is in its cgroup's cpus (0)");
    // Inherited from an ancestor, and the same for services.
    let nested = "[[cgroup]]\nname = \"top\"\ncpus = \"0-1\"\n[[cgroup]]\nname = \"mid\"\nparent = \"top\"\n";
    let e = err(&with(&format!("{nested}[[task]]\nname = \"w\"\ncgroup = \"mid\"\ncpus = \"2-3\"\n{SPIN}")));
    assert_eq!((e.key.as_str(), e.message.as_str()), ("task.w.cpus", "no CPU of 2-3 is in its cgroup's cpus (0-1)"));
    let svc = "[[service]]\nname = \"s\"\ncgroup = \"mid\"\ncpus = \"3\"\nrate_per_s = 10\ncost_us = 100\n";
    assert_eq!(err(&with(&format!("{nested}{svc}"))).key, "service.s.cpus");
    // Overlapping is enough: the thread runs where both allow.
    let s = load(&with(&format!("{nested}[[task]]\nname = \"w\"\ncgroup = \"mid\"\ncpus = \"1-3\"\n{SPIN}")), &[]).unwrap();
    simulate(&s);
}

#[test]
fn child_cpus_within_parents() {
    let text = with("[[cgroup]]\nname = \"top\"\ncpus = \"0-1\"\n[[cgroup]]\nname = \"mid\"\nparent = \"top\"\n[[cgroup]]\nname = \"leaf\"\nparent = \"mid\"\ncpus = \"1-2\"\n");
    let e = err(&text);
    assert_eq!(e.key, "cgroup.leaf.cpus");
    assert_eq!(e.message, "1-2 is not within its parent's cpus (0-1), as cpuset requires");
    load(&text.replace("\"1-2\"", "\"1\""), &[]).unwrap();
}

#[test]
fn cpu_lists_are_bounded_before_expansion() {
    for list in ["0-4294967295", "0-18446744073709551615", "0-300000000"] {
        let e = err(&with(&format!("[[task]]\nname = \"w\"\ncpus = \"{list}\"\n{SPIN}")));
        assert_eq!(e.key, "task.w.cpus");
        assert!(e.message.contains("ids are below 8192"), "{e}");
    }
    let e = err(&with(&format!("[[task]]\nname = \"w\"\ncpus = \"0-4\"\n{SPIN}")));
    assert_eq!(e.message, "CPU 4 does not exist (machine.cpus = 4)");
}

#[test]
fn names_are_plain() {
    let task = |name: &str| with(&format!("[[task]]\nname = {}\n{SPIN}", toml::Value::from(name)));
    for bad in ["a\nb", "a\u{1b}[31mb", "a.b", "", "a b", &"x".repeat(65)] {
        let e = err(&task(bad));
        assert_eq!(e.key, "task[0].name");
        assert!(e.message.starts_with("must be 1 to 64 ASCII letters, digits, '_' or '-', got "), "{e}");
        assert!(!e.to_string().chars().any(char::is_control), "{e:?}");
    }
    load(&task("Web_server-2"), &[]).unwrap();
    assert_eq!(err(&BASE.replace("\"app\"", "\"a/b\"")).key, "cgroup[0].name");
    let svc = with("[[service]]\nname = \"s\\u0007\"\nrate_per_s = 10\ncost_us = 100\n");
    assert_eq!(err(&svc).key, "service[0].name");
    let class = with(&format!("[[task]]\nname = \"w\"\nclass = \"x\\r\"\n{SPIN}"));
    assert_eq!(err(&class).key, "task.w.class");
    let e = err(&BASE.replace("name = \"t\"", "name = \"t\\u001b]0;pwned\\u0007\""));
    assert_eq!(e.key, "name");
    assert!(e.message.starts_with("must be 1 to 128 ASCII letters, digits, spaces or any of \"_-.+:,/()\""), "{e}");
    load(&BASE.replace("name = \"t\"", "name = \"fibtest 88 threads (5.3.7), run 2/3\""), &[]).unwrap();
}

#[test]
fn totals_are_bounded() {
    let many = (0..100).map(|i| format!("[[task]]\nname = \"t{i}\"\nthreads = 100000\n{SPIN}\n")).collect::<String>();
    let e = err(&with(&many));
    assert_eq!(e.key, "task.t0.threads");
    assert_eq!(e.message, format!("the tasks and services have 10000000 threads in all, more than the {MAX_THREADS} a run may have; use fewer threads"));

    let tasks = (0..50).map(|i| format!("[[task]]\nname = \"t{i}\"\n{SPIN}\n")).collect::<String>();
    let day = with(&tasks).replace("duration_s = 0.05", "duration_s = 86400\nsample_ms = 1");
    let e = err(&day);
    assert_eq!(e.key, "sample_ms");
    assert!(e.message.contains(&format!("keep 4320000000 samples, more than the {MAX_SAMPLES}")), "{e}");

    let busy = with("[[service]]\nname = \"s\"\nrate_per_s = 1000000\ncost_us = 1\n").replace("duration_s = 0.05", "duration_s = 100");
    let e = err(&busy);
    assert_eq!(e.key, "service.s.rate_per_s");
    assert!(e.message.contains(&format!("expect 100000000 requests in 100 s, each one's latency kept, more than the {MAX_REQUESTS}")), "{e}");

    let groups = (0..300).map(|i| format!("[[cgroup]]\nname = \"g{i}\"\n")).collect::<String>();
    let e = err(&with(&groups).replace("cpus = 4", "cpus = 4096"));
    assert_eq!(e.key, "machine.cpus");
    assert!(e.message.contains(&format!("need 1236992 runqueues, more than the {MAX_CFS_RQS}")), "{e}");
}

#[test]
fn trace_csv_must_be_a_regular_file() {
    let e = err(&with("[[task]]\nname = \"w\"\ntrace_csv = \"/dev/zero\"\n"));
    assert_eq!(e.to_string(), "task.w.trace_csv: /dev/zero is a character device: give a regular file (line 15)");
}

#[test]
fn times_are_bounded_before_conversion() {
    // Found by the fuzzer: start_spread_us * 1000 overflowed in the simulator.
    let e = err(&with(&format!("[[task]]\nname = \"w\"\nstart_spread_us = 9223372036854775807\n{SPIN}")));
    assert_eq!(e.key, "task.w.start_spread_us");
    assert_eq!(e.message, "must be at most 10000000000000 us (about 116 days), got 9223372036854775807");
    let e = err(&with("[[task]]\nname = \"w\"\nphases = [{ run_us = 1000 }, { sleep_us = 18446744073709551615 }]\n"));
    assert_eq!(e.key, "task.w.phases[1].sleep_us");
    let e = err(&with(&format!("[[task]]\nname = \"w\"\nprofile_ms = 18446744073709551615\n{SPIN}")));
    assert_eq!(e.key, "task.w.profile_ms");
    let e = err(&with("[[task]]\nname = \"w\"\nwindows = [[0, 1e300, 1]]\n"));
    assert_eq!(e.key, "task.w.windows[0]");
    let e = err(&with("[[write]]\ncgroup = \"app\"\nstart_ms = 0\nevery_ms = 1e300\n"));
    assert_eq!(e.key, "write[0].at_ms");
    let e = err(&with("[[service]]\nname = \"s\"\nrate_per_s = 10\ncost_us = 18446744073709551615\n"));
    assert_eq!(e.key, "service.s.cost_us");
}

#[test]
fn deadline_tasks_need_every_cpu() {
    let dl = "policy = \"deadline\"\nruntime_us = 1000\nperiod_us = 10000\n";
    let text = with(&format!("[[cgroup]]\nname = \"one\"\ncpus = \"0-1\"\n[[task]]\nname = \"d\"\ncgroup = \"one\"\n{dl}{SPIN}"));
    let e = err(&text);
    assert_eq!(e.key, "task.d.cgroup");
    assert!(e.message.ends_with("(root domain), but its cgroup's cpus are 0-1"), "{e}");
    load(&text.replace("\"0-1\"", "\"0-3\""), &[]).unwrap();
}

#[test]
fn request_cost_spread_is_bounded() {
    let svc = |cv: &str| with(&format!("[[service]]\nname = \"s\"\ncgroup = \"app\"\nrate_per_s = 100\ncost_us = 1000\ncost_cv = {cv}\n"));
    for cv in ["-0.5", "4.5", "nan"] {
        let e = err(&svc(cv));
        assert_eq!(e.key, "service.s.cost_cv", "{cv}");
        assert!(e.message.starts_with("must be in [0, 4]"), "{}", e.message);
    }
    simulate(&load(&svc("0.5"), &[]).unwrap());
}
