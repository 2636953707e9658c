//! The tick grid and the simulator's tick skipping: when each CPU's ticks
//! and timer interrupts run (the jiffy grid, `skew_tick`, seeded latencies),
//! and which ticks are simulated. A tick that can change nothing but the
//! charged time is skipped and applied later, in one `update_curr` per level
//! (`catch_up_ticks`), when the CPU is next touched.

use crate::engine::event::Event;
use crate::engine::fair::NICE_0_LOAD;
use crate::vocab::noise::{self, Stream};
use crate::engine::sim::Sim;
use crate::vocab::types::{CpuId, Time};

impl Sim<'_> {
    /// Mark `cpu` as touched by this event: apply the ticks skipped so far.
    pub(crate) fn touch(&mut self, cpu: CpuId) {
        self.catch_up_ticks(cpu);
        if !self.rqs[cpu].dirty {
            self.rqs[cpu].dirty = true;
            self.dirty.push(cpu);
        }
    }

    /// A period timer that runs in the interrupt of one of `cpu`'s ticks
    /// fires: returns whether that interrupt is running (it ran the tick),
    /// and ends it when no other timer is left to run in it.
    pub(crate) fn run_in_tick_irq(&mut self, cpu: CpuId, tg: usize) -> bool {
        let rq = &mut self.rqs[cpu];
        let pos = rq.tick_timers.iter().position(|&(_, g)| g == tg).expect("armed in a tick");
        let (index, _) = rq.tick_timers.swap_remove(pos);
        if rq.irq_tick != Some(index) {
            return false;
        }
        if rq.tick_timers.iter().all(|&(k, _)| k != index) {
            rq.irq_tick = None;
            if rq.need_resched {
                self.resched.push(cpu);
            }
        }
        true
    }

    /// Whether `cpu`'s reschedule waits for the end of a tick's interrupt:
    /// a preemption of a thread that is still queued does (the kernel
    /// preempts on the return from the interrupt); a thread that blocked or
    /// left the fair class switches at once.
    pub(crate) fn preemption_held(&self, cpu: CpuId) -> bool {
        let rq = &self.rqs[cpu];
        rq.irq_tick.is_some() && rq.curr.is_some_and(|t| !self.is_dl(t) && self.ses[self.threads[t].se].on_rq)
    }

    /// Expiry of tick 0 on `cpu`: the jiffy grid, skewed per CPU with `skew_tick`.
    fn tick_base(&self, cpu: CpuId) -> Time {
        let tick = self.tun.tick_ns;
        let skew = if self.scenario.kernel.skew_tick { tick / 2 / self.nr_cpus() as u64 * cpu as u64 } else { 0 };
        self.tick_phase + skew
    }

    /// Time of tick `index` on `cpu`: its expiry plus a seeded interrupt latency.
    pub(crate) fn tick_time(&self, cpu: CpuId, index: u64) -> Time {
        self.tick_base(cpu) + index * self.tun.tick_ns + noise::uniform(self.seed, Stream::Tick(cpu), index, self.tick_jitter_ns)
    }

    /// The ticks on `cpu` around an hrtimer expiring at `expires`: the last
    /// one expiring before it (index and when it runs; none before tick 0)
    /// and when the next one runs (at or after it; at equal expiry the tick,
    /// re-armed last, runs after the timer).
    pub(crate) fn ticks_around(&self, cpu: CpuId, expires: Time) -> (Option<(u64, Time)>, Time) {
        let base = self.tick_base(cpu);
        let next = expires.saturating_sub(base).div_ceil(self.tun.tick_ns);
        let before = next.checked_sub(1).map(|k| (k, self.tick_time(cpu, k)));
        (before, self.tick_time(cpu, next))
    }

    /// The first tick index on `cpu` at or after `t` (and not before `next_tick`).
    pub(crate) fn first_tick_at_or_after(&self, cpu: CpuId, t: Time) -> u64 {
        let tick = self.tun.tick_ns;
        let mut k = (t.saturating_sub(self.tick_phase + self.tick_jitter_ns + tick) / tick).max(self.rqs[cpu].next_tick);
        while self.tick_time(cpu, k) < t {
            k += 1;
        }
        k
    }

    /// Latency of an hrtimer (period or slack) expiry.
    pub(crate) fn timer_jitter(&self, stream: Stream, n: u64) -> Time {
        noise::uniform(self.seed, stream, n, self.timer_jitter_ns)
    }

    /// Apply the ticks that were skipped because they could not change
    /// anything but the charged time: one `update_curr` per level at the
    /// last such tick. Idle CPUs have no tick (NOHZ).
    pub(crate) fn catch_up_ticks(&mut self, cpu: CpuId) {
        let Some(tid) = self.fair_curr(cpu) else {
            self.rqs[cpu].next_tick = self.first_tick_at_or_after(cpu, self.now + 1);
            return;
        };
        let rq = &self.rqs[cpu];
        let limit = rq.tick_armed.map(|(k, _)| k).unwrap_or(u64::MAX);
        let first = rq.next_tick;
        if first >= limit || self.tick_time(cpu, first) > self.now {
            return;
        }
        // The last tick before `limit` that is due by now.
        let mut k = self.first_tick_at_or_after(cpu, self.now + 1).min(limit) - 1;
        while k > first && self.tick_time(cpu, k) > self.now {
            k -= 1;
        }
        let at = self.tick_time(cpu, k);
        for se in self.hierarchy(self.threads[tid].se) {
            let rq = self.ses[se].cfs_rq;
            if self.profile.has_eevdf() {
                // Replay the skipped ticks at which the deadline was passed,
                // so that it moves on exactly as it would have.
                loop {
                    let s = &self.ses[se];
                    let vdelta = s.deadline.saturating_sub(s.vruntime) as u128;
                    let wall = (vdelta * s.weight as u128).saturating_sub(s.vruntime_rem as u128).div_ceil(NICE_0_LOAD as u128);
                    let crossing = self.first_tick_at_or_after(cpu, s.exec_start + wall as u64);
                    if crossing >= k {
                        break;
                    }
                    self.update_curr(rq, self.tick_time(cpu, crossing));
                }
            }
            self.update_curr(rq, at);
        }
        self.rqs[cpu].next_tick = k + 1;
    }

    /// The next tick on `cpu` that can change something: every tick while
    /// more than one entity competes at some level; otherwise the first tick
    /// at which some level's local runtime is used up (or, on 4.18, expires),
    /// or whose interrupt runs a period timer (a preemption asked for
    /// meanwhile waits for the timer).
    fn next_interesting_tick(&self, cpu: CpuId) -> Option<u64> {
        let tid = self.fair_curr(cpu)?;
        let first = self.first_tick_at_or_after(cpu, self.now);
        if self.every_tick {
            return Some(first);
        }
        let timer_tick = self.rqs[cpu].tick_timers.iter().map(|&(k, _)| k).filter(|&k| k >= first).min();
        let mut due: Option<Time> = None;
        for se in self.hierarchy(self.threads[tid].se) {
            let c = &self.cfs_rqs[self.ses[se].cfs_rq];
            if c.nr_running > 1 {
                return Some(first);
            }
            if c.runtime_enabled && !c.throttled {
                let mut t = self.ses[se].exec_start.saturating_add_signed(c.runtime_remaining.max(0));
                if self.profile.has_expiry() && c.runtime_remaining >= 0 {
                    t = t.min(c.runtime_expires);
                }
                due = Some(due.map_or(t, |d: Time| d.min(t)));
            }
        }
        let runtime_tick = due.map(|t| self.first_tick_at_or_after(cpu, t.max(self.now)));
        runtime_tick.into_iter().chain(timer_tick).min()
    }

    /// (Re-)arm the next tick event of `cpu` if it changed.
    pub(crate) fn arm_tick(&mut self, cpu: CpuId) {
        let next = self.next_interesting_tick(cpu);
        let rq = &mut self.rqs[cpu];
        if rq.tick_armed.map(|(k, _)| k) == next {
            return;
        }
        rq.tick_gen += 1;
        rq.tick_armed = None;
        if let Some(index) = next {
            let at = self.tick_time(cpu, index);
            let rq = &mut self.rqs[cpu];
            rq.tick_armed = Some((index, at));
            let gen = rq.tick_gen;
            self.events.push(at, Event::Tick { cpu, index, gen });
        }
    }
}
