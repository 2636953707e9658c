//! No input panics: scenario files built from the real keys with arbitrary
//! values (wrong types, huge and negative numbers, strange strings, missing
//! tables) and arbitrary `--set` overrides either fail to load, with a
//! one-line error, or load into a scenario that runs (50 ms of it).
//!
//! A long search: `PROPTEST_CASES=20000 PROPTEST_RNG_SEED=$RANDOM cargo test
//! -p throttlelab-core --release --test fuzz` (a debug build also catches
//! arithmetic overflow).

mod common;

use proptest::prelude::*;
use proptest::sample::{select, subsequence};
use std::sync::OnceLock;
use throttlelab_core::{load, rebase_paths, simulate, simulate_traced};

/// What a key's plausible values look like; any key also gets wild ones.
#[derive(Debug, Clone, Copy)]
enum Kind {
    Count,
    Positive,
    Loop,
    Smt,
    Cpus,
    Hz,
    Us,
    Ns,
    Slice,
    Period,
    Quota,
    Burst,
    SampleMs,
    Secs,
    Ratio,
    Bool,
    Name,
    CpuList,
    Profile,
    Features,
    Phases,
    Windows,
    Word(&'static [&'static str]),
    Path,
    Floats,
}

use Kind::*;

type Keys = &'static [(&'static str, Kind)];

const TOP: Keys = &[("duration_s", Secs), ("seed", Count), ("sample_ms", SampleMs), ("keep_latencies", Bool)];
const MACHINE: Keys = &[
    ("cpus", Cpus),
    ("hz", Hz),
    ("smt", Smt),
    ("smt_speed", Floats),
    ("tick_jitter_us", Secs),
    ("timer_jitter_us", Secs),
    ("tick_late_share", Secs),
    ("tick_late_us", Secs),
    ("tick_late_together", Secs),
    ("idle_exit_us", Secs),
    ("tick_irq_us", Secs),
    ("background_per_s", Secs),
    ("background_us", Secs),
    ("uptime_s", Secs),
    ("tick_phase_us", Secs),
];
const KERNEL: Keys = &[
    ("profile", Profile),
    ("slice_us", Slice),
    ("features", Features),
    ("skew_tick", Bool),
    ("pool_lock_hold_ns", Ns),
    ("pool_transfer_ns", Ns),
];
const CGROUP: Keys = &[
    ("parent", Name),
    ("period_us", Period),
    ("quota_us", Quota),
    ("burst_us", Burst),
    ("weight", Positive),
    ("cpus", CpuList),
    ("period_timer_offset_us", Secs),
];
const TASK: Keys = &[
    ("cgroup", Name),
    ("threads", Count),
    ("cpus", CpuList),
    ("pin", Bool),
    ("loop", Loop),
    ("start_us", Us),
    ("start_spread_us", Us),
    ("class", Name),
];
/// Blocks of task keys that go together.
const DEADLINE: Keys = &[
    ("policy", Word(&["deadline", "normal"])),
    ("runtime_us", Us),
    ("period_us", Period),
    ("deadline_us", Period),
    ("on_refused", Word(&["retry", "error"])),
    ("retry_ms", Positive),
];
const TRACE: Keys = &[("windows", Windows), ("trace_csv", Path), ("clock_scale", Ratio), ("profile_ms", Positive)];
const SERVICE: Keys = &[
    ("cgroup", Name),
    ("workers", Positive),
    ("arrival", Word(&["poisson", "uniform"])),
    ("cpus", CpuList),
];
const WRITE: Keys = &[
    ("start_ms", Secs),
    ("every_ms", Secs),
    ("period_us", Period),
    ("quota_us", Quota),
    ("burst_us", Burst),
];

/// A valid trace file, written once.
fn trace_file() -> &'static str {
    static PATH: OnceLock<String> = OnceLock::new();
    PATH.get_or_init(|| {
        let path = std::env::temp_dir().join(format!("throttlelab-fuzz-{}.csv", std::process::id()));
        std::fs::write(&path, "start_s,end_s,cpu_rate,class\n0,0.02,0.5,critical\n0.03,0.1,1.5,critical\n").unwrap();
        path.to_string_lossy().into_owned()
    })
}

