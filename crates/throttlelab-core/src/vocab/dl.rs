//! SCHED_DEADLINE's bandwidth arithmetic (`kernel/sched/sched.h`,
//! `core.c`), which validation's admission and the deadline class share.

use crate::vocab::profile::Profile;

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
