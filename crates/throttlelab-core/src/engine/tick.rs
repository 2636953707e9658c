//! The tick grid and the simulator's tick skipping: when each CPU's ticks
//! and timer interrupts run (the jiffy grid, `skew_tick`, seeded latencies),
//! and which ticks are simulated. A tick that can change nothing but the
//! charged time is skipped and applied later, in one `update_curr` per level
//! (`catch_up_ticks`), when the CPU is next touched.

use crate::engine::event::{Event, Queue, Slot};
use crate::engine::fair::NICE_0_LOAD;
use crate::vocab::noise::{self, Stream};
use crate::engine::sim::Sim;
use crate::vocab::types::{CpuId, ThreadId, Time};

/// Where each CPU's ticks fall: the jiffy grid, `skew_tick`'s offset per CPU
/// and a seeded interrupt latency per tick (`tick_sched_timer`'s hrtimer).
#[derive(Debug, Clone, Copy)]
pub struct TickGrid {
    pub tick_ns: u64,
    /// Expiry of CPU 0's tick 0: the first after simulated time 0.
    pub phase_ns: Time,
    /// `skew_tick`: CPU c's ticks expire `c * skew_ns` later (0 without it).
    pub skew_ns: u64,
    /// Each tick's interrupt runs uniformly up to this late.
    pub jitter_ns: u64,
    /// Some ticks run later still (`machine.tick_late_*`).
    pub late: TickLate,
    /// The run's seed (its mix taken once: a draw per tick).
    pub noise: noise::Seeded,
}

/// Ticks that run `ns` late on top of the jitter: tick k is late on every
/// CPU at once with chance `all` (in 2^-32), else on a CPU alone with chance
/// `own`, each a pure draw of (seed, tick index), so that the CPUs of a
/// machine whose emulator delivers a tick late to every vCPU share it.
/// `ns` 0: none, and no draw.
#[derive(Debug, Clone, Copy, Default)]
pub struct TickLate {
    pub ns: u64,
    pub all: u64,
    pub own: u64,
}

impl TickLate {
    const ONE: u64 = 1 << 32;

    /// From `machine.tick_late_share` (of all ticks), `tick_late_us` and
    /// `tick_late_together` (the share of late ticks late on every CPU).
    pub fn new(share: Option<f64>, late_us: Option<f64>, together: Option<f64>) -> TickLate {
        let (Some(share), Some(late_us)) = (share, late_us) else { return TickLate::default() };
        let together = together.unwrap_or(0.0);
        let all = share * together;
        // Late alone: of the ticks not late together, the share that makes `share` in all.
        let own = if all < 1.0 { (share - all) / (1.0 - all) } else { 0.0 };
        let chance = |p: f64| (p * Self::ONE as f64).round() as u64;
        TickLate { ns: (late_us * 1e3) as u64, all: chance(all), own: chance(own) }
    }

    /// How much later than its jitter tick `index` of `cpu` runs.
    fn of(&self, noise: noise::Seeded, cpu: CpuId, index: u64) -> u64 {
        if self.ns == 0 {
            return 0;
        }
        let late = noise.uniform(Stream::TickLateAll, index, Self::ONE) < self.all
            || noise.uniform(Stream::TickLate(cpu), index, Self::ONE) < self.own;
        if late {
            self.ns
        } else {
            0
        }
    }
}

impl TickGrid {
    /// `tick_setup_sched_timer`'s offset with `skew_tick`: half a tick spread
    /// over the CPUs, `TICK_NSEC / 2 / nr_cpus * cpu`.
    pub fn skew_ns(tick_ns: u64, skew_tick: bool, nr_cpus: usize) -> u64 {
        if skew_tick {
            tick_ns / 2 / nr_cpus as u64
        } else {
            0
        }
    }

    /// Expiry of tick 0 on `cpu`.
    fn base(&self, cpu: CpuId) -> Time {
        self.phase_ns + self.skew_ns * cpu as u64
    }

    /// Expiry of tick `index` on `cpu`: it runs at or after it, whatever its
    /// latency (no draw).
    pub fn expiry(&self, cpu: CpuId, index: u64) -> Time {
        self.base(cpu) + index * self.tick_ns
    }

