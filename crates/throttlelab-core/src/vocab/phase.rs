//! What a thread does next: the validated phase both backends replay, from
//! a scenario's `phases`, a captured thread's file or rt-app's events.

use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// What a late timer does (rt-app's `mode`). It does not sleep; then
/// `relative` counts the next period from now, `absolute` from the missed
/// expiry, so that the thread catches up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TimerMode {
    #[default]
    Relative,
    Absolute,
}

/// A validated phase (serialized for the real backend's worker).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Phase {
    /// Work worth this many ns of CPU at nominal speed.
    Run(u64),
    /// Busy for this many ns of wall time, however much CPU that gets
    /// (rt-app's `runtime`).
    Runtime(u64),
    /// Sleep this many ns.
    Sleep(u64),
    /// Sleep this many ns less how late the thread's previous `CatchUp`
    /// ended (from its wake-up's time to its first time on a CPU after);
    /// no sleep if that is more, and then nothing is carried. A captured
    /// program that makes up for late wake-ups, as stress-ng's `--cpu-load`
    /// workers do (their `bias`).
    CatchUp(u64),
    /// Sleep until this many ns after the thread's last `Schedule` was due
    /// (the first: after now); no sleep if that is past: a captured thread
    /// that keeps a schedule of due times (each wake-up due a while after
    /// the last was due, whatever held it back since, no sleep while
    /// behind), as sysbench's `--rate` event generator does.
    Schedule(u64),
    /// Sleep until the next multiple of this many ns.
    Timer(u64),
    /// rt-app's `timer`: the thread's timer number `timer`, of this period.
    RtTimer { period: u64, timer: usize, mode: TimerMode },
    /// Sleep until this time of the run (a captured wake-up from outside the
    /// workload: a request does not wait for a throttled group); no sleep
    /// if it is past.
    SleepUntil(u64),
    /// Sleep until a `Wake` of another thread names this one (at once if
    /// one did meanwhile: wake-ups are counted, as a futex word would).
    Wait,
    /// Wake the (single) thread of task number `task` without blocking.
    Wake(usize),
}

/// Whether captured phases only run and sleep on timers (the first may end
/// a sleep begun before the capture): a thread that depends on no other
/// thread and no request from outside, so its cycle is its own.
pub fn runs_on_timers(phases: &[Phase]) -> bool {
    let timed = phases.iter().enumerate().all(|(i, p)| match p {
        Phase::Run(_) | Phase::Sleep(_) | Phase::CatchUp(_) | Phase::Schedule(_) => true,
        Phase::SleepUntil(_) => i == 0,
        _ => false,
    });
    timed && phases.iter().any(|p| matches!(p, Phase::Sleep(_) | Phase::CatchUp(_) | Phase::Schedule(_)))
}

impl Phase {
    /// The phase with `left_ns` of it left: work, or a sleep of that length
    /// (a `SleepUntil` cut in two is two plain sleeps).
    pub fn shortened(self, left_ns: u64) -> Phase {
        match self {
            Phase::Run(_) => Phase::Run(left_ns),
            Phase::Runtime(_) => Phase::Runtime(left_ns),
            _ => Phase::Sleep(left_ns),
        }
    }

    /// A `CatchUp` sleep after its thread's last one ended `late_ns` late:
    /// how long to sleep (None: later than the whole sleep, so no sleep).
    /// Both backends replay it by this rule.
    pub fn catch_up(self, late_ns: u64) -> Option<u64> {
        match self {
            Phase::CatchUp(ns) if ns > late_ns => Some(ns - late_ns),
            _ => None,
        }
    }

    /// A `Schedule` at `now_ns` whose thread's last one was due at
    /// `last_due_ns` (None: none yet): when this one is due, and whether
    /// that is still to come (a sleep until then) or past (no sleep). Both
    /// backends replay it by this rule.
    pub fn schedule_due(self, now_ns: u64, last_due_ns: Option<u64>) -> Option<(u64, bool)> {
        match self {
            Phase::Schedule(ns) => {
                let due = last_due_ns.unwrap_or(now_ns) + ns;
                Some((due, due > now_ns))
            }
            _ => None,
        }
    }

    /// A phase where the thread blocks (or would, were its wake-up not
    /// already past): what ends a captured request ([`Phase::SleepUntil`]).
    pub fn blocks(self) -> bool {
        matches!(self, Phase::Sleep(1..) | Phase::CatchUp(_) | Phase::Schedule(_) | Phase::Timer(_) | Phase::RtTimer { .. } | Phase::SleepUntil(_) | Phase::Wait)
    }
}

/// One stretch of the expanded trace: `slices` times (run, then sleep).
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct Stretch {
    /// Index of the first phase after this stretch.
    pub(crate) end: usize,
    pub(crate) run_ns: u64,
    pub(crate) sleep_ns: u64,
}

/// Index of the first phase of stretch `k`.
fn stretch_start(s: &[Stretch], k: usize) -> usize {
    if k == 0 { 0 } else { s[k - 1].end }
}

