//! What a wake-up costs a thread beyond its work. The kernel charges a task
//! from `set_next_entity` (its `se.exec_start`) to the next `update_curr`:
//! the switch in after a wake-up, the return to user space, and the next
//! sleep's syscall up to `dequeue_entity` are the thread's runtime, on top
//! of its work (docs/fidelity.md, "A wake-up's cost"). The probe's spinners
//! never sleep and do not see it.
//!
//! So after them, a thread pinned to each CPU runs the worker's own run/sleep
//! code ([`Run::work`], [`Run::sleep_until`]) at two run lengths, each for
//! `STRETCH_NS`, and its CPU per cycle is fitted against its work per cycle:
//! the slope is the run/sleep work's speed (1 / slope), the intercept the
//! CPU each wake-up costs (`host.wakeup_cost_us`, the simulator's
//! `machine.wakeup_cost_us`).

use crate::probe::on_each_cpu;
use crate::worker::{now_ns, set_affinity, set_exact_timers, thread_cpu_ns, Run};

/// The run lengths timed, in microseconds of calibrated work: the short runs
/// where the cost shows (3-4 % of a 0.5 ms run on the fidelity host,
/// docs/fidelity.md), and ten times them, which mostly tell the speed.
const RUN_US: [u64; 2] = [500, 5_000];
/// The sleep after each run: long enough that the CPU goes idle, as it does
/// between a grid thread's runs (a guest's haltpoll polls for up to 200 us).
const SLEEP_US: u64 = 1_000;
/// How long each run length is timed, on every CPU at once: both take 0.2 s
/// of a run's probe (the edge grid's rows run 5 runs: 1 s a row).
pub(crate) const STRETCH_NS: u64 = 100_000_000;

/// The fit of the run/sleep threads' CPU against their work, per cycle.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WakeupCost {
    /// The intercept: CPU per cycle without work, us (below 0: noise).
    pub cost_us: f64,
    /// 1 / the slope: calibrated work per CPU of run/sleep threads.
    pub work_speed: f64,
}

/// What the threads did at one run length, summed over the CPUs.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct Stretch {
    cycles: u64,
    cpu_ns: u64,
    /// Calibrated work done, ns.
    work_ns: u64,
}

impl Stretch {
    fn add(self, o: Stretch) -> Stretch {
        Stretch { cycles: self.cycles + o.cycles, cpu_ns: self.cpu_ns + o.cpu_ns, work_ns: self.work_ns + o.work_ns }
    }

    /// (work, CPU) per cycle, us; None without a whole cycle.
    fn per_cycle_us(&self) -> Option<(f64, f64)> {
        let n = self.cycles as f64 * 1e3;
        (self.cycles > 0).then(|| (self.work_ns as f64 / n, self.cpu_ns as f64 / n))
    }
}

/// On `cpu`, cycles of a sleep of `SLEEP_US` then `run_us` of work, for
/// `duration_ns` (the last cycle begun then ends whole), or until `stop`.
/// The thread's CPU is read before its first sleep and after its last run:
/// each cycle's wake-up, run and next sleep's entry.
fn run_sleep_on(cpu: usize, run_us: u64, duration_ns: u64, loops_per_us: f64, stop: &(dyn Fn() -> bool + Sync)) -> Result<Stretch, String> {
    set_affinity(&Some(vec![cpu]))?;
    set_exact_timers()?;
    let start = now_ns();
    // Its end far off: no cycle is cut; the loop below stops beginning them.
    let run = Run::new(start, u64::MAX, loops_per_us, Vec::new());
    let (mut cycles, mut iters) = (0, 0);
    let cpu0 = thread_cpu_ns();
    while now_ns() < start + duration_ns && !stop() {
        run.sleep_until(now_ns() + SLEEP_US * 1_000);
        run.work(run_us * 1_000, &mut iters);
        cycles += 1;
    }
    let cpu_ns = thread_cpu_ns() - cpu0;
    Ok(Stretch { cycles, cpu_ns, work_ns: (iters as f64 * 1_000.0 / loops_per_us) as u64 })
}

/// The least-squares line through `points` (x, y): (slope, intercept); None
/// with fewer than two distinct x.
fn line(points: &[(f64, f64)]) -> Option<(f64, f64)> {
    let n = points.len() as f64;
    let (mx, my) = (points.iter().map(|p| p.0).sum::<f64>() / n, points.iter().map(|p| p.1).sum::<f64>() / n);
    let sxx: f64 = points.iter().map(|p| (p.0 - mx).powi(2)).sum();
    let sxy: f64 = points.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    (sxx > 0.0).then(|| (sxy / sxx, my - sxy / sxx * mx))
}

