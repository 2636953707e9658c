//! `struct cfs_bandwidth` and a `cfs_rq`'s side of it: the arithmetic of
//! `kernel/sched/fair.c`'s bandwidth control on the two structs alone, which
//! `bandwidth.rs` calls with the locks, the trace and the timers around it.

use crate::engine::fair::CfsRq;
use crate::vocab::noise::{self, Stream};
use crate::vocab::output::Limit;
use crate::vocab::profile::Profile;
use crate::vocab::types::{CfsRqId, CpuId, Quota, Time, NSEC_PER_MSEC, NSEC_PER_USEC};

/// A cfs_rq won't donate quota below this amount.
pub const MIN_CFS_RQ_RUNTIME: u64 = NSEC_PER_MSEC;
/// Minimum remaining period time to redistribute slack quota.
pub const MIN_BANDWIDTH_EXPIRATION: u64 = 2 * NSEC_PER_MSEC;
/// How long we wait to gather additional slack before distributing.
pub const CFS_BANDWIDTH_SLACK_PERIOD: u64 = 5 * NSEC_PER_MSEC;
/// The period `init_cfs_bandwidth` draws the timer's random first expiry from.
const DEFAULT_CFS_PERIOD: u64 = 100 * NSEC_PER_MSEC;

/// A group's global runtime pool: `struct cfs_bandwidth`.
#[derive(Debug, Clone)]
pub struct CfsBandwidth {
    /// `None` = RUNTIME_INF.
    pub quota: Option<u64>,
    pub period: u64,
    pub burst: u64,
    pub runtime: u64,
    pub runtime_snap: u64,
    pub idle: bool,
    pub period_active: bool,
    /// The CPU the period timer is pinned to: where `start_cfs_bandwidth`
    /// last armed it (`HRTIMER_MODE_ABS_PINNED`); a restart keeps it there.
    pub timer_cpu: CpuId,
    pub slack_started: bool,
    /// `throttled_cfs_rq`, in list order.
    pub throttled_cfs_rq: Vec<CfsRqId>,
    /// The period hrtimer's expiry in CLOCK_MONOTONIC (`Sim::monotonic`),
    /// on the period grid, without jitter.
    pub period_expires: Time,
    /// How many times each timer has fired (indexes their jitter).
    pub period_fired: u64,
    pub slack_fired: u64,
    /// 4.18: when the current period's runtime expires, and its sequence.
    pub runtime_expires: Time,
    pub expires_seq: u64,
    pub nr_periods: u64,
    pub nr_throttled: u64,
    pub throttled_time: u64,
    pub nr_burst: u64,
    pub burst_time: u64,
    /// `slush_fund` (000 IV-A1, Listing 2): runtime the last refill discarded.
    pub slush_fund: u64,
    /// When `cfs_b->lock` is next free (the cost model's spinlock).
    pub lock_free_at: Time,
    /// How many times the cost model's locks were taken.
    pub lock_acquisitions: u64,
    /// Refills so far, to tell a local pool's first refill in a new period.
    pub period_nr: u64,
}

impl CfsBandwidth {
    /// `init_cfs_bandwidth`: unlimited, with the default period; the
    /// scenario's settings come with `configure_cfs_bandwidth`. The timer's
    /// first expiry is `offset_ns` if given (an absolute time, long past when
    /// the timer first starts, which keeps its phase).
    pub fn new(profile: Profile, tg: usize, seed: u64, offset_ns: Option<u64>) -> Self {
        // "Add a random offset so that timers interleave" (6.6+): an
        // absolute time in [0, 100 ms).
        let period_expires = match offset_ns {
            Some(o) => o,
            None if profile.has_random_timer_offset() => noise::uniform(seed, Stream::TimerOffset(tg), 0, DEFAULT_CFS_PERIOD),
            None => 0,
        };
        CfsBandwidth {
            quota: None,
            period: DEFAULT_CFS_PERIOD,
            burst: 0,
            runtime: 0,
            runtime_snap: 0,
            idle: false,
            period_active: false,
            timer_cpu: 0,
            slack_started: false,
            throttled_cfs_rq: Vec::new(),
            period_expires,
            period_fired: 0,
            slack_fired: 0,
            runtime_expires: 0,
            expires_seq: 0,
            nr_periods: 0,
            nr_throttled: 0,
            throttled_time: 0,
            nr_burst: 0,
            burst_time: 0,
            slush_fund: 0,
            lock_free_at: 0,
            lock_acquisitions: 0,
            period_nr: 0,
        }
    }
}