fn toml_str(s: &str) -> String {
    toml::Value::from(s).to_string()
}

/// Values of any type: edge numbers, odd strings, arrays, tables.
fn wild() -> BoxedStrategy<String> {
    let edge = select(&[
        "0", "-1", "1", "9223372036854775807", "-9223372036854775808", "inf", "-inf", "nan", "1e308", "-0.0",
        "1e-300", "true", "\"\"", "[]", "{}", "[1, \"a\"]", "{ a = 1 }", "\"0-18446744073709551615\"",
        "\"a\\nb\"", "\"\\u001b[31m\"", "1979-05-27T07:32:00Z", "[[]]", "[{}]", "4096", "100000",
        "4294967296", "18446744073709", "1e15", "86400.0001",
    ][..]);
    prop_oneof![
        3 => edge.prop_map(String::from),
        2 => any::<i64>().prop_map(|v| v.to_string()),
        2 => any::<f64>().prop_map(|v| toml::Value::from(v).to_string()),
        1 => any::<String>().prop_map(|s| toml_str(&s)),
    ]
    .boxed()
}

fn int(range: std::ops::Range<i64>) -> BoxedStrategy<String> {
    range.prop_map(|v| v.to_string()).boxed()
}

fn float(range: std::ops::Range<f64>) -> BoxedStrategy<String> {
    range.prop_map(|v| toml::Value::from(v).to_string()).boxed()
}

fn word(words: &'static [&'static str]) -> BoxedStrategy<String> {
    select(words).prop_map(toml_str).boxed()
}

/// Values a key takes in a valid scenario (mostly).
fn plausible(kind: Kind) -> BoxedStrategy<String> {
    match kind {
        Count => int(0..6),
        Positive => int(1..6),
        Loop => prop_oneof![Just("-1".to_string()), int(1..4)].boxed(),
        Smt => prop_oneof![3 => Just("1".to_string()), 1 => Just("2".to_string())].boxed(),
        Cpus => int(1..6),
        Hz => select(&[100, 250, 300, 1000][..]).prop_map(|v: i32| v.to_string()).boxed(),
        Us => prop_oneof![int(1..20_000), int(1_000..1_000_000), Just("1000000000".to_string())].boxed(),
        Ns => int(0..1_000),
        Slice => int(1_000..20_000),
        Period => int(1_000..200_000),
        Quota => prop_oneof![Just("-1".to_string()), int(1_000..200_000)].boxed(),
        Burst => prop_oneof![Just("0".to_string()), int(0..2_000)].boxed(),
        SampleMs => int(0..50),
        Secs => prop_oneof![float(0.001..0.2), float(0.0..100.0)].boxed(),
        Ratio => float(0.1..3.0),
        Bool => any::<bool>().prop_map(|v| v.to_string()).boxed(),
        Name => word(&["app", "b", "c"]),
        CpuList => word(&["0", "1", "0-1", "1-3", "0,2", "2-4"]),
        Profile => word(&["4.18", "5.4", "5.14", "6.1", "6.6", "6.12", "6.18"]),
        Features => subsequence(&["slush_fund", "noop_update", "atomic_pool", "interleave_timers"][..], 0..=2)
            .prop_map(|f| toml::Value::from(f).to_string())
            .boxed(),
        Phases => (int(1..20_000), prop::collection::vec((select(&["run_us", "runtime_us", "sleep_us", "timer_us", "timer"][..]), int(1..20_000)), 0..3))
            .prop_map(|(run, ps)| {
                let first = format!("{{ run_us = {run} }}");
                let phase = |k: &str, v: &String| match k {
                    "timer" => format!("{{ timer = {{ period_us = {v}, mode = \"absolute\" }} }}"),
                    _ => format!("{{ {k} = {v} }}"),
                };
                let items: Vec<String> = std::iter::once(first).chain(ps.iter().map(|(k, v)| phase(k, v))).collect();
                format!("[{}]", items.join(", "))
            })
            .boxed(),
        Windows => prop::collection::vec((0.0f64..0.2, 0.001f64..0.2, 0.0f64..4.0), 1..4)
            .prop_map(|ws| {
                let mut start = 0.0;
                let items: Vec<String> = ws
                    .iter()
                    .map(|(gap, len, rate)| {
                        start += gap;
                        let w = format!("[{start}, {}, {rate}]", start + len);
                        start += len;
                        w
                    })
                    .collect();
                format!("[{}]", items.join(", "))
            })
            .boxed(),
        Word(words) => word(words),
        Path => Just(toml_str(trace_file())).boxed(),
        Floats => prop::collection::vec(0.1f64..1.0, 1..2).prop_map(|v| toml::Value::from(v).to_string()).boxed(),
    }
}

