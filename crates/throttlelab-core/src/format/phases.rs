//! The phase sequence a task's threads follow ([`TaskPhases`]), built from
//! a task: the scenario's `phases` list, a captured thread's (`phases_file`),
//! or measurement windows expanded as 004's Algorithm 1.

use crate::vocab::noise::{self, Stream};
pub use crate::vocab::phase::TaskPhases;
use crate::vocab::phase::Stretch;
use crate::format::scenario::TaskSpec;

/// Slices a measurement window is run in (004: `Slice` = 0.05 s).
const SLICE_NS: u64 = 50_000_000;

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

    /// What the threads of `task`, the scenario's task number `ti`, run
    /// under `seed`, in both backends: [`TaskPhases::replayed`], begun where
    /// the seed's draw puts a captured thread that keeps time by itself in
    /// its cycle ([`Stream::CyclePhase`]).
    pub fn seeded(task: &TaskSpec, ti: usize, threads: usize, seed: u64) -> Self {
        Self::replayed(task, threads, |cycle_ns| noise::uniform(seed, Stream::CyclePhase(ti), 0, cycle_ns))
    }

    /// What `task`'s threads replay: [`TaskPhases::of`], and for a captured
    /// thread that keeps time by itself, begun `offset(cycle)` into its
    /// phases ([`TaskPhases::rotated`]; [`TaskPhases::seeded`] draws it).
    /// Rotated, a sleep begun before the capture is a plain sleep, as it is
    /// again each time the thread goes round ([`TaskSpec::effective_loops`]).
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

    /// For a trace: how long it lasts (first window's start to last end).
    pub fn trace_ns(task: &TaskSpec) -> Option<u64> {
        let (first, last) = (task.windows.first()?, task.windows.last()?);
        Some(((last[1] - first[0]) * 1e9).round() as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vocab::phase::Phase;

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

    #[test]
    fn a_cursor_finds_what_the_search_finds() {
        // Windows, gaps and an empty window (no slices), taken in order, again from
        // the start (the next loop), backwards, and from a cursor past the end.
        let t = task(vec![[0.0, 0.2, 0.5], [0.5, 0.5, 1.0], [1.0, 1.1, 2.0], [1.1, 1.3, 0.3]]);
        let p = TaskPhases::of(&t, 2);
        let n = p.len();
        let order: Vec<usize> = (0..n).chain(0..n).chain((0..n).rev()).chain([n - 1, 0, 7, 3]).collect();
        let mut cursor = 0;
        for i in order {
            assert_eq!(p.get_from(i, &mut cursor), p.get(i), "phase {i}");
            assert_eq!(p.window_entry_from(i, &mut cursor), p.window_entry(i), "phase {i}");
        }
        let mut far = usize::MAX - 1;
        assert_eq!(p.get_from(1, &mut far), p.get(1));
    }
}