impl CfsBandwidth {
    /// The limit in cpu.max's and cpu.max.burst's units.
    pub fn limit(&self) -> Limit {
        Limit {
            quota_us: self.quota.map_or(Quota::Max, |q| Quota::Us(q / NSEC_PER_USEC)),
            period_us: self.period / NSEC_PER_USEC,
            burst_us: self.burst / NSEC_PER_USEC,
        }
    }

    /// `__refill_cfs_bandwidth_runtime`: add a quota, capped at quota + burst
    /// (before 5.14 burst is 0, so this is the old `runtime = quota`), and
    /// count a burst when the pool had used more than the quota since the
    /// last refill. False when unlimited (nothing to refill).
    pub fn refill_runtime(&mut self, now: Time, has_expiry: bool) -> bool {
        let Some(quota) = self.quota else { return false };
        // What this refill discards goes to the slush fund (Listing 2).
        self.slush_fund = self.runtime.saturating_sub(self.burst);
        self.period_nr += 1;
        let runtime = self.runtime + quota;
        if self.runtime_snap > runtime {
            self.burst_time += self.runtime_snap - runtime;
            self.nr_burst += 1;
        }
        self.runtime = runtime.min(quota + self.burst);
        self.runtime_snap = self.runtime;
        if has_expiry {
            self.runtime_expires = now + self.period;
            self.expires_seq += 1;
        }
        true
    }

    /// `__assign_cfs_rq_runtime` once the timer is started: top `cfs_rq`'s
    /// local pool up to `target` from the global one (all of it when
    /// unlimited); returns the amount moved.
    pub fn assign_runtime(&mut self, cfs_rq: &mut CfsRq, target: u64, has_expiry: bool) -> u64 {
        let min_amount = (target as i64 - cfs_rq.runtime_remaining) as u64;
        let amount = match self.quota {
            None => min_amount,
            Some(_) if self.runtime > 0 => {
                let amount = self.runtime.min(min_amount);
                self.runtime -= amount;
                self.idle = false;
                amount
            }
            Some(_) => 0,
        };
        cfs_rq.runtime_remaining += amount as i64;
        if has_expiry && cfs_rq.expires_seq != self.expires_seq {
            cfs_rq.expires_seq = self.expires_seq;
            cfs_rq.runtime_expires = self.runtime_expires;
        }
        amount
    }

    /// `slush_fund` (000 IV-A1, Listing 3): on a local pool's first refill in a
    /// new period, its debt from the previous period is paid from that period's
    /// leftover rather than from the new quota.
    pub fn pay_debt_from_slush_fund(&mut self, cfs_rq: &mut CfsRq) {
        if self.period_nr > cfs_rq.period_nr {
            let refill = self.slush_fund.min(cfs_rq.runtime_remaining.min(0).unsigned_abs());
            self.slush_fund -= refill;
            cfs_rq.runtime_remaining += refill as i64;
            cfs_rq.period_nr = self.period_nr;
        }
    }

    /// `__return_cfs_rq_runtime`: `slack` goes back from `cfs_rq` to the
    /// global pool (when limited); true if the slack timer should start
    /// (more than a slice in the pool and runqueues throttled).
    pub fn return_runtime(&mut self, cfs_rq: &mut CfsRq, slack: u64, slice: u64) -> bool {
        let mut start_slack_timer = false;
        if self.quota.is_some() {
            self.runtime += slack;
            start_slack_timer = self.runtime > slice && !self.throttled_cfs_rq.is_empty();
        }
        cfs_rq.runtime_remaining -= slack as i64;
        start_slack_timer
    }

    /// `distribute_cfs_runtime`'s grant to one throttled `cfs_rq`: what makes
    /// it positive (1 ns above zero), or what is left; returns the grant.
    pub fn distribute_runtime(&mut self, cfs_rq: &mut CfsRq, has_expiry: bool) -> u64 {
        let runtime = ((-cfs_rq.runtime_remaining + 1) as u64).min(self.runtime);
        self.runtime -= runtime;
        cfs_rq.runtime_remaining += runtime as i64;
        if has_expiry {
            cfs_rq.runtime_expires = self.runtime_expires;
        }
        runtime
    }

