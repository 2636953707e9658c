//! Stopping a run once its verdict is certain (`SimOptions::stop`): the
//! whole run's `throttled_ratio` of a cgroup is above the target as soon as
//! its `nr_throttled` passes the bound for the most periods the run can
//! count (`stop::max_nr_throttled`), because `nr_throttled` only grows and
//! `nr_periods` ends at most at that many.

use crate::engine::event::Queue;
use crate::engine::sim::Sim;
use crate::vocab::stop::{max_nr_throttled, Stop, Stopped};
use crate::vocab::types::{Time, NSEC_PER_USEC};

/// An armed stop: group `tg` stops the run past `max_nr_throttled`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct StopAt {
    pub tg: usize,
    pub max_nr_periods: u64,
    pub max_nr_throttled: u64,
}

impl<Q: Queue> Sim<'_, Q> {
    /// The most periods `tg` can count in a run ending at `end`: the period
    /// timer counts (`nr_periods += overrun`) expiries of CLOCK_MONOTONIC in
    /// (time 0, `end`], each a period after the one counted before it
    /// (`hrtimer_forward`; restarting it skips the idle ones uncounted), so
    /// at most `end` over the shortest period it has in the run (its own or
    /// a `[[write]]`'s) rounded up.
    fn max_nr_periods(&self, cgroup: usize, end: Time) -> u64 {
        let own = self.scenario.cgroups[cgroup].period_us;
        let written = self.plan.writes.iter().filter(|w| w.cgroup == cgroup).filter_map(|w| w.period_us);
        let shortest_ns = written.fold(own, u64::min).max(1) * NSEC_PER_USEC;
        end.div_ceil(shortest_ns)
    }

    /// Arm `stop` for this run (its cgroup is validated: `Scenario::cgroup_index`).
    pub(crate) fn arm_stop(&mut self, stop: &Stop) {
        let cgroup = self.scenario.cgroup_index(&stop.cgroup).expect("the stop's cgroup is validated");
        let max_nr_periods = self.max_nr_periods(cgroup, self.end);
        self.stop = Some(StopAt { tg: cgroup + 1, max_nr_periods, max_nr_throttled: max_nr_throttled(stop.max_throttled, max_nr_periods) });
    }

    /// After `tg`'s `nr_throttled` grew: past the bound, the run ends now
    /// (the events of this instant still run).
    pub(crate) fn check_stop(&mut self, tg: usize) {
        if let Some(s) = self.stop {
            if s.tg == tg && self.stopped_at.is_none() && self.tgs[tg].cfs_b.nr_throttled > s.max_nr_throttled {
                self.stopped_at = Some(self.now);
                self.end = self.now;
            }
        }
    }

    /// What the output says of a run that stopped.
    pub(crate) fn stopped(&self) -> Option<Stopped> {
        let (s, at) = (self.stop?, self.stopped_at?);
        Some(Stopped {
            cgroup: self.tgs[s.tg].name.clone(),
            max_nr_periods: s.max_nr_periods,
            max_nr_throttled: s.max_nr_throttled,
            at_s: at as f64 / 1e9,
        })
    }
}
