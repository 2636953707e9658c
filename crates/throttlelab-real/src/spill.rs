//! What a long capture cannot hold in memory, on disk: a file without a name
//! (`tempfile::tempfile_in`) in a directory the capture chose (beside its
//! output), gone when it is dropped.
//! [`Spill`] keeps chains of chunks (one a captured thread: its phases, as
//! they are recognised), [`Sorter`] sorts more numbers than it holds (runs
//! sorted in memory, merged when read). Either holds at most a chunk or a
//! run in memory, however long the capture.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::time::{Duration, Instant};

/// Where a chain's chunks are: the first and the last (None: empty).
#[derive(Debug, Clone, Copy, Default)]
pub struct Chain {
    first: Option<u64>,
    last: Option<u64>,
}

/// A chunk's header: the next chunk's offset (`NONE`: the last) and its length.
const HEADER: usize = 12;
const NONE: u64 = u64::MAX;

/// How long writing a spill took: its writes' count, the longest and their sum
/// (a write to the page cache can wait for the disk).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct WriteTimes {
    pub count: u64,
    pub max: Duration,
    pub total: Duration,
}

impl WriteTimes {
    fn add(&mut self, took: Duration) {
        self.count += 1;
        self.max = self.max.max(took);
        self.total += took;
    }

    /// Both's writes as one's.
    pub fn and(self, other: WriteTimes) -> WriteTimes {
        WriteTimes { count: self.count + other.count, max: self.max.max(other.max), total: self.total + other.total }
    }
}

/// `file.write_all_at(bytes, at)`, its time added to `times`.
fn write_timed(file: &File, bytes: &[u8], at: u64, times: &mut WriteTimes) -> io::Result<()> {
    let started = Instant::now();
    file.write_all_at(bytes, at)?;
    times.add(started.elapsed());
    Ok(())
}

/// Chains of byte chunks in one file, each read back in the order appended.
#[derive(Debug)]
pub struct Spill {
    file: File,
    end: u64,
    times: WriteTimes,
}

impl Spill {
    pub fn new(dir: &Path) -> io::Result<Spill> {
        Ok(Spill { file: tempfile::tempfile_in(dir)?, end: 0, times: WriteTimes::default() })
    }

    /// How long its writes took.
    pub fn times(&self) -> WriteTimes {
        self.times
    }

    /// Append `bytes` as `chain`'s next chunk.
    pub fn append(&mut self, chain: &mut Chain, bytes: &[u8]) -> io::Result<()> {
        let at = self.end;
        let mut chunk = Vec::with_capacity(HEADER + bytes.len());
        chunk.extend_from_slice(&NONE.to_le_bytes());
        chunk.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
        chunk.extend_from_slice(bytes);
        write_timed(&self.file, &chunk, at, &mut self.times)?;
        if let Some(last) = chain.last {
            write_timed(&self.file, &at.to_le_bytes(), last, &mut self.times)?;
        }
        chain.first.get_or_insert(at);
        chain.last = Some(at);
        self.end += chunk.len() as u64;
        Ok(())
    }

    /// Each of `chain`'s chunks, in order.
    pub fn read(&self, chain: &Chain, mut f: impl FnMut(&[u8])) -> io::Result<()> {
        let (mut at, mut bytes) = (chain.first.unwrap_or(NONE), Vec::new());
        while at != NONE {
            let mut header = [0u8; HEADER];
            self.file.read_exact_at(&mut header, at)?;
            bytes.resize(u32::from_le_bytes(header[8..].try_into().expect("4 bytes")) as usize, 0);
            self.file.read_exact_at(&mut bytes, at + HEADER as u64)?;
            f(&bytes);
            at = u64::from_le_bytes(header[..8].try_into().expect("8 bytes"));
        }
        Ok(())
    }
}

