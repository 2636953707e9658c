//! Scenario format v1: one TOML file read by both backends. Its keys: the
//! serde types and their defaults. Unknown keys are rejected by serde
//! (`deny_unknown_fields`); `load.rs` parses (with `--set` overrides) and
//! `validate.rs` checks the values, once.

pub use crate::format::cpulist::parse_cpu_list;
pub use crate::vocab::dl::{dl_runtime_at_rate, OnRefused, DL_MIN_RUNTIME_NS};
pub use crate::vocab::noise::Arrival;
pub use crate::vocab::phase::{runs_on_timers, Phase, TimerMode};
use crate::format::error::ScenarioError;
use crate::vocab::profile::{Feature, Profile};
use crate::vocab::stop::Stop;
use crate::vocab::types::Quota;
pub use crate::vocab::types::{ms_to_ns, secs_to_ns};
use serde::{Deserialize, Serialize};
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
    /// How the trace's reader was scheduled: `SCHED_FIFO 1`, or `nice -10`
    /// where the capture may not use a real-time policy. Empty in captures from before.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reader_policy: String,
    /// The longest time between two reads of the trace's buffers, us: what
    /// the buffers had to hold (0 in captures from before).
    #[serde(default)]
    pub reader_max_gap_us: u64,
    /// The most one CPU's buffer held at a read, KiB (0 in captures from before).
    #[serde(default)]
    pub reader_peak_kb: u64,
    /// The longest time the reader worked between two of its sleeps (reading
    /// the buffers and turning their events into phases), us: with the sleep,
    /// what makes its longest gap (0 in captures from before).
    #[serde(default)]
    pub reader_max_work_us: u64,
    /// The spill files' writes while the trace was read (by a thread of
    /// their own): the longest and their sum, us (0 in captures from before).
    #[serde(default)]
    pub spill_write_max_us: u64,
    #[serde(default)]
    pub spill_write_us: u64,
    /// How often the reader waited for the spill's writer thread, its
    /// queue full (the disk slower than the phases came), and how long in
    /// all, us: the reader's own gap then (0 in captures from before).
    #[serde(default)]
    pub spill_waits: u64,
    #[serde(default)]
    pub spill_wait_us: u64,
    /// How the spill's writer thread was scheduled, as it read itself once
    /// started (`SCHED_FIFO 1`: the reader's policy, given on). Empty in
    /// captures from before.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub writer_policy: String,
    /// Other tasks' preemptions of the captured threads, the host's background
    /// as the target met it, where the threads wanted a CPU long enough to
    /// tell: then `[machine]`'s `background_per_s` and `background_us` (their
    /// mean) are the capture's. Absent otherwise, and in captures from before.
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
    /// How much `work_speed` varies from one run phase to the next: the
    /// coefficient of variation of a run phase's CPU time (a host charges
    /// the same calibrated work differently run by run: its interrupts, its
    /// hypervisor's neighbours). Given, each run phase's work is drawn
    /// log-normal with its `run_us` as the mean and this spread; absent,
    /// every run costs the same.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub work_speed_cv: Option<f64>,
    /// CPU charged to a thread per wake-up beyond its work, us: the kernel
    /// charges a task from `set_next_entity` (its `exec_start`) to the next
    /// `update_curr`, so the switch in, the wake-up's return to user space
    /// and the next sleep's syscall up to `dequeue_entity` are the thread's
    /// runtime. Each run phase that follows a wake-up is this much longer
    /// (docs/fidelity.md, "A wake-up's cost"). 0: none, the default until
    /// a probe measures it (`host.wakeup_cost_us`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub wakeup_cost_us: f64,
    /// Each tick fires up to this late (uniform, seeded): interrupt latency.
    #[serde(default = "default_tick_jitter_us")]
    pub tick_jitter_us: f64,
    /// Each period/slack timer fires up to this late (uniform, seeded).
    #[serde(default = "default_timer_jitter_us")]
    pub timer_jitter_us: f64,
    /// The share of ticks that run `tick_late_us` late on top of
    /// `tick_jitter_us` (seeded, tick by tick): a guest whose emulator
    /// delivers some ticks milliseconds late (QEMU/TCG, docs/fidelity.md).
    /// Absent: none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tick_late_share: Option<f64>,
    /// How late those ticks run, beyond the jitter.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tick_late_us: Option<f64>,
    /// The share of the late ticks that are late on every CPU at once (the
    /// whole guest's tick late); the rest are late on one CPU. Absent: 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tick_late_together: Option<f64>,
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
    /// CPU time each background preemption takes: its mean.
    #[serde(default = "default_background_us")]
    pub background_us: f64,
    /// The median background preemption. Given, each preemption's length is
    /// drawn from a log-normal with this median and `background_us` as its
    /// mean (a host's: many short, a few long); absent, every preemption
    /// takes `background_us`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub background_p50_us: Option<f64>,
    /// The background preemptions' lengths as measured (a sample, or its
    /// quantiles at even steps: [`even_quantiles`]). Given, each preemption
    /// takes one of them, drawn uniformly, in place of `background_us` and
    /// `background_p50_us`: a host's lengths are not one log-normal
    /// (docs/fidelity.md, "The background's lengths, as measured").
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub background_lengths_us: Vec<f64>,
    /// CLOCK_MONOTONIC at simulated time 0, which places the timer grids.
    /// Absent: seeded, uniform in [600, 1200) s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uptime_s: Option<f64>,
    /// Offset of the jiffy grid from multiples of the tick since boot.
    /// Absent: 0 on profiles >= 6.1 (`Profile::has_aligned_tick`), seeded before.
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
/// Left out of a serialised scenario at its default: documents from before
/// the key read the same.
fn is_zero(v: &f64) -> bool {
    *v == 0.0
}
/// `machine.tick_jitter_us` when a scenario does not set it.
pub const DEFAULT_TICK_JITTER_US: f64 = 20.0;
fn default_tick_jitter_us() -> f64 {
    DEFAULT_TICK_JITTER_US
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

impl Machine {
    /// Whether background preemptions happen at all.
    pub fn has_background(&self) -> bool {
        self.background_per_s > 0.0 && (self.background_us > 0.0 || !self.background_lengths_us.is_empty())
    }
}

impl Default for Machine {
    fn default() -> Self {
        Machine {
            cpus: default_cpus(),
            hz: default_hz(),
            smt: default_smt(),
            smt_speed: Vec::new(),
            work_speed: default_work_speed(),
            work_speed_cv: None,
            wakeup_cost_us: 0.0,
            tick_jitter_us: default_tick_jitter_us(),
            timer_jitter_us: default_timer_jitter_us(),
            tick_late_share: None,
            tick_late_us: None,
            tick_late_together: None,
            idle_exit_us: default_idle_exit_us(),
            tick_irq_us: default_tick_irq_us(),
            background_per_s: default_background_per_s(),
            background_us: default_background_us(),
            background_p50_us: None,
            background_lengths_us: Vec::new(),
            uptime_s: None,
            tick_phase_us: None,
        }
    }
}

/// How many lengths a measurement keeps (a probe's, `compare`'s pooled probes).
pub const MEASURED_BACKGROUND_LENGTHS: usize = 64;

/// At most `n` lengths standing for a sorted sample: the sample itself, or
/// its values at the quantiles (i + 1/2) / n (`machine.background_lengths_us`).
pub fn even_quantiles(sorted: &[f64], n: usize) -> Vec<f64> {
    even_quantile_ranks(sorted.len(), n).map(|r| sorted[r]).collect()
}

/// The 0-based ranks [`even_quantiles`] takes of `len` sorted values, ascending
/// (for a sample read as a stream: a capture's).
pub fn even_quantile_ranks(len: usize, n: usize) -> impl Iterator<Item = usize> {
    let kept = len.min(n);
    (0..kept).map(move |i| if len <= n { i } else { (2 * i + 1) * len / (2 * n) })
}

/// `machine.background_lengths_us` from measured lengths (a probe's; the
/// pooled probes of `compare`'s runs), in any order.
pub fn measured_background_lengths(mut lengths_us: Vec<f64>) -> Vec<f64> {
    lengths_us.retain(|us| us.is_finite() && *us > 0.0);
    lengths_us.sort_by(f64::total_cmp);
    even_quantiles(&lengths_us, MEASURED_BACKGROUND_LENGTHS)
}

/// `machine.background_p50_us` from a measured median and mean (the probe's,
/// a capture's): none without a length, and at most the mean, since a median
/// above it is a few long preemptions' noise.
pub fn measured_background_p50_us(p50_us: Option<f64>, mean_us: f64) -> Option<f64> {
    p50_us.filter(|&p| p > 0.0 && mean_us > 0.0).map(|p| p.min(mean_us))
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

fn default_retry_ms() -> u64 {
    100
}

fn default_clock_scale() -> f64 {
    1.0
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
    /// The spread of request costs: absent or 0, each costs `cost_us`; else
    /// lognormal with mean `cost_us` and this coefficient of variation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_cv: Option<f64>,
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

impl Scenario {
    /// Simulated time to run, in ns: `duration_s`, or the cap when absent.
    pub fn duration_ns(&self) -> u64 {
        secs_to_ns(self.duration_s.unwrap_or(MAX_DURATION_S))
    }

    pub fn cgroup_index(&self, name: &str) -> Option<usize> {
        self.cgroups.iter().position(|c| c.name == name)
    }

    /// A run's early stop (`SimOptions::stop`) this scenario can take: a
    /// cgroup it has, a ratio in 0..=1.
    pub fn check_stop(&self, stop: &Stop) -> Result<(), ScenarioError> {
        if self.cgroup_index(&stop.cgroup).is_none() {
            return Err(ScenarioError::new("stop.cgroup", format!("no cgroup named {:?}", stop.cgroup)));
        }
        if !(0.0..=1.0).contains(&stop.max_throttled) {
            return Err(ScenarioError::new("stop.max_throttled", format!("must be a ratio in 0..1, got {}", stop.max_throttled)));
        }
        Ok(())
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
}

#[cfg(test)]
mod tests {
    use super::even_quantiles;

    #[test]
    fn a_short_sample_is_kept_and_a_long_one_stands_as_its_quantiles() {
        assert_eq!(even_quantiles(&[1.0, 2.0, 3.0], 4), vec![1.0, 2.0, 3.0]);
        let sample: Vec<f64> = (0..100).map(f64::from).collect();
        assert_eq!(even_quantiles(&sample, 4), vec![12.0, 37.0, 62.0, 87.0]);
        assert_eq!(even_quantiles(&[], 4), Vec::<f64>::new());
    }
}
