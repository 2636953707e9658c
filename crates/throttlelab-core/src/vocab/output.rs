//! The output document, one schema for both backends; field names follow
//! cgroup v2 `cpu.stat`. The simulator adds `engine`, the real backend `host`.
//! Plain types: the simulator fills them in `collect.rs`.

use crate::vocab::stop::Stopped;
use crate::vocab::types::Quota;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Output {
    pub scenario: String,
    pub backend: &'static str,
    pub profile: String,
    pub seed: u64,
    pub duration_s: f64,
    /// A run stopped once its verdict was certain (`SimOptions::stop`): its
    /// numbers are those at the stop, not a whole run's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stopped: Option<Stopped>,
    pub cgroups: BTreeMap<String, CgroupStats>,
    pub tasks: BTreeMap<String, TaskStats>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub engine: Option<Engine>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host: Option<Host>,
}

/// The machine a real run measured (or the probe alone: `--like-host`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Host {
    /// `uname -r`.
    pub release: String,
    /// CONFIG_HZ from /boot/config-<release> or /proc/config.gz; None if neither is readable.
    pub hz: Option<u32>,
    /// "v1" or "v2" ("none": the probe alone found no cpu controller).
    pub cgroup: String,
    /// Other work on the host, measured before the run by a spinner on each
    /// CPU: its involuntary context switches per second, and the mean time
    /// each took from it (the simulator's `machine.background_per_s` and
    /// `machine.background_us`).
    pub background_per_s: f64,
    pub background_us: f64,
    /// The median of those preemptions' lengths, in microseconds (the
    /// simulator's `machine.background_p50_us`): each the wait the spinner's
    /// schedstat `run_delay` grew by, from its switch away to its switch back.
    /// None without a preemption or schedstat, and in documents from before
    /// it was measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub background_p50_us: Option<f64>,
    /// Those lengths themselves, sorted, or at most 64 of their quantiles
    /// (the simulator's `machine.background_lengths_us`). Empty without a
    /// preemption, and in documents from before they were kept.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub background_lengths_us: Vec<f64>,
    /// The median lateness of the tick's interrupt during that probe, from
    /// tracefs (the simulator's `machine.tick_jitter_us` and
    /// `timer_jitter_us`: uniform lateness with this median). None without
    /// tracefs, and in documents from before it was measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tick_latency_us: Option<f64>,
    /// The ticks that ran far later than that (a guest under QEMU/TCG: some
    /// 3.4 ms, on both vCPUs at once; the simulator's `machine.tick_late_*`).
    /// None where the probe found none, and in documents from before it looked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tick_late: Option<TickLateness>,
    /// The host's sustained speed on the real backend's calibrated busy loop
    /// against its calibration, during that probe: a `run_us` of work cost
    /// `run_us / work_speed` of CPU (the simulator's `machine.smt_speed`
    /// scaled by it). None in documents from before it was measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub work_speed: Option<f64>,
    /// How much that speed varied from one 10 ms block of the loop to the
    /// next during the probe: the coefficient of variation of each block's
    /// CPU time (the simulator's `machine.work_speed_cv`). None in documents
    /// from before it was measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub work_speed_cv: Option<f64>,
    /// The CPU a wake-up cost beyond its work, in microseconds: the
    /// intercept of the probe's fit of run/sleep threads' CPU per cycle
    /// against their work per cycle, at two run lengths (the simulator's
    /// `machine.wakeup_cost_us`). None where the fit could not be made, and
    /// in documents from before it was measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wakeup_cost_us: Option<f64>,
    /// That fit's slope as a speed: the calibrated work per CPU of run/sleep
    /// threads, beside `work_speed` (the spinners'). Reported, not applied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_sleep_work_speed: Option<f64>,
    /// Per limited cgroup, where the kernel put its period timer: expiries
    /// fall on this offset plus whole periods of CLOCK_MONOTONIC (the
    /// simulator's `period_timer_offset_us`). Empty without tracefs.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub period_timer_offset_us: BTreeMap<String, f64>,
    /// Per task, each thread's start as the kernel placed it, in thread order.
    /// The simulator starts every thread on its plan's CPU, on time. Empty in
    /// documents from before it was kept.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub thread_starts: BTreeMap<String, Vec<ThreadStart>>,
    /// CLOCK_MONOTONIC when the workers started, which places the run
    /// against the tick and period timer grids (the simulator's
    /// `machine.uptime_s`); the probe alone: when it started.
    pub uptime_s: f64,
}

