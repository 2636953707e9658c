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
//!
//! Two structures hold them, in the same order: `HeapQueue` (a heap and the
//! slots' tree) and `WheelQueue` (a timing wheel, `wheel`). `Sim` is generic
//! over `Queue`, both monomorphised, and `wheel_pays` picks one per run from
//! the machine: no dispatch per event.

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

/// A CPU's per-CPU timer: the slot it takes in a queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Slot {
    RunDone(usize),
    Tick(usize),
}

impl Slot {
    pub(crate) fn leaf(self) -> usize {
        match self {
            Slot::RunDone(cpu) => 2 * cpu,
            Slot::Tick(cpu) => 2 * cpu + 1,
        }
    }
}

/// The sort key of an event: the time in the high half, then the class bit
/// (clear: by `seq`; set: a tick, or a period timer in a tick's interrupt),
/// then the order: `seq`, or for class 1 the CPU above `GROUP_BITS` and
/// below it 0 for the tick or the group + 1 for a timer. So a tick goes
/// before the timers of its interrupt, and they go by group (as one heap of
/// `(time, class, order, event)` has it). Keys of distinct pending events
/// differ, so the order is total.
pub(crate) type Key = u128;

/// Bits below a class-1 key's CPU: 0 for a tick, a period timer's group + 1.
pub(crate) const GROUP_BITS: u32 = 24;

pub(crate) fn key(at: Time, class: u64, order: u64) -> Key {
    debug_assert!(order < 1 << 63);
    (at as u128) << 64 | (class << 63 | order) as u128
}

pub(crate) fn time_of(k: Key) -> Time {
    (k >> 64) as Time
}

/// A slot's key packed for the tree: the key's order moved up by `shift`
/// bits and the leaf below it. Keys of distinct events differ above the
/// leaf, so the leaf changes no comparison; it names the winner at the root
/// without a second word. `EMPTY` (nothing pending) is above every key.
pub(crate) type Packed = u128;
pub(crate) const EMPTY: Packed = Packed::MAX;

/// The pending `RunDone` and `Tick` of every CPU (`HeapQueue`), or those
/// armed beyond the wheel's reach (`WheelQueue`: a `RunDone` of a long run
/// phase, an idle CPU's far tick): a tournament tree over two leaves per
/// CPU, the earliest at its root. Arming a leaf again replaces its key in
/// place; setting it walks up only while the least key of a subtree changes.
pub(crate) struct Slots {
    /// `node[n + leaf]`: a leaf's packed key (`EMPTY` when nothing is
    /// pending); `node[i]` for `i` in `1..n`: the least of `node[2i]` and
    /// `node[2i + 1]`. `n`, the leaves, is a power of two, `1 << shift`.
    node: Vec<Packed>,
    shift: u32,
    pub(crate) events: Vec<Event>,
    /// Each leaf's key as last armed or cancelled, which the tree takes at
    /// `flush`.
    pub(crate) armed: Vec<Packed>,
    /// Leaves armed or cancelled since the last `flush` (repeats allowed).
    changed: Vec<usize>,
}

impl Slots {
    pub(crate) fn new(nr_cpus: usize) -> Slots {
        let n = (2 * nr_cpus.max(1)).next_power_of_two();
        Slots {
            node: vec![EMPTY; 2 * n],
            shift: n.trailing_zeros(),
            events: vec![Event::Sample(0); n],
            armed: vec![EMPTY; n],
            changed: Vec::new(),
        }
    }

    /// `k` packed with `leaf` (the order, a `seq` or a class-1 CPU and
    /// group, below `1 << (63 - shift)`).
    pub(crate) fn pack(&self, k: Key, leaf: usize) -> Packed {
        let lo = k as u64;
        let (class, order) = (lo >> 63, lo & !(1 << 63));
        debug_assert!(leaf < self.events.len() && order < 1 << (63 - self.shift));
        k >> 64 << 64 | (class << 63 | order << self.shift | leaf as u64) as u128
    }

    pub(crate) fn unpack(&self, p: Packed) -> Key {
        let lo = p as u64;
        let (class, order) = (lo >> 63, (lo & !(1 << 63)) >> self.shift);
        p >> 64 << 64 | (class << 63 | order) as u128
    }

