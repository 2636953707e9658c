//! The scheduler core (`kernel/sched/core.c`): switching (`__schedule`),
//! waking (`try_to_wake_up`), the tick (`sched_tick`) and the helpers they
//! share, over whichever class runs a thread. The classes are `fair`,
//! `bandwidth` and `deadline`.

use crate::engine::rq::ThreadState;
use crate::engine::event::Queue;
use crate::engine::fair::{DEQUEUE_SLEEP, DEQUEUE_SPECIAL};
use crate::engine::sim::Sim;
use crate::vocab::trace::TraceKind;
use crate::vocab::types::{CpuId, ThreadId};
use smallvec::SmallVec;

impl<Q: Queue> Sim<'_, Q> {
    /// `__schedule`: put the running thread back, pick the next one, pull
    /// work from a busy CPU when there is none.
    pub(crate) fn schedule(&mut self, cpu: CpuId) {
        self.touch(cpu);
        self.rqs[cpu].need_resched = false;
        self.account_thread_time(cpu);
        if self.profile.has_sis_util() {
            // Only SIS_UTIL reads the utilization: its idle ticks since the
            // last switch write their hint before this one changes it.
            self.update_idle_cpu_scan();
            let util = self.cpu_util(cpu);
            let rq = &mut self.rqs[cpu];
            (rq.util_avg, rq.util_at) = (util, self.now);
        }
        let prev_busy = self.rqs[cpu].curr.is_some();
        if let Some(prev) = self.rqs[cpu].curr.take() {
            // A fair thread (or one that just left the fair class) is still
            // its runqueue's current entity until put back.
            let se = self.threads[prev].se;
            if self.cfs_rqs[self.ses[se].cfs_rq].curr == Some(se) {
                self.put_prev_task(prev);
            }
        }
        let next = match self.rqs[cpu].dl {
            Some(dl) => Some(dl),
            None => loop {
                match self.pick_next_task_fair(cpu) {
                    Some(t) => break Some(t),
                    None if self.newidle_balance(cpu) => continue,
                    None => break None,
                }
            },
        };
        let rq = &mut self.rqs[cpu];
        rq.curr = next;
        rq.since = self.now;
        if self.profile.has_sis_util() {
            self.util_changed(cpu);
        }
        self.update_rq_masks(cpu);
        let rq = &mut self.rqs[cpu];
        let pending = std::mem::take(&mut rq.pending_stall);
        if let Some(t) = next {
            let th = &mut self.threads[t];
            th.stall_left += pending;
            if let (Some(woke_at), Some(program)) = (th.catch_up_woke_at.take(), th.program.as_mut()) {
                program.woke_late(self.now - woke_at);
            }
        }
        if prev_busy != next.is_some() {
            self.core_load_changed(cpu, next.is_some());
            if self.profile.has_sis_util() {
                match next {
                    Some(_) => self.idle_left(cpu),
                    None => self.idle_entered(cpu),
                }
            }
        }
        self.arm_run_done(cpu);
        if let Some(t) = next {
            self.record(Some(cpu), self.threads[t].tg, TraceKind::Switch(Some(t)));
        } else {
            self.record(Some(cpu), 0, TraceKind::Switch(None));
        }
    }

    /// A hardware thread became busy or idle: its running siblings change
    /// speed, so their work so far is accounted and their completion re-armed.
    fn core_load_changed(&mut self, cpu: CpuId, busy: bool) {
        if self.hw.is_uniform() {
            self.hw.set_busy(cpu, busy);
            return;
        }
        let siblings: SmallVec<[CpuId; 8]> = self.hw.siblings(cpu).filter(|&c| self.rqs[c].curr.is_some()).collect();
        for &c in &siblings {
            self.account_thread_time(c);
        }
        self.hw.set_busy(cpu, busy);
        for &c in &siblings {
            self.arm_run_done(c);
        }
    }

    /// The running thread on its CPU sleeps or exits (`try_to_block_task`:
    /// an exit's `TASK_DEAD` is a special state, never delayed).
    pub(crate) fn block(&mut self, tid: ThreadId) {
        let cpu = self.threads[tid].cpu;
        self.touch(cpu);
        let special = if self.threads[tid].state == ThreadState::Done { DEQUEUE_SPECIAL } else { 0 };
        self.dequeue_task(tid, DEQUEUE_SLEEP | special);
        self.resched_curr(cpu);
    }

    pub(crate) fn is_idle(&self, cpu: CpuId) -> bool {
        // The root count first, unconditionally: `update_rq_masks` reads it
        // for `is_overloaded` too, and the compiler then loads it once.
        let h_nr_running = self.cfs_rqs[self.cfs_rq_id(0, cpu)].h_nr_running;
        let rq = &self.rqs[cpu];
        h_nr_running == 0 && rq.curr.is_none() && rq.dl.is_none()
    }

    /// Whether more than one task is runnable on `cpu` (`rq->nr_running > 1`,
    /// the kernel's `rd->overload`): the CPUs an idle one may pull from.
    pub(crate) fn is_overloaded(&self, cpu: CpuId) -> bool {
        self.cfs_rqs[self.cfs_rq_id(0, cpu)].h_nr_running >= 2
    }

    /// Whether any CPU has more than one task runnable (what a balance at the
    /// root domain sets `rd->overloaded` to).
    pub(crate) fn any_overloaded(&self) -> bool {
        self.overload_mask.iter().any(|&w| w != 0)
    }

    /// Bring `cpu`'s bits in the idle and overload masks up to date: after
    /// its running thread, deadline thread or root `h_nr_running` changed.
    pub(crate) fn update_rq_masks(&mut self, cpu: CpuId) {
        let (idle, overloaded) = (self.is_idle(cpu), self.is_overloaded(cpu));
        // `add_nr_running` marks the root domain overloaded; only a balance clears it.
        self.rd_overloaded |= overloaded;
        set_bit(&mut self.idle_mask, cpu, idle);
        set_bit(&mut self.overload_mask, cpu, overloaded);
    }

    /// The idle CPUs in `lo..hi`, ascending, from the idle mask: the idle-CPU
    /// search costs a word per 64 CPUs, not a look at each.
    pub(crate) fn idle_cpus(&self, lo: CpuId, hi: CpuId) -> impl Iterator<Item = CpuId> + '_ {
        set_bits(&self.idle_mask, lo, hi).inspect(|&c| debug_assert!(self.is_idle(c), "idle mask out of date for CPU {c}"))
    }

    /// The overloaded CPUs in `lo..hi`, ascending, from the overload mask.
    pub(crate) fn overloaded_cpus(&self, lo: CpuId, hi: CpuId) -> impl Iterator<Item = CpuId> + '_ {
        set_bits(&self.overload_mask, lo, hi).inspect(|&c| debug_assert!(self.is_overloaded(c), "overload mask out of date for CPU {c}"))
    }

    /// `set_task_cpu`: move a (not queued) thread's entity to another CPU,
    /// carrying its vruntime relative to the runqueues' min_vruntime if
    /// `carry` (the enqueue that follows keeps it; else neither CPU is
    /// caught up for it).
    pub(crate) fn set_task_cpu(&mut self, tid: ThreadId, dst: CpuId, carry: bool) {
        let src = self.threads[tid].cpu;
        if src == dst {
            return;
        }
        let th = &self.threads[tid];
        let (tg, se) = (th.tg, th.se);
        let src_rq = self.cfs_rq_id(tg, src);
        let dst_rq = self.cfs_rq_id(tg, dst);
        let parent = self.group_se(dst_rq);
        if !carry {
            let s = &mut self.ses[se];
            (s.cfs_rq, s.parent) = (dst_rq, parent);
            self.threads[tid].cpu = dst;
            return;
        }
        // Both min_vruntimes as the ticks so far left them. The source's
        // skipped ticks charge only the runqueues of its running hierarchy,
        // each with a `curr`: without one, `src_rq` is as they leave it, and
        // the source (unchanged by the move) is caught up when next touched.
        if self.cfs_rqs[src_rq].curr.is_some() {
            self.touch(src);
        }
        self.touch(dst);
        let v = self.ses[se].vruntime.saturating_sub(self.cfs_rqs[src_rq].min_vruntime) + self.cfs_rqs[dst_rq].min_vruntime;
        let s = &mut self.ses[se];
        (s.vruntime, s.cfs_rq, s.parent) = (v, dst_rq, parent);
        self.threads[tid].cpu = dst;
    }

    /// `try_to_wake_up`: place the thread, enqueue it, maybe preempt. A
    /// thread still queued (its dequeue delayed) is woken where it is.
    pub(crate) fn try_to_wake_up(&mut self, tid: ThreadId) {
        if self.ses[self.threads[tid].se].sched_delayed {
            self.ttwu_runnable(tid);
            return;
        }
        let initial = self.threads[tid].cpu_ns == 0 && self.threads[tid].state != ThreadState::Runnable;
        let cpu = self.select_task_rq(tid);
        // EEVDF's `place_entity` gives a woken entity its vruntime anew.
        self.set_task_cpu(tid, cpu, !self.profile.has_eevdf());
        self.touch(cpu);
        self.threads[tid].state = ThreadState::Runnable;
        self.enqueue_task(tid, true, initial);
        self.check_preempt_wakeup(cpu, tid);
    }

    /// `ttwu_runnable`: the thread is still queued, delayed, on its CPU:
    /// `enqueue_task(ENQUEUE_DELAYED)` requeues it there, with no
    /// `select_task_rq`, and it may preempt the running thread.
    fn ttwu_runnable(&mut self, tid: ThreadId) {
        let cpu = self.threads[tid].cpu;
        self.touch(cpu);
        self.threads[tid].state = ThreadState::Runnable;
        self.requeue_delayed_entity(self.threads[tid].se);
        if self.rqs[cpu].curr != Some(tid) {
            self.check_preempt_wakeup(cpu, tid);
        }
    }

    /// `sched_tick` (`scheduler_tick` before 6.10) → `task_tick_fair`: charge
    /// every level of the running hierarchy, bottom-up, and check for preemption.
    pub(crate) fn sched_tick(&mut self, cpu: CpuId, index: u64) {
        self.touch(cpu);
        self.rqs[cpu].next_tick = index + 1;
        self.rqs[cpu].next_tick_at = 0;
        let Some(tid) = self.fair_curr(cpu) else { return };
        let mut h = self.hierarchy(self.threads[tid].se);
        while let Some(se) = h.next(self) {
            let rq = self.ses[se].cfs_rq;
            self.update_curr(rq, self.now);
            if !self.profile.has_eevdf() && self.cfs_rqs[rq].nr_running > 1 {
                self.check_preempt_tick(rq);
            }
        }
        self.record(Some(cpu), self.threads[tid].tg, TraceKind::Tick);
    }

    pub(crate) fn resched_curr(&mut self, cpu: CpuId) {
        if !self.rqs[cpu].need_resched {
            self.rqs[cpu].need_resched = true;
            self.resched.push(cpu);
        }
    }
}

