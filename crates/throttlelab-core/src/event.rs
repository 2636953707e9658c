//! The event queue: ordered by `(time_ns, seq)`, so events at the same instant
//! run in the order they were scheduled (as hrtimers with equal expiry do).

use std::cmp::Reverse;
use std::collections::BinaryHeap;

pub type Time = u64;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Event {
    /// A thread becomes runnable for the first time.
    Start(usize),
    /// A sleeping thread's timer expires.
    Wake(usize),
    /// The running thread on a CPU completes its run phase (valid for `gen`).
    RunDone { cpu: usize, gen: u64 },
    /// Scheduler tick `index` on a CPU (valid for `gen`).
    Tick { cpu: usize, index: u64, gen: u64 },
    /// `sched_cfs_period_timer` of a group.
    PeriodTimer(usize),
    /// `sched_cfs_slack_timer` of a group.
    SlackTimer(usize),
    /// The i-th `[[write]]`, occurrence n.
    Write { index: usize, n: u64 },
    /// A request arrives at a service.
    Arrival(usize),
}

#[derive(Default)]
pub struct EventQueue {
    heap: BinaryHeap<Reverse<(Time, u64, Event)>>,
    seq: u64,
    /// Events popped so far.
    pub processed: u64,
}

impl EventQueue {
    pub fn push(&mut self, at: Time, ev: Event) {
        self.seq += 1;
        self.heap.push(Reverse((at, self.seq, ev)));
    }

    pub fn peek_time(&self) -> Option<Time> {
        self.heap.peek().map(|Reverse((t, _, _))| *t)
    }

    pub fn pop(&mut self) -> Option<(Time, Event)> {
        let Reverse((t, _, ev)) = self.heap.pop()?;
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
}