    /// Arm `leaf` with `ev` at `k` (`EMPTY`: cancel it); the tree learns it at `flush`.
    pub(crate) fn arm(&mut self, leaf: usize, k: Packed, ev: Event) {
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
    pub(crate) fn flush(&mut self) {
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
    pub(crate) fn first(&self) -> Option<(usize, Packed)> {
        let k = self.node[1];
        (k != EMPTY).then_some(((k as usize) & (self.events.len() - 1), k))
    }
}

/// The pending events of a run, popped in the order above (the module's
/// doc). Every implementation pops the same events in the same order; only
/// the speed differs.
pub trait Queue {
    /// A queue for `nr_cpus` CPUs whose ticks are `tick_ns` apart.
    fn new(nr_cpus: usize, tick_ns: u64) -> Self;
    /// Schedule `ev` at `at`. A `RunDone` or `Tick` replaces its CPU's
    /// pending one.
    fn push(&mut self, at: Time, ev: Event);
    /// Drop a CPU's pending `RunDone` or `Tick`, if any.
    fn cancel(&mut self, slot: Slot);
    /// Pop the next event if it runs at or before `end`.
    fn pop_until(&mut self, end: Time) -> Option<(Time, Event)>;
    /// Events popped so far.
    fn processed(&self) -> u64;
}

/// The machine's ticks a second (`cpus x HZ`) from which the wheel is used.
/// A boundary measured, not derived: between ugedal-overhead (38 CPUs at
/// HZ=250, 9 500: the wheel +33 %) and chiluk-fibtest (88 at 250, 22 000:
/// -8 %). See `wheel_pays`.
pub const WHEEL_MIN_TICKS_PER_S: u64 = 16_000;

/// Whether a run on `nr_cpus` CPUs ticking every `tick_ns` takes the wheel.
/// The heap and the slots' tree cost a walk of their depth per event, which
/// grows with the CPUs (two slots each) and the sleeping threads; the
/// wheel's pop costs a scan of its first non-empty bucket, whatever the
/// depth. So the wheel pays when the tree is deep and its buckets (4 ticks
/// over 1024) hold about one entry; it loses when they hold many (events
/// microseconds apart: a linear scan per pop) or when most events lie
/// beyond its reach (a sparse load: the heap and the tree do the work, the
/// wheel adds its own). Those are properties of the load, not the machine;
/// the machine's tick rate is the proxy taken here, from measurement
/// (docs/engine.md, `queue10`: where it is wrong, and by how much).
pub fn wheel_pays(nr_cpus: usize, tick_ns: u64) -> bool {
    nr_cpus as u64 * 1_000_000_000 >= WHEEL_MIN_TICKS_PER_S * tick_ns.max(1)
}

/// Every event but the per-CPU slots' in a heap, the slots in their tree.
pub struct HeapQueue {
    /// (time, 0 or 1 for ticks, seq or CPU for ticks, event): every event
    /// but the per-CPU slots'.
    heap: BinaryHeap<Reverse<(Time, u8, u64, Event)>>,
    slots: Slots,
    seq: u64,
    /// Events popped so far.
    processed: u64,
}

impl HeapQueue {
    /// Whether the next event is the earliest slot's (else the heap's top),
    /// and when it runs (as of the last `flush`). Keys are unique but for a
    /// tick and a period timer in that tick's interrupt (same time, class 1,
    /// CPU): the tick (a slot) goes first.
    fn next(&self) -> Option<(bool, Time)> {
        let slot = self.slots.first().map(|(_, k)| k);
        // Packed with the highest leaf, so that a tick still goes first.
        let last_leaf = self.slots.events.len() - 1;
        let heap = self.heap.peek().map(|Reverse((t, c, o, _))| self.slots.pack(key(*t, *c as u64, *o), last_leaf));
        let is_slot = match (slot, heap) {
            (None, None) => return None,
            (Some(s), Some(h)) => s <= h,
            (s, _) => s.is_some(),
        };
        let k = if is_slot { slot } else { heap }.expect("the one chosen is pending");
        Some((is_slot, time_of(k)))
    }
}

impl Queue for HeapQueue {
    fn new(nr_cpus: usize, _tick_ns: u64) -> HeapQueue {
        HeapQueue { heap: BinaryHeap::new(), slots: Slots::new(nr_cpus), seq: 0, processed: 0 }
    }

    fn push(&mut self, at: Time, ev: Event) {
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
        let k = self.slots.pack(key(at, class as u64, order), leaf);
        self.slots.arm(leaf, k, ev);
    }

    fn cancel(&mut self, slot: Slot) {
        let leaf = slot.leaf();
        if self.slots.armed[leaf] != EMPTY {
            self.slots.arm(leaf, EMPTY, Event::Sample(0));
        }
    }

    /// `next` and the pop in one flush and one comparison of the slots with
    /// the heap.
    fn pop_until(&mut self, end: Time) -> Option<(Time, Event)> {
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

    fn processed(&self) -> u64 {
        self.processed
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::wheel::WheelQueue;

    fn pop<Q: Queue>(q: &mut Q) -> Option<(Time, Event)> {
        q.pop_until(Time::MAX)
    }

    /// Runs a test on each structure.
    macro_rules! on_both {
        ($name:ident, $body:ident) => {
            #[test]
            fn $name() {
                $body::<HeapQueue>();
                $body::<WheelQueue>();
            }
        };
    }

    on_both!(ties_resolve_fifo, ties_resolve_fifo_in);
    fn ties_resolve_fifo_in<Q: Queue>() {
        let mut q = Q::new(4, 1_000_000);
        q.push(10, Event::Wake(2));
        q.push(5, Event::Wake(9));
        q.push(10, Event::Wake(1));
        assert_eq!(pop(&mut q), Some((5, Event::Wake(9))));
        assert_eq!(pop(&mut q), Some((10, Event::Wake(2))));
        assert_eq!(pop(&mut q), Some((10, Event::Wake(1))));
        assert_eq!(pop(&mut q), None);
    }

    on_both!(ticks_run_last_in_cpu_order, ticks_run_last_in_cpu_order_in);
    fn ticks_run_last_in_cpu_order_in<Q: Queue>() {
        let mut q = Q::new(4, 1_000_000);
        q.push(10, Event::Tick { cpu: 1, index: 2, gen: 0 });
        q.push(10, Event::Tick { cpu: 0, index: 2, gen: 0 });
        q.push(10, Event::Wake(4));
        assert_eq!(pop(&mut q), Some((10, Event::Wake(4))));
        assert_eq!(pop(&mut q), Some((10, Event::Tick { cpu: 0, index: 2, gen: 0 })));
        assert_eq!(pop(&mut q), Some((10, Event::Tick { cpu: 1, index: 2, gen: 0 })));
    }

    on_both!(period_timer_in_a_tick_follows_that_tick, period_timer_in_a_tick_follows_that_tick_in);
    fn period_timer_in_a_tick_follows_that_tick_in<Q: Queue>() {
        let mut q = Q::new(4, 1_000_000);
        let timer = Event::PeriodTimer { tg: 1, irq: Irq::Tick(1) };
        q.push(10, timer);
        q.push(10, Event::Tick { cpu: 1, index: 2, gen: 0 });
        q.push(10, Event::Tick { cpu: 0, index: 2, gen: 0 });
        assert_eq!(pop(&mut q), Some((10, Event::Tick { cpu: 0, index: 2, gen: 0 })));
        assert_eq!(pop(&mut q), Some((10, Event::Tick { cpu: 1, index: 2, gen: 0 })));
        assert_eq!(pop(&mut q), Some((10, timer)));
        assert_eq!(pop(&mut q), None);
    }

    on_both!(a_rearmed_slot_replaces_the_pending_one_and_a_cancelled_one_is_gone, a_rearmed_slot_replaces_the_pending_one_and_a_cancelled_one_is_gone_in);
    fn a_rearmed_slot_replaces_the_pending_one_and_a_cancelled_one_is_gone_in<Q: Queue>() {
        let mut q = Q::new(2, 1_000_000);
        q.push(20, Event::RunDone { cpu: 0, gen: 1 });
        q.push(30, Event::Tick { cpu: 1, index: 3, gen: 1 });
        q.push(15, Event::RunDone { cpu: 0, gen: 2 });
        q.push(25, Event::Wake(7));
        q.cancel(Slot::Tick(1));
        q.cancel(Slot::Tick(0));
        assert_eq!(q.pop_until(14), None);
        assert_eq!(pop(&mut q), Some((15, Event::RunDone { cpu: 0, gen: 2 })));
        assert_eq!(pop(&mut q), Some((25, Event::Wake(7))));
        assert_eq!(pop(&mut q), None);
        assert_eq!(q.processed(), 2);
    }

    on_both!(slots_pop_in_the_order_of_one_heap_with_stale_entries_skipped, within_a_bucket);
    /// Random pushes, re-arms and cancels: each queue pops what one heap of
    /// every live event (stale ones skipped at pop, as the queue did before
    /// the slots) pops, in the same order.
    fn within_a_bucket<Q: Queue>() {
        // Within a bucket of the wheel.
        pop_in_the_order_of_one_heap::<Q>(1_000_000, &[1], 10);
    }

    on_both!(the_wheel_pops_in_the_order_of_one_heap_near_and_far, near_and_far);
    /// The same across the wheel's buckets, its wrap, the far heap and the
    /// slots' tree, with slots moving between the wheel and the tree: each
    /// push 0-40 ns, 0-40 us, 0-40 ms or 0-400 ms ahead, at HZ=1000 (the
    /// wheel 4.2 ms ahead) and HZ=100 (65.5 us buckets, 67 ms ahead), ticks
    /// on grids that tie them with one another and with timers.
    fn near_and_far<Q: Queue>() {
        let scales = [1, 1_000, 1_000_000, 10_000_000];
        pop_in_the_order_of_one_heap::<Q>(1_000_000, &scales, 10_000);
        pop_in_the_order_of_one_heap::<Q>(10_000_000, &scales, 10_000);
        pop_in_the_order_of_one_heap::<Q>(10_000_000, &scales, 10_000_000);
        pop_in_the_order_of_one_heap::<Q>(4_000_000, &[1_000_000], 4_000_000);
    }

    /// The wheel from a tick rate of `WHEEL_MIN_TICKS_PER_S` (`cpus x HZ`).
    #[test]
    fn the_wheel_is_taken_from_its_tick_rate() {
        assert!(!wheel_pays(4, 4_000_000)); // 1000 ticks a second
        assert!(!wheel_pays(8, 1_000_000)); // 8000
        assert!(!wheel_pays(38, 4_000_000)); // 9500
        assert!(!wheel_pays(15, 1_000_000)); // 15 000
        assert!(wheel_pays(16, 1_000_000)); // 16 000
        assert!(wheel_pays(64, 4_000_000)); // 16 000
        assert!(wheel_pays(88, 4_000_000));
        assert!(wheel_pays(64, 1_000_000));
    }

    /// Random pushes, re-arms and cancels on a queue whose ticks are
    /// `tick_ns` apart, each `rand(40) * scale` ahead (a scale drawn from
    /// `scales` each time), ticks and their timers on a grid of `grid`.
    fn pop_in_the_order_of_one_heap<Q: Queue>(tick_ns: u64, scales: &[u64], grid: u64) {
        let nr_cpus = 5;
        let mut q = Q::new(nr_cpus, tick_ns);
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
            let scale = scales[rand(scales.len() as u64) as usize];
            let at = now + rand(40) * scale;
            seq += 1;
            match rand(7) {
                0 => {
                    run_gen[cpu] += 1;
                    let ev = Event::RunDone { cpu, gen: run_gen[cpu] };
                    q.push(at, ev);
                    reference.push(Reverse((at, 0, seq, ev)));
                }
                1 => {
                    tick_gen[cpu] += 1;
                    // Ticks on a grid, so they tie with one another and with timers.
                    let at = at / grid * grid;
                    let ev = Event::Tick { cpu, index: at / grid, gen: tick_gen[cpu] };
                    q.push(at, ev);
                    reference.push(Reverse((at, 1, cpu as u64, ev)));
                }
                2 => {
                    let at = at / grid * grid;
                    let ev = Event::PeriodTimer { tg: rand(3) as usize, irq: Irq::Tick(cpu) };
                    q.push(at, ev);
                    reference.push(Reverse((at, 1, cpu as u64, ev)));
                }
                3 => {
                    run_gen[cpu] += 1;
                    seq -= 1;
                    q.cancel(Slot::RunDone(cpu));
                }
                4 => {
                    tick_gen[cpu] += 1;
                    seq -= 1;
                    q.cancel(Slot::Tick(cpu));
                }
                _ => {
                    let ev = Event::Wake(rand(100) as usize);
                    q.push(at, ev);
                    reference.push(Reverse((at, 0, seq, ev)));
                }
            }
            if rand(2) == 0 {
                // Now and then only up to a time, so that the queue looks
                // ahead without popping (as a run's end or a stop does).
                let end = if rand(4) == 0 { now + rand(40) * scale } else { Time::MAX };
                let want = loop {
                    match reference.peek() {
                        Some(Reverse((_, _, _, Event::RunDone { cpu, gen }))) if *gen != run_gen[*cpu] => {}
                        Some(Reverse((_, _, _, Event::Tick { cpu, gen, .. }))) if *gen != tick_gen[*cpu] => {}
                        Some(Reverse((t, _, _, ev))) => break (*t <= end).then_some((*t, *ev)),
                        None => break None,
                    }
                    reference.pop();
                };
                if want.is_some() {
                    reference.pop();
                }
                assert_eq!(q.pop_until(end), want);
                if let Some((t, _)) = want {
                    now = t;
                    popped += 1;
                }
            }
        }
        assert!(popped > 5_000, "the queue was exercised: {popped} pops");
        assert_eq!(q.processed(), popped);
    }
}
