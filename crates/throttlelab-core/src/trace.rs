//! An optional record of bandwidth-control activity, for tests, reports and
//! Perfetto traces. Off unless asked for, so plain runs pay nothing.

use crate::event::Time;
use crate::sim::ThreadId;
use serde::Serialize;

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
    /// The slack timer distributed runtime.
    SlackDistribute,
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

#[derive(Debug, Default, Clone, Serialize)]
pub struct Trace {
    pub cpus: usize,
    /// Task group names by index (index 0, the root, is "").
    pub groups: Vec<String>,
    /// The task (or service) each thread belongs to, by thread id; kernel
    /// background activity is "[background]".
    pub threads: Vec<String>,
    pub records: Vec<Record>,
}

impl Trace {
    pub fn push(&mut self, time: Time, cpu: Option<usize>, tg: usize, kind: TraceKind, local_ns: Option<i64>, global_ns: u64) {
        self.records.push(Record { time, cpu, tg, kind, local_ns, global_ns });
    }
}
