//! `hard_limits` (003 5.1, "CFS hard limits"): the first design of CFS
//! bandwidth control, modelled on SCHED_RT's runtime sharing
//! (`kernel/sched/rt.c`, `sched_rt_runtime`). There is no global pool: each
//! cfs_rq gets its own runtime per period (`cfs_runtime`, initially quota / n
//! over the n CPUs of the root domain); a CPU that has used it borrows 1/n of
//! every neighbour's unused runtime under every neighbour's lock
//! (`do_balance_runtime`) and is throttled when that does not cover what it
//! ran. The period timer pays each cfs_rq its own runtime back
//! (`do_sched_rt_period_timer`); borrowed runtime stays with the borrower, as
//! in SCHED_RT. Of `cfs_b` this keeps the period timer, the statistics and
//! the lock of the cost model, which the walks hold while they take the
//! runqueue locks.

use crate::engine::event::Queue;
use crate::engine::sim::Sim;
use crate::vocab::trace::TraceKind;
use crate::vocab::types::CfsRqId;

impl<Q: Queue> Sim<'_, Q> {
    /// `balance_runtime` / `do_balance_runtime`: walk the other CPUs and take
    /// 1/n of each one's unused runtime, but no more than makes this
    /// runqueue's runtime a whole period; stop there. Every CPU visited costs
    /// a lock, held inside the group's. True if the runqueue has runtime now.
    pub(crate) fn do_balance_runtime(&mut self, rq: CfsRqId) -> bool {
        let (tg, cpu) = (self.cfs_rqs[rq].tg, self.cfs_rqs[rq].cpu);
        let n = self.nr_cpus() as u64;
        let period = self.tgs[tg].cfs_b.period;
        let mut locks = 1;
        let mut borrowed = 0;
        for other in (0..self.nr_cpus()).filter(|&c| c != cpu) {
            locks += 1;
            // Its runtime as of its last tick, as `iter->rt_time` is.
            self.touch(other);
            let iter = self.cfs_rq_id(tg, other);
            let spare = self.cfs_rqs[iter].runtime_remaining;
            if spare <= 0 {
                continue;
            }
            let diff = (spare as u64 / n).min(period - self.cfs_rqs[rq].cfs_runtime);
            self.cfs_rqs[iter].cfs_runtime -= diff;
            self.cfs_rqs[iter].runtime_remaining -= diff as i64;
            self.cfs_rqs[rq].cfs_runtime += diff;
            borrowed += diff;
            if self.cfs_rqs[rq].cfs_runtime == period {
                break;
            }
        }
        let cost = self.take_pool_lock(tg, locks);
        self.stall(cpu, cost);
        self.cfs_rqs[rq].runtime_remaining += borrowed as i64;
        self.record(Some(cpu), tg, TraceKind::Assign(borrowed));
        self.cfs_rqs[rq].runtime_remaining > 0
    }

    /// `do_sched_rt_period_timer`: for the `overrun` periods passed, take
    /// each runqueue's own runtime off what it ran (`rt_time -= min(rt_time,
    /// overrun * runtime)`), under each runqueue's lock, and unthrottle those
    /// with runtime again. Returns true to deactivate: no runqueue ran or has
    /// anything to run.
    pub(crate) fn do_sched_rt_period_timer(&mut self, tg: usize, overrun: u64) -> bool {
        let b = &mut self.tgs[tg].cfs_b;
        b.nr_periods += overrun;
        if !b.throttled_cfs_rq.is_empty() {
            b.nr_throttled += overrun;
            self.check_stop(tg);
        }
        let mut idle = true;
        let mut unthrottle = Vec::new();
        for cpu in 0..self.nr_cpus() {
            self.touch(cpu);
            let rq = self.cfs_rq_id(tg, cpu);
            let c = &mut self.cfs_rqs[rq];
            let runtime = c.cfs_runtime as i64;
            if c.runtime_remaining < runtime || c.nr_running > 0 {
                idle = false;
            }
            c.runtime_remaining = (c.runtime_remaining + overrun as i64 * runtime).min(runtime);
            if c.throttled && c.runtime_remaining > 0 {
                unthrottle.push(rq);
            }
        }
        self.take_pool_lock(tg, self.nr_cpus() as u64);
        for rq in unthrottle {
            self.unthrottle_cfs_rq(rq);
        }
        self.record(None, tg, TraceKind::Refill);
        idle
    }
}

#[cfg(test)]
mod tests {
    use crate::load;
    use crate::engine::sim::{Sim, SimOptions};
    use crate::vocab::types::NSEC_PER_MSEC;

    /// 4 CPUs, a quota of one CPU per 100 ms: 25 ms per runqueue, no task.
    const FOUR_CPUS: &str = r#"
name = "hard-limits"
duration_s = 1
[machine]
cpus = 4
[kernel]
features = ["hard_limits"]
[[cgroup]]
name = "app"
period_us = 100000
quota_us = 100000
"#;

