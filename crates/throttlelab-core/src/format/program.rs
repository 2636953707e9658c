//! One thread's program: the cursor through its task's phases that both
//! backends drive. Each asks [`Program::next`] what to do now, does it, and
//! asks again when it is done: the simulator from events (`workload.rs`),
//! the real backend's worker by blocking (`worker.rs`). The cursor keeps
//! the phase, the loops, rt-app's timers, a captured thread's request and
//! the lateness a `CatchUp` makes up, a `Schedule`'s due time; the driver
//! keeps time.

use crate::vocab::output::{Request, Requests};
use crate::vocab::phase::{Phase, TaskPhases, TimerMode};
use std::sync::Arc;

/// What a thread does next. Times are ns since the run's start.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Step {
    /// Work worth `work_ns` of CPU at nominal speed. `window_rate`: the
    /// phase opens a trace window, in which each thread runs at this rate
    /// (a deadline thread's reservation follows it, 004 3.3).
    Run { work_ns: u64, window_rate: Option<f64> },
    /// Busy for `wall_ns` of wall time, however much CPU that gets
    /// (rt-app's `runtime`).
    Busy { wall_ns: u64 },
    /// Sleep until `at`. `catch_up`: tell [`Program::woke_late`] how late
    /// the thread then got a CPU, which its next `CatchUp` makes up.
    SleepUntil { at: u64, catch_up: bool },
    /// Sleep until a sibling's `Wake` is taken (at once if one is pending:
    /// wake-ups are counted, as a futex word would).
    Wait,
    /// Wake the (single) thread of task number `task`, and ask again.
    Wake(usize),
    /// The phases ran `loops` times.
    Done,
}

/// A thread's place in its task's phases.
#[derive(Debug, Clone)]
pub struct Program {
    phases: Arc<TaskPhases>,
    /// How many times to go through the phases (-1: until the run ends).
    loops: i64,
    loops_done: i64,
    phase: usize,
    /// The stretch of trace windows that holds `phase` (a cursor for
    /// [`TaskPhases::get_from`]: the phases are taken in order).
    stretch: usize,
    /// The step given for `phase` is under way: the next call ends it.
    pending: bool,
    /// Its first call: what rt-app's timers count from.
    started_at: Option<u64>,
    /// Each rt-app timer's last expiry, until first used.
    timers: Vec<Option<u64>>,
    /// The request it was woken for (`SleepUntil`, `Wait`), until it blocks.
    request: Option<Request>,
    /// How late its last `CatchUp` ended.
    late_ns: u64,
    /// When its last `Schedule` was due.
    schedule_due: Option<u64>,
    /// It has slept (`Sleep`, `Timer`, a timer): its runs are jobs released
    /// by a sleep's end, which a deadline can be missed by.
    released: bool,
    /// Every step given, when asked for ([`Program::logged`]).
    log: Option<Vec<Step>>,
}

impl Program {
    /// At the start of `phases`, to go through them `loops` times (-1:
    /// until the run ends), with `timers` rt-app timers.
    pub fn new(phases: Arc<TaskPhases>, loops: i64, timers: usize) -> Self {
        Program {
            phases,
            loops,
            loops_done: 0,
            phase: 0,
            stretch: 0,
            pending: false,
            started_at: None,
            timers: vec![None; timers],
            request: None,
            late_ns: 0,
            schedule_due: None,
            released: false,
            log: None,
        }
    }

    /// The same, keeping every step it gives ([`Program::steps`]): for
    /// comparing how the backends drive it.
    pub fn logged(mut self) -> Self {
        self.log = Some(Vec::new());
        self
    }

    /// The steps given so far, if [`Program::logged`].
    pub fn steps(&self) -> Option<&[Step]> {
        self.log.as_deref()
    }

    /// The step to take at `now`; the step given before is over. A request
    /// is answered into `requests` when the thread next blocks.
    pub fn next(&mut self, now: u64, requests: Option<&mut Requests>) -> Step {
        let step = self.step(now, requests);
        if let Some(log) = &mut self.log {
            log.push(step);
        }
        step
    }