/// The stretch holding phase `i`: the first whose `end` is above `i`. A thread
/// takes its phases in order, so `cursor` (the stretch of the phase asked for
/// before) usually holds `i` or is just before the one that does; otherwise a
/// binary search over the stretches. Leaves `cursor` at the answer.
#[inline]
fn stretch_of(s: &[Stretch], i: usize, cursor: &mut usize) -> usize {
    let holds = |k: usize| k < s.len() && stretch_start(s, k) <= i && i < s[k].end;
    let k = match *cursor {
        k if holds(k) => k,
        k if holds(k + 1) => k + 1,
        _ => s.partition_point(|st| st.end <= i),
    };
    *cursor = k;
    k
}

/// The phase sequence a task's threads follow: its `phases` list, a
/// captured thread's, or measurement windows expanded as 004's Algorithm 1
/// (built from a task in `format/phases.rs`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum TaskPhases {
    /// The task's `phases`, or a captured thread's (shared with the scenario).
    List(Arc<[Phase]>),
    /// Trace windows, with the gaps between them as sleeping stretches.
    Windows(Vec<Stretch>),
}


impl TaskPhases {
    #[inline]
    pub fn len(&self) -> usize {
        match self {
            TaskPhases::List(l) => l.len(),
            TaskPhases::Windows(s) => s.last().map_or(0, |s| s.end),
        }
    }

    /// Phase `i` (inlined: a list's is a load).
    #[inline]
    pub fn get(&self, i: usize) -> Phase {
        self.get_from(i, &mut 0)
    }

    /// Phase `i`; `stretch` is a cursor ([`stretch_of`]), left at phase `i`'s stretch.
    #[inline]
    pub fn get_from(&self, i: usize, stretch: &mut usize) -> Phase {
        match self {
            TaskPhases::List(l) => l[i],
            TaskPhases::Windows(s) => {
                let k = stretch_of(s, i, stretch);
                if i % 2 == 0 {
                    Phase::Run(s[k].run_ns)
                } else {
                    Phase::Sleep(s[k].sleep_ns)
                }
            }
        }
    }

    /// If phase `i` opens a window (not a gap), each thread's CPU rate in it.
    pub fn window_entry(&self, i: usize) -> Option<f64> {
        self.window_entry_from(i, &mut 0)
    }

    /// [`TaskPhases::window_entry`], with a cursor as [`TaskPhases::get_from`]'s.
    #[inline]
    pub fn window_entry_from(&self, i: usize, stretch: &mut usize) -> Option<f64> {
        let TaskPhases::Windows(s) = self else { return None };
        let k = stretch_of(s, i, stretch);
        let st = s[k];
        (i == stretch_start(s, k) && st.run_ns > 0).then(|| st.run_ns as f64 / (st.run_ns + st.sleep_ns) as f64)
    }

    /// Whether the threads are woken from outside the workload
    /// ([`Phase::SleepUntil`]) or by a sibling ([`Phase::Wait`]): requests
    /// whose latency is reported.
    pub fn has_requests(&self) -> bool {
        matches!(self, TaskPhases::List(l) if l.iter().any(|p| matches!(p, Phase::SleepUntil(_) | Phase::Wait)))
    }

    /// A captured thread that only runs and sleeps on timers (its first phase
    /// may end a sleep begun before the capture) depends on no other thread,
    /// so where it stood in its cycle against the others when the capture
    /// began is one draw of many, which each seed draws again: its mean
    /// cycle (its CPU time and sleeps per timed sleep). None otherwise.
    pub fn independent_cycle_ns(&self) -> Option<u64> {
        let TaskPhases::List(l) = self else { return None };
        if !runs_on_timers(l) {
            return None;
        }
        let (mut total_ns, mut sleeps) = (0, 0);
        for p in l.iter() {
            match *p {
                Phase::Run(ns) => total_ns += ns,
                Phase::Sleep(ns) | Phase::CatchUp(ns) | Phase::Schedule(ns) => (total_ns, sleeps) = (total_ns + ns, sleeps + 1),
                _ => {}
            }
        }
        Some(total_ns / sleeps)
    }

    /// The phases begun `offset_ns` into them (each as long as its work or
    /// sleep; a `SleepUntil` until its time), with what came before moved to
    /// the end: the same work and sleeps, from another point of the cycle.
    /// A `SleepUntil` moved off the front sleeps as long as it did.
    pub fn rotated(&self, offset_ns: u64) -> TaskPhases {
        let TaskPhases::List(l) = self else { return self.clone() };
        let len_ns = |p: Phase| match p {
            Phase::Run(ns) | Phase::Runtime(ns) | Phase::Sleep(ns) | Phase::CatchUp(ns) | Phase::Schedule(ns) | Phase::SleepUntil(ns) => ns,
            _ => 0,
        };
        let mut at_ns = 0;
        for (k, &p) in l.iter().enumerate() {
            if at_ns + len_ns(p) > offset_ns {
                let skipped_ns = offset_ns - at_ns;
                let head = l[..k].iter().map(|&p| if let Phase::SleepUntil(ns) = p { Phase::Sleep(ns) } else { p });
                let list: Vec<Phase> = std::iter::once(p.shortened(len_ns(p) - skipped_ns))
                    .chain(l[k + 1..].iter().copied())
                    .chain(head)
                    .chain((skipped_ns > 0).then(|| p.shortened(skipped_ns)))
                    .collect();
                return TaskPhases::List(list.into());
            }
            at_ns += len_ns(p);
        }
        self.clone()
    }
}
