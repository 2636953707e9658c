//! Captured threads (`phases_file`): a timed sleep keeps its length, a wake-up
//! from outside its absolute time, and a sibling's wake-up waits for the sibling.

use std::io::Write;
use std::path::PathBuf;
use throttlelab_core::phases_file::HEADER;
use throttlelab_core::{load, rebase_paths, simulate};

/// Write `text` gzip-compressed as `name` in a directory of this test's own.
fn gz_file(name: &str, text: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("throttlelab-captured-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    let mut gz = flate2::write::GzEncoder::new(std::fs::File::create(&path).unwrap(), flate2::Compression::fast());
    gz.write_all(text.as_bytes()).unwrap();
    gz.finish().unwrap();
    path
}

/// Three captured threads in cgroup `app` of `quota_us` per 100 ms on two quiet CPUs.
fn scenario(file: &str, quota_us: u64) -> String {
    let mut s = format!(
        "name = \"captured\"\nduration_s = 1\n[machine]\ncpus = 2\nbackground_per_s = 0\ntick_jitter_us = 0\ntimer_jitter_us = 0\n\
         [[cgroup]]\nname = \"app\"\nperiod_us = 100000\nquota_us = {quota_us}\n"
    );
    for t in ["a", "b", "c"] {
        s += &format!("[[task]]\nname = \"{t}\"\ncgroup = \"app\"\nloop = 1\nphases_file = \"{file}\"\n");
    }
    s
}

fn finished_ms(out: &serde_json::Value, task: &str) -> f64 {
    out["tasks"][task]["finished_s"].as_f64().unwrap() * 1e3
}

#[test]
fn wake_ups_replay_by_their_kind() {
    // a: 10 ms of work, wakes b, sleeps 20 ms, 10 ms more. b waits for a, then
    // 10 ms. c: woken from outside at 30 ms for 10 ms.
    let text = format!(
        "{HEADER}\n[a]\nrun_us 10000\nwake b\nsleep_us 20000\nrun_us 10000\n[b]\nwait\nrun_us 10000\n[c]\nuntil_us 30000\nrun_us 10000\n"
    );
    let file = gz_file("kinds.gz", &text);
    let run = |quota_us| serde_json::to_value(simulate(&load(&scenario(file.to_str().unwrap(), quota_us), &[]).unwrap())).unwrap();
    let free = run(1_000_000);
    let near = |got: f64, want: f64| (got - want).abs() < 0.5;
    assert!(near(finished_ms(&free, "a"), 40.0), "{}", finished_ms(&free, "a"));
    assert!(near(finished_ms(&free, "b"), 20.0), "{}", finished_ms(&free, "b"));
    assert!(near(finished_ms(&free, "c"), 40.0), "{}", finished_ms(&free, "c"));
    // 15 ms of quota per 100 ms: the group throttles, everything ends later,
    // and the order of a wake-up and its waiter holds.
    let tight = run(15_000);
    let app = &tight["cgroups"]["app"];
    assert!(app["nr_throttled"].as_u64().unwrap() > 0);
    assert_eq!(app["usage_usec"].as_u64().unwrap() / 1000, 40);
    for (task, free_ms) in [("a", 40.0), ("b", 20.0), ("c", 40.0)] {
        assert!(finished_ms(&tight, task) > free_ms + 1.0, "{task}: {tight}");
    }
}

#[test]
fn a_wake_before_the_wait_is_kept() {
    // b reaches its wait after a woke it: it does not sleep.
    let text = format!("{HEADER}\n[a]\nrun_us 1000\nwake b\nsleep_us 100000\nrun_us 1\n[b]\nrun_us 5000\nwait\nrun_us 1000\n[c]\nrun_us 1\n");
    let file = gz_file("early.gz", &text);
    let out = serde_json::to_value(simulate(&load(&scenario(file.to_str().unwrap(), 1_000_000), &[]).unwrap())).unwrap();
    assert!((finished_ms(&out, "b") - 6.0).abs() < 0.5, "{}", finished_ms(&out, "b"));
}

#[test]
fn a_captured_threads_bursts_are_its_requests() {
    // c: two 10 ms bursts 50 ms apart, alone on the CPUs: each takes its 10 ms.
    // With 5 ms of quota per 100 ms the first waits for the next period.
    let text = format!("{HEADER}\n[a]\nrun_us 1\n[b]\nrun_us 1\n[c]\nrun_us 10000\nsleep_us 50000\nrun_us 10000\n");
    let file = gz_file("bursts.gz", &text);
    let run = |quota_us| serde_json::to_value(simulate(&load(&scenario(file.to_str().unwrap(), quota_us), &[]).unwrap())).unwrap();
    let free = run(1_000_000);
    assert_eq!(free["tasks"]["c"]["requests"], 2);
    let us = |out: &serde_json::Value, q: &str| out["tasks"]["c"]["latency_us"][q].as_u64().unwrap();
    assert!((9_900..=10_100).contains(&us(&free, "max")), "{free}");
    assert!(us(&run(5_000), "max") > 90_000);
}

#[test]
fn malformed_captures_name_the_key() {
    let err = |text: &str, name: &str| {
        let file = gz_file(name, text);
        load(&scenario(file.to_str().unwrap(), 1_000_000), &[]).unwrap_err().to_string()
    };
    let e = err(&format!("{HEADER}\n[a]\nrun_us 1\nwake z\n[b]\nrun_us 1\n[c]\nrun_us 1\n"), "unknown.gz");
    assert!(e.contains("task.a.phases_file: wake \"z\": no task of this file has that name"), "{e}");
    let e = err(&format!("{HEADER}\n[a]\nrun_us 1\n[b]\nrun_us 1\n"), "missing.gz");
    assert!(e.contains("task.c.phases_file:") && e.contains("has no section [c]"), "{e}");
    let e = err(&format!("{HEADER}\n[a]\nsleep_us 1\n[b]\nrun_us 1\n[c]\nrun_us 1\n"), "idle.gz");
    assert!(e.contains("task.a.phases_file: its section has no run_us > 0"), "{e}");
    let plain = std::env::temp_dir().join(format!("throttlelab-captured-plain-{}", std::process::id()));
    std::fs::write(&plain, "plain text, not gzip-compressed").unwrap();
    let e = load(&scenario(plain.to_str().unwrap(), 1_000_000), &[]).unwrap_err().to_string();
    assert!(e.contains("invalid gzip header"), "{e}");
    std::fs::remove_file(plain).unwrap();
}

#[test]
fn a_relative_phases_file_is_read_beside_the_scenario() {
    let file = gz_file("rel.gz", &format!("{HEADER}\n[a]\nrun_us 1\n[b]\nrun_us 1\n[c]\nrun_us 1\n"));
    let text = rebase_paths(&scenario("rel.gz", 1_000_000), file.parent().unwrap());
    assert!(load(&text, &[]).is_ok());
}
