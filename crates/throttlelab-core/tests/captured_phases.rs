//! Captured threads (`phases_file`): a timed sleep keeps its length (a
//! catch-up sleep less the last one's lateness), a wake-up from outside its
//! absolute time, and a sibling's wake-up waits for the sibling; a thread
//! that depends on no other starts where each seed draws in its cycle.

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
    // 15 ms of quota per 100 ms: the group throttles, the wake-up chain ends
    // later, and the order of a wake-up and its waiter holds. c, alone on its
    // CPU from 30 ms, ends late only if no refill falls in its 10 ms: with the
    // period timer's random offset (6.6+) one can (traced: a refill at 32.8 ms).
    let tight = run(15_000);
    let app = &tight["cgroups"]["app"];
    assert!(app["nr_throttled"].as_u64().unwrap() > 0);
    assert_eq!(app["usage_usec"].as_u64().unwrap() / 1000, 40);
    for (task, free_ms) in [("a", 40.0), ("b", 20.0)] {
        assert!(finished_ms(&tight, task) > free_ms + 1.0, "{task}: {tight}");
    }
    assert!(finished_ms(&tight, "c") >= 40.0 - 0.5, "{tight}");
}

#[test]
fn requests_last_from_their_wake_up_to_the_next_block() {
    // c is woken from outside at 30 ms (4 ms of work), at 32 ms while still
    // busy (2 ms more: queued behind the first), and at 60 ms (1 ms of work, a
    // 5 ms timed sleep that ends the request, 1 ms more that belongs to none).
    let text = format!(
        "{HEADER}\n[a]\nrun_us 1\n[b]\nrun_us 1\n[c]\nuntil_us 30000\nrun_us 4000\nuntil_us 32000\nrun_us 2000\n\
         until_us 60000\nrun_us 1000\nsleep_us 5000\nrun_us 1000\n"
    );
    let file = gz_file("requests.gz", &text);
    let out = serde_json::to_value(simulate(&load(&scenario(file.to_str().unwrap(), 1_000_000), &[]).unwrap())).unwrap();
    let c = &out["tasks"]["c"];
    assert_eq!(c["requests"], 3, "{c}");
    let ms = |p: &str| c["latency_us"][p].as_f64().unwrap() / 1e3;
    // 4 ms, 4 ms (32 -> 36) and 1 ms, each plus wake-up and tick costs below 0.5 ms.
    assert!((ms("p50") - 4.0).abs() < 0.5 && (ms("max") - 4.0).abs() < 0.5, "{c}");
    // From when c took each up: 4 ms, 2 ms (34 -> 36: it was busy until 34) and 1 ms.
    let service_ms = |p: &str| c["service_latency_us"][p].as_f64().unwrap() / 1e3;
    assert!((service_ms("p50") - 2.0).abs() < 0.5 && (service_ms("max") - 4.0).abs() < 0.5, "{c}");
    assert!(out["tasks"]["a"].get("latency_us").is_none(), "a is never woken from outside");
    // Only asked for, every request's latency both ways, in the order answered.
    assert!(c.get("latencies_us").is_none(), "{c}");
    let kept = simulate(&load(&scenario(file.to_str().unwrap(), 1_000_000), &["keep_latencies=true".into()]).unwrap());
    let all = kept.tasks["c"].latencies_us.as_ref().expect("keep_latencies keeps them");
    let ms = |us: &[u64]| us.iter().map(|u| (*u as f64 / 1e3).round() as u64).collect::<Vec<_>>();
    assert_eq!((ms(&all.from_arrival), ms(&all.from_start)), (vec![4, 4, 1], vec![4, 2, 1]), "{all:?}");
    // Throttled at 3 ms per 100 ms, the first request waits for the next period.
    let tight = serde_json::to_value(simulate(&load(&scenario(file.to_str().unwrap(), 3_000), &[]).unwrap())).unwrap();
    assert!(tight["tasks"]["c"]["latency_us"]["max"].as_u64().unwrap() > 60_000, "{}", tight["tasks"]["c"]);
}

