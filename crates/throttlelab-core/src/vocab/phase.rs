//! What a thread does next: the validated phase both backends replay, from
//! a scenario's `phases`, a captured thread's file or rt-app's events.

use serde::{Deserialize, Serialize};

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
    /// As `CatchUp`, and lateness that no sleep made up carries on to the
    /// next: a captured thread that keeps a schedule (each wake-up due a
    /// while after the last was due, no sleep while behind), as sysbench's
    /// `--rate` event generator does.
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

    /// A `CatchUp` or `Schedule` sleep after its thread's last one ended
    /// `late_ns` late: how long to sleep (None: later than the whole sleep,
    /// so no sleep), and the lateness carried on to the next (a `Schedule`'s
    /// that no sleep made up). Both backends replay them by this rule.
    pub fn catch_up(self, late_ns: u64) -> (Option<u64>, u64) {
        match self {
            Phase::CatchUp(ns) | Phase::Schedule(ns) if ns > late_ns => (Some(ns - late_ns), 0),
            Phase::Schedule(ns) => (None, late_ns - ns),
            _ => (None, 0),
        }
    }

    /// A phase where the thread blocks (or would, were its wake-up not
    /// already past): what ends a captured request ([`Phase::SleepUntil`]).
    pub fn blocks(self) -> bool {
        matches!(self, Phase::Sleep(1..) | Phase::CatchUp(_) | Phase::Schedule(_) | Phase::Timer(_) | Phase::RtTimer { .. } | Phase::SleepUntil(_) | Phase::Wait)
    }
}