/// One of two iterators of the same items, chosen once.
pub(crate) enum OneOf<A, B> {
    A(A),
    B(B),
}

impl<T, A: Iterator<Item = T>, B: Iterator<Item = T>> Iterator for OneOf<A, B> {
    type Item = T;
    fn next(&mut self) -> Option<T> {
        match self {
            OneOf::A(a) => a.next(),
            OneOf::B(b) => b.next(),
        }
    }
}

/// Set or clear `cpu`'s bit in a CPU mask: one bounds-checked word, no branch.
fn set_bit(mask: &mut [u64], cpu: CpuId, on: bool) {
    let word = &mut mask[cpu / 64];
    *word = *word & !(1 << (cpu % 64)) | (on as u64) << (cpu % 64);
}

/// The set bits of a CPU mask in `lo..hi`, ascending: a word per 64 CPUs.
fn set_bits(mask: &[u64], lo: CpuId, hi: CpuId) -> impl Iterator<Item = CpuId> + '_ {
    let mut c = lo;
    std::iter::from_fn(move || {
        while c < hi {
            let w = c / 64;
            let bits = mask[w] >> (c % 64);
            if bits == 0 {
                c = (w + 1) * 64;
                continue;
            }
            let found = c + bits.trailing_zeros() as usize;
            if found >= hi {
                break;
            }
            c = found + 1;
            return Some(found);
        }
        c = hi;
        None
    })
}
