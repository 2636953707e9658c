//! How busy the host is with other work. A spinner pinned to each CPU the
//! scenario uses, outside every measured cgroup, counts its involuntary
//! context switches (`ru_nivcsw`) and the time it lost to them. The simulator
//! models this as background activity (`machine.background_per_s`,
//! `machine.background_us`); `compare` passes the measured values, so that
//! the simulator sees the same noise as the kernel does. Marginal
//! configurations (quota exactly the demand) depend on it: each preemption
//! accounts a runqueue's runtime between ticks and can move the tick on which
//! its next refill falls (docs/fidelity.md).

use crate::worker::{now_ns, set_affinity, spin, thread_cpu_ns};
use std::thread;

/// What the probe measured, per CPU.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Background {
    /// Preemptions by other work per CPU and second.
    pub per_s: f64,
    /// Mean time each took from the spinner, in microseconds.
    pub us: f64,
}

/// One spinner's count and loss.
#[derive(Debug, Default, Clone, Copy)]
struct Sample {
    nivcsw: u64,
    wall_ns: u64,
    cpu_ns: u64,
}

/// The calling thread's involuntary context switches so far (`ru_nivcsw`).
fn nivcsw() -> u64 {
    // SAFETY: getrusage only writes the struct passed in.
    unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_THREAD, &mut usage);
        usage.ru_nivcsw as u64
    }
}

fn spin_on(cpu: usize, duration_ns: u64, stop: &(dyn Fn() -> bool + Sync)) -> Result<Sample, String> {
    set_affinity(&Some(vec![cpu]))?;
    let (nivcsw0, cpu0) = (nivcsw(), thread_cpu_ns());
    let start = now_ns();
    while now_ns() < start + duration_ns && !stop() {
        spin(10_000);
    }
    let wall_ns = now_ns() - start;
    let (nivcsw1, cpu1) = (nivcsw(), thread_cpu_ns());
    Ok(Sample { nivcsw: nivcsw1 - nivcsw0, wall_ns, cpu_ns: cpu1 - cpu0 })
}

/// Spin on every CPU of `cpus` at once for `duration_ns`, or until `stop`
/// (a signal: Ctrl-C must not wait for the probe).
pub fn background(cpus: &[usize], duration_ns: u64, stop: &(dyn Fn() -> bool + Sync)) -> Result<Background, String> {
    let samples = thread::scope(|scope| {
        let handles: Vec<_> = cpus.iter().map(|&c| scope.spawn(move || spin_on(c, duration_ns, stop))).collect();
        handles.into_iter().map(|h| h.join().unwrap_or_else(|_| Err("the probe panicked".into()))).collect::<Result<Vec<_>, _>>()
    })?;
    Ok(summarise(&samples))
}

fn summarise(samples: &[Sample]) -> Background {
    let switches: u64 = samples.iter().map(|s| s.nivcsw).sum();
    let wall_s: f64 = samples.iter().map(|s| s.wall_ns as f64 / 1e9).sum();
    let lost_ns: u64 = samples.iter().map(|s| s.wall_ns.saturating_sub(s.cpu_ns)).sum();
    Background {
        per_s: if wall_s > 0.0 { switches as f64 / wall_s } else { 0.0 },
        us: if switches > 0 { lost_ns as f64 / switches as f64 / 1e3 } else { 0.0 },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stop_ends_the_probe_at_once() {
        let t0 = now_ns();
        background(&[0], 10_000_000_000, &|| now_ns() > t0 + 10_000_000).unwrap();
        assert!(now_ns() - t0 < 1_000_000_000);
    }

    #[test]
    fn rates_are_per_cpu_second() {
        let s = [
            Sample { nivcsw: 10, wall_ns: 500_000_000, cpu_ns: 499_000_000 },
            Sample { nivcsw: 30, wall_ns: 500_000_000, cpu_ns: 497_000_000 },
        ];
        assert_eq!(summarise(&s), Background { per_s: 40.0, us: 100.0 });
        assert_eq!(summarise(&[Sample { wall_ns: 1, cpu_ns: 1, nivcsw: 0 }]), Background { per_s: 0.0, us: 0.0 });
    }
}
