//! SIS_UTIL's scan depth without a pass over every CPU at each write.
//!
//! `nr_idle_scan` sums every CPU's `util_avg`. A CPU's PELT signal moves as
//! `2^(-t/H)` from its last switch, so the sum has a closed form, kept up to
//! date at each switch: `1024 * running + 2^(-(now - r) / H) * K`, where `K`
//! sums each CPU's `(util_avg - 1024 * running) * 2^((util_at - r) / H)` for
//! a reference time `r`; a write (`sis_util.rs`) reads it in O(1).

use crate::engine::fair::PELT_HALF_LIFE_NS;
use crate::engine::event::Queue;
use crate::engine::sim::Sim;
use crate::vocab::types::{CpuId, Time};

/// The terms are rebased on `now` once it is this far past `r`: each stays
/// within `1024 * 2^2` in magnitude, which bounds the rounding error.
const REBASE_NS: Time = 2 * PELT_HALF_LIFE_NS as Time;
/// ... or after this many updates, which bound the error `K` accumulates.
const REBASE_UPDATES: u32 = 1 << 20;
/// The closed form's floating-point error is below this with the bounds
/// above (terms of at most 4096, at most 2^20 additions to a sum of at most
/// 4096 per CPU, 256 CPUs: 2^20 * 2 * 4096 * 257 * 2^-53 = 2.4e-4).
#[cfg(test)]
const ROUNDING_ERROR: f64 = 1e-3;

/// The closed form of the CPUs' utilization sum.
#[derive(Debug, Default)]
pub struct UtilSum {
    /// The reference time `r`.
    at: Time,
    /// Each CPU's term and whether it was running, and `K`, the terms' sum.
    terms: Vec<(f64, bool)>,
    k: f64,
    running: u64,
    updates: u32,
}

impl UtilSum {
    pub fn new(nr_cpus: usize) -> Self {
        UtilSum { terms: vec![(0.0, false); nr_cpus], ..UtilSum::default() }
    }

    fn term(&self, util_avg: f64, util_at: Time, running: bool) -> f64 {
        let running_util = if running { 1024.0 } else { 0.0 };
        (util_avg - running_util) * 2f64.powf((util_at as f64 - self.at as f64) / PELT_HALF_LIFE_NS)
    }

    fn set(&mut self, cpu: CpuId, util_avg: f64, util_at: Time, running: bool) {
        let (old, was_running) = self.terms[cpu];
        let new = self.term(util_avg, util_at, running);
        self.terms[cpu] = (new, running);
        self.k += new - old;
        self.running = self.running + running as u64 - was_running as u64;
        self.updates += 1;
    }

    /// `sum(cpu_util(c))` over the CPUs at `now`, untruncated.
    pub fn sum(&self, now: Time) -> f64 {
        let decay = 0.5f64.powf((now - self.at) as f64 / PELT_HALF_LIFE_NS);
        1024.0 * self.running as f64 + decay * self.k
    }
}

impl<Q: Queue> Sim<'_, Q> {
    /// `cpu`'s `util_avg`, `util_at` or running thread changed (a switch).
    pub(crate) fn util_changed(&mut self, cpu: CpuId) {
        let sum = &mut self.util_sum;
        if self.now - sum.at < REBASE_NS && sum.updates < REBASE_UPDATES {
            let rq = &self.rqs[cpu];
            sum.set(cpu, rq.util_avg, rq.util_at, rq.curr.is_some());
            return;
        }
        // Rebase every term on now (and drop the error the sum gathered).
        *sum = UtilSum { at: self.now, ..UtilSum::new(self.rqs.len()) };
        for (c, rq) in self.rqs.iter().enumerate() {
            sum.set(c, rq.util_avg, rq.util_at, rq.curr.is_some());
        }
        sum.updates = 0;
    }
}

#[cfg(test)]
mod tests {
    use crate::engine::rq::Rq;
    use crate::vocab::noise::{self, Stream};
    use crate::{load, Sim, SimOptions};

    /// On 64 CPUs switching at random times (gaps from 1 us to 200 ms, so
    /// across rebases), between running and idle, the closed form is the sum
    /// of `cpu_util` within its rounding error.
    #[test]
    fn the_closed_form_is_the_sum() {
        let s = load("name = \"t\"\nduration_s = 1\n[machine]\ncpus = 64\n[kernel]\nprofile = \"6.18\"\n", &[]).unwrap();
        let mut sim: Sim = Sim::build(&s, SimOptions::default());
        for n in 0..20_000u64 {
            let r = |k: u64, hi: u64| noise::uniform(7, Stream::Uptime, n * 4 + k, hi);
            sim.now += 1_000 + if r(0, 10) == 0 { r(1, 200_000_000) } else { r(1, 2_000_000) };
            let cpu = r(2, 64) as usize;
            let util = sim.cpu_util(cpu);
            let rq: &mut Rq = &mut sim.rqs[cpu];
            (rq.util_avg, rq.util_at) = (util, sim.now);
            rq.curr = (r(3, 3) > 0).then_some(0);
            sim.util_changed(cpu);
            let exact: f64 = (0..64).map(|c| sim.cpu_util(c)).sum();
            let closed = sim.util_sum.sum(sim.now);
            assert!((closed - exact).abs() < super::ROUNDING_ERROR, "{closed} against {exact} at step {n}");
        }
    }
}
