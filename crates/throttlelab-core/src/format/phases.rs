//! The phase sequence a task's threads follow: the scenario's `phases` list,
//! a captured thread's (`phases_file`), or measurement windows expanded as
//! 004's Algorithm 1.

use crate::vocab::phase::{runs_on_timers, Phase};
use crate::format::scenario::TaskSpec;
use std::sync::Arc;

/// Slices a measurement window is run in (004: `Slice` = 0.05 s).
const SLICE_NS: u64 = 50_000_000;

/// One stretch of the expanded trace: `slices` times (run, then sleep).
#[derive(Debug, Clone, Copy)]
pub struct Stretch {
    /// Index of the first phase after this stretch.
    end: usize,
    run_ns: u64,
    sleep_ns: u64,
}

#[derive(Debug, Clone)]
pub enum TaskPhases {
    /// The task's `phases`, or a captured thread's (shared with the scenario).
    List(Arc<[Phase]>),
    /// Trace windows, with the gaps between them as sleeping stretches.
    Windows(Vec<Stretch>),
}

impl TaskPhases {
    /// What every thread of `task` runs, given how many threads share it.
    pub fn of(task: &TaskSpec, threads: usize) -> Self {
        if let Some(captured) = &task.captured {
            return TaskPhases::List(captured.clone());
        }
        if task.windows.is_empty() {
            let timers = task.timer_names();
            return TaskPhases::List(task.phases.iter().map(|p| p.phase(&timers).expect("validated")).collect());
        }
        let mut stretches = Vec::new();
        let mut end = 0;
        let mut push = |slices: u64, run_ns: u64, sleep_ns: u64| {
            end += 2 * slices as usize;
            stretches.push(Stretch { end, run_ns, sleep_ns });
        };
        let mut last_end_s = task.windows[0][0];
        for &[start_s, end_s, rate] in &task.windows {
            if start_s > last_end_s {
                push(1, 0, ((start_s - last_end_s) * 1e9).round() as u64);
            }
            // Eq. 5-12: CPU time in the window, scaled to this machine, split
            // among the threads, in slices of 50 ms of wall time.
            let window_ns = ((end_s - start_s) * 1e9).round() as u64;
            let slices = window_ns.div_ceil(SLICE_NS).max(1);
            let slice_ns = window_ns / slices;
            let run_ns = (rate * task.clock_scale / threads as f64 * slice_ns as f64).round() as u64;
            push(slices, run_ns.min(slice_ns), slice_ns.saturating_sub(run_ns));
            last_end_s = end_s;
        }
        TaskPhases::Windows(stretches)
    }

    /// What `task`'s threads replay: [`TaskPhases::of`], and for a captured
    /// thread that keeps time by itself, begun `offset(cycle)` into its
    /// phases ([`TaskPhases::rotated`]; the simulator draws it by seed, the
    /// kernel replay takes 0). Rotated, a sleep begun before the capture
    /// is a plain sleep, as it is again each time the thread goes round
    /// ([`TaskSpec::effective_loops`]).
    pub fn replayed(task: &TaskSpec, threads: usize, offset: impl FnOnce(u64) -> u64) -> Self {
        let phases = TaskPhases::of(task, threads);
        match task.captured.as_ref().and(phases.independent_cycle_ns()) {
            Some(cycle_ns) => phases.rotated(offset(cycle_ns)),
            None => phases,
        }
    }

    /// Threads a task needs: its own count, or for a trace as many as its
    /// busiest window's rate (a rate above 1 is split among threads).
    pub fn threads(task: &TaskSpec) -> usize {
        let busiest = task.windows.iter().map(|w| w[2] * task.clock_scale).fold(0.0, f64::max);
        (task.threads.max(0) as usize).max(busiest.ceil() as usize)
    }

    pub fn len(&self) -> usize {
        match self {
            TaskPhases::List(l) => l.len(),
            TaskPhases::Windows(s) => s.last().map_or(0, |s| s.end),
        }
    }

    pub fn get(&self, i: usize) -> Phase {
        match self {
            TaskPhases::List(l) => l[i],
            TaskPhases::Windows(s) => {
                let k = s.partition_point(|st| st.end <= i);
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
        let TaskPhases::Windows(s) = self else { return None };
        let k = s.partition_point(|st| st.end <= i);
        let start = if k == 0 { 0 } else { s[k - 1].end };
        let st = s[k];
        (i == start && st.run_ns > 0).then(|| st.run_ns as f64 / (st.run_ns + st.sleep_ns) as f64)
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

    /// For a trace: how long it lasts (first window's start to last end).
    pub fn trace_ns(task: &TaskSpec) -> Option<u64> {
        let (first, last) = (task.windows.first()?, task.windows.last()?);
        Some(((last[1] - first[0]) * 1e9).round() as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(windows: Vec<[f64; 3]>) -> TaskSpec {
        let text = "name = \"w\"\nthreads = 1\n";
        let mut t: TaskSpec = toml::from_str(text).unwrap();
        t.windows = windows;
        t
    }

    #[test]
    fn a_captured_thread_on_timers_goes_round_to_the_end() {
        // As the capture writes them: `loop = 1`.
        let captured = |phases: Vec<Phase>| {
            let mut t = task(Vec::new());
            (t.loops, t.captured) = (1, Some(phases.into()));
            t
        };
        // Ends a sleep begun before the capture, then runs and sleeps: its own cycle.
        let timed = captured(vec![Phase::SleepUntil(5), Phase::Run(10), Phase::CatchUp(20), Phase::Run(10), Phase::Sleep(20)]);
        assert_eq!(timed.effective_loops(), -1);
        // The kernel replay starts where the capture did: the first sleep, plain, as long as it was.
        let p = TaskPhases::replayed(&timed, 1, |_| 0);
        assert_eq!((p.get(0), p.get(1), p.len()), (Phase::Sleep(5), Phase::Run(10), 5));
        assert!(!p.has_requests());
        // Woken from outside or by a sibling, or never sleeping: its phases once.
        for once in [vec![Phase::Run(10), Phase::SleepUntil(50), Phase::Run(10)], vec![Phase::Wait, Phase::Run(10), Phase::Sleep(5)], vec![Phase::Run(10)]] {
            let t = captured(once.clone());
            assert_eq!(t.effective_loops(), 1, "{once:?}");
            assert_eq!(TaskPhases::replayed(&t, 1, |_| 0).get(0), once[0]);
        }
    }

    #[test]
    fn windows_expand_into_slices() {
        let t = task(vec![[0.0, 1.0, 0.5], [2.0, 2.5, 2.0]]);
        assert_eq!(TaskPhases::threads(&t), 2);
        let p = TaskPhases::of(&t, 2);
        // 20 slices of 50 ms at 0.25 each, a 1 s gap, 10 slices at 1.0 each.
        assert_eq!(p.len(), 40 + 2 + 20);
        assert_eq!(p.get(0), Phase::Run(12_500_000));
        assert_eq!(p.get(1), Phase::Sleep(37_500_000));
        assert_eq!(p.get(40), Phase::Run(0));
        assert_eq!(p.get(41), Phase::Sleep(1_000_000_000));
        assert_eq!(p.get(42), Phase::Run(50_000_000));
        assert_eq!(p.get(43), Phase::Sleep(0));
        assert_eq!(TaskPhases::trace_ns(&t), Some(2_500_000_000));
        assert_eq!(p.window_entry(0), Some(0.25));
        assert_eq!(p.window_entry(2), None, "inside a window");
        assert_eq!(p.window_entry(40), None, "a gap");
        assert_eq!(p.window_entry(42), Some(1.0));
    }
}