    /// `unthrottle_cfs_rq`'s accounting: `cfs_rq` (number `id`) leaves the
    /// throttled list, and its throttled time since `throttled_clock` counts.
    pub fn unthrottle(&mut self, id: CfsRqId, cfs_rq: &mut CfsRq, now: Time) {
        cfs_rq.throttled = false;
        if let Some(since) = cfs_rq.throttled_clock.take() {
            self.throttled_time += now - since;
        }
        self.throttled_cfs_rq.retain(|&r| r != id);
    }

    /// `hrtimer_forward` of the period timer to `now` (CLOCK_MONOTONIC): move
    /// the expiry past now by whole periods; returns the periods moved (the
    /// overrun), 0 if it has not expired.
    pub fn hrtimer_forward(&mut self, now: Time) -> u64 {
        if now < self.period_expires {
            return 0;
        }
        let overrun = (now - self.period_expires) / self.period + 1;
        self.period_expires += overrun * self.period;
        overrun
    }
}

/// A `cfs_rq`'s side of bandwidth control.
impl CfsRq {
    /// 4.18 `expire_cfs_rq_runtime` at `clock`: local runtime left from an
    /// earlier refill (`expires_seq` behind the global `seq`) is dropped; if
    /// the global pool has not moved on (clock drift), it is extended by a
    /// tick.
    pub fn expire_runtime(&mut self, clock: Time, seq: u64, tick_ns: u64) {
        if clock < self.runtime_expires || self.runtime_remaining < 0 {
            return;
        }
        if self.expires_seq == seq {
            self.runtime_expires += tick_ns;
        } else {
            self.runtime_remaining = 0;
        }
    }

    /// `__return_cfs_rq_runtime`'s `slack_runtime`: what it keeps above
    /// `min_cfs_rq_runtime`, None if nothing.
    pub fn slack_runtime(&self) -> Option<u64> {
        let slack = self.runtime_remaining - MIN_CFS_RQ_RUNTIME as i64;
        (slack > 0).then_some(slack as u64)
    }

    /// `throttle_cfs_rq`'s end: throttled, and its throttled time starts now,
    /// or (`with_tasks`, 6.5+) once it holds a task.
    pub fn mark_throttled(&mut self, now: Time, with_tasks: bool) {
        self.throttled = true;
        if self.nr_running > 0 || !with_tasks {
            self.throttled_clock = Some(now);
        }
    }
}

