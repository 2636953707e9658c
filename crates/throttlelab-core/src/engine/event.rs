//! The event queue: ordered by `(time_ns, seq)`, so events at the same instant
//! run in the order they were scheduled (as hrtimers with equal expiry do).
//!
//! Ticks are the exception: at an instant they run after everything else, in
//! CPU order. A tick timer is re-armed every tick, so among timers of equal
//! expiry it is the one inserted last; and the order must not depend on when
//! the simulator chose to arm it (it skips ticks that cannot matter). A period
//! timer that runs in a tick's interrupt comes right after that tick.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::vocab::types::Time;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Event {
    /// A thread becomes runnable for the first time.
    Start(usize),
    /// A sleeping thread's timer expires.
    Wake(usize),
    /// A sibling woke a thread that waits (a captured `wake`).
    Signal(usize),
    /// A thread's `runtime` phase has had its wall time (the `gen`-th it began).
    RuntimeEnd { tid: usize, gen: u64 },
    /// The running thread on a CPU completes its run phase (valid for `gen`).
    RunDone { cpu: usize, gen: u64 },
    /// Scheduler tick `index` on a CPU (valid for `gen`).
    Tick { cpu: usize, index: u64, gen: u64 },
    /// `sched_cfs_period_timer` of a group, run by `irq`.
    PeriodTimer { tg: usize, irq: Irq },
    /// `sched_cfs_slack_timer` of a group.
    SlackTimer(usize),
    /// The i-th `[[write]]`, occurrence n.
    Write { index: usize, n: u64 },
    /// A request arrives at a service.
    Arrival(usize),
    /// The running deadline thread on a CPU used up its runtime (valid for `gen`).
    DlRuntimeEnd { cpu: usize, gen: u64 },
    /// A throttled deadline thread's replenishment timer.
    DlReplenish(usize),
    /// A thread refused by admission control tries `sched_setattr` again.
    DlRetry(usize),
    /// A deadline trace thread asks for its profiling stage (window `gen`).
    DlProfile { tid: usize, gen: u64 },
    /// A deadline trace thread's profiling stage ends (window `gen`).
    DlProfileEnd { tid: usize, gen: u64 },
    /// Record every task's CPU time (the n-th `sample_ms` boundary).
    Sample(u64),
}

/// The interrupt that runs an hrtimer's callback.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Irq {
    /// Its own, with its latency.
    Own,
    /// The tick interrupt of this CPU, right after the tick.
    Tick(usize),
    /// Its own, once its CPU has left the idle state.
    AfterIdle,
}

#[derive(Default)]
pub struct EventQueue {
    /// (time, 0 or 1 for ticks, seq or CPU for ticks, event).
    heap: BinaryHeap<Reverse<(Time, u8, u64, Event)>>,
    seq: u64,
    /// Events popped so far.
    pub processed: u64,
}

impl EventQueue {
    pub fn push(&mut self, at: Time, ev: Event) {
        self.seq += 1;
        let (class, order) = match ev {
            // A tick sorts before a period timer of the same CPU and instant.
            Event::Tick { cpu, .. } | Event::PeriodTimer { irq: Irq::Tick(cpu), .. } => (1, cpu as u64),
            _ => (0, self.seq),
        };
        self.heap.push(Reverse((at, class, order, ev)));
    }

    pub fn peek_time(&self) -> Option<Time> {
        self.heap.peek().map(|Reverse((t, _, _, _))| *t)
    }

    pub fn pop(&mut self) -> Option<(Time, Event)> {
        let Reverse((t, _, _, ev)) = self.heap.pop()?;
        self.processed += 1;
        Some((t, ev))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ties_resolve_fifo() {
        let mut q = EventQueue::default();
        q.push(10, Event::Wake(2));
        q.push(5, Event::Wake(9));
        q.push(10, Event::Wake(1));
        assert_eq!(q.pop(), Some((5, Event::Wake(9))));
        assert_eq!(q.pop(), Some((10, Event::Wake(2))));
        assert_eq!(q.pop(), Some((10, Event::Wake(1))));
        assert_eq!(q.pop(), None);
    }

    #[test]
    fn ticks_run_last_in_cpu_order() {
        let mut q = EventQueue::default();
        q.push(10, Event::Tick { cpu: 1, index: 2, gen: 0 });
        q.push(10, Event::Tick { cpu: 0, index: 2, gen: 0 });
        q.push(10, Event::Wake(4));
        assert_eq!(q.pop(), Some((10, Event::Wake(4))));
        assert_eq!(q.pop(), Some((10, Event::Tick { cpu: 0, index: 2, gen: 0 })));
        assert_eq!(q.pop(), Some((10, Event::Tick { cpu: 1, index: 2, gen: 0 })));
    }

    #[test]
    fn period_timer_in_a_tick_follows_that_tick() {
        let mut q = EventQueue::default();
        let timer = Event::PeriodTimer { tg: 1, irq: Irq::Tick(1) };
        q.push(10, timer);
        q.push(10, Event::Tick { cpu: 1, index: 2, gen: 0 });
        q.push(10, Event::Tick { cpu: 0, index: 2, gen: 0 });
        assert_eq!(q.pop(), Some((10, Event::Tick { cpu: 0, index: 2, gen: 0 })));
        assert_eq!(q.pop(), Some((10, Event::Tick { cpu: 1, index: 2, gen: 0 })));
        assert_eq!(q.pop(), Some((10, timer)));
        assert_eq!(q.pop(), None);
    }
}
