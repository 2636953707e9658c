//! Scenario format v1: one TOML file read by both backends.
//!
//! Parsing and validation happen here, once. Unknown keys are rejected by serde
//! (`deny_unknown_fields`); value checks follow the kernel's own limits
//! (`tg_set_cfs_bandwidth`: period 1 ms..1 s, quota >= 1 ms, burst <= quota).

use crate::cpulist::CpuList;
pub use crate::cpulist::parse_cpu_list;
use crate::error::{shown, ScenarioError};
use crate::output::Limit;
use crate::phases::TaskPhases;
use crate::profile::{Feature, Profile};
use crate::types::Quota;
use serde::{Deserialize, Serialize};
use std::collections::{HashMap, HashSet};
use std::rc::Rc;
use std::sync::Arc;

/// Simulated time cap when `duration_s` is absent: run until every finite task
/// finishes, but never longer than this.
pub const MAX_DURATION_S: f64 = 86_400.0;

/// The longest `sample_ms`: a day, as the longest run.
pub const MAX_SAMPLE_MS: u64 = 86_400_000;

// Totals a run may ask for. Each key has its own range; these bound their
// products, which a run keeps in memory (a few hundred MB at most).
/// Threads of all tasks and services together.
pub const MAX_THREADS: u64 = 100_000;
/// Runqueues: one cfs_rq (and group entity) per cgroup, the root's included, per CPU.
pub const MAX_CFS_RQS: u64 = 1_000_000;
/// `sample_ms` intervals over the run, summed over the tasks.
pub const MAX_SAMPLES: u64 = 10_000_000;
/// Requests expected over the run (`rate_per_s` x duration), summed over the
/// services: each one's latency is kept.
pub const MAX_REQUESTS: u64 = 10_000_000;
/// Captured phases (`phases_file`), summed over the files: each is kept, a
/// `Phase` of 24 bytes (docs/engine.md: what a run holds per phase).
pub const MAX_PHASES: u64 = 10_000_000;

/// The longest time any key may give (10^16 ns, about 116 days): far beyond
/// a run (a day at most), and far from overflowing u64 nanoseconds when a
/// run adds it to the time.
pub const MAX_TIME_NS: u64 = 10_000_000_000_000_000;
const MAX_TIME_MS: f64 = (MAX_TIME_NS / 1_000_000) as f64;

/// Kernel limits from `kernel/sched/core.c`.
pub const MIN_CFS_QUOTA_PERIOD_US: u64 = 1_000;
pub const MAX_CFS_QUOTA_PERIOD_US: u64 = 1_000_000;
/// `max_cfs_runtime = MAX_BW * NSEC_PER_USEC`, MAX_BW = 2^(64 - BW_SHIFT) - 1.
pub const MAX_CFS_RUNTIME_US: u64 = (1 << 44) - 1;

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    pub name: String,
    /// Simulated seconds; absent = until every finite task finishes (capped).
    #[serde(default)]
    pub duration_s: Option<f64>,
    #[serde(default = "default_seed")]
    pub seed: u64,
    /// Report every task's CPU time per interval of this many ms
    /// (`cpu_usec_series`); 0 = not at all.
    #[serde(default)]
    pub sample_ms: u64,
    /// Report every request's latency (`latencies_us`), not only percentiles.
    #[serde(default)]
    pub keep_latencies: bool,
    #[serde(default)]
    pub machine: Machine,
    #[serde(default)]
    pub kernel: Kernel,
    #[serde(default, rename(deserialize = "cgroup"))]
    pub cgroups: Vec<CgroupSpec>,
    #[serde(default, rename(deserialize = "task"))]
    pub tasks: Vec<TaskSpec>,
    #[serde(default, rename(deserialize = "service"))]
    pub services: Vec<ServiceSpec>,
    #[serde(default, rename(deserialize = "write"))]
    pub writes: Vec<WriteSpec>,
    /// What `throttlelab capture` read of the captured cgroup, to hold a
    /// replay against; the simulator does not use it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capture: Option<CaptureSpec>,
}

/// The `[capture]` table: where a workload was captured and its cgroup's
/// `cpu.stat` deltas over the capture (names and units of cgroup v2).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CaptureSpec {
    /// The cgroup's directory, or the pids given.
    pub source: String,
    pub release: String,
    pub duration_s: f64,
    pub threads: u64,
    /// Absent where the cgroup does not count it (v1 without a cpuacct cgroup).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage_usec: Option<u64>,
    pub nr_periods: u64,
    pub nr_throttled: u64,
    pub throttled_usec: u64,
    /// Demand captured: every thread's time on a CPU.
    pub cpu_usec: u64,
    /// Switches out of a captured thread whose switch in the kernel left out
    /// of the trace and whose time is not known (no `sched_stat_runtime`, no
    /// bound): bursts missing from `cpu_usec`.
    #[serde(default)]
    pub untraced_switches: u64,
    /// Trace events the kernel's ring buffer lost (overwritten before they
    /// were read, or refused): bursts around them may be cut or missing.
    #[serde(default)]
    pub lost_events: u64,
    /// Trace events read (of every task on the host: switches, wake-ups, runtime updates).
    #[serde(default)]
    pub trace_events: u64,
    /// The kernel memory the trace took: every CPU's ring buffer, KiB.
    #[serde(default)]
    pub trace_buffer_kb: u64,
    /// Other tasks' preemptions of the captured threads, the host's
    /// background as the target met it, where the threads wanted a CPU long
    /// enough to tell: then `[machine]`'s `background_per_s` and
    /// `background_us` (their mean) are the capture's. Absent otherwise, and
    /// in captures from before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub background_preemptions: Option<u64>,
    /// Their lengths' median, 90th percentile and longest, us.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub background_p50_us: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub background_p90_us: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub background_max_us: Option<f64>,
}

fn default_seed() -> u64 {
    1
}

/// The hardware and its noise. Defaults come from measurements on a 6.18
/// host (docs/engine.md, "Noise"): hrtimer wake-up latency p50 14-27 us, and
/// 2.1-2.4 involuntary context switches per second of an isolated spinner.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Machine {
    #[serde(default = "default_cpus")]
    pub cpus: usize,
    /// CONFIG_HZ: scheduler tick frequency.
    #[serde(default = "default_hz")]
    pub hz: u32,
    /// Hardware threads per core; CPUs are numbered core by core.
    #[serde(default = "default_smt")]
    pub smt: usize,
    /// Speed of each busy hardware thread when k threads of its core are busy
    /// (k = 1..=smt), as a fraction of nominal. Absent: all 1.0.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub smt_speed: Vec<f64>,
    /// How fast a `run_us` of work runs on this machine, as a fraction of
    /// nominal, on top of `smt_speed`: a real host sustains the real
    /// backend's calibrated loop a few per cent slower than its calibration,
    /// and `compare` passes what the probe measured (`host.work_speed`).
    #[serde(default = "default_work_speed")]
    pub work_speed: f64,
    /// Each tick fires up to this late (uniform, seeded): interrupt latency.
    #[serde(default = "default_tick_jitter_us")]
    pub tick_jitter_us: f64,
    /// Each period/slack timer fires up to this late (uniform, seeded).
    #[serde(default = "default_timer_jitter_us")]
    pub timer_jitter_us: f64,
    /// A period timer on an idle CPU fires this much later still: the CPU
    /// leaves its idle state first.
    #[serde(default = "default_idle_exit_us")]
    pub idle_exit_us: f64,
    /// How long a tick's interrupt lasts: a period timer of the same CPU that
    /// expires before it ends runs inside it, before the reschedule the tick
    /// asked for.
    #[serde(default = "default_tick_irq_us")]
    pub tick_irq_us: f64,
    /// Background kernel activity (kworkers, softirq threads): short
    /// preemptions of whatever runs, arriving per CPU as a Poisson process.
    #[serde(default = "default_background_per_s")]
    pub background_per_s: f64,
    /// CPU time each background preemption takes.
    #[serde(default = "default_background_us")]
    pub background_us: f64,
    /// CLOCK_MONOTONIC at simulated time 0, which places the timer grids.
    /// Absent: seeded, uniform in [600, 1200) s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uptime_s: Option<f64>,
    /// Offset of the jiffy grid from multiples of the tick since boot.
    /// Absent: 0 on profiles >= 6.6 (ticks aligned since 6.5), seeded before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tick_phase_us: Option<f64>,
}

