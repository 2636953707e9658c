//! The output document of a finished run: each cgroup's `cpu.stat`
//! (`cpu_cfs_stat_show`) and each task's threads summed.

use crate::vocab::output::{CgroupStats, Engine, Output, Requests, TaskStats};
use crate::format::phases::TaskPhases;
use crate::engine::event::Queue;
use crate::engine::sim::Sim;
use crate::engine::workload::Driver;
use std::collections::BTreeMap;

pub(crate) fn collect<Q: Queue>(sim: &Sim<'_, Q>, end_ns: u64, events: u64, wall_s: f64) -> Output {
    let s = sim.scenario;
    let mut cgroups = BTreeMap::new();
    for (i, c) in s.cgroups.iter().enumerate() {
        let tg = &sim.tgs[i + 1];
        let usage_ns: u64 = sim.threads.iter().filter(|t| tg.subtree.contains(&t.tg)).map(|t| t.cpu_ns).sum();
        let b = &tg.cfs_b;
        cgroups.insert(
            c.name.clone(),
            CgroupStats {
                limit: b.limit(),
                usage_usec: usage_ns / 1_000,
                nr_periods: b.nr_periods,
                nr_throttled: b.nr_throttled,
                throttled_usec: b.throttled_time / 1_000,
                nr_bursts: b.nr_burst,
                burst_usec: b.burst_time / 1_000,
                throttled_ratio: if b.nr_periods == 0 { 0.0 } else { b.nr_throttled as f64 / b.nr_periods as f64 },
            },
        );
    }
    let mut tasks = BTreeMap::new();
    let mut add = |name: &str, driver: Driver, class: Option<String>, requests: Option<&Requests>, trace_ns: Option<u64>, series: Option<&Vec<u64>>| {
        let threads: Vec<_> = sim.threads.iter().filter(|t| t.driver == driver).collect();
        let dl = threads.iter().any(|t| t.dl.is_some());
        let done = !threads.is_empty() && threads.iter().all(|t| t.finished_at.is_some());
        tasks.insert(
            name.to_string(),
            TaskStats {
                threads: threads.len() as u64,
                cpu_usec: threads.iter().map(|t| t.cpu_ns).sum::<u64>() / 1_000,
                work_usec: threads.iter().map(|t| t.work_ns).sum::<u64>() / 1_000,
                finished_s: done.then(|| threads.iter().filter_map(|t| t.finished_at).max().unwrap_or(0) as f64 / 1e9),
                class,
                requests: requests.map(Requests::count),
                latency_us: requests.map(Requests::latency_us),
                service_latency_us: requests.map(Requests::service_latency_us),
                latencies_us: requests.filter(|_| s.keep_latencies).map(Requests::latencies_us),
                delay_s: trace_ns.filter(|_| done).map(|trace| {
                    let response = threads.iter().map(|t| t.finished_at.unwrap_or(0) - t.started_at).max().unwrap_or(0);
                    (response as f64 - trace as f64) / 1e9
                }),
                deadline_misses: dl.then(|| threads.iter().filter_map(|t| t.dl.as_ref()).map(|d| d.misses).sum()),
                admission_refusals: dl.then(|| threads.iter().filter_map(|t| t.dl.as_ref()).map(|d| d.refusals).sum()),
                cpu_usec_series: series.map(|ns| ns.iter().map(|n| n / 1_000).collect()),
            },
        );
    };
    for (i, t) in s.tasks.iter().enumerate() {
        let series = (s.sample_ms > 0).then(|| &sim.cpu_series[i]);
        add(&t.name, Driver::Task(i), t.class.clone(), sim.task_requests[i].as_ref(), TaskPhases::trace_ns(t), series);
    }
    for (i, svc) in s.services.iter().enumerate() {
        add(&svc.name, Driver::Worker(i), None, Some(&sim.services[i].requests), None, None);
    }
    Output {
        scenario: s.name.clone(),
        backend: "sim",
        profile: s.kernel.profile.as_str().to_string(),
        seed: s.seed,
        duration_s: end_ns as f64 / 1e9,
        stopped: sim.stopped(),
        cgroups,
        tasks,
        engine: Some(Engine { events, wall_s, lock_acquisitions: sim.tgs.iter().map(|tg| tg.cfs_b.lock_acquisitions).sum() }),
        host: None,
    }
}
