//! What a long capture cannot hold in memory, on disk: a file without a name
//! (`tempfile::tempfile_in`) in a directory the capture chose (beside its
//! output), gone when it is dropped.
//! [`Spill`] keeps chains of chunks (one a captured thread: its phases, as
//! they are recognised), [`Sorter`] sorts more numbers than it holds (runs
//! sorted in memory, merged when read). Either holds at most a chunk or a
//! run in memory, however long the capture. Their writes can be queued to a
//! [`Writer`], a thread of its own, so that the capture's reader does not
//! wait for the disk.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::thread_sched::Scheduling;

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

/// At most this much queued for a [`Writer`] (32 MiB): seconds of
/// `stress-ng --switch 2`'s phases (a few MB a second), should a write stall
/// (one took 2.7 s on the 6.18 host: docs/capture.md, "The spill's writer").
pub const QUEUE_BYTES: usize = 32 << 20;

/// A thread that writes spill files for the capture's reader: the reader
/// queues its writes and goes on, since a write to the page cache can wait
/// for the disk, and while the reader waits the kernel's buffers fill. The
/// queue holds at most its capacity in bytes (a write larger goes alone);
/// when it is full the queuing side waits for room, counted in
/// [`WriterStats`]: a write is never dropped. The thread is scheduled as the
/// thread that made it (the capture's reader: `SCHED_FIFO`, or nice -10):
/// at `SCHED_OTHER` the workload the reader outranks starved it for seconds.
#[derive(Debug)]
pub struct Writer {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

#[derive(Debug, Default)]
struct Shared {
    queue: Mutex<Queue>,
    changed: Condvar,
}

#[derive(Debug, Default)]
struct Queue {
    /// Each write: its file, offset and bytes.
    jobs: VecDeque<(Arc<File>, u64, Vec<u8>)>,
    /// Bytes queued or being written.
    bytes: usize,
    capacity: usize,
    /// A write taken from `jobs` is being written.
    busy: bool,
    closed: bool,
    /// The thread takes no write (tests: a writer that fell behind).
    paused: bool,
    /// The first write that failed, reported to the next queued or settled.
    error: Option<io::Error>,
    stats: WriterStats,
}

/// What a [`Writer`] wrote, and how often and how long the queuing side
/// waited for room because it fell behind.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct WriterStats {
    pub times: WriteTimes,
    pub waits: u64,
    pub waited: Duration,
    /// The writer thread's scheduling, as it read itself once started: what
    /// it runs at, not only what it was given (None: no writer).
    pub policy: Option<Scheduling>,
}

impl Writer {
    pub fn new(capacity: usize) -> io::Result<Writer> {
        let shared = Arc::new(Shared { queue: Mutex::new(Queue { capacity, ..Queue::default() }), changed: Condvar::new() });
        let theirs = Arc::clone(&shared);
        let scheduled = Scheduling::of_this_thread();
        let thread = std::thread::Builder::new().name("spill-writer".into()).spawn(move || {
            scheduled.apply_to_this_thread();
            theirs.lock().stats.policy = Some(Scheduling::of_this_thread());
            theirs.changed.notify_all();
            theirs.run()
        })?;
        // Started once it has read its scheduling: `stats` has it from here on.
        let mut q = shared.lock();
        while q.stats.policy.is_none() {
            q = shared.wait(q);
        }
        drop(q);
        Ok(Writer { shared, thread: Some(thread) })
    }

    /// Queue `bytes` to be written at `at` in `file`; wait (counted) while
    /// the queue has no room. Err: an earlier write failed.
    pub fn queue(&self, file: &Arc<File>, at: u64, bytes: Vec<u8>) -> io::Result<()> {
        let mut q = self.shared.lock();
        q.failed()?;
        let room = |q: &Queue| q.bytes == 0 || q.bytes + bytes.len() <= q.capacity;
        if !room(&q) {
            let started = Instant::now();
            q.stats.waits += 1;
            while !room(&q) && q.error.is_none() {
                q = self.shared.wait(q);
            }
            q.stats.waited += started.elapsed();
            q.failed()?;
        }
        q.bytes += bytes.len();
        q.jobs.push_back((Arc::clone(file), at, bytes));
        self.shared.changed.notify_all();
        Ok(())
    }

    /// Wait until everything queued is written. Err: a write failed.
    pub fn settle(&self) -> io::Result<()> {
        let mut q = self.shared.lock();
        while (!q.jobs.is_empty() || q.busy) && q.error.is_none() {
            q = self.shared.wait(q);
        }
        q.failed()
    }

    pub fn stats(&self) -> WriterStats {
        self.shared.lock().stats
    }