    /// Time of tick `index` on `cpu`: its expiry plus a seeded interrupt latency.
    /// Out of line, the searches below inlined into their callers: on the
    /// busy built-ins most searches end before a draw (a tick expiring at or
    /// after the time sought needs none), and this split is 0.9 % fewer
    /// instructions at 64 CPUs than the searches out of line with the draw
    /// inlined into them; on request-service, where most searches draw, it
    /// is 1.6 % more (docs/engine.md, `const11`).
    #[inline(never)]
    pub fn tick_time(&self, cpu: CpuId, index: u64) -> Time {
        self.base(cpu) + index * self.tick_ns + self.noise.uniform(Stream::Tick(cpu), index, self.jitter_ns) + self.late.of(self.noise, cpu, index)
    }

    /// The ticks on `cpu` around an hrtimer expiring at `expires`: the last
    /// one expiring before it (index and when it runs; none before tick 0)
    /// and when the next one runs (at or after it; at equal expiry the tick,
    /// re-armed last, runs after the timer).
    pub fn ticks_around(&self, cpu: CpuId, expires: Time) -> (Option<(u64, Time)>, Time) {
        let next = expires.saturating_sub(self.base(cpu)).div_ceil(self.tick_ns);
        let before = next.checked_sub(1).map(|k| (k, self.tick_time(cpu, k)));
        (before, self.tick_time(cpu, next))
    }

    /// The first tick index on `cpu` that runs at or after `t`, from index
    /// `from`, and when it runs.
    #[inline]
    pub fn first_at_or_after(&self, cpu: CpuId, t: Time, from: u64) -> (u64, Time) {
        self.first_at_or_after_and_before(cpu, t, from, None).0
    }

    /// The same, and when the tick before the one found runs, where the
    /// search drew it (it runs before `t`), or `before` (the time of tick
    /// `from - 1`, known to run before `t`) where the search starts at `from`.
    #[inline]
    pub fn first_at_or_after_and_before(&self, cpu: CpuId, t: Time, from: u64, before: Option<Time>) -> ((u64, Time), Option<Time>) {
        let mut k = self.first_candidate(cpu, t, from);
        let mut before = before.filter(|_| k == from);
        loop {
            let at = self.tick_time(cpu, k);
            if at >= t {
                return ((k, at), before);
            }
            before = Some(at);
            k += 1;
        }
    }

    /// The same index, without when it runs: a tick that expires at or
    /// after `t` runs at or after it whatever its latency, so it takes no
    /// draw.
    #[inline]
    pub fn first_index_at_or_after(&self, cpu: CpuId, t: Time, from: u64) -> u64 {
        let mut k = self.first_candidate(cpu, t, from);
        while self.base(cpu) + k * self.tick_ns < t && self.tick_time(cpu, k) < t {
            k += 1;
        }
        k
    }

    /// Where the search starts: from `from`, skipping, without computing
    /// their latency, the ticks that run before `t` even at the largest
    /// latency (`jitter_ns - 1`, and a late tick's `late.ns`). The skew is
    /// under a tick, so this is never before `(t - phase_ns - jitter_ns) /
    /// tick_ns - 1`, a bound the search once took first.
    fn first_candidate(&self, cpu: CpuId, t: Time, from: u64) -> u64 {
        debug_assert!(self.skew_ns * cpu as u64 <= self.tick_ns, "skew_tick spreads half a tick");
        let latest = self.base(cpu) + (self.jitter_ns + self.late.ns).saturating_sub(1);
        t.saturating_sub(latest).div_ceil(self.tick_ns).max(from)
    }
}

