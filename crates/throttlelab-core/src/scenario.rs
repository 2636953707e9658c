//! Scenario format v1: one TOML file read by both backends.
//!
//! Parsing and validation happen here, once. Unknown keys are rejected by serde
//! (`deny_unknown_fields`); value checks follow the kernel's own limits
//! (`tg_set_cfs_bandwidth`: period 1 ms..1 s, quota >= 1 ms, burst <= quota).

use crate::error::ScenarioError;
use crate::phases::TaskPhases;
use crate::profile::{Feature, Profile};
use serde::{Deserialize, Serialize};

/// Simulated time cap when `duration_s` is absent: run until every finite task
/// finishes, but never longer than this.
pub const MAX_DURATION_S: f64 = 86_400.0;

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
    /// Absent or -1: unlimited.
    #[serde(default)]
    pub quota_us: Option<i64>,
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

impl CgroupSpec {
    /// The quota in microseconds, `None` when unlimited.
    pub fn quota(&self) -> Option<u64> {
        match self.quota_us {
            Some(q) if q >= 0 => Some(q as u64),
            _ => None,
        }
    }
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
    /// Times the phases run, -1 = forever; a trace runs once unless `loop` says more.
    pub fn effective_loops(&self) -> i64 {
        if self.loops == -1 && !self.windows.is_empty() {
            1
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
    pub sleep_us: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timer_us: Option<u64>,
}

/// A validated phase.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Work worth this many ns of CPU at nominal speed.
    Run(u64),
    /// Sleep this many ns.
    Sleep(u64),
    /// Sleep until the next multiple of this many ns (rt-app's `timer`).
    Timer(u64),
}

impl PhaseSpec {
    pub fn phase(&self) -> Option<Phase> {
        match (self.run_us, self.sleep_us, self.timer_us) {
            (Some(r), None, None) => Some(Phase::Run(r * 1_000)),
            (None, Some(s), None) => Some(Phase::Sleep(s * 1_000)),
            (None, None, Some(t)) => Some(Phase::Timer(t * 1_000)),
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
    #[serde(default)]
    pub quota_us: Option<i64>,
    #[serde(default)]
    pub burst_us: Option<u64>,
}

/// Parse `"0-3,5"` into a sorted list of CPU ids.
pub fn parse_cpu_list(s: &str) -> Result<Vec<usize>, String> {
    let mut cpus = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (lo, hi) = match part.split_once('-') {
            Some((a, b)) => (a.trim(), b.trim()),
            None => (part, part),
        };
        let lo: usize = lo.parse().map_err(|_| format!("bad CPU list {s:?}"))?;
        let hi: usize = hi.parse().map_err(|_| format!("bad CPU list {s:?}"))?;
        if lo > hi {
            return Err(format!("bad CPU range {part:?}"));
        }
        cpus.extend(lo..=hi);
    }
    cpus.sort_unstable();
    cpus.dedup();
    if cpus.is_empty() {
        return Err(format!("empty CPU list {s:?}"));
    }
    Ok(cpus)
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

    /// Check every value against its allowed range; `Ok` means the simulator
    /// and the real backend can both take it as is.
    pub fn validate(&self) -> Result<(), ScenarioError> {
        let err = |key: String, msg: String| Err(ScenarioError::new(key, msg));
        if self.name.trim().is_empty() {
            return err("name".into(), "must not be empty".into());
        }
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
        if !(m.background_us >= 0.0 && m.background_us <= 10_000.0) {
            return err("machine.background_us".into(), format!("must be in [0, 10000], got {}", m.background_us));
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
        self.validate_cgroups()?;
        self.validate_tasks()?;
        self.validate_services()?;
        self.validate_writes()?;
        if self.duration_s.is_none() && !self.tasks.iter().any(|t| t.effective_loops() >= 0 && (t.threads > 0 || !t.windows.is_empty())) {
            return err("duration_s".into(), "required when no task is finite (every task loops forever)".into());
        }
        Ok(())
    }

    fn validate_cpus(&self, key: &str, cpus: &Option<String>) -> Result<(), ScenarioError> {
        if let Some(list) = cpus {
            let ids = parse_cpu_list(list).map_err(|m| ScenarioError::new(key, m))?;
            if let Some(&bad) = ids.iter().find(|&&c| c >= self.machine.cpus) {
                return Err(ScenarioError::new(
                    key,
                    format!("CPU {bad} does not exist (machine.cpus = {})", self.machine.cpus),
                ));
            }
        }
        Ok(())
    }

    fn validate_cgroups(&self) -> Result<(), ScenarioError> {
        for (i, c) in self.cgroups.iter().enumerate() {
            let key = |field: &str| format!("cgroup.{}.{}", c.name, field);
            if c.name.is_empty() || c.name.contains(['/', '.']) {
                return Err(ScenarioError::new(format!("cgroup[{i}].name"), format!("must be a plain name, got {:?}", c.name)));
            }
            if self.cgroups[..i].iter().any(|o| o.name == c.name) {
                return Err(ScenarioError::new(key("name"), "duplicate cgroup name".to_string()));
            }
            if let Some(p) = &c.parent {
                if self.cgroups[..i].iter().all(|o| &o.name != p) {
                    return Err(ScenarioError::new(
                        key("parent"),
                        format!("unknown cgroup {p:?} (a parent must be declared before its children)"),
                    ));
                }
            }
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
            self.validate_cpus(&key("cpus"), &c.cpus)?;
        }
        Ok(())
    }

    fn check_cgroup_ref(&self, key: String, cg: &Option<String>) -> Result<(), ScenarioError> {
        match cg {
            Some(name) if self.cgroup_index(name).is_none() => {
                Err(ScenarioError::new(key, format!("unknown cgroup {name:?}")))
            }
            _ => Ok(()),
        }
    }

    fn validate_tasks(&self) -> Result<(), ScenarioError> {
        let mut names: Vec<&str> = Vec::new();
        for (i, t) in self.tasks.iter().enumerate() {
            let key = |field: &str| format!("task.{}.{}", t.name, field);
            if t.name.is_empty() || t.name.contains('.') {
                return Err(ScenarioError::new(format!("task[{i}].name"), format!("must be a plain name, got {:?}", t.name)));
            }
            if names.contains(&t.name.as_str()) {
                return Err(ScenarioError::new(key("name"), "duplicate task name".to_string()));
            }
            names.push(&t.name);
            self.check_cgroup_ref(key("cgroup"), &t.cgroup)?;
            if !(0..=100_000).contains(&t.threads) {
                return Err(ScenarioError::new(key("threads"), format!("must be in 0..=100000, got {}", t.threads)));
            }
            if t.loops < -1 || t.loops == 0 {
                return Err(ScenarioError::new(key("loop"), format!("must be -1 (forever) or >= 1, got {}", t.loops)));
            }
            if !t.windows.is_empty() {
                if !t.phases.is_empty() {
                    return Err(ScenarioError::new(key("windows"), "give phases or windows, not both".to_string()));
                }
                self.validate_windows(t)?;
                self.validate_cpus(&key("cpus"), &t.cpus)?;
                self.validate_deadline(t)?;
                continue;
            }
            if t.phases.is_empty() {
                return Err(ScenarioError::new(key("phases"), "must list at least one phase".to_string()));
            }
            for (j, p) in t.phases.iter().enumerate() {
                match p.phase() {
                    None => {
                        return Err(ScenarioError::new(
                            format!("task.{}.phases[{j}]", t.name),
                            "must have exactly one of run_us, sleep_us, timer_us".to_string(),
                        ))
                    }
                    Some(Phase::Timer(0)) => {
                        return Err(ScenarioError::new(format!("task.{}.phases[{j}].timer_us", t.name), "must be > 0".to_string()))
                    }
                    Some(_) => {}
                }
            }
            if !t.phases.iter().any(|p| matches!(p.phase(), Some(Phase::Run(r)) if r > 0)) {
                return Err(ScenarioError::new(key("phases"), "must contain a run_us phase > 0".to_string()));
            }
            self.validate_cpus(&key("cpus"), &t.cpus)?;
            self.validate_deadline(t)?;
        }
        self.admit_statically()
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

    /// `sched_setattr`'s checks of SCHED_DEADLINE parameters (`__checkparam_dl`).
    fn validate_deadline(&self, t: &TaskSpec) -> Result<(), ScenarioError> {
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

    fn validate_services(&self) -> Result<(), ScenarioError> {
        for s in &self.services {
            let key = |field: &str| format!("service.{}.{}", s.name, field);
            if self.tasks.iter().any(|t| t.name == s.name) || self.services.iter().filter(|o| o.name == s.name).count() > 1 {
                return Err(ScenarioError::new(key("name"), "duplicate task or service name".to_string()));
            }
            self.check_cgroup_ref(key("cgroup"), &s.cgroup)?;
            if !(1..=100_000).contains(&s.workers) {
                return Err(ScenarioError::new(key("workers"), format!("must be in 1..=100000, got {}", s.workers)));
            }
            if !(s.rate_per_s > 0.0 && s.rate_per_s <= 1e6) {
                return Err(ScenarioError::new(key("rate_per_s"), format!("must be in (0, 1e6], got {}", s.rate_per_s)));
            }
            if s.cost_us == 0 {
                return Err(ScenarioError::new(key("cost_us"), "must be > 0".to_string()));
            }
            self.validate_cpus(&key("cpus"), &s.cpus)?;
        }
        Ok(())
    }

    fn validate_writes(&self) -> Result<(), ScenarioError> {
        for (i, w) in self.writes.iter().enumerate() {
            let key = |field: &str| format!("write[{i}].{field}");
            let Some(cg) = self.cgroup_index(&w.cgroup) else {
                return Err(ScenarioError::new(key("cgroup"), format!("unknown cgroup {:?}", w.cgroup)));
            };
            match (w.at_ms, w.start_ms, w.every_ms) {
                (Some(at), None, None) if at >= 0.0 => {}
                (None, Some(start), Some(every)) if start >= 0.0 && every >= 1.0 => {}
                _ => {
                    return Err(ScenarioError::new(
                        key("at_ms"),
                        "give at_ms >= 0, or start_ms >= 0 with every_ms >= 1".to_string(),
                    ))
                }
            }
            let c = &self.cgroups[cg];
            let period = w.period_us.unwrap_or(c.period_us);
            let quota = w.quota_us.or(c.quota_us);
            let burst = w.burst_us.unwrap_or(c.burst_us);
            check_bandwidth(&key, period, quota, burst, self.kernel.profile)?;
        }
        Ok(())
    }
}

/// The checks of `tg_set_cfs_bandwidth` (and burst's availability per profile).
fn check_bandwidth(
    key: &dyn Fn(&str) -> String,
    period_us: u64,
    quota_us: Option<i64>,
    burst_us: u64,
    profile: Profile,
) -> Result<(), ScenarioError> {
    if !(MIN_CFS_QUOTA_PERIOD_US..=MAX_CFS_QUOTA_PERIOD_US).contains(&period_us) {
        return Err(ScenarioError::new(key("period_us"), format!("must be in 1000..=1000000 (1 ms..1 s), got {period_us}")));
    }
    match quota_us {
        None | Some(-1) => {}
        Some(q) if q < 0 => {
            return Err(ScenarioError::new(key("quota_us"), format!("must be -1 (unlimited) or >= 1000, got {q}")))
        }
        Some(q) if (q as u64) < MIN_CFS_QUOTA_PERIOD_US => {
            return Err(ScenarioError::new(key("quota_us"), format!("must be >= 1000 (1 ms), got {q}")))
        }
        Some(q) if (q as u64) > MAX_CFS_RUNTIME_US => {
            return Err(ScenarioError::new(key("quota_us"), format!("must be <= {MAX_CFS_RUNTIME_US}, got {q}")))
        }
        Some(q) => {
            if burst_us > q as u64 {
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
    fn cpu_lists() {
        assert_eq!(parse_cpu_list("0-3,5").unwrap(), vec![0, 1, 2, 3, 5]);
        assert_eq!(parse_cpu_list("2").unwrap(), vec![2]);
        assert!(parse_cpu_list("3-1").is_err());
        assert!(parse_cpu_list("x").is_err());
        assert!(parse_cpu_list("").is_err());
    }
}
