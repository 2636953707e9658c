//! CFS bandwidth control: the "CFS bandwidth control machinery" section of
//! `kernel/sched/fair.c` and `tg_set_cfs_bandwidth` of `core.c`. Function
//! names are the kernel's; each cites the behaviour it follows, per profile.
//! The arithmetic on `struct cfs_bandwidth` and `cfs_rq` alone is in
//! `cfs_bandwidth.rs`.

use crate::engine::cfs_bandwidth::{CFS_BANDWIDTH_SLACK_PERIOD, MIN_BANDWIDTH_EXPIRATION};
use crate::engine::event::{Event, Irq, Queue};
use crate::engine::fair::{CfsRq, DEQUEUE_DELAYED, DEQUEUE_SLEEP, DEQUEUE_SPECIAL};
use crate::engine::sim::Sim;
use crate::vocab::noise::Stream;
use crate::vocab::trace::TraceKind;
use crate::vocab::types::{CfsRqId, CpuId, Quota, Time, NSEC_PER_USEC};

impl<Q: Queue> Sim<'_, Q> {
    /// `__refill_cfs_bandwidth_runtime` of group `tg`, traced.
    fn refill_cfs_bandwidth_runtime(&mut self, tg: usize) {
        if self.tgs[tg].cfs_b.refill_runtime(self.now, self.profile.has_expiry()) {
            self.record(None, tg, TraceKind::Refill);
        }
    }

    /// `__assign_cfs_rq_runtime`: pay the local pool's debt (`slush_fund`),
    /// start the period timer and take from the global pool; true if the
    /// local pool is now positive.
    fn assign_runtime(&mut self, rq: CfsRqId, target: u64) -> bool {
        if self.features.hard_limits {
            return self.do_balance_runtime(rq);
        }
        let (tg, cpu) = (self.cfs_rqs[rq].tg, self.cfs_rqs[rq].cpu);
        if self.features.slush_fund {
            self.tgs[tg].cfs_b.pay_debt_from_slush_fund(&mut self.cfs_rqs[rq]);
        }
        if self.tgs[tg].cfs_b.quota.is_some() {
            self.pool_access(tg, Some(cpu));
            self.start_cfs_bandwidth(tg, cpu);
        }
        let amount = self.tgs[tg].cfs_b.assign_runtime(&mut self.cfs_rqs[rq], target, self.profile.has_expiry());
        let ok = self.cfs_rqs[rq].runtime_remaining > 0;
        self.record(Some(cpu), tg, TraceKind::Assign(amount));
        ok
    }

    /// The cost model of the global pool (000 III-B, IV-B, Fig. 9). Every
    /// access takes CPU time on the accessing CPU, counted as its thread's
    /// usage but doing no work: with the kernel's spinlock, accesses
    /// serialise and a waiting CPU spins; with `atomic_pool` (000 Listing 4)
    /// an access is one cache-line transfer and nobody waits. Accesses from
    /// timer context (distribution) hold the lock without a thread to charge.
    fn pool_access(&mut self, tg: usize, cpu: Option<CpuId>) {
        let cost = if self.features.atomic_pool { self.scenario.kernel.pool_transfer_ns } else { self.take_pool_lock(tg, 1) };
        if let Some(cpu) = cpu {
            self.stall(cpu, cost);
        }
    }

    /// Take `cfs_b->lock` and, while holding it, `locks - 1` more (each held
    /// `pool_lock_hold_ns`): wait until it is free, then hold it for all of
    /// them. Returns how long the taker spent, waiting included.
    pub(crate) fn take_pool_lock(&mut self, tg: usize, locks: u64) -> u64 {
        let hold = self.scenario.kernel.pool_lock_hold_ns;
        let b = &mut self.tgs[tg].cfs_b;
        let start = b.lock_free_at.max(self.now);
        b.lock_free_at = start + locks * hold;
        b.lock_acquisitions += locks;
        b.lock_free_at - self.now
    }

    /// `assign_cfs_rq_runtime`: ask for a slice.
    fn assign_cfs_rq_runtime(&mut self, rq: CfsRqId) -> bool {
        self.assign_runtime(rq, self.tun.slice_ns)
    }

    /// 4.18 `expire_cfs_rq_runtime` ([`CfsRq::expire_runtime`]).
    fn expire_cfs_rq_runtime(&mut self, rq: CfsRqId, clock: Time) {
        let seq = self.tgs[self.cfs_rqs[rq].tg].cfs_b.expires_seq;
        self.cfs_rqs[rq].expire_runtime(clock, seq, self.tun.tick_ns);
    }

    /// `account_cfs_rq_runtime`: inlined up to its test, as in the kernel
    /// (about half the calls are for a runqueue without bandwidth).
    #[inline]
    pub(crate) fn account_cfs_rq_runtime(&mut self, rq: CfsRqId, delta: u64, clock: Time) {
        if self.cfs_rqs[rq].runtime_enabled {
            self.__account_cfs_rq_runtime(rq, delta, clock);
        }
    }

    /// `__account_cfs_rq_runtime`: charge the local pool; when it is used
    /// up ask for more, and if there is none make the CPU reschedule so
    /// that the hierarchy gets throttled. `clock` is the runqueue's clock
    /// the charge is made at.
    #[inline(never)]
    fn __account_cfs_rq_runtime(&mut self, rq: CfsRqId, delta: u64, clock: Time) {
        self.cfs_rqs[rq].runtime_remaining -= delta as i64;
        let hard_limits = self.features.hard_limits;
        if hard_limits {
            // No refill starts the period timer: running does (`start_rt_bandwidth`).
            self.start_cfs_bandwidth(self.cfs_rqs[rq].tg, self.cfs_rqs[rq].cpu);
        } else if self.profile.has_expiry() {
            self.expire_cfs_rq_runtime(rq, clock);
        }
        let c = &self.cfs_rqs[rq];
        if c.runtime_remaining > 0 || (c.throttled && (hard_limits || self.profile.has_throttle_race_fixes())) {
            return;
        }
        if !self.assign_cfs_rq_runtime(rq) && self.cfs_rqs[rq].curr.is_some() {
            self.resched_curr(self.cfs_rqs[rq].cpu);
        }
    }

    /// Apply `f` to the cfs_rq of every group in `tg`'s subtree on `cpu`
    /// (`walk_tg_tree_from`).
    fn walk_tg_tree_from(&mut self, tg: usize, cpu: usize, f: impl Fn(&mut CfsRq)) {
        for i in 0..self.tgs[tg].subtree.len() {
            let d = self.tgs[tg].subtree[i];
            let id = self.cfs_rq_id(d, cpu);
            f(&mut self.cfs_rqs[id]);
        }
    }

    /// `throttle_cfs_rq`: take the group's entity off its parent on this CPU.
    /// Returns false when runtime turned up after all (5.7+).
    pub(crate) fn throttle_cfs_rq(&mut self, rq: CfsRqId) -> bool {
        let tg = self.cfs_rqs[rq].tg;
        // With `hard_limits` the borrowing that failed was the last try (`sched_rt_runtime_exceeded`).
        if self.profile.has_throttle_race_fixes() && !self.features.hard_limits && self.assign_runtime(rq, 1) {
            return false;
        }
        self.tgs[tg].cfs_b.throttled_cfs_rq.push(rq);
        if !self.profile.has_throttle_race_fixes() {
            // Before 5.7 the first throttled cfs_rq starts the timer here.
            self.start_cfs_bandwidth(tg, self.cfs_rqs[rq].cpu);
        }
        let cpu = self.cfs_rqs[rq].cpu;
        self.walk_tg_tree_from(tg, cpu, |c| c.throttle_count += 1);
        let delta = self.cfs_rqs[rq].h_nr_running;
        let mut se = self.group_se(rq);
        let mut dequeue = true;
        while let Some(s) = se {
            if !self.ses[s].on_rq {
                break;
            }
            let parent = self.ses[s].cfs_rq;
            if dequeue {
                // SPECIAL: a throttle delays nothing; a delayed entity's dequeue is finished.
                let delayed = if self.ses[s].sched_delayed { DEQUEUE_DELAYED } else { 0 };
                self.dequeue_entity(parent, s, DEQUEUE_SLEEP | DEQUEUE_SPECIAL | delayed);
            }
            self.cfs_rqs[parent].h_nr_running -= delta;
            if self.cfs_rqs[parent].throttled {
                break;
            }
            // Stop dequeuing once a parent keeps other entities.
            if dequeue && self.cfs_rqs[parent].load > 0 {
                dequeue = false;
            }
            se = self.ses[s].parent;
        }
        self.update_rq_masks(cpu);
        self.cfs_rqs[rq].mark_throttled(self.now, self.profile.has_throttled_time_with_tasks());
        self.record(Some(cpu), tg, TraceKind::Throttle);
        true
    }

    /// `unthrottle_cfs_rq`: account the throttled time and put the group's
    /// entity back on its parents.
    pub(crate) fn unthrottle_cfs_rq(&mut self, rq: CfsRqId) {
        let tg = self.cfs_rqs[rq].tg;
        let cpu = self.cfs_rqs[rq].cpu;
        self.touch(cpu);
        self.tgs[tg].cfs_b.unthrottle(rq, &mut self.cfs_rqs[rq], self.now);
        self.walk_tg_tree_from(tg, cpu, |c| c.throttle_count -= 1);
        self.record(Some(cpu), tg, TraceKind::Unthrottle);
        if self.cfs_rqs[rq].load == 0 {
            return;
        }
        let delta = self.cfs_rqs[rq].h_nr_running;
        let mut se = self.group_se(rq);
        let mut enqueue = true;
        while let Some(s) = se {
            let parent = self.ses[s].cfs_rq;
            if enqueue {
                if self.ses[s].sched_delayed {
                    // Unfinished DELAY_DEQUEUE business first: then placed as woken.
                    self.dequeue_entity(parent, s, DEQUEUE_SLEEP | DEQUEUE_DELAYED);
                    self.enqueue_entity(parent, s, true, false);
                } else if self.ses[s].on_rq {
                    enqueue = false;
                } else {
                    self.enqueue_entity(parent, s, true, false);
                }
            }
            self.cfs_rqs[parent].h_nr_running += delta;
            if self.cfs_rqs[parent].throttled {
                break;
            }
            se = self.ses[s].parent;
        }
        self.update_rq_masks(cpu);
        if self.rqs[cpu].curr.is_none() && self.cfs_rqs[self.cfs_rq_id(0, cpu)].nr_running > 0 {
            self.resched_curr(cpu);
        }
    }

    /// `record_throttle_clock` (6.18; inline in `enqueue_entity` from 6.5): the
    /// first task to arrive on a runqueue throttled while empty starts its
    /// throttled time.
    pub(crate) fn record_throttle_clock(&mut self, rq: CfsRqId) {
        let c = &mut self.cfs_rqs[rq];
        if c.throttled && c.throttled_clock.is_none() {
            c.throttled_clock = Some(self.now);
        }
    }

    /// `check_cfs_rq_runtime`: throttle a runqueue that is out of runtime;
    /// true if it is (now) throttled.
    pub(crate) fn check_cfs_rq_runtime(&mut self, rq: CfsRqId) -> bool {
        let c = &self.cfs_rqs[rq];
        if !c.runtime_enabled || c.runtime_remaining > 0 {
            return false;
        }
        if c.throttled {
            return true;
        }
        self.throttle_cfs_rq(rq)
    }

    /// `check_enqueue_throttle`: a group waking up on a CPU must not run on
    /// runtime it does not have.
    pub(crate) fn check_enqueue_throttle(&mut self, rq: CfsRqId) {
        let c = &self.cfs_rqs[rq];
        if !c.runtime_enabled || c.curr.is_some() || c.throttled {
            return;
        }
        self.account_cfs_rq_runtime(rq, 0, self.now);
        if self.cfs_rqs[rq].runtime_remaining <= 0 {
            self.throttle_cfs_rq(rq);
        }
    }

    /// `return_cfs_rq_runtime`: a runqueue whose last entity left gives all
    /// but `min_cfs_rq_runtime` back; the slack timer hands it to throttled
    /// runqueues.
    pub(crate) fn return_cfs_rq_runtime(&mut self, rq: CfsRqId) {
        let c = &self.cfs_rqs[rq];
        // With `hard_limits` there is no global pool: idle runtime stays to be borrowed.
        if !c.runtime_enabled || c.nr_running > 0 || self.features.hard_limits {
            return;
        }
        let Some(slack) = c.slack_runtime() else { return };
        let (tg, cpu) = (c.tg, c.cpu);
        // 4.18 returns only runtime of the current period.
        if self.profile.has_expiry() && c.runtime_expires != self.tgs[tg].cfs_b.runtime_expires {
            self.cfs_rqs[rq].runtime_remaining -= slack as i64;
            return;
        }
        if self.tgs[tg].cfs_b.quota.is_some() {
            self.pool_access(tg, Some(cpu));
        }
        if self.tgs[tg].cfs_b.return_runtime(&mut self.cfs_rqs[rq], slack, self.tun.slice_ns) {
            self.start_cfs_slack_bandwidth(tg);
        }
        self.record(Some(cpu), tg, TraceKind::Return(slack));
    }

    /// `interleave_timers` (001, Hegde's RFC): the period timers of limited
    /// groups with the same period start at offsets spread evenly across it
    /// (0 and 50 ms for two groups at 100 ms), so their refills alternate
    /// instead of coinciding.
    pub(crate) fn interleave_period_timers(&mut self) {
        let limited: Vec<(usize, u64)> = self
            .scenario
            .cgroups
            .iter()
            .enumerate()
            .filter(|(_, c)| c.quota_us != Quota::Max)
            .map(|(i, c)| (i + 1, c.period_us * NSEC_PER_USEC))
            .collect();
        for &(tg, period) in &limited {
            let same: Vec<usize> = limited.iter().filter(|&&(_, p)| p == period).map(|&(g, _)| g).collect();
            let rank = same.iter().position(|&g| g == tg).expect("listed") as u64;
            let offset = rank * period / same.len() as u64;
            // One period before the first expiry, which is then `offset` into the run.
            self.tgs[tg].cfs_b.period_expires = self.uptime_ns + offset - period;
        }
    }

    /// `runtime_refresh_within`: is the period timer about to fire?
    fn runtime_refresh_within(&self, tg: usize, min_expire: u64) -> bool {
        (self.tgs[tg].cfs_b.period_expires as i64 - self.monotonic() as i64) < min_expire as i64
    }

    fn start_cfs_slack_bandwidth(&mut self, tg: usize) {
        if self.runtime_refresh_within(tg, CFS_BANDWIDTH_SLACK_PERIOD + MIN_BANDWIDTH_EXPIRATION) {
            return;
        }
        let b = &mut self.tgs[tg].cfs_b;
        if b.slack_started {
            return;
        }
        b.slack_started = true;
        let n = b.slack_fired;
        let at = self.now + CFS_BANDWIDTH_SLACK_PERIOD + self.timer_jitter(Stream::SlackTimer(tg), n);
        self.events.push(at, Event::SlackTimer(tg));
    }

    /// `sched_cfs_slack_timer` / `do_sched_cfs_slack_timer`.
    pub(crate) fn sched_cfs_slack_timer(&mut self, tg: usize) {
        let b = &mut self.tgs[tg].cfs_b;
        b.slack_started = false;
        b.slack_fired += 1;
        self.record(None, tg, TraceKind::SlackTimer);
        if self.runtime_refresh_within(tg, MIN_BANDWIDTH_EXPIRATION) {
            return;
        }
        let b = &self.tgs[tg].cfs_b;
        if b.quota.is_some() && b.runtime > self.tun.slice_ns {
            self.record(None, tg, TraceKind::SlackDistribute);
            self.distribute_cfs_runtime(tg);
        }
    }

    /// `distribute_cfs_runtime`: give each throttled runqueue, in list order,
    /// what it needs to be positive again; returns whether some stay throttled.
    /// Unthrottling happens after the walk (remote CPUs get it by IPI).
    fn distribute_cfs_runtime(&mut self, tg: usize) -> bool {
        let mut throttled = false;
        let mut remaining = 1;
        let mut unthrottle = Vec::new();
        let has_expiry = self.profile.has_expiry();
        for rq in self.tgs[tg].cfs_b.throttled_cfs_rq.clone() {
            if remaining == 0 {
                throttled = true;
                break;
            }
            let c = &self.cfs_rqs[rq];
            if !c.throttled || unthrottle.contains(&rq) {
                continue;
            }
            self.pool_access(tg, None);
            let runtime = self.tgs[tg].cfs_b.distribute_runtime(&mut self.cfs_rqs[rq], has_expiry);
            remaining = self.tgs[tg].cfs_b.runtime;
            let c = &self.cfs_rqs[rq];
            let (cpu, positive) = (c.cpu, c.runtime_remaining > 0);
            self.record(Some(cpu), tg, TraceKind::Distribute(runtime));
            if positive {
                unthrottle.push(rq);
            } else {
                throttled = true;
            }
        }
        for rq in unthrottle {
            if self.cfs_rqs[rq].throttled {
                self.unthrottle_cfs_rq(rq);
            }
        }
        throttled
    }

    /// `start_cfs_bandwidth`: arm the period timer on `cpu` if it is not
    /// running. Before 5.4 the global runtime's expiry moves on by the
    /// periods the timer missed, and a new expiry sequence begins.
    fn start_cfs_bandwidth(&mut self, tg: usize, cpu: CpuId) {
        if self.tgs[tg].cfs_b.period_active {
            return;
        }
        self.tgs[tg].cfs_b.period_active = true;
        self.tgs[tg].cfs_b.timer_cpu = cpu;
        let overrun = self.hrtimer_forward_now(tg);
        if self.profile.has_expiry() {
            let b = &mut self.tgs[tg].cfs_b;
            b.runtime_expires += (overrun + 1) * b.period;
            b.expires_seq += 1;
        }
        self.arm_period_timer(tg);
    }

    /// Queue the period timer's callback. Against other CPUs' ticks its
    /// interrupt latency races; against the tick of its own CPU it does not:
    /// `hrtimer_interrupt` runs every timer that has expired, in expiry
    /// order, and retries while the next one expired meanwhile, before it
    /// returns to `schedule()`. So a tick that expired first runs a timer
    /// expiring before its interrupt ends (`tick_irq_ns`) right after
    /// itself, before the throttle the tick may have asked for (which
    /// `throttle_cfs_rq` then finds unnecessary); a timer that expired first
    /// runs before the next tick. Measured on the host (6.18, 1 spinner, a
    /// timer within 25 us of a tick): 0-1 throttled periods of 100 with the
    /// spinner on the timer's CPU, 8-58 with it on the other one.
    fn arm_period_timer(&mut self, tg: usize) {
        let b = &self.tgs[tg].cfs_b;
        let (cpu, expires) = (b.timer_cpu, b.period_expires - self.uptime_ns);
        let (before, after) = self.ticks.ticks_around(cpu, expires);
        let (at, irq) = match before {
            Some((index, tick)) if expires <= tick + self.tick_irq_ns => {
                self.rqs[cpu].tick_timers.push((index, tg));
                (expires.max(tick), Irq::Tick(cpu))
            }
            _ => {
                let own = expires + self.timer_jitter(Stream::PeriodTimer(tg), b.period_fired);
                (own.min(after), Irq::Own) // at `after` it runs first: ticks run last at an instant
            }
        };
        self.events.push(at, Event::PeriodTimer { tg, irq });
    }

    /// `hrtimer_forward_now` of `tg`'s period timer.
    fn hrtimer_forward_now(&mut self, tg: usize) -> u64 {
        let now = self.monotonic();
        self.tgs[tg].cfs_b.hrtimer_forward(now)
    }

    /// `sched_cfs_period_timer`: one call per expiry of the period timer.
    pub(crate) fn sched_cfs_period_timer(&mut self, tg: usize) {
        self.tgs[tg].cfs_b.period_fired += 1;
        let mut idle = false;
        loop {
            let overrun = self.hrtimer_forward_now(tg);
            if overrun == 0 {
                break;
            }
            idle = self.do_sched_cfs_period_timer(tg, overrun);
        }
        if idle {
            self.tgs[tg].cfs_b.period_active = false;
        } else {
            self.arm_period_timer(tg);
        }
    }

    /// `do_sched_cfs_period_timer`: count the period, refill, and hand the
    /// new runtime to throttled runqueues. Returns true to deactivate.
    fn do_sched_cfs_period_timer(&mut self, tg: usize, overrun: u64) -> bool {
        if self.tgs[tg].cfs_b.quota.is_none() {
            return true;
        }
        if self.features.hard_limits {
            return self.do_sched_rt_period_timer(tg, overrun);
        }
        let mut throttled = !self.tgs[tg].cfs_b.throttled_cfs_rq.is_empty();
        self.tgs[tg].cfs_b.nr_periods += overrun;
        self.refill_cfs_bandwidth_runtime(tg);
        let b = &mut self.tgs[tg].cfs_b;
        if b.idle && !throttled {
            return true;
        }
        if !throttled {
            b.idle = true;
            return false;
        }
        b.nr_throttled += overrun;
        self.check_stop(tg);
        while throttled && self.tgs[tg].cfs_b.runtime > 0 {
            throttled = self.distribute_cfs_runtime(tg);
        }
        self.tgs[tg].cfs_b.idle = false;
        false
    }

    /// A limit as a run finds it: set long before its tasks start, as the
    /// real backend's cgroups and a container's are. The idle periods since
    /// `tg_set_cfs_bandwidth` refilled the global pool to quota + burst, and
    /// the second of them found the group idle and stopped the period timer
    /// (`do_sched_cfs_period_timer`); the first runtime asked for restarts it.
    pub(crate) fn configure_cfs_bandwidth(&mut self, tg: usize, period: u64, quota: u64, burst: u64) {
        let local = self.local_runtime_at_set(Some(quota));
        let b = &mut self.tgs[tg].cfs_b;
        b.period = period;
        b.quota = Some(quota);
        b.burst = burst;
        b.runtime = quota + burst;
        b.runtime_snap = b.runtime;
        b.idle = true;
        for cpu in 0..self.nr_cpus() {
            let rq = self.cfs_rq_id(tg, cpu);
            self.cfs_rqs[rq].runtime_enabled = true;
            self.cfs_rqs[rq].runtime_remaining = local as i64;
            self.cfs_rqs[rq].cfs_runtime = local;
        }
    }

    /// What `tg_set_cfs_bandwidth` leaves in every local pool: nothing (1 ns
    /// from 6.18), or with `hard_limits` each CPU's share of the quota.
    fn local_runtime_at_set(&self, quota: Option<u64>) -> u64 {
        match quota {
            Some(quota) if self.features.hard_limits => quota / self.nr_cpus() as u64,
            _ => self.profile.has_task_based_throttle() as u64,
        }
    }

    /// `tg_set_cfs_bandwidth`: a write to cpu.max (or cfs_quota_us /
    /// cfs_period_us / burst). Even with unchanged values it refills the
    /// global pool, empties every local pool and unthrottles; with
    /// `noop_update` (000 IV-A2) a write of unchanged values does nothing.
    pub(crate) fn tg_set_cfs_bandwidth(&mut self, tg: usize, period: u64, quota: Option<u64>, burst: u64) {
        let b = &self.tgs[tg].cfs_b;
        if self.features.noop_update && (b.period, b.quota, b.burst) == (period, quota, burst) {
            return;
        }
        for cpu in 0..self.nr_cpus() {
            self.touch(cpu);
        }
        let b = &mut self.tgs[tg].cfs_b;
        b.period = period;
        b.quota = quota;
        b.burst = burst;
        self.refill_cfs_bandwidth_runtime(tg);
        if quota.is_some() {
            // The writer runs where the scheduler would wake it: an idle CPU first.
            let cpu = (0..self.nr_cpus()).find(|&c| self.is_idle(c)).unwrap_or(0);
            self.start_cfs_bandwidth(tg, cpu);
        }
        let local = self.local_runtime_at_set(quota);
        for cpu in 0..self.nr_cpus() {
            let rq = self.cfs_rq_id(tg, cpu);
            let c = &mut self.cfs_rqs[rq];
            c.runtime_enabled = quota.is_some();
            c.runtime_remaining = local as i64;
            c.cfs_runtime = local;
            if c.throttled {
                self.unthrottle_cfs_rq(rq);
            }
        }
    }
}