impl<Q: Queue> Sim<'_, Q> {
    /// Mark `cpu` as touched by this event: apply the ticks skipped so far.
    /// None is due while `next_tick` runs after now (its time memoised): then
    /// `catch_up_ticks` would return at its first test, busy or idle, as it
    /// does on every touch after the first of an event.
    #[inline]
    pub(crate) fn touch(&mut self, cpu: CpuId) {
        if self.rqs[cpu].next_tick_at <= self.now {
            self.catch_up_ticks(cpu);
        }
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
    /// preempts on the return from the interrupt); a thread that blocked
    /// (its dequeue delayed or not) or left the fair class switches at once.
    pub(crate) fn preemption_held(&self, cpu: CpuId) -> bool {
        let rq = &self.rqs[cpu];
        let queued = |t: ThreadId| {
            let se = &self.ses[self.threads[t].se];
            se.on_rq && !se.sched_delayed
        };
        rq.irq_tick.is_some() && rq.curr.is_some_and(|t| !self.is_dl(t) && queued(t))
    }

    /// The first tick index on `cpu` at or after `t` (and not before `next_tick`).
    pub(crate) fn first_tick_at_or_after(&self, cpu: CpuId, t: Time) -> u64 {
        let rq = &self.rqs[cpu];
        if rq.next_tick_at >= t {
            return rq.next_tick;
        }
        self.ticks.first_index_at_or_after(cpu, t, rq.next_tick)
    }

    /// The same, and when that tick runs. When `next_tick` itself runs at or
    /// after `t` (its time memoised), it is the answer, with no hashing.
    pub(crate) fn first_tick_at_or_after_timed(&self, cpu: CpuId, t: Time) -> (u64, Time) {
        let rq = &self.rqs[cpu];
        if rq.next_tick_at >= t {
            // A memo of 0 (not computed) only passes for t = 0, where every
            // tick runs at or after t and `next_tick` is the answer too.
            return (rq.next_tick, rq.next_tick_at);
        }
        self.ticks.first_at_or_after(cpu, t, rq.next_tick)
    }

    /// When tick `next_tick` of `cpu` runs, memoised in `next_tick_at`.
    fn next_tick_time(&mut self, cpu: CpuId) -> Time {
        let rq = &self.rqs[cpu];
        if rq.next_tick_at != 0 {
            return rq.next_tick_at;
        }
        let at = self.ticks.tick_time(cpu, rq.next_tick);
        self.rqs[cpu].next_tick_at = at;
        at
    }

    /// Latency of an hrtimer (period or slack) expiry.
    pub(crate) fn timer_jitter(&self, stream: Stream, n: u64) -> Time {
        self.ticks.noise.uniform(stream, n, self.timer_jitter_ns)
    }

    /// Apply the ticks that were skipped because they could not change
    /// anything but the charged time: one `update_curr` per level at the
    /// last such tick. Idle CPUs have no tick (NOHZ).
    #[inline(never)]
    pub(crate) fn catch_up_ticks(&mut self, cpu: CpuId) {
        let Some(tid) = self.fair_curr(cpu) else {
            let (k, at) = self.first_tick_at_or_after_timed(cpu, self.now + 1);
            let rq = &mut self.rqs[cpu];
            (rq.next_tick, rq.next_tick_at) = (k, at);
            return;
        };
        let rq = &self.rqs[cpu];
        let limit = rq.tick_armed.unwrap_or(u64::MAX);
        let first = rq.next_tick;
        let due_by = self.tick_due_by(cpu);
        if first >= limit || self.next_tick_time(cpu) >= due_by {
            return;
        }
        // The first tick not due: most catch-ups skipped `first` alone, so
        // it is `first + 1` when that one runs at or after `due_by` (the
        // search's answer: no tick before it is a candidate, and `first` is
        // due), found with its one draw and no search; else the search goes
        // on from `first + 2`.
        let next_at = self.ticks.tick_time(cpu, first + 1);
        let ((after, after_at), before_at) = if next_at >= due_by {
            ((first + 1, next_at), None)
        } else {
            self.ticks.first_at_or_after_and_before(cpu, due_by, first + 2, Some(next_at))
        };
        // The last tick before `limit` that is due, and when it ran. Every
        // tick from `first` to `after` is due (`first` by the memo, the
        // search's by their draws or their expiry's bound), so that is tick
        // `min(after, limit) - 1`: `first`'s time is the memo, the one
        // before `after` the search's draw where it made one, another's
        // is drawn once.
        let k = after.min(limit) - 1;
        let at = match before_at {
            _ if k == first => self.rqs[cpu].next_tick_at,
            Some(at) if k + 1 == after => at,
            _ => self.ticks.tick_time(cpu, k),
        };
        debug_assert!(at < due_by, "tick {k} of CPU {cpu} is due");
        // Ticks before `k` to replay only if one was skipped before it (most
        // catch-ups skipped `k` alone: the search would start at `first`).
        let replay = self.profile.has_eevdf() && k > first;
        let mut h = self.hierarchy(self.threads[tid].se);
        while let Some(se) = h.next(self) {
            let rq = self.ses[se].cfs_rq;
            if replay {
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
                    self.update_curr(rq, self.ticks.tick_time(cpu, crossing));
                }
            }
            self.update_curr(rq, at);
        }
        let rq = &mut self.rqs[cpu];
        rq.next_tick = k + 1;
        rq.next_tick_at = if k + 1 == after { after_at } else { 0 };
    }

    /// The ticks of `cpu` that have run by the current event are those
    /// before this time: those before `now`, and the one at `now` if its CPU
    /// comes before the event's (`ticks_run_at`). A period timer whose
    /// own interrupt would come after its CPU's next tick runs at that
    /// tick's instant, before it (`arm_period_timer`): a catch-up there that
    /// charged the tick first gave `hard_limits`' refill (which clips the
    /// runtime to a period's) a different runtime than every tick gave it.
    fn tick_due_by(&self, cpu: CpuId) -> Time {
        let (t, n) = self.ticks_run_at;
        self.now + (t == self.now && cpu < n) as Time
    }

    /// A class-1 event of `cpu` (its tick, or a period timer in its
    /// interrupt) runs: the ticks at `now` of the CPUs up to it have run.
    pub(crate) fn tick_runs(&mut self, cpu: CpuId) {
        let (t, n) = self.ticks_run_at;
        self.ticks_run_at = (self.now, if t == self.now { n.max(cpu + 1) } else { cpu + 1 });
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
        let mut h = self.hierarchy(self.threads[tid].se);
        while let Some(se) = h.next(self) {
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

    /// (Re-)arm the next tick of `cpu` if it changed (the queue drops the
    /// one it replaces). A tick that expires at or after the pending
    /// `RunDone` is not queued: the `RunDone` runs first (a tick runs last
    /// at an instant) and touches the CPU, which arms it again then; most
    /// ticks armed on a switch are replaced so, before they run.
    pub(crate) fn arm_tick(&mut self, cpu: CpuId) {
        let next = self.next_interesting_tick(cpu);
        let rq = &mut self.rqs[cpu];
        if rq.tick_armed == next {
            // Queued, or to be queued if the `RunDone` moved meanwhile.
            self.queue_tick_if_before_run_done(cpu);
            return;
        }
        rq.tick_armed = next;
        if rq.tick_queued {
            rq.tick_queued = false;
            if !self.tick_before_run_done(cpu) {
                self.events.cancel(Slot::Tick(cpu));
                return;
            }
        }
        // Queued, replacing the one queued before if any.
        self.queue_tick_if_before_run_done(cpu);
    }

    /// Whether `cpu`'s armed tick, not queued, expires before its pending
    /// `RunDone`, and so must be queued.
    fn tick_before_run_done(&self, cpu: CpuId) -> bool {
        let rq = &self.rqs[cpu];
        rq.tick_armed.is_some_and(|index| !rq.tick_queued && self.ticks.expiry(cpu, index) < rq.run_done_at)
    }

    /// Queue `cpu`'s armed tick if it must be (`tick_before_run_done`): after
    /// the tick or the `RunDone` changed.
    pub(crate) fn queue_tick_if_before_run_done(&mut self, cpu: CpuId) {
        if !self.tick_before_run_done(cpu) {
            return;
        }
        let rq = &mut self.rqs[cpu];
        let index = rq.tick_armed.expect("armed");
        rq.tick_gen += 1;
        rq.tick_queued = true;
        let gen = rq.tick_gen;
        let at = self.ticks.tick_time(cpu, index);
        self.events.push(at, Event::Tick { cpu, index, gen });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    /// HZ=250 on 4 CPUs with `skew_tick`, the grid 1 ms after time 0.
    fn grid(jitter_ns: u64) -> TickGrid {
        TickGrid { tick_ns: 4 * MS, phase_ns: MS, skew_ns: TickGrid::skew_ns(4 * MS, true, 4), jitter_ns, late: TickLate::default(), noise: noise::Seeded::new(7) }
    }

    #[test]
    fn late_ticks_are_late_by_their_lateness_together_as_asked() {
        let exact = grid(0);
        let with = |share, together| TickGrid { late: TickLate::new(Some(share), Some(3000.0), Some(together)), ..grid(0) };
        let late = |g: &TickGrid, cpu, k| g.tick_time(cpu, k) - exact.tick_time(cpu, k);
        for (share, together) in [(0.1, 1.0), (0.1, 0.0), (0.2, 0.5)] {
            let g = with(share, together);
            let n = 20_000u64;
            let (mut one, mut both) = (0u64, 0u64);
            for k in 0..n {
                let (a, b) = (late(&g, 0, k), late(&g, 1, k));
                assert!(a == 0 || a == 3 * MS, "late by the lateness or not at all");
                one += (a > 0) as u64;
                both += (a > 0 && b > 0) as u64;
            }
            let share_seen = one as f64 / n as f64;
            assert!((share_seen - share).abs() < 0.01, "share {share}: {share_seen}");
            // Together: late on both; apart, on both only by chance (share^2).
            let expect = share * together + (share * (1.0 - together)).powi(2);
            assert!((both as f64 / n as f64 - expect).abs() < 0.01, "together {together}: {both} of {n}");
        }
        // Found by when they run: a late tick is still the one after the tick before it.
        let g = with(0.5, 1.0);
        for k in 1..200 {
            assert_eq!(g.first_at_or_after(2, g.tick_time(2, k - 1) + 1, 0).0, k);
            assert_eq!(g.first_index_at_or_after(2, g.tick_time(2, k - 1) + 1, 0), k);
        }
        // Absent: no draw, the same times.
        assert_eq!(TickGrid { late: TickLate::new(None, None, None), ..grid(0) }.tick_time(1, 9), exact.tick_time(1, 9));
    }

    #[test]
    fn skew_tick_spreads_half_a_tick_over_the_cpus() {
        // tick_setup_sched_timer: offset = (TICK_NSEC >> 1) / num_possible_cpus() * cpu.
        let g = grid(0);
        assert_eq!(g.skew_ns, MS / 2);
        assert_eq!(TickGrid::skew_ns(4 * MS, false, 4), 0);
        assert_eq!(g.tick_time(0, 0), MS);
        assert_eq!(g.tick_time(3, 0), 2 * MS + MS / 2);
        assert_eq!(g.tick_time(3, 2), 10 * MS + MS / 2);
    }

    #[test]
    fn a_timer_falls_between_two_ticks_of_its_cpu() {
        let g = grid(0);
        // CPU 1 ticks at 1.5, 5.5, 9.5 ms: a timer at 9 ms follows tick 1.
        assert_eq!(g.ticks_around(1, 9 * MS), (Some((1, 5 * MS + MS / 2)), 9 * MS + MS / 2));
        // At a tick's own expiry the tick is the next one: it runs after the timer.
        assert_eq!(g.ticks_around(1, 9 * MS + MS / 2), (Some((1, 5 * MS + MS / 2)), 9 * MS + MS / 2));
        // Before tick 0 there is none before.
        assert_eq!(g.ticks_around(1, MS), (None, MS + MS / 2));
    }

    #[test]
    fn first_tick_at_or_after_a_time() {
        let g = grid(0);
        assert_eq!(g.first_at_or_after(0, 9 * MS, 0).0, 2, "CPU 0 ticks at 1, 5, 9 ms");
        assert_eq!(g.first_at_or_after(0, 9 * MS + 1, 0).0, 3);
        assert_eq!(g.first_at_or_after(0, 9 * MS, 5).0, 5, "never before `from`");
        assert_eq!(g.first_at_or_after(0, 0, 0), (0, MS));
    }

    /// The index alone (no draw where the expiry decides) is the index of
    /// the search with every latency drawn; and the search is the one that
    /// started from the bound it no longer takes, at every time around the ticks.
    #[test]
    fn the_index_alone_and_the_one_bound_are_the_search_with_both() {
        for jitter in [0, 1, 300_000, 4 * MS - 1] {
            let g = grid(jitter);
            for cpu in 0..4 {
                for t in (0..40 * MS).step_by(9_973).chain([MS, MS + 1, 5 * MS + MS / 2]) {
                    for from in [0, 3] {
                        let found = g.first_at_or_after(cpu, t, from);
                        let mut k = (t.saturating_sub(g.phase_ns + g.jitter_ns + g.tick_ns) / g.tick_ns).max(from);
                        while g.tick_time(cpu, k) < t {
                            k += 1;
                        }
                        assert_eq!(found, (k, g.tick_time(cpu, k)), "jitter {jitter} cpu {cpu} t {t} from {from}");
                        assert_eq!(g.first_index_at_or_after(cpu, t, from), k, "jitter {jitter} cpu {cpu} t {t} from {from}");
                    }
                }
            }
        }
    }

    #[test]
    fn each_tick_runs_up_to_its_jitter_late_the_same_for_a_seed() {
        let (exact, late) = (grid(0), grid(100_000));
        let lateness: Vec<u64> = (0..1000).map(|k| late.tick_time(2, k) - exact.tick_time(2, k)).collect();
        assert!(lateness.iter().all(|&l| l < 100_000));
        assert!(*lateness.iter().min().unwrap() < 5_000 && *lateness.iter().max().unwrap() > 95_000, "spread over [0, 100 us)");
        assert_eq!(late.tick_time(2, 17), grid(100_000).tick_time(2, 17));
        // Found by when it runs, latency included.
        assert_eq!(late.first_at_or_after(2, late.tick_time(2, 40), 0), (40, late.tick_time(2, 40)));
        assert_eq!(late.first_at_or_after(2, late.tick_time(2, 40) + 1, 0).0, 41);
    }
}