    const MS: i64 = NSEC_PER_MSEC as i64;

    /// Set each runqueue of the group to (runtime per period, remaining).
    fn pools(sim: &mut Sim, pools: [(u64, i64); 4]) {
        for (cpu, (runtime, remaining)) in pools.into_iter().enumerate() {
            let rq = sim.cfs_rq_id(1, cpu);
            sim.cfs_rqs[rq].cfs_runtime = runtime as u64 * NSEC_PER_MSEC;
            sim.cfs_rqs[rq].runtime_remaining = remaining * MS;
        }
    }

    fn remaining_ms(sim: &Sim) -> Vec<f64> {
        (0..4).map(|cpu| sim.cfs_rqs[sim.cfs_rq_id(1, cpu)].runtime_remaining as f64 / MS as f64).collect()
    }

    #[test]
    fn each_runqueue_starts_with_its_share_of_the_quota() {
        let s = load(FOUR_CPUS, &[]).unwrap();
        let sim = Sim::build(&s, SimOptions::default());
        assert_eq!(remaining_ms(&sim), [25.0; 4]);
        assert!((0..4).all(|cpu| sim.cfs_rqs[sim.cfs_rq_id(1, cpu)].cfs_runtime == 25 * NSEC_PER_MSEC));
    }

    /// `do_balance_runtime`: a quarter of each neighbour's unused runtime,
    /// nothing from one that has none, and every CPU's lock.
    #[test]
    fn borrowing_takes_one_nth_of_each_neighbours_spare_runtime() {
        let s = load(FOUR_CPUS, &[]).unwrap();
        let mut sim = Sim::build(&s, SimOptions::default());
        pools(&mut sim, [(25, -1), (25, 25), (25, 10), (25, -2)]);
        assert!(sim.do_balance_runtime(sim.cfs_rq_id(1, 0)));
        assert_eq!(remaining_ms(&sim), [-1.0 + 6.25 + 2.5, 18.75, 7.5, -2.0]);
        let runtime: Vec<u64> = (0..4).map(|cpu| sim.cfs_rqs[sim.cfs_rq_id(1, cpu)].cfs_runtime / 1000).collect();
        assert_eq!(runtime, [33_750, 18_750, 22_500, 25_000], "runtime moves with what is lent");
        assert_eq!(sim.tgs[1].cfs_b.lock_acquisitions, 4);
        // Nothing left to borrow that covers the overrun: throttle.
        pools(&mut sim, [(25, -1), (25, 2), (25, 0), (25, 0)]);
        assert!(!sim.do_balance_runtime(sim.cfs_rq_id(1, 0)));
        assert_eq!(remaining_ms(&sim), [-0.5, 1.5, 0.0, 0.0]);
    }

    /// No runqueue borrows past a whole period, and the walk stops there.
    #[test]
    fn borrowing_stops_at_a_whole_period() {
        let s = load(FOUR_CPUS, &[]).unwrap();
        let mut sim = Sim::build(&s, SimOptions::default());
        pools(&mut sim, [(98, -1), (20, 20), (0, 0), (1, 1)]);
        assert!(sim.do_balance_runtime(sim.cfs_rq_id(1, 0)));
        assert_eq!(remaining_ms(&sim), [1.0, 18.0, 0.0, 1.0]);
        assert_eq!(sim.cfs_rqs[sim.cfs_rq_id(1, 0)].cfs_runtime, 100 * NSEC_PER_MSEC);
        assert_eq!(sim.tgs[1].cfs_b.lock_acquisitions, 2, "its own and CPU 1's");
    }

    /// `do_sched_rt_period_timer`: each runqueue gets its own runtime back,
    /// debts first, and is unthrottled when that leaves it positive.
    #[test]
    fn the_period_pays_each_runqueue_its_own_runtime() {
        let s = load(FOUR_CPUS, &[]).unwrap();
        let mut sim = Sim::build(&s, SimOptions::default());
        pools(&mut sim, [(40, -3), (10, 4), (25, 25), (25, -30)]);
        for cpu in [0, 3] {
            assert!(sim.throttle_cfs_rq(sim.cfs_rq_id(1, cpu)));
        }
        let idle = sim.do_sched_rt_period_timer(1, 1);
        assert!(!idle);
        assert_eq!(remaining_ms(&sim), [37.0, 10.0, 25.0, -5.0]);
        let throttled: Vec<bool> = (0..4).map(|cpu| sim.cfs_rqs[sim.cfs_rq_id(1, cpu)].throttled).collect();
        assert_eq!(throttled, [false, false, false, true]);
        let b = &sim.tgs[1].cfs_b;
        assert_eq!((b.nr_periods, b.nr_throttled, b.lock_acquisitions), (1, 1, 4));
        // A period in which nothing ran lets the timer go idle.
        pools(&mut sim, [(25, 25); 4]);
        sim.unthrottle_cfs_rq(sim.cfs_rq_id(1, 3));
        assert!(sim.do_sched_rt_period_timer(1, 1));
    }
}
