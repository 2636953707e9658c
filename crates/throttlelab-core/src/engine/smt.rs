//! The hardware model: cores of `machine.smt` hardware threads, where a thread
//! runs at a speed that depends on how many of its siblings are busy (SMT
//! folding, 001). Work progresses at that speed; CPU time is still charged in
//! wall time, as the kernel does.

use crate::vocab::types::CpuId;

/// Speeds are parts per million of nominal speed.
pub const NOMINAL_PPM: u64 = 1_000_000;

#[derive(Debug, Clone)]
pub struct Smt {
    threads_per_core: usize,
    /// Speed of a busy thread when k siblings (itself included) are busy, k = 1..=smt.
    speed_ppm: Vec<u64>,
    /// Busy hardware threads per core.
    busy: Vec<usize>,
    /// Whether every entry of `speed_ppm` is the same: no thread's speed
    /// depends on its core's load.
    uniform: bool,
}

impl Smt {
    /// CPUs are numbered core by core: CPUs 0..smt-1 share core 0. Every
    /// speed is scaled by `work_speed`, the machine's own.
    pub fn new(cpus: usize, threads_per_core: usize, speed: &[f64], work_speed: f64) -> Self {
        let speed_ppm: Vec<u64> = (0..threads_per_core)
            .map(|k| (speed.get(k).unwrap_or(&1.0) * work_speed * NOMINAL_PPM as f64).round() as u64)
            .collect();
        let uniform = speed_ppm.iter().all(|&s| s == speed_ppm[0]);
        Smt { threads_per_core, speed_ppm, busy: vec![0; cpus / threads_per_core], uniform }
    }

    fn core(&self, cpu: CpuId) -> usize {
        cpu / self.threads_per_core
    }

    /// The other hardware threads of `cpu`'s core.
    pub fn siblings(&self, cpu: CpuId) -> impl Iterator<Item = CpuId> {
        let first = self.core(cpu) * self.threads_per_core;
        (first..first + self.threads_per_core).filter(move |&c| c != cpu)
    }

    /// How fast a thread running on `cpu` makes progress now.
    pub fn speed_ppm(&self, cpu: CpuId) -> u64 {
        if self.uniform {
            return self.speed_ppm[0];
        }
        let busy = self.busy[self.core(cpu)].max(1);
        self.speed_ppm[busy - 1]
    }

    /// Whether some thread's speed depends on the core's load at all.
    pub fn is_uniform(&self) -> bool {
        self.uniform
    }

    /// `cpu` went from idle to busy (`true`) or back.
    pub fn set_busy(&mut self, cpu: CpuId, busy: bool) {
        let core = self.core(cpu);
        if busy {
            self.busy[core] += 1;
        } else {
            self.busy[core] -= 1;
        }
    }
}

/// Work done in `delta_ns` of wall time at `speed_ppm`.
pub fn work_in(delta_ns: u64, speed_ppm: u64) -> u64 {
    // At nominal speed the product and quotient give `delta_ns` back: spare the u128 division.
    if speed_ppm == NOMINAL_PPM {
        return delta_ns;
    }
    (delta_ns as u128 * speed_ppm as u128 / NOMINAL_PPM as u128) as u64
}

/// Wall time needed for `work_ns` at `speed_ppm` (rounded up).
pub fn time_for(work_ns: u64, speed_ppm: u64) -> u64 {
    if speed_ppm == NOMINAL_PPM {
        return work_ns;
    }
    (work_ns as u128 * NOMINAL_PPM as u128).div_ceil(speed_ppm.max(1) as u128) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn speed_follows_busy_siblings() {
        let mut smt = Smt::new(8, 4, &[1.0, 1.0, 0.8, 0.5], 1.0);
        assert_eq!(smt.siblings(5).collect::<Vec<_>>(), vec![4, 6, 7]);
        assert_eq!(smt.speed_ppm(0), NOMINAL_PPM);
        for cpu in 0..3 {
            smt.set_busy(cpu, true);
        }
        assert_eq!(smt.speed_ppm(1), 800_000);
        assert_eq!(smt.speed_ppm(4), NOMINAL_PPM, "other core unaffected");
        smt.set_busy(3, true);
        assert_eq!(smt.speed_ppm(2), 500_000);
        assert!(!smt.is_uniform());
        assert!(Smt::new(4, 2, &[], 0.9).is_uniform());
    }

    #[test]
    fn the_machines_work_speed_scales_every_sibling_count() {
        let mut smt = Smt::new(4, 2, &[1.0, 0.5], 0.96);
        assert_eq!(smt.speed_ppm(0), 960_000);
        smt.set_busy(0, true);
        smt.set_busy(1, true);
        assert_eq!(smt.speed_ppm(0), 480_000);
        assert_eq!(Smt::new(2, 1, &[], 0.96).speed_ppm(1), 960_000);
    }

    /// Nominal speed's shortcut gives what the u128 product and quotient give.
    #[test]
    fn nominal_speed_is_the_identity_of_the_division() {
        for x in [0u64, 1, 999_999, 1_000_001, 123_456_789_012, u64::MAX / 3, u64::MAX] {
            let nominal = NOMINAL_PPM as u128;
            assert_eq!(work_in(x, NOMINAL_PPM) as u128, x as u128 * nominal / nominal);
            assert_eq!(time_for(x, NOMINAL_PPM) as u128, (x as u128 * nominal).div_ceil(nominal));
        }
    }

    #[test]
    fn work_and_time_round_trip() {
        for (w, s) in [(1_000_000u64, 690_000u64), (7, 333_333), (123_456_789, NOMINAL_PPM)] {
            let t = time_for(w, s);
            assert!(work_in(t, s) >= w && work_in(t - 1, s) < w);
        }
    }
}