fn default_cpus() -> usize {
    1
}
fn default_hz() -> u32 {
    250
}
fn default_smt() -> usize {
    1
}
fn default_work_speed() -> f64 {
    1.0
}
fn default_tick_jitter_us() -> f64 {
    20.0
}
fn default_timer_jitter_us() -> f64 {
    20.0
}
fn default_idle_exit_us() -> f64 {
    25.0
}
fn default_tick_irq_us() -> f64 {
    12.0
}
fn default_background_per_s() -> f64 {
    2.0
}
fn default_background_us() -> f64 {
    20.0
}

impl Default for Machine {
    fn default() -> Self {
        Machine {
            cpus: default_cpus(),
            hz: default_hz(),
            smt: default_smt(),
            smt_speed: Vec::new(),
            work_speed: default_work_speed(),
            tick_jitter_us: default_tick_jitter_us(),
            timer_jitter_us: default_timer_jitter_us(),
            idle_exit_us: default_idle_exit_us(),
            tick_irq_us: default_tick_irq_us(),
            background_per_s: default_background_per_s(),
            background_us: default_background_us(),
            uptime_s: None,
            tick_phase_us: None,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Kernel {
    #[serde(default)]
    pub profile: Profile,
    /// `sched_cfs_bandwidth_slice_us`.
    #[serde(default = "default_slice_us")]
    pub slice_us: u64,
    #[serde(default)]
    pub features: Vec<Feature>,
    /// The `skew_tick=1` boot parameter: CPU i ticks i/(2*cpus) of a tick late.
    #[serde(default)]
    pub skew_tick: bool,
    /// Cost model of the global pool (000 III-B): how long one access holds
    /// `cfs_b->lock`. Default: a cache-line transfer in, the critical section,
    /// a transfer out to the next waiter (2 x 80 ns + 40 ns).
    #[serde(default = "default_pool_lock_hold_ns")]
    pub pool_lock_hold_ns: u64,
    /// With `atomic_pool`, what one access costs: one cache-line transfer
    /// (49-84 ns measured between the 6.18 host's CPUs; docs/engine.md).
    #[serde(default = "default_pool_transfer_ns")]
    pub pool_transfer_ns: u64,
}

fn default_pool_lock_hold_ns() -> u64 {
    200
}

fn default_pool_transfer_ns() -> u64 {
    80
}

fn default_slice_us() -> u64 {
    5_000
}

impl Default for Kernel {
    fn default() -> Self {
        Kernel {
            profile: Profile::default(),
            slice_us: default_slice_us(),
            features: Vec::new(),
            skew_tick: false,
            pool_lock_hold_ns: default_pool_lock_hold_ns(),
            pool_transfer_ns: default_pool_transfer_ns(),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CgroupSpec {
    pub name: String,
    #[serde(default)]
    pub parent: Option<String>,
    #[serde(default = "default_period_us")]
    pub period_us: u64,
    /// Absent, -1 or "max" (cpu.max's word): unlimited.
    #[serde(default)]
    pub quota_us: Quota,
    #[serde(default)]
    pub burst_us: u64,
    /// cgroup v2 `cpu.weight` (1..10000, 100 = nice 0).
    #[serde(default = "default_weight")]
    pub weight: u64,
    #[serde(default)]
    pub cpus: Option<String>,
    /// Where the period timer's expiries fall: on `offset + k * period_us`
    /// of CLOCK_MONOTONIC (the real backend reports the kernel's in
    /// `host.period_timer_offset_us`). Absent: drawn as the kernel draws it
    /// (6.6+: uniform below 100 ms at creation; 0 before).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub period_timer_offset_us: Option<f64>,
}

fn default_period_us() -> u64 {
    100_000
}
fn default_weight() -> u64 {
    100
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TaskSpec {
    pub name: String,
    #[serde(default)]
    pub cgroup: Option<String>,
    /// 0 disables the task.
    #[serde(default = "default_threads")]
    pub threads: i64,
    #[serde(default)]
    pub cpus: Option<String>,
    /// Thread i is pinned to the i-th allowed CPU.
    #[serde(default)]
    pub pin: bool,
    /// Times the phase list runs; -1 = until the end (a trace: once).
    #[serde(default = "default_loop", rename = "loop")]
    pub loops: i64,
    #[serde(default)]
    pub phases: Vec<PhaseSpec>,
    /// Trace-driven instead of `phases`: measurement windows
    /// `[start_s, end_s, cpu_rate]` (core-seconds per second, as in the
    /// Google cluster trace's task_usage), emulated as 004's Algorithm 1.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub windows: Vec<[f64; 3]>,
    /// The windows from a CSV file instead (`start_s,end_s,cpu_rate[,class]`),
    /// relative to the scenario file's directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace_csv: Option<String>,
    /// A captured thread's phases instead, from the section named as the
    /// task in this gzip-compressed side file (`throttlelab capture`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phases_file: Option<String>,
    /// What `phases_file` holds for it, once read.
    #[serde(skip)]
    pub captured: Option<Arc<[Phase]>>,
    /// ClockSpeedA / ClockSpeedB (004 eq. 8): CPU time on the traced machine
    /// to CPU time here.
    #[serde(default = "default_clock_scale")]
    pub clock_scale: f64,
    /// Every thread starts at this time.
    #[serde(default)]
    pub start_us: u64,
    /// Each thread starts a seeded uniform offset in [0, start_spread_us) later.
    #[serde(default)]
    pub start_spread_us: u64,
    #[serde(default)]
    pub class: Option<String>,
    /// Scheduling policy: the fair class, or SCHED_DEADLINE.
    #[serde(default)]
    pub policy: Policy,
    /// SCHED_DEADLINE parameters (`sched_attr`): runtime, relative deadline
    /// (default: the period) and period.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime_us: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline_us: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub period_us: Option<u64>,
    /// What a thread does when admission control refuses it.
    #[serde(default)]
    pub on_refused: OnRefused,
    /// With `on_refused = "retry"`: how long until the next attempt.
    #[serde(default = "default_retry_ms")]
    pub retry_ms: u64,
    /// Deadline trace tasks: 004 3.3's profiling stage at each window (a whole
    /// core for this long, then runtime = measured rate x period); absent =
    /// reserve the trace's own rate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile_ms: Option<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Policy {
    #[default]
    Normal,
    Deadline,
}

/// A refused `sched_setattr`: keep running as a fair task and try again
/// every `retry_ms` (004's method), or fail the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OnRefused {
    #[default]
    Retry,
    Error,
}

fn default_retry_ms() -> u64 {
    100
}

fn default_clock_scale() -> f64 {
    1.0
}

/// SCHED_DEADLINE bandwidths are fixed point with this many fraction bits (`BW_SHIFT`).
pub const BW_SHIFT: u32 = 20;

/// `to_ratio`: runtime/period as a fixed-point bandwidth.
pub fn to_ratio(period_ns: u64, runtime_ns: u64) -> u64 {
    ((runtime_ns as u128) << BW_SHIFT).div_ceil(period_ns as u128) as u64
}

/// The smallest runtime `sched_setattr` accepts (`1 << DL_SCALE` ns).
pub const DL_MIN_RUNTIME_NS: u64 = 1 << 10;

/// A reservation of `rate` of a CPU: runtime = rate x period, rounded up, within
/// what `sched_setattr` accepts (at least `DL_MIN_RUNTIME_NS`, at most the deadline).
pub fn dl_runtime_at_rate(rate: f64, deadline_ns: u64, period_ns: u64) -> u64 {
    ((rate * period_ns as f64).ceil() as u64).clamp(DL_MIN_RUNTIME_NS, deadline_ns)
}

/// What SCHED_DEADLINE tasks may reserve of `cpus` CPUs: `sched_rt_runtime_us`
/// / `sched_rt_period_us` (950000 / 1000000) of each, less, from 6.12, each
/// CPU's fair deadline server (50 ms every 1 s, `fair_server_init`), whose
/// bandwidth admission counts too (on 6.18: two 0.9 reservations fit on 2
/// CPUs, two 0.95 or six 0.31 do not).
pub fn dl_capacity_bw(cpus: usize, profile: Profile) -> u64 {
    let fair_server = if profile.has_fair_server() { to_ratio(1_000_000_000, 50_000_000) } else { 0 };
    cpus as u64 * (to_ratio(1_000_000_000, 950_000_000) - fair_server)
}

impl TaskSpec {
    /// The names of the timers its phases use, each once, in order of first use.
    pub fn timer_names(&self) -> Vec<&str> {
        let mut names: Vec<&str> = Vec::new();
        for t in self.phases.iter().filter_map(|p| p.timer.as_ref()) {
            if !names.contains(&t.name.as_str()) {
                names.push(&t.name);
            }
        }
        names
    }

    /// Times the phases run, -1 = forever; a trace runs once unless `loop`
    /// says more. A captured thread that keeps time by itself
    /// ([`runs_on_timers`]) goes on with its cycle to the end of the run:
    /// under a looser limit than the captured one it gets through its
    /// captured phases sooner, and the workload did not stop there.
    pub fn effective_loops(&self) -> i64 {
        if self.loops == -1 && !self.windows.is_empty() {
            1
        } else if self.captured.as_deref().is_some_and(runs_on_timers) {
            -1
        } else {
            self.loops
        }
    }

    /// (runtime, deadline, period) in ns for a deadline task.
    pub fn dl_params_ns(&self) -> Option<(u64, u64, u64)> {
        let (runtime, period) = (self.runtime_us?, self.period_us?);
        Some((runtime * 1_000, self.deadline_us.unwrap_or(period) * 1_000, period * 1_000))
    }
}

fn default_threads() -> i64 {
    1
}
fn default_loop() -> i64 {
    -1
}

/// One entry of `phases`: exactly one key.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PhaseSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_us: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime_us: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sleep_us: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timer_us: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timer: Option<TimerSpec>,
}

/// rt-app's `timer` event: wake `period_us` after the timer's last expiry,
/// the first counted from the thread's start.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TimerSpec {
    pub period_us: u64,
    /// The timer's name: the phases of a thread that name the same timer
    /// share it (each thread has its own, as rt-app's `unique` refs).
    #[serde(default = "default_timer_ref", rename = "ref")]
    pub name: String,
    #[serde(default)]
    pub mode: TimerMode,
}

fn default_timer_ref() -> String {
    "unique".to_string()
}

/// What a late timer does (rt-app's `mode`). It does not sleep; then
/// `relative` counts the next period from now, `absolute` from the missed
/// expiry, so that the thread catches up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TimerMode {
    #[default]
    Relative,
    Absolute,
}

/// A validated phase (serialized for the real backend's worker).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Phase {
    /// Work worth this many ns of CPU at nominal speed.
    Run(u64),
    /// Busy for this many ns of wall time, however much CPU that gets
    /// (rt-app's `runtime`).
    Runtime(u64),
    /// Sleep this many ns.
    Sleep(u64),
    /// Sleep this many ns less how late the thread's previous `CatchUp`
    /// ended (from its wake-up's time to its first time on a CPU after);
    /// no sleep if that is more, and then nothing is carried. A captured
    /// program that makes up for late wake-ups, as stress-ng's `--cpu-load`
    /// workers do (their `bias`).
    CatchUp(u64),
    /// As `CatchUp`, and lateness that no sleep made up carries on to the
    /// next: a captured thread that keeps a schedule (each wake-up due a
    /// while after the last was due, no sleep while behind), as sysbench's
    /// `--rate` event generator does.
    Schedule(u64),
    /// Sleep until the next multiple of this many ns.
    Timer(u64),
    /// rt-app's `timer`: the thread's timer number `timer`, of this period.
    RtTimer { period: u64, timer: usize, mode: TimerMode },
    /// Sleep until this time of the run (a captured wake-up from outside the
    /// workload: a request does not wait for a throttled group); no sleep
    /// if it is past.
    SleepUntil(u64),
    /// Sleep until a `Wake` of another thread names this one (at once if
    /// one did meanwhile: wake-ups are counted, as a futex word would).
    Wait,
    /// Wake the (single) thread of task number `task` without blocking.
    Wake(usize),
}

/// Whether captured phases only run and sleep on timers (the first may end
/// a sleep begun before the capture): a thread that depends on no other
/// thread and no request from outside, so its cycle is its own.
pub fn runs_on_timers(phases: &[Phase]) -> bool {
    let timed = phases.iter().enumerate().all(|(i, p)| match p {
        Phase::Run(_) | Phase::Sleep(_) | Phase::CatchUp(_) | Phase::Schedule(_) => true,
        Phase::SleepUntil(_) => i == 0,
        _ => false,
    });
    timed && phases.iter().any(|p| matches!(p, Phase::Sleep(_) | Phase::CatchUp(_) | Phase::Schedule(_)))
}

impl Phase {
    /// The phase with `left_ns` of it left: work, or a sleep of that length
    /// (a `SleepUntil` cut in two is two plain sleeps).
    pub fn shortened(self, left_ns: u64) -> Phase {
        match self {
            Phase::Run(_) => Phase::Run(left_ns),
            Phase::Runtime(_) => Phase::Runtime(left_ns),
            _ => Phase::Sleep(left_ns),
        }
    }

    /// A `CatchUp` or `Schedule` sleep after its thread's last one ended
    /// `late_ns` late: how long to sleep (None: later than the whole sleep,
    /// so no sleep), and the lateness carried on to the next (a `Schedule`'s
    /// that no sleep made up). Both backends replay them by this rule.
    pub fn catch_up(self, late_ns: u64) -> (Option<u64>, u64) {
        match self {
            Phase::CatchUp(ns) | Phase::Schedule(ns) if ns > late_ns => (Some(ns - late_ns), 0),
            Phase::Schedule(ns) => (None, late_ns - ns),
            _ => (None, 0),
        }
    }

    /// A phase where the thread blocks (or would, were its wake-up not
    /// already past): what ends a captured request ([`Phase::SleepUntil`]).
    pub fn blocks(self) -> bool {
        matches!(self, Phase::Sleep(1..) | Phase::CatchUp(_) | Phase::Schedule(_) | Phase::Timer(_) | Phase::RtTimer { .. } | Phase::SleepUntil(_) | Phase::Wait)
    }
}

impl PhaseSpec {
    /// The phase, given the names of its task's timers ([`TaskSpec::timer_names`]).
    pub fn phase(&self, timers: &[&str]) -> Option<Phase> {
        match (self.run_us, self.runtime_us, self.sleep_us, self.timer_us, &self.timer) {
            (Some(r), None, None, None, None) => Some(Phase::Run(r * 1_000)),
            (None, Some(r), None, None, None) => Some(Phase::Runtime(r * 1_000)),
            (None, None, Some(s), None, None) => Some(Phase::Sleep(s * 1_000)),
            (None, None, None, Some(t), None) => Some(Phase::Timer(t * 1_000)),
            (None, None, None, None, Some(t)) => Some(Phase::RtTimer {
                period: t.period_us * 1_000,
                timer: timers.iter().position(|n| *n == t.name)?,
                mode: t.mode,
            }),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Arrival {
    Poisson,
    Uniform,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServiceSpec {
    pub name: String,
    #[serde(default)]
    pub cgroup: Option<String>,
    #[serde(default = "default_workers")]
    pub workers: i64,
    #[serde(default = "default_arrival")]
    pub arrival: Arrival,
    pub rate_per_s: f64,
    pub cost_us: u64,
    #[serde(default)]
    pub cpus: Option<String>,
}

fn default_workers() -> i64 {
    1
}
fn default_arrival() -> Arrival {
    Arrival::Poisson
}

/// A write to cpu.max / cpu.max.burst; absent values are rewritten unchanged.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WriteSpec {
    pub cgroup: String,
    #[serde(default)]
    pub at_ms: Option<f64>,
    #[serde(default)]
    pub start_ms: Option<f64>,
    #[serde(default)]
    pub every_ms: Option<f64>,
    #[serde(default)]
    pub period_us: Option<u64>,
    /// Absent: unchanged; -1 or "max": unlimited.
    #[serde(default)]
    pub quota_us: Option<Quota>,
    #[serde(default)]
    pub burst_us: Option<u64>,
}

impl WriteSpec {
    /// What this write leaves in cpu.max and cpu.max.burst that held `cur`:
    /// an absent value is written unchanged. Both backends apply writes by
    /// this rule.
    pub fn applied_to(&self, cur: Limit) -> Limit {
        Limit {
            quota_us: self.quota_us.unwrap_or(cur.quota_us),
            period_us: self.period_us.unwrap_or(cur.period_us),
            burst_us: self.burst_us.unwrap_or(cur.burst_us),
        }
    }
}

/// Seconds (float, from the file) to integer nanoseconds.
pub fn secs_to_ns(s: f64) -> u64 {
    (s * 1e9).round() as u64
}

/// Milliseconds (float, from the file) to integer nanoseconds.
pub fn ms_to_ns(ms: f64) -> u64 {
    (ms * 1e6).round() as u64
}

impl Scenario {
    /// Simulated time to run, in ns: `duration_s`, or the cap when absent.
    pub fn duration_ns(&self) -> u64 {
        secs_to_ns(self.duration_s.unwrap_or(MAX_DURATION_S))
    }

    pub fn cgroup_index(&self, name: &str) -> Option<usize> {
        self.cgroups.iter().position(|c| c.name == name)
    }

    /// The cgroup a validated task or service names (its `cgroup`): its
    /// index, None for the root. Both backends place threads by it.
    pub fn group_of(&self, cgroup: &Option<String>) -> Option<usize> {
        cgroup.as_ref().map(|name| self.cgroup_index(name).expect("validated"))
    }

    /// The CPUs of cgroup `cgroup` (an index; None is the root): its nearest
    /// ancestor's `cpus`, itself included, else every CPU of the machine.
    pub fn cgroup_cpus(&self, cgroup: Option<usize>) -> Vec<usize> {
        let mut g = cgroup;
        while let Some(i) = g {
            let c = &self.cgroups[i];
            if let Some(list) = &c.cpus {
                return parse_cpu_list(list).expect("validated");
            }
            g = c.parent.as_ref().map(|p| self.cgroup_index(p).expect("validated"));
        }
        (0..self.machine.cpus).collect()
    }

    /// Where a task or service in `cgroup` may run: its own `cpus` within its
    /// cgroup's. Never empty once validated (`check_member_cpus`).
    pub fn allowed_cpus(&self, cgroup: Option<usize>, cpus: &Option<String>) -> Vec<usize> {
        let group = self.cgroup_cpus(cgroup);
        match cpus {
            Some(list) => parse_cpu_list(list).expect("validated").into_iter().filter(|c| group.binary_search(c).is_ok()).collect(),
            None => group,
        }
    }

    /// Check every value against its allowed range; `Ok` means the simulator
    /// and the real backend can both take it as is.
    pub fn validate(&self) -> Result<(), ScenarioError> {
        let err = |key: String, msg: String| Err(ScenarioError::new(key, msg));
        check_scenario_name(&self.name)?;
        if let Some(d) = self.duration_s {
            if !(d > 0.0 && d <= MAX_DURATION_S) {
                return err("duration_s".into(), format!("must be in (0, {MAX_DURATION_S}], got {d}"));
            }
        }
        let m = &self.machine;
        if m.cpus == 0 || m.cpus > 4096 {
            return err("machine.cpus".into(), format!("must be in 1..=4096, got {}", m.cpus));
        }
        if ![100, 250, 300, 1000].contains(&m.hz) {
            return err("machine.hz".into(), format!("must be one of 100, 250, 300, 1000 (CONFIG_HZ), got {}", m.hz));
        }
        if m.smt == 0 || !m.cpus.is_multiple_of(m.smt) {
            return err("machine.smt".into(), format!("must be >= 1 and divide machine.cpus ({}), got {}", m.cpus, m.smt));
        }
        if !m.smt_speed.is_empty() && m.smt_speed.len() != m.smt {
            return err("machine.smt_speed".into(), format!("must list one speed per busy sibling count 1..={}, got {} values", m.smt, m.smt_speed.len()));
        }
        if let Some(bad) = m.smt_speed.iter().find(|s| !(**s > 0.0 && **s <= 1.0)) {
            return err("machine.smt_speed".into(), format!("speeds must be in (0, 1], got {bad}"));
        }
        if !(m.work_speed > 0.0 && m.work_speed <= 1.0) {
            return err("machine.work_speed".into(), format!("must be in (0, 1], got {}", m.work_speed));
        }
        let tick_us = 1e6 / m.hz as f64;
        let latencies = [
            ("machine.tick_jitter_us", m.tick_jitter_us),
            ("machine.timer_jitter_us", m.timer_jitter_us),
            ("machine.idle_exit_us", m.idle_exit_us),
            ("machine.tick_irq_us", m.tick_irq_us),
        ];
        for (key, v) in latencies {
            if !(0.0..tick_us).contains(&v) {
                return err(key.into(), format!("must be in [0, {tick_us:.0}) (one tick), got {v}"));
            }
        }
        if !(0.0..=10_000.0).contains(&m.background_per_s) {
            return err("machine.background_per_s".into(), format!("must be in [0, 10000], got {}", m.background_per_s));
        }
        // Up to a second: the real backend's probe hands compare what it
        // measured, and on a busy host one preemption by other work averaged
        // over 10 ms (10.9 ms with two compilers on this 2-CPU machine).
        if !(m.background_us >= 0.0 && m.background_us <= 1_000_000.0) {
            return err("machine.background_us".into(), format!("must be in [0, 1000000] (1 s), got {}", m.background_us));
        }
        if let Some(c) = &self.capture {
            let lengths = [("capture.background_p50_us", c.background_p50_us), ("capture.background_p90_us", c.background_p90_us), ("capture.background_max_us", c.background_max_us)];
            for (key, v) in lengths {
                if let Some(v) = v.filter(|v| !(v.is_finite() && *v >= 0.0)) {
                    return err(key.into(), format!("must be a length >= 0, got {v}"));
                }
            }
        }
        if let Some(u) = m.uptime_s {
            if !(1.0..=1e7).contains(&u) {
                return err("machine.uptime_s".into(), format!("must be in [1, 1e7], got {u}"));
            }
        }
        if let Some(p) = m.tick_phase_us {
            if !(0.0..tick_us).contains(&p) {
                return err("machine.tick_phase_us".into(), format!("must be in [0, {tick_us:.0}) (one tick), got {p}"));
            }
        }
        let k = &self.kernel;
        if k.slice_us == 0 || k.slice_us > MAX_CFS_QUOTA_PERIOD_US {
            return err("kernel.slice_us".into(), format!("must be in 1..=1000000, got {}", k.slice_us));
        }
        for (key, v) in [("kernel.pool_lock_hold_ns", k.pool_lock_hold_ns), ("kernel.pool_transfer_ns", k.pool_transfer_ns)] {
            if v > 1_000_000 {
                return err(key.into(), format!("must be <= 1000000 (1 ms), got {v}"));
            }
        }
        if self.sample_ms > MAX_SAMPLE_MS {
            return err("sample_ms".into(), format!("must be in 0..={MAX_SAMPLE_MS} (a day), got {}", self.sample_ms));
        }
        let cgroups = self.validate_cgroups()?;
        let names = self.validate_tasks(&cgroups)?;
        self.validate_services(&cgroups, names)?;
        self.validate_writes(&cgroups)?;
        self.validate_totals()?;
        if self.duration_s.is_none() && !self.tasks.iter().any(|t| t.effective_loops() >= 0 && (t.threads > 0 || !t.windows.is_empty())) {
            return err("duration_s".into(), "required when no task is finite (every task loops forever)".into());
        }
        Ok(())
    }

    /// A `cpus` value: a CPU list within the machine.
    fn cpu_list(&self, key: &str, list: &str) -> Result<CpuList, ScenarioError> {
        let cpus = CpuList::parse(list).map_err(|m| ScenarioError::new(key, m))?;
        if cpus.last() >= self.machine.cpus {
            let msg = format!("CPU {} does not exist (machine.cpus = {})", cpus.last(), self.machine.cpus);
            return Err(ScenarioError::new(key, msg));
        }
        Ok(cpus)
    }

    /// A task's or service's `cpus`: within the machine, and sharing a CPU
    /// with its cgroup's effective cpus (or no thread of it could run).
    fn check_member_cpus(&self, key: &str, cpus: &Option<String>, group: Option<&CpuList>) -> Result<(), ScenarioError> {
        let Some(list) = cpus else { return Ok(()) };
        let cpus = self.cpu_list(key, list)?;
        match group {
            Some(group) if !cpus.intersects(group) => {
                Err(ScenarioError::new(key, format!("no CPU of {cpus} is in its cgroup's cpus ({group})")))
            }
            _ => Ok(()),
        }
    }

    fn validate_cgroups(&self) -> Result<CgroupIndex<'_>, ScenarioError> {
        let mut index = CgroupIndex {
            by_name: HashMap::with_capacity(self.cgroups.len()),
            effective_cpus: Vec::with_capacity(self.cgroups.len()),
        };
        for (i, c) in self.cgroups.iter().enumerate() {
            check_name(&format!("cgroup[{i}].name"), &c.name)?;
            let key = |field: &str| format!("cgroup.{}.{}", c.name, field);
            if index.by_name.contains_key(c.name.as_str()) {
                return Err(ScenarioError::new(key("name"), "duplicate cgroup name".to_string()));
            }
            let parent = match &c.parent {
                None => None,
                Some(p) => Some(*index.by_name.get(p.as_str()).ok_or_else(|| {
                    let msg = format!("unknown cgroup {} (a parent must be declared before its children)", shown(p));
                    ScenarioError::new(key("parent"), msg)
                })?),
            };
            index.by_name.insert(&c.name, i);
            check_bandwidth(&key, c.period_us, c.quota_us, c.burst_us, self.kernel.profile)?;
            if let Some(o) = c.period_timer_offset_us {
                if !(0.0..c.period_us as f64).contains(&o) {
                    let msg = format!("must be in [0, {}) (one period), got {o}", c.period_us);
                    return Err(ScenarioError::new(key("period_timer_offset_us"), msg));
                }
            }
            if !(1..=10_000).contains(&c.weight) {
                return Err(ScenarioError::new(key("weight"), format!("must be in 1..=10000 (cpu.weight), got {}", c.weight)));
            }
            let inherited = parent.and_then(|p| index.effective_cpus[p].clone());
            let effective = match &c.cpus {
                None => inherited,
                Some(list) => {
                    let cpus = self.cpu_list(&key("cpus"), list)?;
                    if let Some(parent_cpus) = inherited.filter(|p| !cpus.is_subset(p)) {
                        let msg = format!("{cpus} is not within its parent's cpus ({parent_cpus}), as cpuset requires");
                        return Err(ScenarioError::new(key("cpus"), msg));
                    }
                    Some(Rc::new(cpus))
                }
            };
            index.effective_cpus.push(effective);
        }
        Ok(index)
    }

    /// Returns the task names, which services may not take.
    fn validate_tasks(&self, cgroups: &CgroupIndex) -> Result<HashSet<&str>, ScenarioError> {
        let mut names = HashSet::with_capacity(self.tasks.len());
        for (i, t) in self.tasks.iter().enumerate() {
            check_name(&format!("task[{i}].name"), &t.name)?;
            let key = |field: &str| format!("task.{}.{}", t.name, field);
            if !names.insert(t.name.as_str()) {
                return Err(ScenarioError::new(key("name"), "duplicate task name".to_string()));
            }
            let group_cpus = cgroups.cpus_of(cgroups.get(key("cgroup"), &t.cgroup)?);
            if let Some(class) = &t.class {
                check_name(&key("class"), class)?;
            }
            if !(0..=100_000).contains(&t.threads) {
                return Err(ScenarioError::new(key("threads"), format!("must be in 0..=100000, got {}", t.threads)));
            }
            validate_task_times(t)?;
            if t.loops < -1 || t.loops == 0 {
                return Err(ScenarioError::new(key("loop"), format!("must be -1 (forever) or >= 1, got {}", t.loops)));
            }
            if let Some(captured) = &t.captured {
                if t.threads != 1 {
                    return Err(ScenarioError::new(key("threads"), format!("a captured thread (phases_file) is one thread, got {}", t.threads)));
                }
                if !captured.iter().any(|p| matches!(p, Phase::Run(r) if *r > 0)) {
                    return Err(ScenarioError::new(key("phases_file"), "its section has no run_us > 0".to_string()));
                }
                self.check_member_cpus(&key("cpus"), &t.cpus, group_cpus)?;
                self.validate_deadline(t, group_cpus)?;
                continue;
            }
            if !t.windows.is_empty() {
                if !t.phases.is_empty() {
                    return Err(ScenarioError::new(key("windows"), "give phases or windows, not both".to_string()));
                }
                self.validate_windows(t)?;
                self.check_member_cpus(&key("cpus"), &t.cpus, group_cpus)?;
                self.validate_deadline(t, group_cpus)?;
                continue;
            }
            if t.phases.is_empty() {
                return Err(ScenarioError::new(key("phases"), "must list at least one phase".to_string()));
            }
            let timers = t.timer_names();
            for (j, p) in t.phases.iter().enumerate() {
                let at = |field: &str| format!("task.{}.phases[{j}].{field}", t.name);
                match p.phase(&timers) {
                    None => {
                        return Err(ScenarioError::new(
                            format!("task.{}.phases[{j}]", t.name),
                            "must have exactly one of run_us, runtime_us, sleep_us, timer_us, timer".to_string(),
                        ))
                    }
                    Some(Phase::Timer(0)) => return Err(ScenarioError::new(at("timer_us"), "must be > 0".to_string())),
                    Some(Phase::RtTimer { period: 0, .. }) => {
                        return Err(ScenarioError::new(at("timer.period_us"), "must be > 0".to_string()))
                    }
                    Some(_) => {}
                }
            }
            let works = |p: &PhaseSpec| matches!(p.phase(&timers), Some(Phase::Run(r) | Phase::Runtime(r)) if r > 0);
            if !t.phases.iter().any(works) {
                return Err(ScenarioError::new(key("phases"), "must contain a run_us or runtime_us phase > 0".to_string()));
            }
            self.check_member_cpus(&key("cpus"), &t.cpus, group_cpus)?;
            self.validate_deadline(t, group_cpus)?;
        }
        self.admit_statically()?;
        Ok(names)
    }

    fn validate_windows(&self, t: &TaskSpec) -> Result<(), ScenarioError> {
        let key = |field: &str| format!("task.{}.{}", t.name, field);
        if !(t.clock_scale > 0.0 && t.clock_scale <= 100.0) {
            return Err(ScenarioError::new(key("clock_scale"), format!("must be in (0, 100], got {}", t.clock_scale)));
        }
        let mut last_end = f64::NEG_INFINITY;
        for (i, &[start, end, rate]) in t.windows.iter().enumerate() {
            let bad = |m: String| Err(ScenarioError::new(format!("task.{}.windows[{i}]", t.name), m));
            if !(start.is_finite() && end.is_finite() && start < end) {
                return bad(format!("needs start_s < end_s, got [{start}, {end}]"));
            }
            if start < last_end {
                return bad(format!("starts at {start} s, before the previous window ends ({last_end} s)"));
            }
            if !(0.0..=1024.0).contains(&rate) {
                return bad(format!("cpu_rate must be in [0, 1024] core-seconds per second, got {rate}"));
            }
            last_end = end;
        }
        Ok(())
    }

    /// `sched_setattr`'s checks of SCHED_DEADLINE parameters (`__checkparam_dl`),
    /// and of its affinity: the root domain's every CPU (else EPERM).
    fn validate_deadline(&self, t: &TaskSpec, group_cpus: Option<&CpuList>) -> Result<(), ScenarioError> {
        let key = |field: &str| format!("task.{}.{}", t.name, field);
        if t.policy == Policy::Normal {
            let profile = t.profile_ms.map(|ms| ms * 1_000);
            if let Some(field) = [("runtime_us", t.runtime_us), ("deadline_us", t.deadline_us), ("period_us", t.period_us), ("profile_ms", profile)]
                .iter()
                .find_map(|(f, v)| v.map(|_| *f))
            {
                return Err(ScenarioError::new(key(field), "only for policy = \"deadline\"".to_string()));
            }
            return Ok(());
        }
        let Some((runtime, deadline, period)) = t.dl_params_ns() else {
            return Err(ScenarioError::new(key("runtime_us"), "policy = \"deadline\" needs runtime_us and period_us".to_string()));
        };
        if runtime < DL_MIN_RUNTIME_NS || runtime > deadline || deadline > period {
            return Err(ScenarioError::new(
                key("runtime_us"),
                format!("need 1.024 us <= runtime_us <= deadline_us <= period_us, got {} <= {} <= {}", runtime / 1000, deadline / 1000, period / 1000),
            ));
        }
        if !(100_000..=4_000_000_000).contains(&period) {
            return Err(ScenarioError::new(key("period_us"), format!("must be in 100..=4000000 (sched_deadline_period_{{min,max}}_us), got {}", period / 1000)));
        }
        if t.cpus.is_some() || t.pin {
            return Err(ScenarioError::new(key("cpus"), "a SCHED_DEADLINE task must be allowed on every CPU (root domain)".to_string()));
        }
        if let Some(cpus) = group_cpus.filter(|c| !c.is_all(self.machine.cpus)) {
            let msg = format!("a SCHED_DEADLINE task must be allowed on every CPU (root domain), but its cgroup's cpus are {cpus}");
            return Err(ScenarioError::new(key("cgroup"), msg));
        }
        if t.retry_ms == 0 {
            return Err(ScenarioError::new(key("retry_ms"), "must be >= 1".to_string()));
        }
        if let Some(ms) = t.profile_ms {
            if t.windows.is_empty() {
                return Err(ScenarioError::new(key("profile_ms"), "profiles trace windows: give windows or trace_csv".to_string()));
            }
            if !(1..=4_000).contains(&ms) {
                return Err(ScenarioError::new(key("profile_ms"), format!("must be in 1..=4000 (the stage is a period: sched_deadline_period_max_us), got {ms}")));
            }
        }
        Ok(())
    }

    /// With `on_refused = "error"`, admission control decided before the run:
    /// if all deadline threads together need more than admission allows, some
    /// `sched_setattr` would be refused, and the run fails. (Tasks that retry
    /// are admitted or refused as they start.)
    fn admit_statically(&self) -> Result<(), ScenarioError> {
        let capacity = dl_capacity_bw(self.machine.cpus, self.kernel.profile);
        let deadline = || self.tasks.iter().filter(|t| t.policy == Policy::Deadline);
        let total: u64 = deadline()
            .map(|t| {
                // A thread that profiles starts on a whole core.
                let (runtime, _, period) = t.dl_params_ns().expect("validated");
                let bw = if t.profile_ms.is_some() { 1 << BW_SHIFT } else { to_ratio(period, runtime) };
                TaskPhases::threads(t) as u64 * bw
            })
            .sum();
        if let Some(t) = deadline().find(|t| t.on_refused == OnRefused::Error) {
            if total > capacity {
                return Err(ScenarioError::new(
                    format!("task.{}", t.name),
                    format!(
                        "SCHED_DEADLINE admission refused (EBUSY): the deadline tasks need {:.2} CPUs, more than the {:.2} admission allows",
                        total as f64 / (1u64 << BW_SHIFT) as f64,
                        capacity as f64 / (1u64 << BW_SHIFT) as f64
                    ),
                ));
            }
        }
        Ok(())
    }

    fn validate_services<'a>(&'a self, cgroups: &CgroupIndex, mut names: HashSet<&'a str>) -> Result<(), ScenarioError> {
        for (i, s) in self.services.iter().enumerate() {
            check_name(&format!("service[{i}].name"), &s.name)?;
            let key = |field: &str| format!("service.{}.{}", s.name, field);
            if !names.insert(s.name.as_str()) {
                return Err(ScenarioError::new(key("name"), "duplicate task or service name".to_string()));
            }
            let group_cpus = cgroups.cpus_of(cgroups.get(key("cgroup"), &s.cgroup)?);
            if !(1..=100_000).contains(&s.workers) {
                return Err(ScenarioError::new(key("workers"), format!("must be in 1..=100000, got {}", s.workers)));
            }
            if !(s.rate_per_s > 0.0 && s.rate_per_s <= 1e6) {
                return Err(ScenarioError::new(key("rate_per_s"), format!("must be in (0, 1e6], got {}", s.rate_per_s)));
            }
            check_time(&key("cost_us"), s.cost_us, 1_000, "us")?;
            if s.cost_us == 0 {
                return Err(ScenarioError::new(key("cost_us"), "must be > 0".to_string()));
            }
            self.check_member_cpus(&key("cpus"), &s.cpus, group_cpus)?;
        }
        Ok(())
    }

    fn validate_writes(&self, cgroups: &CgroupIndex) -> Result<(), ScenarioError> {
        for (i, w) in self.writes.iter().enumerate() {
            let key = |field: &str| format!("write[{i}].{field}");
            let Some(&cg) = cgroups.by_name.get(w.cgroup.as_str()) else {
                return Err(ScenarioError::new(key("cgroup"), format!("unknown cgroup {}", shown(&w.cgroup))));
            };
            match (w.at_ms, w.start_ms, w.every_ms) {
                (Some(at), None, None) if (0.0..=MAX_TIME_MS).contains(&at) => {}
                (None, Some(start), Some(every)) if (0.0..=MAX_TIME_MS).contains(&start) && (1.0..=MAX_TIME_MS).contains(&every) => {}
                _ => {
                    return Err(ScenarioError::new(
                        key("at_ms"),
                        format!("give at_ms, or start_ms with every_ms >= 1, each at most {MAX_TIME_MS} (about 116 days)"),
                    ))
                }
            }
            let c = &self.cgroups[cg];
            let period = w.period_us.unwrap_or(c.period_us);
            let quota = w.quota_us.unwrap_or(c.quota_us);
            let burst = w.burst_us.unwrap_or(c.burst_us);
            check_bandwidth(&key, period, quota, burst, self.kernel.profile)?;
        }
        Ok(())
    }
    /// Bound the products of keys that a run keeps in memory; each error
    /// names the key that contributes most.
    fn validate_totals(&self) -> Result<(), ScenarioError> {
        let too_many = |key: String, what: String, limit: u64, fix: &str| {
            Err(ScenarioError::new(key, format!("{what}, more than the {limit} a run may have; {fix}")))
        };
        let key = |(table, name, field): (&str, &str, &str)| format!("{table}.{name}.{field}");
        let task_threads = self.tasks.iter().map(|t| (("task", t.name.as_str(), "threads"), TaskPhases::threads(t) as u64));
        let workers = self.services.iter().map(|s| (("service", s.name.as_str(), "workers"), s.workers as u64));
        let (threads, biggest) = largest_sum(task_threads.chain(workers));
        if threads > MAX_THREADS {
            let what = format!("the tasks and services have {threads} threads in all");
            return too_many(key(biggest.expect("threads")), what, MAX_THREADS, "use fewer threads");
        }
        let cfs_rqs = (self.cgroups.len() as u64 + 1) * self.machine.cpus as u64;
        if cfs_rqs > MAX_CFS_RQS {
            let what = format!("{} cgroups and the root on {} CPUs need {cfs_rqs} runqueues", self.cgroups.len(), self.machine.cpus);
            return too_many("machine.cpus".into(), what, MAX_CFS_RQS, "use fewer cgroups or CPUs");
        }
        if self.sample_ms > 0 {
            let samples = self.duration_ns() / (self.sample_ms * 1_000_000) * self.tasks.len() as u64;
            if samples > MAX_SAMPLES {
                let what = format!("{} tasks sampled every {} ms for {} s keep {samples} samples", self.tasks.len(), self.sample_ms, self.duration_ns() as f64 / 1e9);
                return too_many("sample_ms".into(), what, MAX_SAMPLES, "raise sample_ms or shorten duration_s");
            }
        }
        let duration_s = self.duration_ns() as f64 / 1e9;
        let expected = self.services.iter().map(|s| (("service", s.name.as_str(), "rate_per_s"), (s.rate_per_s * duration_s) as u64));
        let (requests, biggest) = largest_sum(expected);
        if requests > MAX_REQUESTS {
            let what = format!("the services expect {requests} requests in {duration_s} s, each one's latency kept");
            return too_many(key(biggest.expect("requests")), what, MAX_REQUESTS, "lower rate_per_s or shorten duration_s");
        }
        Ok(())
    }
}

/// The sum of the values, and the key of the largest.
fn largest_sum<K>(items: impl Iterator<Item = (K, u64)>) -> (u64, Option<K>) {
    let (mut sum, mut largest) = (0u64, None::<(K, u64)>);
    for (key, v) in items {
        sum = sum.saturating_add(v);
        match &largest {
            Some((_, l)) if *l >= v => {}
            _ => largest = Some((key, v)),
        }
    }
    (sum, largest.map(|(key, _)| key))
}

/// A time key, in units of `ns_per_unit`, at most [`MAX_TIME_NS`].
fn check_time(key: &str, value: u64, ns_per_unit: u64, unit: &str) -> Result<(), ScenarioError> {
    let max = MAX_TIME_NS / ns_per_unit;
    if value > max {
        return Err(ScenarioError::new(key, format!("must be at most {max} {unit} (about 116 days), got {value}")));
    }
    Ok(())
}

/// Every time a task gives, before anything converts one to nanoseconds.
fn validate_task_times(t: &TaskSpec) -> Result<(), ScenarioError> {
    let check = |prefix: &str, fields: &[(&str, Option<u64>)], ns_per_unit: u64, unit: &str| {
        fields.iter().try_for_each(|&(field, v)| match v {
            Some(v) => check_time(&format!("{prefix}.{field}"), v, ns_per_unit, unit),
            None => Ok(()),
        })
    };
    let task = format!("task.{}", t.name);
    let us = [
        ("start_us", Some(t.start_us)),
        ("start_spread_us", Some(t.start_spread_us)),
        ("runtime_us", t.runtime_us),
        ("deadline_us", t.deadline_us),
        ("period_us", t.period_us),
    ];
    check(&task, &us, 1_000, "us")?;
    check(&task, &[("retry_ms", Some(t.retry_ms)), ("profile_ms", t.profile_ms)], 1_000_000, "ms")?;
    for (j, p) in t.phases.iter().enumerate() {
        let times = [("run_us", p.run_us), ("runtime_us", p.runtime_us), ("sleep_us", p.sleep_us), ("timer_us", p.timer_us)];
        check(&format!("{task}.phases[{j}]"), &times, 1_000, "us")?;
        check(&format!("{task}.phases[{j}].timer"), &[("period_us", p.timer.as_ref().map(|t| t.period_us))], 1_000, "us")?;
    }
    let max_s = (MAX_TIME_NS / 1_000_000_000) as f64;
    if let Some((i, w)) = t.windows.iter().enumerate().find(|(_, w)| !(0.0..=max_s).contains(&w[0]) || !(0.0..=max_s).contains(&w[1])) {
        let msg = format!("start_s and end_s must be in [0, {max_s}] (about 116 days), got [{}, {}]", w[0], w[1]);
        return Err(ScenarioError::new(format!("task.{}.windows[{i}]", t.name), msg));
    }
    Ok(())
}

/// The cgroups as validated, for checking what refers to them: their indices
/// by name, and each one's effective cpus (its own `cpus`, else its nearest
/// ancestor's; `None`: every CPU of the machine).
struct CgroupIndex<'a> {
    by_name: HashMap<&'a str, usize>,
    effective_cpus: Vec<Option<Rc<CpuList>>>,
}

impl CgroupIndex<'_> {
    /// The cgroup a task or service names (at `key`): its index, `None` for the root.
    fn get(&self, key: String, cgroup: &Option<String>) -> Result<Option<usize>, ScenarioError> {
        match cgroup {
            None => Ok(None),
            Some(name) => match self.by_name.get(name.as_str()) {
                Some(&i) => Ok(Some(i)),
                None => Err(ScenarioError::new(key, format!("unknown cgroup {}", shown(name)))),
            },
        }
    }

    fn cpus_of(&self, cgroup: Option<usize>) -> Option<&CpuList> {
        cgroup.and_then(|i| self.effective_cpus[i].as_deref())
    }
}

/// Names of cgroups, tasks and services (and `class` labels): `--set` keys
/// address them between dots, and the real backend makes directories of them.
const NAME_MAX_LEN: usize = 64;

fn check_name(key: &str, name: &str) -> Result<(), ScenarioError> {
    let ok = |b: u8| b.is_ascii_alphanumeric() || b == b'_' || b == b'-';
    if name.is_empty() || name.len() > NAME_MAX_LEN || !name.bytes().all(ok) {
        let msg = format!("must be 1 to {NAME_MAX_LEN} ASCII letters, digits, '_' or '-', got {}", shown(name));
        return Err(ScenarioError::new(key, msg));
    }
    Ok(())
}

/// The scenario's `name`: free text for reports, without control characters
/// or markup.
const SCENARIO_NAME_MAX_LEN: usize = 128;
const SCENARIO_NAME_PUNCTUATION: &str = " _-.+:,/()";

fn check_scenario_name(name: &str) -> Result<(), ScenarioError> {
    let ok = |c: char| c.is_ascii_alphanumeric() || SCENARIO_NAME_PUNCTUATION.contains(c);
    if name.trim().is_empty() || name.len() > SCENARIO_NAME_MAX_LEN || !name.chars().all(ok) {
        let msg = format!(
            "must be 1 to {SCENARIO_NAME_MAX_LEN} ASCII letters, digits, spaces or any of {:?}, got {}",
            SCENARIO_NAME_PUNCTUATION.trim_start(),
            shown(name)
        );
        return Err(ScenarioError::new("name", msg));
    }
    Ok(())
}

/// The checks of `tg_set_cfs_bandwidth` (and burst's availability per profile).
fn check_bandwidth(
    key: &dyn Fn(&str) -> String,
    period_us: u64,
    quota_us: Quota,
    burst_us: u64,
    profile: Profile,
) -> Result<(), ScenarioError> {
    if !(MIN_CFS_QUOTA_PERIOD_US..=MAX_CFS_QUOTA_PERIOD_US).contains(&period_us) {
        return Err(ScenarioError::new(key("period_us"), format!("must be in 1000..=1000000 (1 ms..1 s), got {period_us}")));
    }
    match quota_us {
        Quota::Max => {}
        Quota::Us(q) if q < MIN_CFS_QUOTA_PERIOD_US => {
            return Err(ScenarioError::new(key("quota_us"), format!("must be >= 1000 (1 ms), got {q}")))
        }
        Quota::Us(q) if q > MAX_CFS_RUNTIME_US => {
            return Err(ScenarioError::new(key("quota_us"), format!("must be <= {MAX_CFS_RUNTIME_US}, got {q}")))
        }
        Quota::Us(q) => {
            if burst_us > q {
                return Err(ScenarioError::new(key("burst_us"), format!("must be <= quota_us ({q}), got {burst_us}")));
            }
        }
    }
    if burst_us > 0 && !profile.has_burst() {
        return Err(ScenarioError::new(
            key("burst_us"),
            format!("burst needs kernel.profile >= 5.14, got {}", profile.as_str()),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_write_sets_what_it_names_and_max_lifts_the_limit() {
        let cur = Limit { quota_us: Quota::Us(50_000), period_us: 100_000, burst_us: 1_000 };
        let write = |quota_us, period_us, burst_us| WriteSpec {
            cgroup: "a".into(),
            at_ms: Some(1.0),
            start_ms: None,
            every_ms: None,
            period_us,
            quota_us,
            burst_us,
        };
        assert_eq!(write(None, None, None).applied_to(cur), cur);
        assert_eq!(write(Some(Quota::Max), None, None).applied_to(cur), Limit { quota_us: Quota::Max, ..cur });
        let all = write(Some(Quota::Us(20_000)), Some(50_000), Some(0)).applied_to(cur);
        assert_eq!(all, Limit { quota_us: Quota::Us(20_000), period_us: 50_000, burst_us: 0 });
    }
}
