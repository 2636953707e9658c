//! The event queue as a timing wheel whose buckets' width follows the tick
//! (`WheelQueue`): its cost per event does not grow with the pending events,
//! so it serves machines that tick often (`event::wheel_pays`); the order is
//! the one `event`'s doc gives, the same as `HeapQueue`'s.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::engine::event::{key, time_of, Event, Irq, Key, Queue, Slot, Slots, EMPTY, GROUP_BITS};
use crate::vocab::types::Time;

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
pub struct WheelQueue {
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
    processed: u64,
}

impl Drop for WheelQueue {
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

impl WheelQueue {
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
}

impl Queue for WheelQueue {
    fn new(nr_cpus: usize, tick_ns: u64) -> WheelQueue {
        let buckets = SPARE_BUCKETS
            .with(|s| s.borrow_mut().pop())
            .unwrap_or_else(|| (0..BUCKETS).map(|_| Vec::new()).collect());
        WheelQueue {
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

    fn push(&mut self, at: Time, ev: Event) {
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

    fn cancel(&mut self, slot: Slot) {
        let leaf = slot.leaf();
        self.gen[leaf] = self.gen[leaf].wrapping_add(1);
        if self.slots.armed[leaf] != EMPTY {
            self.slots.arm(leaf, EMPTY, Event::Sample(0));
        }
    }

    fn pop_until(&mut self, end: Time) -> Option<(Time, Event)> {
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

    fn processed(&self) -> u64 {
        self.processed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bucket_width_follows_the_tick() {
        assert_eq!(bucket_shift(1_000_000), 12);
        assert_eq!(bucket_shift(4_000_000), 14);
        assert_eq!(bucket_shift(10_000_000), 16);
        assert!((BUCKETS as u64) << bucket_shift(3_333_333) >= REACH_TICKS * 3_333_333);
    }
}
