//! The event queue: ordered by `(time_ns, seq)`, so events at the same instant
//! run in the order they were scheduled (as hrtimers with equal expiry do).
//!
//! Ticks are the exception: at an instant they run after everything else, in
//! CPU order. A tick timer is re-armed every tick, so among timers of equal
//! expiry it is the one inserted last; and the order must not depend on when
//! the simulator chose to arm it (it skips ticks that cannot matter). A period
//! timer that runs in a tick's interrupt comes right after that tick.
//!
//! A CPU has at most one pending `RunDone` and one pending `Tick`: arming
//! either again replaces the one before (as `hrtimer_start` on an armed
//! hrtimer moves it). They are kept in per-CPU slots (`Slots`, a tournament tree)
//! beside the heap of everything else, so a replaced one is gone at once
//! instead of being popped and skipped later. The two are merged at pop by the
//! same total order, so the order of the events is the one a single heap gives.
//!
//! A slot armed (or cancelled) several times during one event takes its key,
//! `seq` included, at each arming, but the tree learns only the last, at the
//! next peek or pop: nothing is popped during an event, so the order is the
//! one of walking the tree at every arming.

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
    /// The running thread on a CPU completes its run phase (armed at `gen`).
    RunDone { cpu: usize, gen: u64 },
    /// Scheduler tick `index` on a CPU (armed at `gen`).
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

/// A CPU's per-CPU timer: the slot it takes in `Slots`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Slot {
    RunDone(usize),
    Tick(usize),
}

impl Slot {
    fn leaf(self) -> usize {
        match self {
            Slot::RunDone(cpu) => 2 * cpu,
            Slot::Tick(cpu) => 2 * cpu + 1,
        }
    }
}

/// The sort key of an event: (time, class and order). Class 0 (by `seq`) in
/// the top bit clear, class 1 (ticks, by CPU) set: the order of
/// `(time, class, order)`.
type Key = (Time, u64);

fn key(at: Time, class: u8, order: u64) -> Key {
    (at, (class as u64) << 63 | order)
}

/// A slot's key packed in one word for the tree: the time in the high half,
/// then the class bit, the order, and the leaf in the low `shift` bits. Keys
/// of distinct events differ in `(time, class, order)`, so the leaf below
/// them changes no comparison between them; it names the winner at the root
/// without a second word. `EMPTY` (nothing pending) is above every key.
type Packed = u128;
const EMPTY: Packed = Packed::MAX;

/// The pending `RunDone` and `Tick` of every CPU: a tournament tree over two
/// leaves per CPU, the earliest at its root. Setting a leaf walks up only
/// while the least key of a subtree changes.
struct Slots {
    /// `node[n + leaf]`: a leaf's packed key (`EMPTY` when nothing is
    /// pending); `node[i]` for `i` in `1..n`: the least of `node[2i]` and
    /// `node[2i + 1]`. `n`, the leaves, is a power of two, `1 << shift`.
    node: Vec<Packed>,
    shift: u32,
    events: Vec<Event>,
    /// Each leaf's key as last armed or cancelled, which the tree takes at
    /// `flush`.
    armed: Vec<Packed>,
    /// Leaves armed or cancelled since the last `flush` (repeats allowed).
    changed: Vec<usize>,
}

impl Slots {
    fn new(nr_cpus: usize) -> Slots {
        let n = (2 * nr_cpus.max(1)).next_power_of_two();
        Slots {
            node: vec![EMPTY; 2 * n],
            shift: n.trailing_zeros(),
            events: vec![Event::Sample(0); n],
            armed: vec![EMPTY; n],
            changed: Vec::new(),
        }
    }

    /// `key` packed with `leaf` (`leaf` below `1 << shift`; the order, a
    /// `seq` or a CPU, below `1 << (63 - shift)`: 2^49 pushes at 8192 CPUs).
    fn pack(&self, (at, class_order): Key, leaf: usize) -> Packed {
        let (class, order) = (class_order >> 63, class_order & !(1 << 63));
        debug_assert!(leaf < self.events.len() && order < 1 << (63 - self.shift));
        (at as u128) << 64 | (class << 63 | order << self.shift | leaf as u64) as u128
    }

    /// Arm `leaf` with `ev` at `k` (`EMPTY`: cancel it); the tree learns it at `flush`.
    fn arm(&mut self, leaf: usize, k: Packed, ev: Event) {
        debug_assert!(leaf < self.armed.len(), "flush masks the leaf");
        self.events[leaf] = ev;
        self.armed[leaf] = k;
        self.changed.push(leaf);
    }

