//! Fig. 4 of 000_0fe7089afdf9d8d0.txt, tick by tick: period 10 ms, quota 10 ms,
//! slice 5 ms, 4 ms ticks (HZ=250), one CPU-bound process, no noise.

use throttlelab_core::trace::{Record, TraceKind, TraceOptions};
use throttlelab_core::{load, Sim, SimOptions};

mod common;

fn fig4() -> String {
    format!(
        r#"
name = "fig4"
duration_s = 0.031
{}[kernel]
profile = "5.4"
slice_us = 5000
[[cgroup]]
name = "app"
period_us = 10000
quota_us = 10000
[[task]]
name = "spin"
cgroup = "app"
phases = [{{ run_us = 1000000 }}]
"#,
        common::QUIET_ONE_CPU
    )
}

const MS: i64 = 1_000_000;

fn trace(skip_ticks: bool) -> (throttlelab_core::Output, Vec<Record>) {
    let s = load(&fig4(), &[]).unwrap();
    let options = SimOptions { trace: Some(TraceOptions::default()), every_tick: !skip_ticks, stop: None };
    let (out, t) = Sim::new(&s, options).run();
    (out, t.expect("traced").records.into_iter().filter(|r| r.tg == 1).collect())
}

/// (local, global) right after the last record at `t_ms` of `kind`.
fn pools_at(recs: &[Record], t_ms: i64, kind: fn(&TraceKind) -> bool) -> (i64, i64) {
    let r = recs.iter().filter(|r| r.time as i64 == t_ms * MS && kind(&r.kind)).last().unwrap_or_else(|| panic!("no record at {t_ms} ms"));
    (r.local_ns.unwrap_or(i64::MIN) / MS, r.global_ns as i64 / MS)
}

#[test]
fn fig4_timeline_tick_by_tick() {
    let (out, recs) = trace(false);
    let tick = |k: &TraceKind| *k == TraceKind::Tick;
    let assign = |k: &TraceKind| matches!(k, TraceKind::Assign(_));
    // t=0: the local pool takes a slice; 5 ms stay in the global pool.
    assert_eq!(pools_at(&recs, 0, assign), (5, 5));
    // t=4: 1 ms left locally.
    assert_eq!(pools_at(&recs, 4, tick), (1, 5));
    // t=8: -3 ms is paid from the global pool, which is left with nothing: local 2 ms.
    assert_eq!(pools_at(&recs, 8, tick), (2, 0));
    // t=10: the period timer refills 10 ms.
    assert_eq!(pools_at(&recs, 10, |k| *k == TraceKind::Refill).1, 10);
    // t=12: -2 ms compensated, refilled to 5 ms; global 3 ms.
    assert_eq!(pools_at(&recs, 12, tick), (5, 3));
    assert_eq!(pools_at(&recs, 16, tick), (1, 3));
    // t=20: refill to 10 ms, then the -3 ms of the previous period is paid from it.
    assert_eq!(pools_at(&recs, 20, tick), (5, 2));
    assert_eq!(pools_at(&recs, 24, tick), (1, 2));
    // t=28: -3 ms, only 2 ms left: throttled until the period ends at 30 ms.
    let thr = recs.iter().find(|r| r.kind == TraceKind::Throttle).unwrap();
    assert_eq!(thr.time as i64, 28 * MS);
    assert_eq!(thr.local_ns, Some(-MS));
    let un = recs.iter().find(|r| r.kind == TraceKind::Unthrottle).unwrap();
    assert_eq!(un.time as i64, 30 * MS);
    let app = &out.cgroups["app"];
    assert_eq!(app.nr_periods, 3);
    assert_eq!(app.nr_throttled, 1);
    assert_eq!(app.throttled_usec, 2_000);
    // It ran 8 ms of the third period's 10 ms quota: 28 ms of 30, plus 1 ms after.
    assert_eq!(out.tasks["spin"].cpu_usec, 29_000);
}

#[test]
fn skipping_ticks_changes_nothing() {
    let (a, ra) = trace(false);
    let (b, rb) = trace(true);
    assert_eq!(a.cgroups, b.cgroups);
    assert_eq!(a.tasks, b.tasks);
    let key = |r: &Record| (r.time, r.kind == TraceKind::Throttle, r.kind == TraceKind::Unthrottle);
    let ta: Vec<_> = ra.iter().filter(|r| matches!(r.kind, TraceKind::Throttle | TraceKind::Unthrottle)).map(key).collect();
    let tb: Vec<_> = rb.iter().filter(|r| matches!(r.kind, TraceKind::Throttle | TraceKind::Unthrottle)).map(key).collect();
    assert_eq!(ta, tb);
}