/// Append `n` as LEB128.
pub fn put_varint(out: &mut Vec<u8>, mut n: u64) {
    while n >= 0x80 {
        out.push(n as u8 | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

/// The LEB128 number at `bytes[*at..]`, `*at` moved past it.
pub fn get_varint(bytes: &[u8], at: &mut usize) -> u64 {
    let (mut n, mut shift) = (0u64, 0);
    loop {
        let b = bytes[*at];
        *at += 1;
        n |= u64::from(b & 0x7f) << shift;
        if b < 0x80 {
            return n;
        }
        shift += 7;
    }
}

/// How many numbers a [`Sorter`] holds before it writes them out as a run (512 KiB).
const RUN: usize = 1 << 16;

/// How many numbers of a run are read at a time as it is merged (32 KiB).
const READ_BLOCK: usize = 4096;

/// Numbers pushed in any order, read back sorted: in memory up to `RUN`
/// of them, then in sorted runs on disk (each headed by its length),
/// merged as they are read.
#[derive(Debug)]
pub struct Sorter {
    file: File,
    end: u64,
    held: Vec<u64>,
    len: u64,
    times: WriteTimes,
}

impl Sorter {
    pub fn new(dir: &Path) -> io::Result<Sorter> {
        Ok(Sorter { file: tempfile::tempfile_in(dir)?, end: 0, held: Vec::new(), len: 0, times: WriteTimes::default() })
    }

    /// How long its writes took.
    pub fn times(&self) -> WriteTimes {
        self.times
    }

    pub fn push(&mut self, n: u64) -> io::Result<()> {
        self.held.push(n);
        self.len += 1;
        if self.held.len() >= RUN {
            self.held.sort_unstable();
            let mut bytes = Vec::with_capacity(8 * (self.held.len() + 1));
            bytes.extend_from_slice(&(self.held.len() as u64).to_le_bytes());
            self.held.iter().for_each(|n| bytes.extend_from_slice(&n.to_le_bytes()));
            write_timed(&self.file, &bytes, self.end, &mut self.times)?;
            self.end += bytes.len() as u64;
            self.held.clear();
        }
        Ok(())
    }

    pub fn len(&self) -> u64 {
        self.len
    }

    /// What it holds in memory, bytes.
    pub fn held_bytes(&self) -> usize {
        self.held.capacity() * 8
    }

    /// Every number pushed, in ascending order.
    pub fn each(&self, mut f: impl FnMut(u64)) -> io::Result<()> {
        // Each run's next offset and end; the numbers still in memory as a run of their own.
        let mut runs: Vec<(u64, u64)> = Vec::new();
        let mut at = 0;
        while at < self.end {
            let mut len = [0u8; 8];
            self.file.read_exact_at(&mut len, at)?;
            let end = at + 8 + 8 * u64::from_le_bytes(len);
            runs.push((at + 8, end));
            at = end;
        }
        let mut held = self.held.clone();
        held.sort_unstable();
        // Each run's numbers read a block at a time: the block and where in it.
        let nr_runs = runs.len();
        let mut blocks: Vec<(Vec<u64>, usize)> = vec![(Vec::new(), 0); nr_runs];
        let mut next = |run: usize| -> io::Result<Option<u64>> {
            let (block, i) = &mut blocks[run];
            if *i == block.len() {
                let (at, end) = &mut runs[run];
                let n = ((*end - *at) / 8).min(READ_BLOCK as u64) as usize;
                let mut bytes = vec![0u8; 8 * n];
                self.file.read_exact_at(&mut bytes, *at)?;
                *at += bytes.len() as u64;
                *block = bytes.chunks_exact(8).map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes"))).collect();
                *i = 0;
            }
            let n = block.get(*i).copied();
            *i += 1;
            Ok(n)
        };
        let mut heap = BinaryHeap::new();
        for run in 0..nr_runs {
            if let Some(n) = next(run)? {
                heap.push(Reverse((n, run)));
            }
        }
        let mut held = held.into_iter().peekable();
        loop {
            let from_runs = heap.peek().map(|Reverse((n, _))| *n);
            match (from_runs, held.peek()) {
                (Some(r), Some(&h)) if h < r => f(held.next().expect("peeked")),
                (None, Some(_)) => f(held.next().expect("peeked")),
                (Some(_), _) => {
                    let Reverse((n, run)) = heap.pop().expect("peeked");
                    f(n);
                    if let Some(n) = next(run)? {
                        heap.push(Reverse((n, run)));
                    }
                }
                (None, None) => return Ok(()),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chains_read_back_in_order_however_interleaved() {
        let mut spill = Spill::new(&std::env::temp_dir()).unwrap();
        let (mut a, mut b) = (Chain::default(), Chain::default());
        for i in 0..50u8 {
            spill.append(if i % 3 == 0 { &mut a } else { &mut b }, &[i; 3][..(i as usize % 3) + 1]).unwrap();
        }
        let read = |chain: &Chain| {
            let mut got = Vec::new();
            spill.read(chain, |c| got.push(c.to_vec())).unwrap();
            got
        };
        assert_eq!(read(&a), (0..50u8).filter(|i| i % 3 == 0).map(|i| vec![i; 1]).collect::<Vec<_>>());
        assert_eq!(read(&b).len(), 33);
        assert_eq!(read(&b)[1], vec![2, 2, 2]);
        assert!(read(&Chain::default()).is_empty());
    }

    #[test]
    fn varints_round_trip() {
        let mut bytes = Vec::new();
        let numbers = [0, 1, 127, 128, 300, u32::MAX as u64, u64::MAX];
        numbers.iter().for_each(|&n| put_varint(&mut bytes, n));
        let mut at = 0;
        assert_eq!(numbers.map(|_| get_varint(&bytes, &mut at)), numbers);
        assert_eq!(at, bytes.len());
    }

    #[test]
    fn a_sorter_sorts_more_than_it_holds() {
        let mut s = Sorter::new(&std::env::temp_dir()).unwrap();
        let n = 3 * RUN as u64 + 1234;
        // A permutation of 0..n (7919, a prime, does not divide n), each twice.
        for i in 0..2 * n {
            s.push(i * 7919 % n).unwrap();
        }
        assert!(s.held_bytes() <= 8 * RUN, "{}", s.held_bytes());
        let mut got = Vec::new();
        s.each(|v| got.push(v)).unwrap();
        assert_eq!(got.len() as u64, 2 * n);
        assert!(got.chunks(2).enumerate().all(|(i, pair)| pair == [i as u64, i as u64]));
        assert_eq!(s.len(), 2 * n);
    }
}