    fn step(&mut self, now: u64, mut requests: Option<&mut Requests>) -> Step {
        let started = *self.started_at.get_or_insert(now);
        if std::mem::take(&mut self.pending) {
            // Woken for a request: it arrived at its time, or with the wake.
            match self.phases.get_from(self.phase, &mut self.stretch) {
                Phase::SleepUntil(at) => self.request = Some(Request { arrived_ns: at, started_ns: now }),
                Phase::Wait => self.request = Some(Request { arrived_ns: now, started_ns: now }),
                _ => {}
            }
            self.phase += 1;
        }
        loop {
            if self.phase >= self.phases.len() {
                self.phase = 0;
                self.loops_done += 1;
                if self.loops >= 0 && self.loops_done >= self.loops {
                    return Step::Done;
                }
            }
            let phase = self.phases.get_from(self.phase, &mut self.stretch);
            if phase.blocks() {
                // The request it was woken for is answered: a captured
                // thread blocked here, after sending its response.
                if let (Some(request), Some(requests)) = (self.request, requests.as_deref_mut()) {
                    requests.answered(request, now);
                    self.request = None;
                }
            }
            if matches!(phase, Phase::Sleep(_) | Phase::Timer(_) | Phase::RtTimer { .. }) {
                self.released = true;
            }
            let step = match phase {
                Phase::Run(0) | Phase::Runtime(0) | Phase::Sleep(0) => None,
                Phase::Run(work_ns) => Some(Step::Run { work_ns, window_rate: self.phases.window_entry_from(self.phase, &mut self.stretch) }),
                Phase::Runtime(wall_ns) => Some(Step::Busy { wall_ns }),
                Phase::Sleep(ns) => Some(Step::SleepUntil { at: now + ns, catch_up: false }),
                Phase::CatchUp(_) => {
                    phase.catch_up(std::mem::take(&mut self.late_ns)).map(|ns| Step::SleepUntil { at: now + ns, catch_up: true })
                }
                Phase::Schedule(_) => {
                    let (due, ahead) = phase.schedule_due(now, self.schedule_due).expect("a Schedule");
                    self.schedule_due = Some(due);
                    ahead.then_some(Step::SleepUntil { at: due, catch_up: false })
                }
                Phase::Timer(period) => Some(Step::SleepUntil { at: (now / period + 1) * period, catch_up: false }),
                Phase::RtTimer { period, timer, mode } => {
                    let expiry = self.timers[timer].unwrap_or(started) + period;
                    // Late: no sleep (rt-app's `timer` event).
                    self.timers[timer] = Some(match mode {
                        TimerMode::Relative if now >= expiry => now,
                        _ => expiry,
                    });
                    (now < expiry).then_some(Step::SleepUntil { at: expiry, catch_up: false })
                }
                Phase::SleepUntil(at) if at > now => Some(Step::SleepUntil { at, catch_up: false }),
                Phase::SleepUntil(at) => {
                    // A request arrived at `at` (later than now if the thread was busy).
                    self.request = Some(Request { arrived_ns: at, started_ns: now });
                    None
                }
                Phase::Wait => Some(Step::Wait),
                Phase::Wake(task) => {
                    self.phase += 1;
                    return Step::Wake(task);
                }
            };
            match step {
                Some(step) => {
                    self.pending = true;
                    return step;
                }
                None => self.phase += 1,
            }
        }
    }

    /// Its last `CatchUp` sleep ended `late_ns` before it got
    /// a CPU (the driver measures it: a [`Step::SleepUntil`] with `catch_up`).
    pub fn woke_late(&mut self, late_ns: u64) {
        self.late_ns = late_ns;
    }

    /// Whether it is at a `Wait`: a sibling's first `Wake` wakes it.
    pub fn waits(&self) -> bool {
        self.phase < self.phases.len() && self.phases.get(self.phase) == Phase::Wait
    }

    /// Whether it has slept since it started ([`Program`]'s `released`).
    pub fn released(&self) -> bool {
        self.released
    }

