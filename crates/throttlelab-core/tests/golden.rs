//! Golden outputs: every built-in scenario's output JSON (the `engine` block
//! aside) and a digest of its bandwidth trace, byte for byte against
//! tests/golden/ (the repository's). A change to the engine's speed must not
//! change a single byte; a change meant to alter results regenerates the files:
//!
//!     THROTTLELAB_BLESS=1 cargo test -p throttlelab-core --release --test golden
//!
//! and the diff of tests/golden/ shows what moved. Besides the built-ins, a few
//! small cases cover what they leave out: every kernel profile and every
//! `kernel.features` entry on the run/sleep load of issue 36.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use throttlelab_core::trace::{Record, TraceKind, TraceOptions, Window};
use throttlelab_core::{load, Sim, SimOptions};

/// An output larger than this is stored as its digest only.
const MAX_STORED_BYTES: usize = 64 * 1024;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// FNV-1a, 64 bits: a digest that is the same on every platform and toolchain.
#[derive(Clone, Copy)]
struct Fnv(u64);

impl Fnv {
    fn new() -> Self {
        Fnv(0xcbf2_9ce4_8422_2325)
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ b as u64).wrapping_mul(0x0100_0000_01b3);
        }
    }
}

/// The run/sleep load of issue 36 at 8 CPUs for 1 s: 32 threads of 1 ms run,
/// 2 ms sleep under a 6-CPU quota, 2 spinners in an unlimited group.
const RUN_SLEEP: &str = r#"name = "run-sleep"
duration_s = 1
seed = 7
[machine]
cpus = 8
hz = 1000
[kernel]
profile = "6.18"
[[cgroup]]
name = "app"
period_us = 100000
quota_us = 600000
[[cgroup]]
name = "batch"
[[task]]
name = "worker"
cgroup = "app"
threads = 32
start_spread_us = 3000
phases = [{ run_us = 1000 }, { sleep_us = 2000 }]
[[task]]
name = "spinner"
cgroup = "batch"
threads = 2
phases = [{ run_us = 100_000_000 }]
"#;

/// (case name, scenario text, overrides).
fn cases() -> Vec<(String, String, Vec<String>)> {
    let dir = repo().join("python/throttlelab/scenarios");
    let mut names: Vec<_> = std::fs::read_dir(&dir)
        .expect("built-in scenarios")
        .map(|e| e.expect("dir entry").file_name().into_string().expect("utf-8 name"))
        .filter_map(|n| n.strip_suffix(".toml").map(str::to_string))
        .collect();
    names.sort();
    let mut cases: Vec<_> = names
        .into_iter()
        .map(|n| {
            let text = std::fs::read_to_string(dir.join(format!("{n}.toml"))).expect("readable built-in");
            (n, text, vec![])
        })
        .collect();
    for profile in ["4.18", "5.4", "5.14", "6.1", "6.6", "6.12", "6.18"] {
        cases.push((format!("run-sleep-{profile}"), RUN_SLEEP.into(), vec![format!("kernel.profile=\"{profile}\"")]));
    }
    for feature in ["interleave_timers", "atomic_pool", "hard_limits"] {
        cases.push((format!("run-sleep-{feature}"), RUN_SLEEP.into(), vec![format!("kernel.features=[\"{feature}\"]")]));
    }
    // The features that act on cpu.max writes and on debt, with the rewrites.
    let rewrites = std::fs::read_to_string(dir.join("ugedal-rewrites.toml")).expect("readable built-in");
    for feature in ["slush_fund", "noop_update"] {
        cases.push((format!("ugedal-rewrites-{feature}"), rewrites.clone(), vec![format!("kernel.features=[\"{feature}\"]")]));
    }
    cases.push(("run-sleep-smt2".into(), RUN_SLEEP.into(), vec!["machine.smt=2".into(), "machine.smt_speed=[1.0, 0.6]".into()]));
    cases
}

/// A trace record's fields, for the digest.
fn record_bytes(r: &Record) -> Vec<u8> {
    let (kind, arg) = match r.kind {
        TraceKind::Tick => (0, 0),
        TraceKind::Switch(t) => (1, t.map_or(u64::MAX, |t| t as u64)),
        TraceKind::Assign(ns) => (2, ns),
        TraceKind::Return(ns) => (3, ns),
        TraceKind::Refill => (4, 0),
        TraceKind::SlackDistribute => (5, 0),
        TraceKind::Throttle => (6, 0),
        TraceKind::Unthrottle => (7, 0),
        TraceKind::SlackTimer => (8, 0),
        TraceKind::Distribute(ns) => (9, ns),
    };
    let cpu = r.cpu.map_or(u64::MAX, |c| c as u64);
    let local = r.local_ns.map_or(i64::MIN, |l| l);
    [r.time, cpu, r.tg as u64, kind, arg, local as u64, r.global_ns].iter().flat_map(|v| v.to_le_bytes()).collect()
}

/// The output without its `engine` block (pretty JSON) and the trace's
/// record count and digest.
fn run(text: &str, overrides: &[String]) -> (String, u64, u64) {
    let scenario = load(text, overrides).expect("valid case");
    let digest = Arc::new(Mutex::new((0u64, Fnv::new())));
    let sink_digest = digest.clone();
    let options = TraceOptions {
        window: Window::WHOLE_RUN,
        sink: Some(Box::new(move |trace, _| {
            let mut d = sink_digest.lock().expect("digest");
            for r in &trace.records {
                d.0 += 1;
                d.1.write(&record_bytes(r));
            }
        })),
    };
    let (mut out, _) = Sim::new(&scenario, SimOptions { trace: Some(options), ..SimOptions::default() }).run();
    out.engine = None;
    let json = serde_json::to_string_pretty(&out).expect("output serialises") + "\n";
    let (n, fnv) = *digest.lock().expect("digest");
    (json, n, fnv.0)
}

/// The stored form: the output itself (or its digest if large), then the trace's.
fn golden_text(json: &str, records: u64, trace_fnv: u64) -> String {
    let mut f = Fnv::new();
    f.write(json.as_bytes());
    let output = if json.len() <= MAX_STORED_BYTES { json.to_string() } else { format!("{{\"output_fnv1a64\": \"{:016x}\"}}\n", f.0) };
    format!("{output}{{\"output_bytes\": {}, \"trace_records\": {records}, \"trace_fnv1a64\": \"{trace_fnv:016x}\"}}\n", json.len())
}

#[test]
fn every_builtin_matches_its_golden_output() {
    let dir = repo().join("tests/golden");
    let bless = std::env::var_os("THROTTLELAB_BLESS").is_some();
    let mut changed = Vec::new();
    for (name, text, overrides) in cases() {
        let (json, records, fnv) = run(&text, &overrides);
        let got = golden_text(&json, records, fnv);
        let path = dir.join(format!("{name}.json"));
        if bless {
            std::fs::create_dir_all(&dir).expect("tests/golden");
            std::fs::write(&path, &got).expect("write golden");
            continue;
        }
        let want = std::fs::read_to_string(&path).unwrap_or_default();
        if got != want {
            let line = got.lines().zip(want.lines()).position(|(a, b)| a != b).map_or(0, |i| i + 1);
            changed.push(format!("{name} (first difference at line {line})"));
        }
    }
    assert!(
        changed.is_empty(),
        "outputs differ from tests/golden/: {}; if intended, regenerate with \
         THROTTLELAB_BLESS=1 cargo test -p throttlelab-core --release --test golden",
        changed.join(", ")
    );
}
