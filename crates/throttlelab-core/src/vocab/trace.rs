//! An optional record of bandwidth-control activity, for tests, reports and
//! Perfetto traces. Off unless asked for, so plain runs pay nothing.
//!
//! A trace can keep a time window only, and hand its records to a sink in
//! chunks instead of keeping them: then memory is bounded by a chunk, not by
//! the run.

use crate::vocab::types::{ThreadId, Time};
use serde::Serialize;
use std::collections::HashMap;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", content = "arg", rename_all = "snake_case")]
pub enum TraceKind {
    /// A scheduler tick that was processed.
    Tick,
    /// A CPU switched to a thread, or to idle.
    Switch(Option<ThreadId>),
    /// Runtime moved from the global to a local pool (ns; may be 0).
    Assign(u64),
    /// Slack returned from a local pool to the global one (ns).
    Return(u64),
    /// The period timer refilled the global pool.
    Refill,
    /// The slack timer fired (`sched_cfs_slack_timer`), whether or not it distributes.
    SlackTimer,
    /// The slack timer distributed runtime.
    SlackDistribute,
    /// `distribute_cfs_runtime` gave a throttled cfs_rq runtime (ns).
    Distribute(u64),
    Throttle,
    Unthrottle,
}

/// One record: what happened, and both pools right after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Record {
    #[serde(rename = "t_ns")]
    pub time: Time,
    pub cpu: Option<usize>,
    /// Task group index (0 = root, i = the i-th `[[cgroup]]`).
    pub tg: usize,
    #[serde(flatten)]
    pub kind: TraceKind,
    /// `runtime_remaining` of the group's cfs_rq on `cpu`.
    pub local_ns: Option<i64>,
    /// The global pool's `runtime`.
    pub global_ns: u64,
}

/// The simulated time a trace keeps, both ends included.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    pub from_ns: Time,
    pub to_ns: Time,
}

impl Window {
    pub const WHOLE_RUN: Window = Window { from_ns: 0, to_ns: Time::MAX };
}

/// Receives the records kept so far (in `Trace::records`, emptied after each
/// call) and the simulated time reached.
pub type Sink = Box<dyn FnMut(&Trace, Time) + Send>;

/// How a run is traced: which window, and where the records go (kept in
/// `Trace::records` when there is no sink).
pub struct TraceOptions {
    pub window: Window,
    pub sink: Option<Sink>,
}

impl Default for TraceOptions {
    fn default() -> Self {
        TraceOptions { window: Window::WHOLE_RUN, sink: None }
    }
}

/// Records handed to the sink at once, at most.
pub const CHUNK_RECORDS: usize = 50_000;
/// The sink hears at least this often in simulated time, for progress, even
/// before the window opens.
pub const CHUNK_NS: Time = 100_000_000;

/// What a record before the window sets for the window's start: the thread
/// on a CPU, a group's throttling on a CPU, a group's pool levels (global,
/// and local on a CPU). Only the last record of each key is kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum StateKey {
    Running(usize),
    Throttled(usize, usize),
    Pools(usize, Option<usize>),
}

#[derive(Serialize)]
pub struct Trace {
    pub cpus: usize,
    /// Task group names by index (index 0, the root, is "").
    pub groups: Vec<String>,
    /// The task (or service) each thread belongs to, by thread id; kernel
    /// background activity is "[background]".
    pub threads: Vec<String>,
    /// The records of the window, preceded by those before it that still say
    /// what ran, what was throttled and the pool levels at its start (a
    /// consumer replays them and draws from the window's start).
    pub records: Vec<Record>,
    #[serde(skip)]
    window: Window,
    #[serde(skip)]
    sink: Option<Sink>,
    /// Before the window opens: the last record of each state key, with its
    /// sequence number to replay them in order.
    #[serde(skip)]
    before: HashMap<StateKey, (u64, Record)>,
    #[serde(skip)]
    seq: u64,
    #[serde(skip)]
    opened: bool,
    #[serde(skip)]
    flushed_ns: Time,
}

impl Trace {
    pub fn new(cpus: usize, groups: Vec<String>, threads: Vec<String>, options: TraceOptions) -> Self {
        Trace {
            cpus,
            groups,
            threads,
            records: Vec::new(),
            window: options.window,
            sink: options.sink,
            before: HashMap::new(),
            seq: 0,
            opened: false,
            flushed_ns: 0,
        }
    }

