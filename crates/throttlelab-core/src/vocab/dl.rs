//! SCHED_DEADLINE's bandwidth arithmetic (`kernel/sched/sched.h`,
//! `core.c`), which validation's admission and the deadline class share.

use crate::vocab::profile::Profile;
use serde::{Deserialize, Serialize};

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

/// A refused `sched_setattr`: keep running as a fair task and try again
/// every `retry_ms` (004's method), or fail the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OnRefused {
    #[default]
    Retry,
    Error,
}

/// SCHED_DEADLINE parameters of a `sched_attr`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct DlParams {
    pub runtime_ns: u64,
    pub deadline_ns: u64,
    pub period_ns: u64,
}

impl DlParams {
    /// The same deadline and period with `rate` of a CPU ([`dl_runtime_at_rate`]).
    pub fn at_rate(self, rate: f64) -> DlParams {
        let runtime_ns = dl_runtime_at_rate(rate, self.deadline_ns, self.period_ns);
        DlParams { runtime_ns, ..self }
    }

    /// A whole CPU in periods of `ns`: runtime = deadline = period.
    pub fn whole_core(ns: u64) -> DlParams {
        DlParams { runtime_ns: ns, deadline_ns: ns, period_ns: ns }
    }
}

/// A `policy = "deadline"` task's reservation: `sched_setattr` for every
/// thread as it starts; refused (EBUSY), a thread runs as a normal one and
/// retries every `retry_ns`, or with `on_refused = "error"` fails the run.
/// A trace task's threads change their parameters at each window.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DlPlan {
    pub params: DlParams,
    pub retry_ns: u64,
    pub on_refused: OnRefused,
    /// 004 3.3's profiling stage at each window: a whole core for this long.
    pub profile_ns: Option<u64>,
}

impl DlPlan {
    /// What a thread asks for as it starts: its first window's profiling
    /// stage if it profiles, else its own parameters.
    pub fn admission(&self) -> DlParams {
        self.profile_ns.map_or(self.params, DlParams::whole_core)
    }
}