    /// Bring the tree up to date with the leaves armed since the last flush:
    /// one walk per leaf, whatever the number of times it was armed.
    ///
    /// Every index is masked by the length less one (a power of two, not
    /// zero): the compiler proves it in bounds, so the walk has no checks.
    fn flush(&mut self) {
        let (node, armed) = (&mut self.node[..], &self.armed[..]);
        if node.is_empty() || armed.is_empty() {
            return;
        }
        let (n, node_mask, leaf_mask) = (armed.len(), node.len() - 1, armed.len() - 1);
        while let Some(leaf) = self.changed.pop() {
            let k = armed[leaf & leaf_mask];
            let mut i = (n + leaf) & node_mask;
            if node[i] == k {
                continue;
            }
            node[i] = k;
            while i > 1 {
                let least = node[i & node_mask].min(node[(i ^ 1) & node_mask]);
                i = (i / 2) & node_mask;
                if node[i] == least {
                    // This subtree's least is unchanged, and so is every one above.
                    break;
                }
                node[i] = least;
            }
        }
    }

    /// The earliest pending leaf and its packed key, if any (as of the last `flush`).
    fn first(&self) -> Option<(usize, Packed)> {
        let k = self.node[1];
        (k != EMPTY).then_some(((k as usize) & (self.events.len() - 1), k))
    }
}

pub struct EventQueue {
    /// (time, 0 or 1 for ticks, seq or CPU for ticks, event): every event
    /// but the per-CPU slots'.
    heap: BinaryHeap<Reverse<(Time, u8, u64, Event)>>,
    slots: Slots,
    seq: u64,
    /// Events popped so far.
    pub processed: u64,
}

impl EventQueue {
    pub fn new(nr_cpus: usize) -> EventQueue {
        EventQueue { heap: BinaryHeap::new(), slots: Slots::new(nr_cpus), seq: 0, processed: 0 }
    }

    /// Schedule `ev` at `at`. A `RunDone` or `Tick` replaces its CPU's
    /// pending one.
    pub fn push(&mut self, at: Time, ev: Event) {
        self.seq += 1;
        let (class, order) = match ev {
            // A tick sorts before a period timer of the same CPU and instant.
            Event::Tick { cpu, .. } | Event::PeriodTimer { irq: Irq::Tick(cpu), .. } => (1, cpu as u64),
            _ => (0, self.seq),
        };
        let leaf = match ev {
            Event::RunDone { cpu, .. } => Slot::RunDone(cpu).leaf(),
            Event::Tick { cpu, .. } => Slot::Tick(cpu).leaf(),
            _ => return self.heap.push(Reverse((at, class, order, ev))),
        };
        let k = self.slots.pack(key(at, class, order), leaf);
        self.slots.arm(leaf, k, ev);
    }

    /// Drop a CPU's pending `RunDone` or `Tick`, if any.
    pub fn cancel(&mut self, slot: Slot) {
        let leaf = slot.leaf();
        if self.slots.armed[leaf] != EMPTY {
            self.slots.arm(leaf, EMPTY, Event::Sample(0));
        }
    }

    /// Whether the next event is the earliest slot's (else the heap's top),
    /// and when it runs (as of the last `flush`). Keys are unique but for a
    /// tick and a period timer in that tick's interrupt (same time, class 1,
    /// CPU): the tick (a slot) goes first.
    fn next(&self) -> Option<(bool, Time)> {
        let slot = self.slots.first().map(|(_, k)| k);
        // Packed with the highest leaf, so that a tick still goes first.
        let last_leaf = self.slots.events.len() - 1;
        let heap = self.heap.peek().map(|Reverse((t, c, o, _))| self.slots.pack(key(*t, *c, *o), last_leaf));
        let is_slot = match (slot, heap) {
            (None, None) => return None,
            (Some(s), Some(h)) => s <= h,
            (s, _) => s.is_some(),
        };
        let k = if is_slot { slot } else { heap }.expect("the one chosen is pending");
        Some((is_slot, (k >> 64) as Time))
    }

    #[cfg(test)]
    pub fn peek_time(&mut self) -> Option<Time> {
        self.slots.flush();
        self.next().map(|(_, t)| t)
    }

    #[cfg(test)]
    pub fn pop(&mut self) -> Option<(Time, Event)> {
        self.pop_until(Time::MAX)
    }