    #[cfg(test)]
    fn pause(&self, paused: bool) {
        self.shared.lock().paused = paused;
        self.shared.changed.notify_all();
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        {
            let mut q = self.shared.lock();
            q.closed = true;
            q.paused = false;
        }
        self.shared.changed.notify_all();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Queue {
    fn failed(&self) -> io::Result<()> {
        match &self.error {
            Some(e) => Err(io::Error::new(e.kind(), e.to_string())),
            None => Ok(()),
        }
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn wait<'a>(&self, q: MutexGuard<'a, Queue>) -> MutexGuard<'a, Queue> {
        self.changed.wait(q).unwrap_or_else(|e| e.into_inner())
    }

    /// The writer thread: each queued write in turn, until closed and empty.
    fn run(&self) {
        let mut q = self.lock();
        loop {
            if !q.paused {
                if let Some((file, at, bytes)) = q.jobs.pop_front() {
                    q.busy = true;
                    drop(q);
                    let started = Instant::now();
                    let written = file.write_all_at(&bytes, at);
                    let took = started.elapsed();
                    q = self.lock();
                    q.busy = false;
                    q.bytes -= bytes.len();
                    q.stats.times.add(took);
                    if let Err(e) = written {
                        q.error.get_or_insert(e);
                    }
                    self.changed.notify_all();
                    continue;
                }
            }
            if q.closed && q.jobs.is_empty() {
                return;
            }
            q = self.wait(q);
        }
    }
}

/// A spill file's writes: written at once, or queued to a [`Writer`].
#[derive(Debug)]
struct Sink {
    file: Arc<File>,
    writer: Option<Arc<Writer>>,
    /// Its own writes' times (none when queued: the writer's count).
    times: WriteTimes,
}

impl Sink {
    fn new(dir: &Path, writer: Option<Arc<Writer>>) -> io::Result<Sink> {
        Ok(Sink { file: Arc::new(tempfile::tempfile_in(dir)?), writer, times: WriteTimes::default() })
    }

    fn write_at(&mut self, bytes: Vec<u8>, at: u64) -> io::Result<()> {
        match &self.writer {
            Some(w) => w.queue(&self.file, at, bytes),
            None => {
                let started = Instant::now();
                self.file.write_all_at(&bytes, at)?;
                self.times.add(started.elapsed());
                Ok(())
            }
        }
    }

    /// The file, once everything queued for it is written.
    fn settled(&self) -> io::Result<&File> {
        if let Some(w) = &self.writer {
            w.settle()?;
        }
        Ok(&self.file)
    }
}

/// Chains of byte chunks in one file, each read back in the order appended.
#[derive(Debug)]
pub struct Spill {
    sink: Sink,
    end: u64,
}

impl Spill {
    /// One that writes itself (tests: what a queued one must equal).
    #[cfg(test)]
    pub fn new(dir: &Path) -> io::Result<Spill> {
        Ok(Spill { sink: Sink::new(dir, None)?, end: 0 })
    }

    /// One whose writes `writer` does.
    pub fn queued(dir: &Path, writer: Arc<Writer>) -> io::Result<Spill> {
        Ok(Spill { sink: Sink::new(dir, Some(writer))?, end: 0 })
    }

    /// How long the writes it made itself took (none when queued).
    pub fn times(&self) -> WriteTimes {
        self.sink.times
    }

    /// Append `bytes` as `chain`'s next chunk.
    pub fn append(&mut self, chain: &mut Chain, bytes: &[u8]) -> io::Result<()> {
        let at = self.end;
        let mut chunk = Vec::with_capacity(HEADER + bytes.len());
        chunk.extend_from_slice(&NONE.to_le_bytes());
        chunk.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
        chunk.extend_from_slice(bytes);
        let len = chunk.len() as u64;
        self.sink.write_at(chunk, at)?;
        if let Some(last) = chain.last {
            self.sink.write_at(at.to_le_bytes().to_vec(), last)?;
        }
        chain.first.get_or_insert(at);
        chain.last = Some(at);
        self.end += len;
        Ok(())
    }