/// Where and when a thread of a real run started: its wake-up at the start
/// can move it off the CPU it slept on (`select_task_rq_fair`).
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
pub struct ThreadStart {
    /// The CPU it first ran on after its start wake-up (`sched_getcpu`).
    pub cpu: u32,
    /// How long after its planned start it ran, in microseconds.
    pub late_us: f64,
}

/// Ticks that ran late beyond the usual jitter, as the probe found them
/// (`probe.rs`, from each tick's charge to its spinners).
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
pub struct TickLateness {
    /// Their share of all ticks.
    pub share: f64,
    /// How late they ran, the median, in microseconds.
    pub late_us: f64,
    /// The share of them that were late on every CPU at once.
    pub together: f64,
}

impl TickLateness {
    /// A tick later than this is late beyond the jitter: a guest under
    /// QEMU/TCG ran 80-100 us late at the median and its late ticks 1.6-3.4 ms
    /// (docs/fidelity.md); a host's, tens of microseconds. The probe and
    /// `diff`'s guest traces both count by it.
    pub const LATE_NS: u64 = 500_000;
}

/// A cgroup's limit as the kernel holds it at the end of the run (after
/// every `[[write]]`): `cpu.max` and `cpu.max.burst`.
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq)]
pub struct Limit {
    pub quota_us: Quota,
    pub period_us: u64,
    pub burst_us: u64,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct CgroupStats {
    /// The limit that caused the throttling below.
    pub limit: Limit,
    pub usage_usec: u64,
    pub nr_periods: u64,
    pub nr_throttled: u64,
    pub throttled_usec: u64,
    pub nr_bursts: u64,
    pub burst_usec: u64,
    /// nr_throttled / nr_periods.
    pub throttled_ratio: f64,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct TaskStats {
    pub threads: u64,
    pub cpu_usec: u64,
    pub work_usec: u64,
    /// When the last thread finished; null if some thread did not.
    pub finished_s: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub class: Option<String>,
    /// Requests answered: a service's, or a captured task's wake-ups from
    /// outside the workload (`until_us` phases) and by its siblings (`wait`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub requests: Option<u64>,
    /// A service's request latency, arrival to the end of its work. For a
    /// task woken from outside (a server thread a client outside the cgroup
    /// wakes), from each `until_us` wake-up (the request's arrival, which
    /// keeps its time of the run) to the thread's next block (its response
    /// sent); a request that arrives while the thread is still busy counts
    /// from its arrival. A sibling's wake-up (`wait`) counts from when the
    /// thread takes it up: a wake that came while it was busy waited unseen. This is what throttling adds to a client's latency;
    /// a client's own measure (send to response received, e.g. pgbench's)
    /// also holds what happens outside the thread: the client's own CPU time
    /// and scheduling, the way in (send to `sched_waking`) and out, and a
    /// request that takes several wake-ups of the thread (a transaction of
    /// several statements) counts here as several.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub latency_us: Option<Latency>,
    /// The same requests' latency from when a thread took each up: its
    /// arrival, or the end of the thread's previous request if it was still
    /// busy (a service's worker, from taking it off the queue). What a client
    /// with one request in flight on a server thread of its own measures
    /// (h2load or wrk against a process- or thread-per-connection server): it
    /// sends the next request only once the last is answered, so the wait
    /// behind its own earlier request is not in its figure (coordinated
    /// omission); `latency_us` is what an open-loop client measures from the
    /// request's scheduled time (pgbench --rate, wrk2).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub service_latency_us: Option<Latency>,
    /// With `keep_latencies`: every request's latency, both ways, in the
    /// order answered, so that the requests of several tasks (a server's
    /// processes) can be pooled: their percentiles cannot.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub latencies_us: Option<Latencies>,
    /// Trace-driven tasks: response time minus the trace's duration (004 eq. 14).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delay_s: Option<f64>,
    /// SCHED_DEADLINE tasks: jobs finished after their deadline.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deadline_misses: Option<u64>,
    /// SCHED_DEADLINE tasks: `sched_setattr` calls refused by admission control.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub admission_refusals: Option<u64>,
    /// With `sample_ms`: CPU time in each whole interval of that length from the start.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_usec_series: Option<Vec<u64>>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Latency {
    pub p50: u64,
    pub p90: u64,
    pub p99: u64,
    pub max: u64,
}

/// Every request's latency (us): `latency_us`'s and `service_latency_us`'s.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Latencies {
    pub from_arrival: Vec<u64>,
    pub from_start: Vec<u64>,
}

/// The only part that may differ between two runs of the same seed.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Engine {
    pub events: u64,
    pub wall_s: f64,
    /// Bandwidth control's lock acquisitions in all groups (the cost model's
    /// `cfs_b->lock` and, with `hard_limits`, the runqueue locks): a
    /// simulated quantity no kernel counter reports.
    pub lock_acquisitions: u64,
}