/// `struct cfs_bandwidth` and `struct cfs_rq` built by hand, checked against
/// values worked out from 6.12's `kernel/sched/fair.c`.
#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = NSEC_PER_MSEC;

    /// A group limited to `quota` per 100 ms with `burst`, its pool at `runtime`.
    fn cfs_b(quota: u64, burst: u64, runtime: u64) -> CfsBandwidth {
        let mut b = CfsBandwidth::new(Profile::default(), 1, 1, Some(0));
        (b.quota, b.burst, b.period, b.runtime, b.runtime_snap) = (Some(quota), burst, 100 * MS, runtime, runtime);
        b
    }

    fn cfs_rq(runtime_remaining: i64) -> CfsRq {
        CfsRq { runtime_enabled: true, runtime_remaining, ..CfsRq::default() }
    }

    #[test]
    fn refill_caps_at_quota_plus_burst_and_counts_a_burst() {
        // __refill_cfs_bandwidth_runtime: runtime += quota; a snapshot above
        // the new runtime is burst used; then runtime = min(runtime, quota + burst).
        let mut b = cfs_b(50 * MS, 20 * MS, 5 * MS);
        assert!(b.refill_runtime(0, false));
        assert_eq!((b.runtime, b.runtime_snap, b.nr_burst), (55 * MS, 55 * MS, 0));
        assert!(b.refill_runtime(0, false));
        assert_eq!(b.runtime, 70 * MS, "capped at quota + burst");
        // 65 ms used in one period of a 50 ms quota: 15 ms of burst.
        b.runtime -= 65 * MS;
        assert!(b.refill_runtime(0, false));
        assert_eq!((b.runtime, b.nr_burst, b.burst_time), (55 * MS, 1, 15 * MS));
        // 4.18: the refill's runtime expires a period later, in a new sequence.
        assert!(b.refill_runtime(7 * MS, true));
        assert_eq!((b.runtime_expires, b.expires_seq), (107 * MS, 1));
        // RUNTIME_INF: nothing to refill.
        let mut unlimited = CfsBandwidth::new(Profile::default(), 1, 1, Some(0));
        assert!(!unlimited.refill_runtime(0, false));
        assert_eq!((unlimited.runtime, unlimited.period_nr), (0, 0));
    }

    #[test]
    fn assign_tops_up_to_the_target_from_what_the_pool_has() {
        // __assign_cfs_rq_runtime: min_amount = target - runtime_remaining,
        // amount = min(cfs_b->runtime, min_amount).
        let mut b = cfs_b(50 * MS, 0, 3 * MS);
        b.idle = true;
        let mut c = cfs_rq(-(MS as i64));
        assert_eq!(b.assign_runtime(&mut c, 5 * MS, false), 3 * MS);
        assert_eq!((c.runtime_remaining, b.runtime, b.idle), (2 * MS as i64, 0, false));
        assert_eq!(b.assign_runtime(&mut c, 5 * MS, false), 0, "an empty pool gives nothing");
        assert_eq!(c.runtime_remaining, 2 * MS as i64);
        // Unlimited: the whole of min_amount, from nowhere.
        let mut inf = CfsBandwidth::new(Profile::default(), 1, 1, Some(0));
        let mut c = cfs_rq(-(MS as i64));
        assert_eq!(inf.assign_runtime(&mut c, 5 * MS, false), 6 * MS);
        assert_eq!(c.runtime_remaining, 5 * MS as i64);
        // 4.18: the local pool takes the global expiry with its runtime.
        let mut b = cfs_b(50 * MS, 0, 50 * MS);
        (b.runtime_expires, b.expires_seq) = (100 * MS, 4);
        let mut c = cfs_rq(0);
        b.assign_runtime(&mut c, 5 * MS, true);
        assert_eq!((c.runtime_expires, c.expires_seq), (100 * MS, 4));
    }

    #[test]
    fn the_slush_fund_pays_last_periods_debt_once() {
        // 000 Listing 3: the first assign in a new period pays the debt from
        // what the last refill discarded.
        let mut b = cfs_b(50 * MS, 0, 30 * MS);
        b.refill_runtime(0, false);
        assert_eq!((b.slush_fund, b.period_nr, b.runtime), (30 * MS, 1, 50 * MS));
        let mut c = cfs_rq(-4 * MS as i64);
        b.pay_debt_from_slush_fund(&mut c);
        assert_eq!((c.runtime_remaining, b.slush_fund, c.period_nr), (0, 26 * MS, 1));
        c.runtime_remaining = -(MS as i64);
        b.pay_debt_from_slush_fund(&mut c);
        assert_eq!((c.runtime_remaining, b.slush_fund), (-(MS as i64), 26 * MS), "once per period");
    }

    #[test]
    fn return_keeps_min_cfs_rq_runtime_and_wakes_the_slack_timer() {
        // __return_cfs_rq_runtime: slack = runtime_remaining - min_cfs_rq_runtime
        // (1 ms); the slack timer starts when the pool holds more than a slice
        // and some cfs_rq is throttled.
        let mut c = cfs_rq(7 * MS as i64);
        assert_eq!(c.slack_runtime(), Some(6 * MS));
        let mut b = cfs_b(50 * MS, 0, 2 * MS);
        assert!(!b.return_runtime(&mut c, 6 * MS, 5 * MS), "nobody throttled");
        assert_eq!((b.runtime, c.runtime_remaining), (8 * MS, MS as i64));
        assert_eq!(c.slack_runtime(), None);
        b.throttled_cfs_rq.push(9);
        let mut c = cfs_rq(7 * MS as i64);
        assert!(b.return_runtime(&mut c, 6 * MS, 5 * MS));
        assert_eq!(b.runtime, 14 * MS);
        assert_eq!(cfs_rq(MS as i64 / 2).slack_runtime(), None);
    }

    #[test]
    fn distribute_gives_each_throttled_cfs_rq_one_ns_above_zero_in_order() {
        // distribute_cfs_runtime: runtime = min(-runtime_remaining + 1, cfs_b->runtime).
        let mut b = cfs_b(50 * MS, 0, 4 * MS);
        let (mut first, mut second) = (cfs_rq(-(MS as i64)), cfs_rq(-5 * MS as i64));
        assert_eq!(b.distribute_runtime(&mut first, false), MS + 1);
        assert_eq!((first.runtime_remaining, b.runtime), (1, 3 * MS - 1));
        assert_eq!(b.distribute_runtime(&mut second, false), 3 * MS - 1);
        assert_eq!((second.runtime_remaining, b.runtime), (-2 * MS as i64 - 1, 0), "still throttled");
    }

    #[test]
    fn throttled_time_runs_from_throttle_to_unthrottle() {
        // throttle_cfs_rq starts throttled_clock (from 6.5 only with tasks
        // queued); unthrottle_cfs_rq adds rq_clock - throttled_clock to
        // cfs_b->throttled_time and takes the cfs_rq off the throttled list.
        let mut b = cfs_b(50 * MS, 0, 0);
        let mut empty = cfs_rq(0);
        empty.mark_throttled(10 * MS, true);
        assert!(empty.throttled && empty.throttled_clock.is_none());
        let mut busy = CfsRq { nr_running: 1, ..cfs_rq(0) };
        busy.mark_throttled(10 * MS, true);
        b.throttled_cfs_rq.extend([3, 7]);
        b.unthrottle(7, &mut busy, 35 * MS);
        assert_eq!((busy.throttled, busy.throttled_clock, b.throttled_time), (false, None, 25 * MS));
        assert_eq!(b.throttled_cfs_rq, vec![3]);
        // Before 6.5 an empty cfs_rq's throttle counts too.
        let mut old = cfs_rq(0);
        old.mark_throttled(10 * MS, false);
        assert_eq!(old.throttled_clock, Some(10 * MS));
    }

    #[test]
    fn the_period_timer_forwards_by_whole_periods() {
        // hrtimer_forward: an expiry at or before now moves past it by whole
        // periods, the overrun counting them (nr_periods += overrun).
        let mut b = cfs_b(50 * MS, 0, 0);
        b.period_expires = 1000 * MS;
        assert_eq!(b.hrtimer_forward(999 * MS), 0);
        assert_eq!(b.hrtimer_forward(1000 * MS), 1);
        assert_eq!(b.period_expires, 1100 * MS);
        assert_eq!(b.hrtimer_forward(1350 * MS), 3);
        assert_eq!(b.period_expires, 1400 * MS);
    }

    #[test]
    fn local_runtime_expires_with_its_period_on_4_18() {
        // 4.18 expire_cfs_rq_runtime: past runtime_expires, runtime of an older
        // refill is dropped; of the current one (clock drift) it lasts a tick more.
        let mut c = CfsRq { runtime_expires: 100 * MS, expires_seq: 2, ..cfs_rq(3 * MS as i64) };
        c.expire_runtime(99 * MS, 3, 4 * MS);
        assert_eq!((c.runtime_remaining, c.runtime_expires), (3 * MS as i64, 100 * MS), "not yet");
        c.expire_runtime(100 * MS, 2, 4 * MS);
        assert_eq!((c.runtime_remaining, c.runtime_expires), (3 * MS as i64, 104 * MS), "same refill: a tick more");
        c.expire_runtime(104 * MS, 3, 4 * MS);
        assert_eq!(c.runtime_remaining, 0, "an older refill's runtime is dropped");
    }

    #[test]
    fn the_limit_reads_back_in_cpu_max_units() {
        let b = cfs_b(50 * MS, 20 * MS, 0);
        assert_eq!(b.limit(), Limit { quota_us: Quota::Us(50_000), period_us: 100_000, burst_us: 20_000 });
        assert_eq!(CfsBandwidth::new(Profile::default(), 1, 1, Some(0)).limit().quota_us, Quota::Max);
    }
}