/// The fit of each run length's (work, CPU) per cycle; None where a length
/// had no whole cycle or the CPU does not grow with the work.
fn fit(stretches: &[Stretch]) -> Option<WakeupCost> {
    let points: Vec<(f64, f64)> = stretches.iter().map(Stretch::per_cycle_us).collect::<Option<_>>()?;
    let (slope, intercept) = line(&points)?;
    (slope > 0.0).then(|| WakeupCost { cost_us: intercept, work_speed: 1.0 / slope })
}

/// Time run/sleep work on every CPU of `cpus` at once, each run length in
/// turn, and fit it; `loops_per_us` is the calibration the workers get.
pub fn wakeup_cost(cpus: &[usize], loops_per_us: f64, stop: &(dyn Fn() -> bool + Sync)) -> Result<Option<WakeupCost>, String> {
    let mut stretches = Vec::with_capacity(RUN_US.len());
    for run_us in RUN_US {
        let on_cpus = on_each_cpu(cpus, |c| run_sleep_on(c, run_us, STRETCH_NS, loops_per_us, stop))?;
        stretches.push(on_cpus.into_iter().fold(Stretch::default(), Stretch::add));
    }
    Ok(fit(&stretches))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stretch of `cycles` cycles of `work_us` each, at `speed`, each costing `cost_us` more.
    fn synthetic(cycles: u64, work_us: f64, speed: f64, cost_us: f64) -> Stretch {
        let c = cycles as f64;
        Stretch { cycles, cpu_ns: (c * (work_us / speed + cost_us) * 1e3).round() as u64, work_ns: (c * work_us * 1e3).round() as u64 }
    }

    #[test]
    fn the_fit_finds_the_speed_and_the_cost_per_wake_up() {
        // The fidelity host's (0.98, 17 us) and the 6.12 guest's (0.95, 40 us), at the probe's lengths.
        for (speed, cost_us) in [(0.98, 17.0), (0.95, 40.0), (1.0, 0.0)] {
            let f = fit(&[synthetic(134, 500.0, speed, cost_us), synthetic(32, 5_000.0, speed, cost_us)]).unwrap();
            assert!((f.work_speed - speed).abs() < 1e-6, "{f:?}");
            assert!((f.cost_us - cost_us).abs() < 1e-3, "{f:?}");
        }
        // A slower run/sleep speed and no cost is told from a cost at the spinners' speed: 10 ms
        // runs 3 % dearer at 0.92 is no 40 us a cycle (that would be 0.4 %).
        let f = fit(&[synthetic(134, 500.0, 0.92, 0.0), synthetic(32, 5_000.0, 0.92, 0.0)]).unwrap();
        assert!((f.work_speed - 0.92).abs() < 1e-6 && f.cost_us.abs() < 1e-3, "{f:?}");
        // Per cycle, whatever the number of cycles: pooled CPUs fit as one.
        let pooled = synthetic(60, 500.0, 0.97, 20.0).add(synthetic(74, 500.0, 0.97, 20.0));
        let f = fit(&[pooled, synthetic(32, 5_000.0, 0.97, 20.0)]).unwrap();
        assert!((f.work_speed - 0.97).abs() < 1e-6 && (f.cost_us - 20.0).abs() < 1e-3, "{f:?}");
    }

    #[test]
    fn no_fit_without_two_lengths_or_a_growing_cost() {
        assert_eq!(fit(&[synthetic(10, 500.0, 1.0, 5.0)]), None, "one length");
        assert_eq!(fit(&[synthetic(10, 500.0, 1.0, 5.0), Stretch::default()]), None, "a length without a cycle");
        assert_eq!(fit(&[synthetic(10, 500.0, 1.0, 5.0), synthetic(10, 500.0, 1.0, 5.0)]), None, "the same work twice");
        // Longer runs that cost less CPU: no speed.
        let cheaper = Stretch { cycles: 10, cpu_ns: 1_000_000, work_ns: 50_000_000 };
        assert_eq!(fit(&[synthetic(10, 500.0, 1.0, 5.0), cheaper]), None);
    }

    #[test]
    fn the_probe_times_whole_cycles_and_stops_at_once() {
        // On CPU 0 for 20 ms per length: whole cycles, CPU at least their work's (no timing asserted).
        let loops_per_us = crate::worker::calibrate();
        let s = run_sleep_on(0, 500, 20_000_000, loops_per_us, &|| false).unwrap();
        assert!(s.cycles >= 1 && s.work_ns >= s.cycles * 499_000 && s.work_ns <= s.cycles * 501_000, "{s:?}");
        assert!(s.cpu_ns > 0, "{s:?}");
        let t0 = now_ns();
        assert_eq!(run_sleep_on(0, 500, 10_000_000_000, loops_per_us, &|| true).unwrap().cycles, 0);
        assert!(now_ns() - t0 < 100_000_000);
    }
}
