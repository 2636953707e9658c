//! A run that may stop once its verdict is certain: what a caller asks
//! (`Stop`, in `SimOptions::stop`) and what the stopped run's output says
//! (`Stopped`). A search that only needs to know whether a setting misses
//! (advise's judged-only steps) asks for it; a stopped run's numbers are
//! those at the stop, never a result.

use serde::Serialize;

/// Stop once cgroup `cgroup`'s whole-run `throttled_ratio` (cpu.stat's
/// `nr_throttled / nr_periods`) is certain to exceed `max_throttled`.
#[derive(Debug, Clone, PartialEq)]
pub struct Stop {
    pub cgroup: String,
    /// A ratio in 0..=1.
    pub max_throttled: f64,
}

/// Why and when a run stopped before its end: its output is not a whole run's.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Stopped {
    pub cgroup: String,
    /// The periods the run could count at most (`nr_periods` at its end).
    pub max_nr_periods: u64,
    /// The most throttled periods that could still meet `max_throttled`:
    /// the run stopped at the period after.
    pub max_nr_throttled: u64,
    /// Simulated time of the stop.
    pub at_s: f64,
}

/// The largest `nr_throttled` whose ratio to `max_nr_periods` is at most
/// `max_throttled`, in f64 as `throttled_ratio` is computed: above it, any
/// `nr_throttled / nr_periods` with `nr_periods <= max_nr_periods` is above
/// `max_throttled` (f64 division rounds monotonically).
pub fn max_nr_throttled(max_throttled: f64, max_nr_periods: u64) -> u64 {
    let n = max_nr_periods as f64;
    let mut k = (max_throttled * n).floor().max(0.0) as u64;
    while k > 0 && k as f64 / n > max_throttled {
        k -= 1;
    }
    while ((k + 1) as f64 / n) <= max_throttled {
        k += 1;
    }
    k
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bound_is_the_last_count_that_still_meets() {
        assert_eq!(max_nr_throttled(0.3, 10), 3); // 3/10 meets, 4/10 misses
        assert_eq!(max_nr_throttled(0.05, 600), 30);
        assert_eq!(max_nr_throttled(0.0, 600), 0);
        assert_eq!(max_nr_throttled(1.0, 600), 600);
        // 0.07 * 100 is 7.000000000000001 in f64; 7 / 100 is 0.07 exactly as f64.
        assert_eq!(max_nr_throttled(0.07, 100), 7);
        for (m, n) in [(0.05, 6000u64), (0.1, 30), (0.333, 7), (0.02, 1200)] {
            let k = max_nr_throttled(m, n);
            assert!(k as f64 / n as f64 <= m && (k + 1) as f64 / n as f64 > m, "{m} of {n}: {k}");
        }
    }
}
