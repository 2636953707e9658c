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

/// A CPU's per-CPU timer: the slot it takes in `EventQueue`.
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

/// The sort key of an event: the time in the high half, then the class bit
/// (clear: by `seq`; set: a tick, or a period timer in a tick's interrupt),
/// then the order: `seq`, or for class 1 the CPU above `GROUP_BITS` and
/// below it 0 for the tick or the group + 1 for a timer. So a tick goes
/// before the timers of its interrupt, and they go by group (as one heap of
/// `(time, class, order, event)` has it). Keys of distinct pending events
/// differ, so the order is total.
type Key = u128;

/// Bits below a class-1 key's CPU: 0 for a tick, a period timer's group + 1.
const GROUP_BITS: u32 = 24;

fn key(at: Time, class: u64, order: u64) -> Key {
    debug_assert!(order < 1 << 63);
    (at as u128) << 64 | (class << 63 | order) as u128
}

fn time_of(k: Key) -> Time {
    (k >> 64) as Time
}

/// A slot's key packed for the tree: the key's order moved up by `shift`
/// bits and the leaf below it. Keys of distinct events differ above the
/// leaf, so the leaf changes no comparison; it names the winner at the root
/// without a second word. `EMPTY` (nothing pending) is above every key.
type Packed = u128;
const EMPTY: Packed = Packed::MAX;