/// Nearest-rank percentile of sorted values (0 for none).
fn percentile(sorted: &[u64], p: f64) -> u64 {
    nearest_rank(sorted, p / 100.0).unwrap_or(0)
}

/// The value at quantile `q` (0-1) of sorted values, by nearest rank; None
/// for none.
pub fn nearest_rank(sorted: &[u64], q: f64) -> Option<u64> {
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted.get(rank.clamp(1, sorted.len().max(1)) - 1).copied()
}

/// A request being answered: when it arrived, and when a thread took it up
/// (its arrival, or later if the thread was still busy with earlier ones).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Request {
    pub arrived_ns: u64,
    pub started_ns: u64,
}

/// The requests a task or service answered, each one's latency (ns) from
/// its arrival and from its start; both backends keep them this way.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Requests {
    pub from_arrival_ns: Vec<u64>,
    pub from_start_ns: Vec<u64>,
}

impl Requests {
    /// `request` answered at `now_ns`.
    pub fn answered(&mut self, request: Request, now_ns: u64) {
        self.from_arrival_ns.push(now_ns - request.arrived_ns);
        self.from_start_ns.push(now_ns - request.started_ns);
    }

    /// Another thread's requests, added to these.
    pub fn extend(&mut self, other: &Requests) {
        self.from_arrival_ns.extend(&other.from_arrival_ns);
        self.from_start_ns.extend(&other.from_start_ns);
    }

    pub fn count(&self) -> u64 {
        self.from_arrival_ns.len() as u64
    }

    /// `TaskStats::latency_us`: from each request's arrival.
    pub fn latency_us(&self) -> Latency {
        latency(&self.from_arrival_ns)
    }

    /// `TaskStats::service_latency_us`: from when a thread took each up.
    pub fn service_latency_us(&self) -> Latency {
        latency(&self.from_start_ns)
    }

    /// `TaskStats::latencies_us`.
    pub fn latencies_us(&self) -> Latencies {
        let us = |ns: &[u64]| ns.iter().map(|n| n / 1_000).collect();
        Latencies { from_arrival: us(&self.from_arrival_ns), from_start: us(&self.from_start_ns) }
    }
}

/// Request latencies (ns) summarised as nearest-rank percentiles in us;
/// both backends report them this way.
pub fn latency(ns: &[u64]) -> Latency {
    let mut us: Vec<u64> = ns.iter().map(|n| n / 1_000).collect();
    us.sort_unstable();
    Latency { p50: percentile(&us, 50.0), p90: percentile(&us, 90.0), p99: percentile(&us, 99.0), max: us.last().copied().unwrap_or(0) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank() {
        let v: Vec<u64> = (1..=100).collect();
        assert_eq!(percentile(&v, 50.0), 50);
        assert_eq!(percentile(&v, 99.0), 99);
        assert_eq!(percentile(&v, 100.0), 100);
        assert_eq!(percentile(&[7], 50.0), 7);
        assert_eq!(percentile(&[], 50.0), 0);
    }
}