    pub fn push(&mut self, time: Time, cpu: Option<usize>, tg: usize, kind: TraceKind, local_ns: Option<i64>, global_ns: u64) {
        let record = Record { time, cpu, tg, kind, local_ns, global_ns };
        if time < self.window.from_ns {
            self.remember(record);
        } else if time <= self.window.to_ns {
            self.open();
            self.records.push(record);
        }
        if self.sink.is_some() && (self.records.len() >= CHUNK_RECORDS || time >= self.flushed_ns + CHUNK_NS) {
            self.flush(time);
        }
    }

    /// Hand what is left to the sink, if any; call once the run is over.
    pub fn finish(&mut self, now_ns: Time) {
        self.open();
        if self.sink.is_some() {
            self.flush(now_ns);
        }
    }

    fn remember(&mut self, record: Record) {
        self.seq += 1;
        let mut keys = vec![StateKey::Pools(record.tg, record.cpu)];
        match (record.kind, record.cpu) {
            (TraceKind::Switch(_), Some(cpu)) => keys.push(StateKey::Running(cpu)),
            (TraceKind::Throttle | TraceKind::Unthrottle, Some(cpu)) => keys.push(StateKey::Throttled(cpu, record.tg)),
            _ => {}
        }
        for key in keys {
            self.before.insert(key, (self.seq, record));
        }
    }

    /// The window starts: the remembered records go first, in their order, once each.
    fn open(&mut self) {
        if self.opened {
            return;
        }
        self.opened = true;
        let mut held: Vec<(u64, Record)> = self.before.drain().map(|(_, v)| v).collect();
        held.sort_by_key(|&(seq, _)| seq);
        held.dedup_by_key(|&mut (seq, _)| seq);
        self.records.extend(held.into_iter().map(|(_, r)| r));
    }

    fn flush(&mut self, now_ns: Time) {
        let mut sink = self.sink.take().expect("a sink");
        sink(self, now_ns);
        self.sink = Some(sink);
        self.records.clear();
        self.flushed_ns = now_ns;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    fn trace(window: Window, sink: Option<Sink>) -> Trace {
        Trace::new(2, vec![String::new(), "app".into()], vec!["a".into(), "b".into()], TraceOptions { window, sink })
    }

    #[test]
    fn before_the_window_only_the_last_record_of_each_state_is_held_then_replayed_in_order() {
        let mut t = trace(Window { from_ns: 1_000_000, to_ns: 2_000_000 }, None);
        for i in 0..10_000u64 {
            let cpu = (i % 2) as usize;
            t.push(i * 100, Some(cpu), 1, TraceKind::Switch(Some(cpu)), Some(i as i64), i);
            t.push(i * 100, Some(cpu), 1, if i % 3 == 0 { TraceKind::Throttle } else { TraceKind::Tick }, Some(i as i64), i);
            t.push(i * 100, None, 1, TraceKind::Refill, None, i);
        }
        // per CPU: the switch, the throttle, the pools; the global pool
        assert_eq!(t.before.len(), 2 * 3 + 1);
        t.push(1_500_000, Some(0), 1, TraceKind::Tick, Some(0), 0);
        t.push(2_000_001, Some(0), 1, TraceKind::Tick, Some(0), 0);
        let times: Vec<Time> = t.records.iter().map(|r| r.time).collect();
        // CPU 0's throttle (i = 9_996), switch and pools (9_998); CPU 1's switch, throttle
        // and pools (9_999); the global pool (the refill); then the window
        assert_eq!(times, [999_600, 999_800, 999_800, 999_900, 999_900, 999_900, 1_500_000]);
        assert!(times.windows(2).all(|w| w[0] <= w[1]));
    }

    #[test]
    fn a_sink_gets_bounded_chunks_and_the_trace_keeps_nothing() {
        let sizes = Arc::new(Mutex::new(Vec::new()));
        let seen = Arc::clone(&sizes);
        let mut t = trace(Window::WHOLE_RUN, Some(Box::new(move |t: &Trace, _| seen.lock().unwrap().push(t.records.len()))));
        let n = 3 * CHUNK_RECORDS + 7;
        for i in 0..n {
            t.push(i as Time, Some(0), 1, TraceKind::Tick, Some(0), 0);
            assert!(t.records.len() < CHUNK_RECORDS);
        }
        t.finish(n as Time);
        let sizes = sizes.lock().unwrap();
        assert!(sizes.iter().all(|&s| s <= CHUNK_RECORDS));
        assert_eq!(sizes.iter().sum::<usize>(), n);
        assert!(t.records.is_empty());
    }
}