#[test]
fn a_siblings_wake_up_is_a_request_from_when_it_is_taken_up() {
    // a wakes b at 1 ms and at 12 ms; b works 2 ms for each and waits again.
    let text = format!(
        "{HEADER}\n[a]\nrun_us 1000\nwake b\nsleep_us 10000\nrun_us 1000\nwake b\nsleep_us 10000\n\
         [b]\nwait\nrun_us 2000\nwait\nrun_us 2000\nwait\n[c]\nrun_us 1\n"
    );
    let file = gz_file("sibling.gz", &text);
    let out = serde_json::to_value(simulate(&load(&scenario(file.to_str().unwrap(), 1_000_000), &[]).unwrap())).unwrap();
    let b = &out["tasks"]["b"];
    assert_eq!(b["requests"], 2, "{b}");
    assert!((b["latency_us"]["max"].as_f64().unwrap() / 1e3 - 2.0).abs() < 0.5, "{b}");
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
fn catch_up_and_schedule_sleeps_make_up_for_a_late_wake_up() {
    // a: 1 ms of work and a 20 ms sleep, six times, then 1 ms; b works 300 ms
    // and at 20 ms per 100 ms keeps the group throttled from early in each
    // period, so a's wake-ups wait for the next period. A plain sleep then
    // sleeps its 20 ms again; a catch-up sleep less the time it waited, and
    // a schedule sleep until its next due time, 20 ms after the last.
    let finished = |sleep: &str, quota_us| {
        let body = format!("run_us 1000\n{sleep} 20000\n").repeat(6);
        // c wakes a at the start: a does not start at a random point of its cycle.
        let text = format!("{HEADER}\n[a]\nwait\n{body}run_us 1000\n[b]\nrun_us 300000\n[c]\nrun_us 1\nwake a\n");
        let file = gz_file(&format!("{sleep}-{quota_us}.gz"), &text);
        let mut s = scenario(file.to_str().unwrap(), quota_us);
        s = s.replace("duration_s = 1", "duration_s = 2");
        finished_ms(&serde_json::to_value(simulate(&load(&s, &[]).unwrap())).unwrap(), "a")
    };
    let (plain, catch_up, schedule) = (finished("sleep_us", 20_000), finished("catchup_us", 20_000), finished("schedule_us", 20_000));
    assert!(catch_up + 50.0 < plain, "plain {plain} ms, catch-up {catch_up} ms");
    // A wait longer than a sleep, which a catch-up sleep forgets, a schedule
    // makes up with the sleeps after.
    assert!(schedule + 10.0 < catch_up, "catch-up {catch_up} ms, schedule {schedule} ms");
    // Never late, a plain or catch-up sleep sleeps its length: 7 ms of work
    // and 120 ms of sleep; a schedule's wake-ups are due 20 ms apart, its
    // work within: 1 ms, six gaps of 20 ms, then 1 ms.
    for (sleep, want_ms) in [("sleep_us", 127.0), ("catchup_us", 127.0), ("schedule_us", 122.0)] {
        let ms = finished(sleep, 1_000_000);
        assert!((ms - want_ms).abs() < 0.5, "{sleep}: {ms} ms");
    }
}

#[test]
fn an_independent_thread_starts_where_each_seed_draws_in_its_cycle_and_keeps_it_to_the_end() {
    // a: ten cycles of 10 ms of work and a 90 ms sleep, on no one's wake-up.
    // Each seed starts it somewhere in its cycle, the part before moved to
    // the end: its first 0.55 s hold 50 to 60 ms of work, by where it
    // began. It goes round again when its phases are done (`loop = 1`
    // notwithstanding): 2 s hold 200 ms of work and it never finishes.
    // b, woken by a sibling, and c replay their phases once.
    let body = "run_us 10000\nsleep_us 90000\n".repeat(10);
    let file = gz_file("independent.gz", &format!("{HEADER}\n[a]\n{body}[b]\nwait\nrun_us 10000\n[c]\nrun_us 1\nwake b\n"));
    let run = |seed: u64, duration_s: f64| {
        let set = [format!("seed={seed}"), format!("duration_s={duration_s}")];
        serde_json::to_value(simulate(&load(&scenario(file.to_str().unwrap(), 1_000_000), &set).unwrap())).unwrap()
    };
    let mut first_half_ms = Vec::new();
    for seed in 1..=8 {
        let whole = run(seed, 2.0);
        let a = &whole["tasks"]["a"];
        assert!((199_000..=200_000).contains(&a["work_usec"].as_u64().unwrap()), "{a}");
        assert!(a["finished_s"].is_null(), "{a}");
        assert!((finished_ms(&whole, "b") - 10.0).abs() < 0.5, "b waits for c's wake, not a draw");
        let half = run(seed, 0.55)["tasks"]["a"]["work_usec"].as_u64().unwrap() / 1000;
        assert!((50..=60).contains(&half), "seed {seed}: {half} ms");
        first_half_ms.push(half);
    }
    first_half_ms.sort();
    first_half_ms.dedup();
    assert!(first_half_ms.len() >= 3, "the seeds draw different places: {first_half_ms:?}");
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