    /// Each of `chain`'s chunks, in order.
    pub fn read(&self, chain: &Chain, mut f: impl FnMut(&[u8])) -> io::Result<()> {
        let file = self.sink.settled()?;
        let (mut at, mut bytes) = (chain.first.unwrap_or(NONE), Vec::new());
        while at != NONE {
            let mut header = [0u8; HEADER];
            file.read_exact_at(&mut header, at)?;
            bytes.resize(u32::from_le_bytes(header[8..].try_into().expect("4 bytes")) as usize, 0);
            file.read_exact_at(&mut bytes, at + HEADER as u64)?;
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
    sink: Sink,
    end: u64,
    held: Vec<u64>,
    len: u64,
}

impl Sorter {
    pub fn new(dir: &Path) -> io::Result<Sorter> {
        Ok(Sorter { sink: Sink::new(dir, None)?, end: 0, held: Vec::new(), len: 0 })
    }

    /// One whose writes `writer` does.
    pub fn queued(dir: &Path, writer: Arc<Writer>) -> io::Result<Sorter> {
        Ok(Sorter { sink: Sink::new(dir, Some(writer))?, end: 0, held: Vec::new(), len: 0 })
    }

    /// How long the writes it made itself took (none when queued).
    pub fn times(&self) -> WriteTimes {
        self.sink.times
    }

    pub fn push(&mut self, n: u64) -> io::Result<()> {
        self.held.push(n);
        self.len += 1;
        if self.held.len() >= RUN {
            self.held.sort_unstable();
            let mut bytes = Vec::with_capacity(8 * (self.held.len() + 1));
            bytes.extend_from_slice(&(self.held.len() as u64).to_le_bytes());
            self.held.iter().for_each(|n| bytes.extend_from_slice(&n.to_le_bytes()));
            let at = self.end;
            self.end += bytes.len() as u64;
            self.sink.write_at(bytes, at)?;
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
        let file = self.sink.settled()?;
        let mut runs: Vec<(u64, u64)> = Vec::new();
        let mut at = 0;
        while at < self.end {
            let mut len = [0u8; 8];
            file.read_exact_at(&mut len, at)?;
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
                file.read_exact_at(&mut bytes, *at)?;
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

    #[test]
    fn queued_chains_read_back_as_written_at_once() {
        let dir = std::env::temp_dir();
        let writer = Arc::new(Writer::new(64).unwrap());
        let (mut direct, mut queued) = (Spill::new(&dir).unwrap(), Spill::queued(&dir, Arc::clone(&writer)).unwrap());
        let mut chains = [[Chain::default(); 3]; 2];
        for i in 0..300u32 {
            let bytes: Vec<u8> = (0..i % 40).map(|b| (b ^ i) as u8).collect();
            direct.append(&mut chains[0][i as usize % 3], &bytes).unwrap();
            queued.append(&mut chains[1][i as usize % 3], &bytes).unwrap();
        }
        for k in 0..3 {
            let (mut a, mut b) = (Vec::new(), Vec::new());
            direct.read(&chains[0][k], |c| a.push(c.to_vec())).unwrap();
            queued.read(&chains[1][k], |c| b.push(c.to_vec())).unwrap();
            assert_eq!(a, b);
            assert_eq!(a.len(), 100);
        }
        assert_eq!(writer.stats().times.count, 300 + 297);
        assert_eq!(queued.times(), WriteTimes::default());
    }

    #[test]
    fn a_writer_that_falls_behind_makes_the_queue_wait_and_counts_it() {
        let file = Arc::new(tempfile::tempfile_in(std::env::temp_dir()).unwrap());
        let writer = Arc::new(Writer::new(10).unwrap());
        writer.pause(true);
        writer.queue(&file, 0, vec![1; 6]).unwrap();
        assert_eq!(writer.stats().waits, 0);
        // No room for 6 more while the first 6 wait: the second waits until the writer takes it.
        let second = {
            let (writer, file) = (Arc::clone(&writer), Arc::clone(&file));
            std::thread::spawn(move || writer.queue(&file, 6, vec![2; 6]))
        };
        while writer.stats().waits == 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
        writer.pause(false);
        second.join().unwrap().unwrap();
        writer.settle().unwrap();
        let stats = writer.stats();
        assert_eq!((stats.waits, stats.times.count), (1, 2));
        assert!(stats.waited > Duration::ZERO);
        let mut back = [0u8; 12];
        file.read_exact_at(&mut back, 0).unwrap();
        assert_eq!(back, [1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2]);
        // A write larger than the queue goes alone, without waiting for room it cannot have.
        writer.queue(&file, 12, vec![3; 100]).unwrap();
        writer.settle().unwrap();
        assert_eq!(writer.stats().waits, 1);
    }

    /// A writer made by a thread at SCHED_FIFO with SCHED_RESET_ON_FORK (the
    /// capture's reader) runs at SCHED_FIFO, and says so; one made by a
    /// thread at SCHED_OTHER says its nice. Needs CAP_SYS_NICE (root).
    #[test]
    fn a_writer_runs_and_reports_its_makers_scheduling() {
        let policy = std::thread::spawn(|| {
            let param = libc::sched_param { sched_priority: 1 };
            // SAFETY: this test thread only.
            let r = unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO | libc::SCHED_RESET_ON_FORK, &param) };
            assert_eq!(r, 0, "{}", io::Error::last_os_error());
            Writer::new(64).unwrap().stats().policy
        })
        .join()
        .unwrap();
        assert_eq!(policy.map(|p| p.to_string()).as_deref(), Some("SCHED_FIFO 1"));
        let other = std::thread::spawn(|| Writer::new(64).unwrap().stats().policy).join().unwrap().unwrap();
        assert!(!other.is_realtime(), "{other:?}");
        assert_eq!(other.to_string(), format!("nice {}", Scheduling::of_this_thread().nice));
    }

    #[test]
    fn a_failed_write_is_reported_to_the_next_queued() {
        // A file opened for reading only: the writer's pwrite fails with EBADF.
        let file = Arc::new(File::open("/proc/self/status").unwrap());
        let writer = Writer::new(1 << 20).unwrap();
        writer.queue(&file, 0, vec![1; 4]).unwrap();
        assert!(writer.settle().is_err());
        assert!(writer.queue(&file, 4, vec![1; 4]).is_err());
    }
}