/// Values of the right type but wrong for the key.
fn edge(kind: Kind) -> BoxedStrategy<String> {
    match kind {
        Name => word(&["a.b", "x\ny", "", "a b", "\u{1b}[2J", "cgroup", "ÄÖ"]),
        CpuList => word(&["3-1", "", "0-4294967295", "1-", "x", "0-8191", "8192", "0-18446744073709551616", " , "]),
        Profile => word(&["9.9", "6.18 "]),
        Features => Just("[\"warp\"]".to_string()).boxed(),
        Path => word(&["/dev/zero", "/", "/nonexistent.csv", "relative.csv", "/dev/null", "/proc/self/status"]),
        Windows => word(&["[[0, 1e300, 1]]", "[[-1e300, 1e300, 1024]]", "[[1, 0, 1]]", "[[0, 1, nan]]", "[[0, 86400, 1024], [1e9, 2e9, 1]]"])
            .prop_map(|w| w.trim_matches('"').to_string())
            .boxed(),
        Phases => word(&[
            "[]",
            "[{ run_us = 0 }]",
            "[{ timer_us = 0 }]",
            "[{ run_us = 18446744073709 }, { sleep_us = 18446744073709 }]",
            "[{ runtime_us = 0 }]",
            "[{ runtime_us = 18446744073709 }]",
            "[{ run_us = 1 }, { timer = { period_us = 0 } }]",
            "[{ run_us = 1 }, { timer = { period_us = 18446744073709, mode = \"sometimes\" } }]",
        ])
            .prop_map(|w| w.trim_matches('"').to_string())
            .boxed(),
        _ => select(&["0", "-1", "1", "4095", "4096", "100000", "1000000000000", "9223372036854775807", "0.5", "1e20"][..])
            .prop_map(String::from)
            .boxed(),
    }
}

/// A key's value: plausible, or (with weight `wildness` each) wrong for the
/// key or of any type.
fn value(kind: Kind, wildness: u32) -> BoxedStrategy<String> {
    if wildness == 0 {
        return plausible(kind);
    }
    prop_oneof![12 => plausible(kind), wildness => edge(kind), wildness => wild()].boxed()
}

fn line(key: &'static str, kind: Kind, wildness: u32) -> BoxedStrategy<String> {
    value(kind, wildness).prop_map(move |v| format!("{key} = {v}\n")).boxed()
}

/// `key = value` lines: the `required` keys (usually), a few `optional` ones,
/// and sometimes each block of `blocks` whole.
fn lines(required: Keys, optional: Keys, blocks: &'static [Keys], wildness: u32) -> BoxedStrategy<String> {
    let required: Vec<_> = required.iter().map(|&(k, kind)| prop::option::weighted(0.97, line(k, kind, wildness))).collect();
    let blocks: Vec<_> = blocks
        .iter()
        .map(|&b| prop::option::weighted(0.15, subsequence(b, 1..=b.len())))
        .collect();
    (required, subsequence(optional, 0..=optional.len().min(4)), blocks)
        .prop_flat_map(move |(req, keys, blocks)| {
            let keys: Vec<_> = keys.into_iter().chain(blocks.into_iter().flatten().flatten()).collect();
            // A trace replaces the phases.
            let traced = keys.iter().any(|(k, _)| ["windows", "trace_csv"].contains(k));
            let req: Vec<String> = req.into_iter().flatten().filter(|l| !(traced && l.starts_with("phases"))).collect();
            let opt: Vec<_> = keys.into_iter().map(|(k, kind)| line(k, kind, wildness)).collect();
            opt.prop_map(move |opt| req.iter().cloned().chain(opt).collect::<String>())
        })
        .boxed()
}