/// The slots armed beyond the wheel's reach (a `RunDone` of a long run
/// phase, an idle CPU's far tick): a tournament tree over two leaves per
/// CPU, the earliest at its root. Arming a leaf again replaces its key in
/// place; setting it walks up only while the least key of a subtree changes.
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

    /// `k` packed with `leaf` (the order, a `seq` or a class-1 CPU and
    /// group, below `1 << (63 - shift)`).
    fn pack(&self, k: Key, leaf: usize) -> Packed {
        let lo = k as u64;
        let (class, order) = (lo >> 63, lo & !(1 << 63));
        debug_assert!(leaf < self.events.len() && order < 1 << (63 - self.shift));
        k >> 64 << 64 | (class << 63 | order << self.shift | leaf as u64) as u128
    }

    fn unpack(&self, p: Packed) -> Key {
        let lo = p as u64;
        let (class, order) = (lo >> 63, (lo & !(1 << 63)) >> self.shift);
        p >> 64 << 64 | (class << 63 | order) as u128
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

/// The wheel's buckets: 1024, a bit each in 16 words, and a bit per word.
const BUCKETS: usize = 1024;
const WORDS: usize = BUCKETS / 64;

/// The wheel reaches at least this many ticks ahead of its cursor: a busy
/// CPU's next tick is always in it.
const REACH_TICKS: u64 = 4;

/// A bucket's width, `1 << shift` ns: the least for which the wheel reaches
/// `REACH_TICKS` ticks (4.1 us at HZ=1000, 16.4 us at HZ=250, 65.5 us at
/// HZ=100). Only the speed depends on it, not the order.
fn bucket_shift(tick_ns: u64) -> u32 {
    let width = (REACH_TICKS * tick_ns.max(1)).div_ceil(BUCKETS as u64);
    width.next_power_of_two().trailing_zeros()
}

/// Not a slot's entry.
const NOT_SLOT: u32 = u32::MAX;

/// A pending event in the wheel, or a slot's arming (`slot` its leaf; stale
/// once the leaf is armed again or cancelled: its `gen` is no longer the
/// leaf's).
#[derive(Debug, Clone, Copy)]
struct Entry {
    key: Key,
    ev: Event,
    slot: u32,
    gen: u32,
}

/// The index of the least live entry of `bucket`, whose stale ones are
/// dropped: scanned from the last, so that a swap brings in one already seen.
fn least_live(bucket: &mut Vec<Entry>, gen: &[u32]) -> Option<usize> {
    let mut least: Option<usize> = None;
    for j in (0..bucket.len()).rev() {
        let e = &bucket[j];
        if e.slot != NOT_SLOT && gen[e.slot as usize] != e.gen {
            bucket.swap_remove(j);
            if least == Some(bucket.len()) {
                least = Some(j);
            }
        } else if least.map_or(true, |l| e.key < bucket[l].key) {
            least = Some(j);
        }
    }
    least
}

type Buckets = Box<[Vec<Entry>]>;

thread_local! {
    /// Buckets of queues dropped on this thread, emptied, their `Vec`s'
    /// storage kept: advise and reproduce run many short simulations in
    /// one process, and each would allocate a bucket's storage anew.
    static SPARE_BUCKETS: std::cell::RefCell<Vec<Buckets>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Every pending event: the near ones in a timing wheel, the far ones in a
/// heap (`far`) or, for a CPU's `RunDone` and `Tick`, a tree (`slots`).
///
/// Bucket `b` of the wheel holds the entries whose time is in
/// `[b, b + 1) << shift`, unsorted, at `b % BUCKETS`. The wheel holds
/// buckets `cursor..cursor + BUCKETS`; an event beyond them is pushed into
/// `far` or `slots` and stays there until it is popped (no cascading: each
/// pop compares the wheel's least with the heap's top and the tree's root,
/// and the keys give the order, not the structure). The cursor is the
/// bucket of the last event popped, or the wheel's first bucket that held an
/// entry at the last pop if later; an event pushed before it goes into it
/// (it is the least there).
///
/// A slot armed within reach pushes an entry with the leaf's next `gen`;
/// the entry of an earlier arming, or of one cancelled, stays in its bucket
/// and is dropped when the bucket is scanned. A slot armed beyond reach is
/// set in the tree, which replaces its key in place (so far stale entries do
/// not pile up).
pub struct EventQueue {
    buckets: Buckets,
    /// A bit per bucket that may hold entries, and a bit per non-zero word.
    nonempty: [u64; WORDS],
    summary: u64,
    shift: u32,
    cursor: u64,
    far: BinaryHeap<Reverse<(Key, Event)>>,
    slots: Slots,
    /// Per slot leaf: its armings and cancels so far (wrapping); only a
    /// wheel entry of the last arming, if nothing cancelled it, is live.
    gen: Vec<u32>,
    seq: u64,
    /// Events popped so far.
    pub processed: u64,
}

impl Drop for EventQueue {
    fn drop(&mut self) {
        let mut buckets = std::mem::take(&mut self.buckets);
        buckets.iter_mut().for_each(Vec::clear);
        SPARE_BUCKETS.with(|s| s.borrow_mut().push(buckets));
    }
}

/// Where the next event comes from.
enum Source {
    /// The wheel's bucket and the entry's index in it.
    Wheel(usize, usize),
    Far,
    /// The tree's leaf.
    Slot(usize),
}

impl EventQueue {
    /// A queue for `nr_cpus` CPUs whose ticks are `tick_ns` apart.
    pub fn new(nr_cpus: usize, tick_ns: u64) -> EventQueue {
        let buckets = SPARE_BUCKETS
            .with(|s| s.borrow_mut().pop())
            .unwrap_or_else(|| (0..BUCKETS).map(|_| Vec::new()).collect());
        EventQueue {
            buckets,
            nonempty: [0; WORDS],
            summary: 0,
            shift: bucket_shift(tick_ns),
            cursor: 0,
            far: BinaryHeap::new(),
            slots: Slots::new(nr_cpus),
            gen: vec![0; 2 * nr_cpus],
            seq: 0,
            processed: 0,
        }
    }

    /// Schedule `ev` at `at`. A `RunDone` or `Tick` replaces its CPU's
    /// pending one.
    pub fn push(&mut self, at: Time, ev: Event) {
        self.seq += 1;
        let k = match ev {
            Event::Tick { cpu, .. } => key(at, 1, (cpu as u64) << GROUP_BITS),
            Event::PeriodTimer { tg, irq: Irq::Tick(cpu) } => {
                debug_assert!((tg as u64) < (1 << GROUP_BITS) - 1);
                key(at, 1, (cpu as u64) << GROUP_BITS | (tg as u64 + 1))
            }
            _ => key(at, 0, self.seq),
        };
        let leaf = match ev {
            Event::RunDone { cpu, .. } => Slot::RunDone(cpu).leaf(),
            Event::Tick { cpu, .. } => Slot::Tick(cpu).leaf(),
            _ => {
                return match self.bucket(at) {
                    Some(i) => self.insert(i, Entry { key: k, ev, slot: NOT_SLOT, gen: 0 }),
                    None => self.far.push(Reverse((k, ev))),
                }
            }
        };
        self.gen[leaf] = self.gen[leaf].wrapping_add(1);
        match self.bucket(at) {
            Some(i) => {
                if self.slots.armed[leaf] != EMPTY {
                    self.slots.arm(leaf, EMPTY, Event::Sample(0));
                }
                self.insert(i, Entry { key: k, ev, slot: leaf as u32, gen: self.gen[leaf] });
            }
            None => {
                let p = self.slots.pack(k, leaf);
                self.slots.arm(leaf, p, ev);
            }
        }
    }

    /// Drop a CPU's pending `RunDone` or `Tick`, if any.
    pub fn cancel(&mut self, slot: Slot) {
        let leaf = slot.leaf();
        self.gen[leaf] = self.gen[leaf].wrapping_add(1);
        if self.slots.armed[leaf] != EMPTY {
            self.slots.arm(leaf, EMPTY, Event::Sample(0));
        }
    }

    /// The wheel's bucket for an event at `at`, if within its reach.
    fn bucket(&self, at: Time) -> Option<usize> {
        let b = (at >> self.shift).max(self.cursor);
        (b - self.cursor < BUCKETS as u64).then_some(b as usize % BUCKETS)
    }

    fn insert(&mut self, i: usize, e: Entry) {
        self.buckets[i].push(e);
        self.nonempty[i / 64] |= 1 << (i % 64);
        self.summary |= 1 << (i / 64);
    }

    fn clear_bit(&mut self, i: usize) {
        self.nonempty[i / 64] &= !(1 << (i % 64));
        if self.nonempty[i / 64] == 0 {
            self.summary &= !(1 << (i / 64));
        }
    }

    /// The wheel's first bucket at or after the cursor's that may hold
    /// entries (in the order of the buckets from the cursor's, around).
    fn next_nonempty(&self) -> Option<usize> {
        let from = self.cursor as usize % BUCKETS;
        let (w0, off) = (from / 64, from % 64);
        let at = |w: usize, word: u64| w * 64 + word.trailing_zeros() as usize;
        let word = self.nonempty[w0] & (!0 << off);
        if word != 0 {
            return Some(at(w0, word));
        }
        // The words after `w0`, then around from the first (`w0`'s own bits
        // before `off` last: the buckets furthest ahead).
        let after = self.summary & (!1 << w0) & ((1 << WORDS) - 1);
        let w = if after != 0 { after } else { self.summary }.trailing_zeros() as usize;
        (w < WORDS).then(|| at(w, self.nonempty[w]))
    }

    /// The bucket of the wheel's least live entry and its index there,
    /// stale entries before it dropped; the cursor moves to its bucket.
    fn wheel_first(&mut self) -> Option<(usize, usize)> {
        loop {
            let i = self.next_nonempty()?;
            let from = self.cursor as usize % BUCKETS;
            self.cursor += ((i + BUCKETS - from) % BUCKETS) as u64;
            if let Some(j) = least_live(&mut self.buckets[i], &self.gen) {
                return Some((i, j));
            }
            self.clear_bit(i);
        }
    }

    /// The next event's source and key: the least of the wheel's, the far
    /// heap's and the tree's.
    fn next(&mut self) -> Option<(Source, Key)> {
        self.slots.flush();
        let mut best = self.wheel_first().map(|(i, j)| (Source::Wheel(i, j), self.buckets[i][j].key));
        if let Some(&Reverse((k, _))) = self.far.peek() {
            if best.as_ref().map_or(true, |&(_, b)| k < b) {
                best = Some((Source::Far, k));
            }
        }
        if let Some((leaf, p)) = self.slots.first() {
            let k = self.slots.unpack(p);
            if best.as_ref().map_or(true, |&(_, b)| k < b) {
                best = Some((Source::Slot(leaf), k));
            }
        }
        best
    }

    #[cfg(test)]
    pub fn peek_time(&mut self) -> Option<Time> {
        self.next().map(|(_, k)| time_of(k))
    }

    #[cfg(test)]
    pub fn pop(&mut self) -> Option<(Time, Event)> {
        self.pop_until(Time::MAX)
    }

    /// Pop the next event if it runs at or before `end`.
    pub fn pop_until(&mut self, end: Time) -> Option<(Time, Event)> {
        let (source, k) = self.next().filter(|&(_, k)| time_of(k) <= end)?;
        // Every pending event is at or after this one: the wheel reaches
        // from here (else, emptied, it would keep reaching from its last
        // entry's bucket, and events nearer than the wheel's reach would go
        // far).
        self.cursor = self.cursor.max(time_of(k) >> self.shift);
        let ev = match source {
            Source::Wheel(i, j) => {
                let e = self.buckets[i].swap_remove(j);
                if self.buckets[i].is_empty() {
                    self.clear_bit(i);
                }
                e.ev
            }
            Source::Far => self.far.pop().expect("peeked").0 .1,
            Source::Slot(leaf) => {
                let ev = self.slots.events[leaf];
                // Emptied at the next flush, unless its dispatch re-arms it
                // first: one walk up the tree, not two.
                self.slots.arm(leaf, EMPTY, Event::Sample(0));
                ev
            }
        };
        self.processed += 1;
        Some((time_of(k), ev))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ties_resolve_fifo() {
        let mut q = EventQueue::new(4, 1_000_000);
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
        let mut q = EventQueue::new(4, 1_000_000);
        q.push(10, Event::Tick { cpu: 1, index: 2, gen: 0 });
        q.push(10, Event::Tick { cpu: 0, index: 2, gen: 0 });
        q.push(10, Event::Wake(4));
        assert_eq!(q.pop(), Some((10, Event::Wake(4))));
        assert_eq!(q.pop(), Some((10, Event::Tick { cpu: 0, index: 2, gen: 0 })));
        assert_eq!(q.pop(), Some((10, Event::Tick { cpu: 1, index: 2, gen: 0 })));
    }

    #[test]
    fn period_timer_in_a_tick_follows_that_tick() {
        let mut q = EventQueue::new(4, 1_000_000);
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
        let mut q = EventQueue::new(2, 1_000_000);
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
        // Within a bucket of the wheel.
        pop_in_the_order_of_one_heap(1_000_000, &[1], 10);
    }

    /// The same across the wheel's buckets, its wrap, the far heap and the
    /// slots' tree, with slots moving between the wheel and the tree: each
    /// push 0-40 ns, 0-40 us, 0-40 ms or 0-400 ms ahead, at HZ=1000 (the
    /// wheel 4.2 ms ahead) and HZ=100 (65.5 us buckets, 67 ms ahead), ticks
    /// on grids that tie them with one another and with timers.
    #[test]
    fn the_wheel_pops_in_the_order_of_one_heap_near_and_far() {
        let scales = [1, 1_000, 1_000_000, 10_000_000];
        pop_in_the_order_of_one_heap(1_000_000, &scales, 10_000);
        pop_in_the_order_of_one_heap(10_000_000, &scales, 10_000);
        pop_in_the_order_of_one_heap(10_000_000, &scales, 10_000_000);
        pop_in_the_order_of_one_heap(4_000_000, &[1_000_000], 4_000_000);
    }

    #[test]
    fn bucket_width_follows_the_tick() {
        assert_eq!(bucket_shift(1_000_000), 12);
        assert_eq!(bucket_shift(4_000_000), 14);
        assert_eq!(bucket_shift(10_000_000), 16);
        assert!((BUCKETS as u64) << bucket_shift(3_333_333) >= REACH_TICKS * 3_333_333);
    }

    /// Random pushes, re-arms and cancels on a queue whose ticks are
    /// `tick_ns` apart, each `rand(40) * scale` ahead (a scale drawn from
    /// `scales` each time), ticks and their timers on a grid of `grid`.
    fn pop_in_the_order_of_one_heap(tick_ns: u64, scales: &[u64], grid: u64) {
        let nr_cpus = 5;
        let mut q = EventQueue::new(nr_cpus, tick_ns);
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
        assert_eq!(q.processed, popped);
    }
}