    /// Pop the next event if it runs at or before `end`: `peek_time` and
    /// `pop` in one flush and one comparison of the slots with the heap.
    pub fn pop_until(&mut self, end: Time) -> Option<(Time, Event)> {
        self.slots.flush();
        let (is_slot, t) = self.next().filter(|&(_, t)| t <= end)?;
        let ev = if is_slot {
            let (leaf, _) = self.slots.first().expect("a slot is pending");
            let ev = self.slots.events[leaf];
            // Emptied at the next flush, unless its dispatch re-arms it
            // first (a `Tick` its tick, a `RunDone` the next thread's): one
            // walk up the tree, not two.
            self.slots.arm(leaf, EMPTY, Event::Sample(0));
            ev
        } else {
            self.heap.pop().expect("the heap is not empty").0 .3
        };
        self.processed += 1;
        Some((t, ev))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ties_resolve_fifo() {
        let mut q = EventQueue::new(4);
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
        let mut q = EventQueue::new(4);
        q.push(10, Event::Tick { cpu: 1, index: 2, gen: 0 });
        q.push(10, Event::Tick { cpu: 0, index: 2, gen: 0 });
        q.push(10, Event::Wake(4));
        assert_eq!(q.pop(), Some((10, Event::Wake(4))));
        assert_eq!(q.pop(), Some((10, Event::Tick { cpu: 0, index: 2, gen: 0 })));
        assert_eq!(q.pop(), Some((10, Event::Tick { cpu: 1, index: 2, gen: 0 })));
    }

    #[test]
    fn period_timer_in_a_tick_follows_that_tick() {
        let mut q = EventQueue::new(4);
        let timer = Event::PeriodTimer { tg: 1, irq: Irq::Tick(1) };
        q.push(10, timer);
        q.push(10, Event::Tick { cpu: 1, index: 2, gen: 0 });
        q.push(10, Event::Tick { cpu: 0, index: 2, gen: 0 });
        assert_eq!(q.pop(), Some((10, Event::Tick { cpu: 0, index: 2, gen: 0 })));
        assert_eq!(q.pop(), Some((10, Event::Tick { cpu: 1, index: 2, gen: 0 })));
        assert_eq!(q.pop(), Some((10, timer)));
        assert_eq!(q.pop(), None);
    }

    #[test]
    fn a_rearmed_slot_replaces_the_pending_one_and_a_cancelled_one_is_gone() {
        let mut q = EventQueue::new(2);
        q.push(20, Event::RunDone { cpu: 0, gen: 1 });
        q.push(30, Event::Tick { cpu: 1, index: 3, gen: 1 });
        q.push(15, Event::RunDone { cpu: 0, gen: 2 });
        q.push(25, Event::Wake(7));
        q.cancel(Slot::Tick(1));
        q.cancel(Slot::Tick(0));
        assert_eq!(q.peek_time(), Some(15));
        assert_eq!(q.pop(), Some((15, Event::RunDone { cpu: 0, gen: 2 })));
        assert_eq!(q.pop(), Some((25, Event::Wake(7))));
        assert_eq!(q.pop(), None);
        assert_eq!(q.processed, 2);
    }

    /// Random pushes, re-arms and cancels: the queue pops what one heap of
    /// every live event (stale ones skipped at pop, as the queue did before
    /// the slots) pops, in the same order.
    #[test]
    fn slots_pop_in_the_order_of_one_heap_with_stale_entries_skipped() {
        let nr_cpus = 5;
        let mut q = EventQueue::new(nr_cpus);
        let mut reference: BinaryHeap<Reverse<(Time, u8, u64, Event)>> = BinaryHeap::new();
        let (mut seq, mut run_gen, mut tick_gen) = (0u64, vec![0u64; nr_cpus], vec![0u64; nr_cpus]);
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut rand = |m: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % m
        };
        let (mut now, mut popped) = (0, 0);
        for _ in 0..20_000 {
            let cpu = rand(nr_cpus as u64) as usize;
            let at = now + rand(40);
            seq += 1;
            match rand(6) {
                0 => {
                    run_gen[cpu] += 1;
                    let ev = Event::RunDone { cpu, gen: run_gen[cpu] };
                    q.push(at, ev);
                    reference.push(Reverse((at, 0, seq, ev)));
                }
                1 => {
                    tick_gen[cpu] += 1;
                    // Ticks on a grid of 10, so they tie with one another and with timers.
                    let at = at / 10 * 10;
                    let ev = Event::Tick { cpu, index: at / 10, gen: tick_gen[cpu] };
                    q.push(at, ev);
                    reference.push(Reverse((at, 1, cpu as u64, ev)));
                }
                2 => {
                    let at = at / 10 * 10;
                    let ev = Event::PeriodTimer { tg: rand(3) as usize, irq: Irq::Tick(cpu) };
                    q.push(at, ev);
                    reference.push(Reverse((at, 1, cpu as u64, ev)));
                }
                3 => {
                    run_gen[cpu] += 1;
                    seq -= 1;
                    q.cancel(Slot::RunDone(cpu));
                }
                _ => {
                    let ev = Event::Wake(rand(100) as usize);
                    q.push(at, ev);
                    reference.push(Reverse((at, 0, seq, ev)));
                }
            }
            if rand(2) == 0 {
                let want = loop {
                    match reference.pop() {
                        Some(Reverse((_, _, _, Event::RunDone { cpu, gen }))) if gen != run_gen[cpu] => continue,
                        Some(Reverse((_, _, _, Event::Tick { cpu, gen, .. }))) if gen != tick_gen[cpu] => continue,
                        Some(Reverse((t, _, _, ev))) => break Some((t, ev)),
                        None => break None,
                    }
                };
                assert_eq!(q.pop(), want);
                if let Some((t, _)) = want {
                    now = t;
                    popped += 1;
                }
            }
        }
        assert!(popped > 5_000, "the queue was exercised: {popped} pops");
        assert_eq!(q.processed, popped);
    }
}