/// Up to `names.len()` elements of an array of tables, named in turn (or,
/// with `wildness`, not quite; "": no name key).
fn tables(header: &'static str, names: &'static [&'static str], required: Keys, optional: Keys, blocks: &'static [Keys], wildness: u32) -> BoxedStrategy<String> {
    let element = (value(Name, wildness), prop::option::weighted(0.99, Just(())), lines(required, optional, blocks, wildness));
    prop::collection::vec(element, 0..=names.len())
        .prop_map(move |ts| {
            let named = |(i, (odd, named, t)): (usize, &(String, Option<()>, String))| match named {
                _ if names[i].is_empty() => format!("{header}\n{t}"),
                Some(()) if odd == "\"app\"" || wildness == 0 => format!("{header}\nname = {}\n{t}", toml_str(names[i])),
                Some(()) => format!("{header}\nname = {odd}\n{t}"),
                None => format!("{header}\n{t}"),
            };
            ts.iter().enumerate().map(named).collect()
        })
        .boxed()
}

/// A scenario file: the real grammar, with values that are plausible or
/// (with weight `wildness`) not.
fn document(wildness: u32) -> BoxedStrategy<String> {
    (
        lines(&[("name", Name)], TOP, &[], wildness),
        prop::option::of(lines(&[], MACHINE, &[], wildness)),
        prop::option::of(lines(&[], KERNEL, &[], wildness)),
        tables("[[cgroup]]", &["app", "b", "c"], &[], CGROUP, &[], wildness),
        tables("[[task]]", &["w", "x", "y"], &[("phases", Phases)], TASK, &[DEADLINE, TRACE], wildness),
        tables("[[service]]", &["s", "t"], &[("rate_per_s", Secs), ("cost_us", Us)], SERVICE, &[], wildness),
        tables("[[write]]", &["", ""], &[("cgroup", Name), ("at_ms", Secs)], WRITE, &[], wildness),
    )
        .prop_map(|(top, machine, kernel, cgroups, tasks, services, writes)| {
            let machine = machine.map(|m| format!("[machine]\n{m}")).unwrap_or_default();
            let kernel = kernel.map(|k| format!("[kernel]\n{k}")).unwrap_or_default();
            format!("{top}{machine}{kernel}{cgroups}{tasks}{services}{writes}")
        })
        .boxed()
}

/// A valid scenario that every key of an override below addresses.
const BASE: &str = r#"
name = "base"
duration_s = 0.05
[machine]
cpus = 4
[[cgroup]]
name = "app"
period_us = 10000
quota_us = 20000
[[cgroup]]
name = "b"
parent = "app"
[[task]]
name = "w"
cgroup = "b"
threads = 3
phases = [{ run_us = 3000 }, { sleep_us = 2000 }]
[[task]]
name = "x"
phases = [{ run_us = 100000 }]
[[service]]
name = "s"
cgroup = "app"
rate_per_s = 200
cost_us = 500
[[write]]
cgroup = "app"
start_ms = 5
every_ms = 7
"#;

/// Keys of [`BASE`] as `--set` addresses them.
const BASE_KEYS: &[Keys] = &[
    TOP,
    &[("machine.cpus", Cpus), ("machine.hz", Hz), ("machine.smt", Smt), ("machine.smt_speed", Floats), ("machine.background_per_s", Secs), ("machine.uptime_s", Secs)],
    &[("kernel.profile", Profile), ("kernel.slice_us", Slice), ("kernel.features", Features), ("kernel.skew_tick", Bool)],
    &[("cgroup.app.period_us", Period), ("cgroup.app.quota_us", Quota), ("cgroup.app.burst_us", Burst), ("cgroup.app.cpus", CpuList), ("cgroup.b.cpus", CpuList), ("cgroup.b.quota_us", Quota), ("cgroup.b.parent", Name), ("cgroup.app.weight", Positive)],
    &[("task.w.threads", Count), ("task.w.cpus", CpuList), ("task.w.pin", Bool), ("task.w.loop", Loop), ("task.w.cgroup", Name), ("task.x.cpus", CpuList), ("task.x.phases", Phases), ("task.w.start_spread_us", Us)],
    &[("service.s.workers", Positive), ("service.s.cpus", CpuList), ("service.s.arrival", Word(&["poisson", "uniform"]))],
    &[("task.x.policy", Word(&["deadline"])), ("task.x.runtime_us", Us), ("task.x.period_us", Period), ("task.x.on_refused", Word(&["retry", "error"]))],
    &[("task.x.windows", Windows), ("task.x.phases", Word(&["[]"])), ("task.x.trace_csv", Path)],
];

/// [`BASE`] with overrides of its keys, plausible or (with `wildness`) not.
fn based(wildness: u32) -> BoxedStrategy<(String, Vec<String>)> {
    let keys: Vec<(&str, Kind)> = BASE_KEYS.iter().flat_map(|k| k.iter().copied()).collect();
    subsequence(keys, 0..=5)
        .prop_flat_map(move |keys| {
            let sets: Vec<_> = keys.into_iter().map(|(k, kind)| value(kind, wildness).prop_map(move |v| format!("{k}={v}"))).collect();
            sets.prop_map(|sets| (BASE.to_string(), sets))
        })
        .boxed()
}

/// A scenario file and `--set` arguments.
fn input() -> BoxedStrategy<(String, Vec<String>)> {
    prop_oneof![1 => (scenario(), overrides()), 1 => based(0), 1 => based(1)].boxed()
}

fn scenario() -> BoxedStrategy<String> {
    prop_oneof![8 => document(0), 8 => document(1), 4 => document(3), 1 => any::<String>()].boxed()
}

/// `--set` arguments: real keys (and some that are not) with any value.
fn overrides() -> BoxedStrategy<Vec<String>> {
    let key = prop_oneof![
        4 => select(&[
            "seed", "duration_s", "sample_ms", "name", "machine.cpus", "machine.hz", "machine.smt", "kernel.profile",
            "kernel.features", "kernel.slice_us", "cgroup.app.quota_us", "cgroup.app.period_us", "cgroup.app.cpus",
            "cgroup.app.parent", "cgroup.b.burst_us", "cgroup.app.name", "task.w.threads", "task.w.cpus",
            "task.w.phases", "task.w.pin", "task.w.cgroup", "task.w.name", "task.w.trace_csv", "service.s.workers",
            "service.s.rate_per_s", "write", "task", "task.w", "a..b", "", "machine", "machine.cpus.x",
        ][..]).prop_map(String::from),
        1 => "[a-z._]{0,12}",
    ];
    let value = prop_oneof![
        3 => wild(),
        3 => plausible(Us),
        1 => plausible(CpuList),
        1 => edge(CpuList),
        1 => "[ -~]{0,12}",
        1 => select(&["18446744073709551615", "18446744073709551616", "1_000", "-5"][..]).prop_map(String::from),
    ];
    let set = prop_oneof![9 => (key, value).prop_map(|(k, v)| format!("{k}={v}")), 1 => any::<String>()];
    prop_oneof![2 => Just(Vec::new()), 1 => prop::collection::vec(set, 1..3)].boxed()
}

proptest! {
    #![proptest_config(common::proptest_config(5000))]

    #[test]
    fn no_input_panics((text, sets) in input(), traced in any::<bool>()) {
        // As the CLI reads a file: relative trace_csv paths made absolute first.
        let text = rebase_paths(&text, &std::env::temp_dir());
        match load(&text, &sets) {
            Err(e) => {
                let line = e.to_string();
                prop_assert!(!line.chars().any(char::is_control), "{line:?}");
            }
            Ok(mut s) => {
                s.duration_s = Some(s.duration_s.map_or(0.05, |d| d.min(0.05)));
                if traced {
                    simulate_traced(&s);
                } else {
                    simulate(&s);
                }
            }
        }
    }
}