    /// What it runs.
    pub fn phases(&self) -> &TaskPhases {
        &self.phases
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn program(phases: Vec<Phase>, loops: i64) -> Program {
        Program::new(Arc::new(TaskPhases::List(phases.into())), loops, 1)
    }

    #[test]
    fn a_program_steps_through_its_phases_and_loops() {
        let mut p = program(vec![Phase::Run(5), Phase::Sleep(0), Phase::Sleep(10), Phase::Timer(100), Phase::Wake(3)], 2);
        let mut at = |now, want| assert_eq!(p.next(now, None), want, "at {now}");
        at(0, Step::Run { work_ns: 5, window_rate: None });
        // The empty sleep is passed over.
        at(7, Step::SleepUntil { at: 17, catch_up: false });
        at(18, Step::SleepUntil { at: 100, catch_up: false });
        at(100, Step::Wake(3));
        at(100, Step::Run { work_ns: 5, window_rate: None });
        at(105, Step::SleepUntil { at: 115, catch_up: false });
        at(115, Step::SleepUntil { at: 200, catch_up: false });
        at(200, Step::Wake(3));
        at(200, Step::Done);
    }

    #[test]
    fn a_catch_up_makes_up_lateness_once() {
        let mut p = program(vec![Phase::Run(5), Phase::CatchUp(10)], -1);
        assert_eq!(p.next(0, None), Step::Run { work_ns: 5, window_rate: None });
        assert_eq!(p.next(5, None), Step::SleepUntil { at: 15, catch_up: true });
        // Woken at 15, on a CPU at 40: 25 late, more than the next sleep.
        p.woke_late(25);
        assert_eq!(p.next(40, None), Step::Run { work_ns: 5, window_rate: None });
        assert_eq!(p.next(45, None), Step::Run { work_ns: 5, window_rate: None });
        // The lateness was made up: a whole sleep again.
        assert_eq!(p.next(50, None), Step::SleepUntil { at: 60, catch_up: true });
    }

    #[test]
    fn a_schedule_sleeps_until_its_next_due_time_and_not_while_behind() {
        let mut p = program(vec![Phase::Run(5), Phase::Schedule(10)], -1);
        assert_eq!(p.next(0, None), Step::Run { work_ns: 5, window_rate: None });
        assert_eq!(p.next(5, None), Step::SleepUntil { at: 15, catch_up: false });
        // Due at 15, on a CPU at 40: due again at 25, 35, 45, 55, 65, all past.
        for now in [40, 45, 50, 55, 60, 65] {
            assert_eq!(p.next(now, None), Step::Run { work_ns: 5, window_rate: None }, "at {now}");
        }
        assert_eq!(p.next(70, None), Step::SleepUntil { at: 75, catch_up: false });
    }

    #[test]
    fn a_captured_request_is_timed_from_its_arrival_to_the_next_block() {
        let mut p = program(vec![Phase::SleepUntil(50), Phase::Run(5), Phase::Wait, Phase::Run(5)], 1);
        let mut requests = Requests::default();
        assert_eq!(p.next(0, Some(&mut requests)), Step::SleepUntil { at: 50, catch_up: false });
        // Woken late, at 60: the request arrived at 50.
        assert_eq!(p.next(60, Some(&mut requests)), Step::Run { work_ns: 5, window_rate: None });
        assert!(p.next(70, Some(&mut requests)) == Step::Wait && p.waits());
        assert_eq!((requests.from_arrival_ns.clone(), requests.from_start_ns.clone()), (vec![20], vec![10]));
        // A wake taken at 100 is a request from then.
        assert_eq!(p.next(100, Some(&mut requests)), Step::Run { work_ns: 5, window_rate: None });
        assert_eq!(p.next(130, Some(&mut requests)), Step::Done);
        assert_eq!(requests.count(), 1, "answered only when the thread blocks");
    }

    #[test]
    fn an_rt_timer_counts_from_the_start_and_a_late_one_does_not_sleep() {
        let rel = |mode| Phase::RtTimer { period: 10, timer: 0, mode };
        for (mode, second) in [(TimerMode::Absolute, 30), (TimerMode::Relative, 35)] {
            let mut p = program(vec![Phase::Run(1), rel(mode)], -1);
            assert_eq!(p.next(100, None), Step::Run { work_ns: 1, window_rate: None });
            assert_eq!(p.next(101, None), Step::SleepUntil { at: 110, catch_up: false });
            // Late at 125: no sleep; absolute keeps the grid, relative restarts from now.
            assert_eq!(p.next(111, None), Step::Run { work_ns: 1, window_rate: None });
            assert_eq!(p.next(125, None), Step::Run { work_ns: 1, window_rate: None });
            assert_eq!(p.next(126, None), Step::SleepUntil { at: 100 + second, catch_up: false }, "{mode:?}");
        }
    }
}
