//! Seeded noise that does not depend on the order events are processed in.
//!
//! Each random quantity (the jitter of tick k on CPU c, of the n-th period
//! timer of a group, a thread's start offset) is a pure function of
//! `(seed, stream, index)`. Skipping ticks that cannot change the outcome
//! therefore leaves every other random draw unchanged, and a seed means the
//! same in both backends: the real one draws its threads' starts and its
//! services' arrivals from the same streams.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
/// How a service's requests arrive: gaps drawn from an exponential (Poisson
/// arrivals) or all the mean gap ([`interarrival_ns`]).
pub enum Arrival {
    Poisson,
    Uniform,
}

/// Which random quantity a draw belongs to.
#[derive(Debug, Clone, Copy)]
pub enum Stream {
    Tick(usize),
    PeriodTimer(usize),
    SlackTimer(usize),
    /// A task thread's start offset, by thread: the tasks' threads numbered
    /// in scenario order.
    ThreadStart(usize),
    TimerOffset(usize),
    /// The jiffy grid's phase, set at boot.
    TickPhase,
    /// Arrivals of background kernel activity on a CPU.
    Background(usize),
    /// How long each of a CPU's background preemptions lasts, where the
    /// lengths are a distribution (`machine.background_p50_us`).
    BackgroundLength(usize),
    /// How long the machine has been up at simulated time 0.
    Uptime,
    /// Request arrivals of a service (by its index in the scenario).
    Arrival(usize),
    /// Where an independent captured thread starts in its cycle, by task.
    CyclePhase(usize),
    /// A CPU's newly idle balances' dice (`NI_RANDOM`), by CPU.
    NewIdle(usize),
    /// Request costs of a service whose costs spread (`cost_cv`), by its index.
    Cost(usize),
    /// Each run phase's CPU time, by thread, where the machine's work speed
    /// spreads from run to run (`machine.work_speed_cv`).
    Work(usize),
    /// Whether tick k is late on every CPU at once (a guest whose emulator
    /// delivers a tick late to both vCPUs: `machine.tick_late_share`).
    TickLateAll,
    /// Whether tick k is late on this CPU alone, by CPU.
    TickLate(usize),
}

impl Stream {
    fn key(self) -> u64 {
        let (tag, id) = match self {
            Stream::Tick(c) => (1u64, c),
            Stream::PeriodTimer(g) => (2, g),
            Stream::SlackTimer(g) => (3, g),
            Stream::ThreadStart(t) => (4, t),
            Stream::TimerOffset(g) => (5, g),
            Stream::TickPhase => (6, 0),
            Stream::Background(c) => (7, c),
            Stream::Uptime => (8, 0),
            Stream::Arrival(s) => (9, s),
            Stream::CyclePhase(t) => (10, t),
            Stream::NewIdle(c) => (11, c),
            Stream::Cost(s) => (12, s),
            Stream::BackgroundLength(c) => (13, c),
            Stream::Work(t) => (14, t),
            Stream::TickLateAll => (15, 0),
            Stream::TickLate(c) => (16, c),
        };
        (tag << 56) ^ id as u64
    }
}

/// The splitmix64 finaliser: a bijective 64-bit mix with full avalanche.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A seed with its own mix taken once: the draws of a hot stream (every
/// tick's latency) then cost two mixes, not three, and are the same numbers.
#[derive(Debug, Clone, Copy)]
pub struct Seeded(u64);

impl Seeded {
    pub fn new(seed: u64) -> Seeded {
        Seeded(mix(seed ^ 0x9e37_79b9_7f4a_7c15))
    }

    /// [`uniform`] of this seed.
    pub fn uniform(self, stream: Stream, index: u64, bound: u64) -> u64 {
        if bound == 0 {
            return 0;
        }
        let h = mix(self.0.wrapping_add(stream.key()) ^ mix(index.wrapping_add(0x632b_e59b_d9b4_e019)));
        ((h as u128 * bound as u128) >> 64) as u64
    }
}

/// Uniform integer in `[0, bound)` (0 when `bound` is 0).
pub fn uniform(seed: u64, stream: Stream, index: u64, bound: u64) -> u64 {
    Seeded::new(seed).uniform(stream, index, bound)
}

/// Exponentially distributed with the given mean (inverse transform).
pub fn exponential(seed: u64, stream: Stream, index: u64, mean: f64) -> f64 {
    const SCALE: u64 = 1 << 53;
    let u = (uniform(seed, stream, index, SCALE) as f64 + 0.5) / SCALE as f64;
    -mean * u.ln()
}

/// A standard normal from two uniform draws of the stream (Box-Muller), at
/// `2 index` and `2 index + 1`.
fn standard_normal(seed: u64, stream: Stream, index: u64) -> f64 {
    const SCALE: u64 = 1 << 53;
    let unit = |i: u64| (uniform(seed, stream, i, SCALE) as f64 + 0.5) / SCALE as f64;
    let (u1, u2) = (unit(2 * index), unit(2 * index + 1));
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

/// Log-normal with the given median and mean (mean >= median; sigma =
/// sqrt(2 ln(mean / median))): many short values and a few long ones, as a
/// host's preemptions by other work are.
pub fn log_normal(seed: u64, stream: Stream, index: u64, median: f64, mean: f64) -> f64 {
    let sigma = (2.0 * (mean / median).ln()).max(0.0).sqrt();
    median * (sigma * standard_normal(seed, stream, index)).exp()
}

/// The gap before request `n` of service `service` (request 0's is from time
/// 0), in ns and at least 1: the mean gap, or an exponential draw with that
/// mean for Poisson arrivals.
pub fn interarrival_ns(seed: u64, service: usize, n: u64, arrival: Arrival, rate_per_s: f64) -> u64 {
    let mean_ns = 1e9 / rate_per_s;
    let gap = match arrival {
        Arrival::Uniform => mean_ns,
        Arrival::Poisson => exponential(seed, Stream::Arrival(service), n, mean_ns),
    };
    (gap.round() as u64).max(1)
}

/// The CPU time of request `n` of service `service`, in ns and at least 1:
/// `cost_ns` itself where `cost_cv` is 0, else a lognormal draw with mean
/// `cost_ns` and coefficient of variation `cost_cv` (a real service's request
/// costs spread, with a tail: pgbench's p90/p50 1.5, p99/p50 2.8).
pub fn request_cost_ns(seed: u64, service: usize, n: u64, cost_ns: u64, cost_cv: f64) -> u64 {
    spread_ns(seed, Stream::Cost(service), n, cost_ns, cost_cv)
}

/// `mean_ns` itself where `cv` is 0, else draw `index` of `stream`: a
/// lognormal with mean `mean_ns` and coefficient of variation `cv`, in ns
/// and at least 1.
pub fn spread_ns(seed: u64, stream: Stream, index: u64, mean_ns: u64, cv: f64) -> u64 {
    if cv <= 0.0 {
        return mean_ns;
    }
    let z = standard_normal(seed, stream, index);
    let sigma2 = (1.0 + cv * cv).ln();
    let ns = mean_ns as f64 * (sigma2.sqrt() * z - sigma2 / 2.0).exp();
    (ns.round() as u64).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uniform_is_bounded_and_spread() {
        let n = 10_000;
        let draws: Vec<u64> = (0..n).map(|i| uniform(7, Stream::Tick(3), i, 100)).collect();
        assert!(draws.iter().all(|&d| d < 100));
        let mean = draws.iter().sum::<u64>() as f64 / n as f64;
        assert!((mean - 49.5).abs() < 2.0, "mean {mean}");
        assert_ne!(uniform(7, Stream::Tick(3), 0, 1 << 40), uniform(8, Stream::Tick(3), 0, 1 << 40));
        assert_ne!(uniform(7, Stream::Tick(3), 0, 1 << 40), uniform(7, Stream::Tick(4), 0, 1 << 40));
        assert_eq!(uniform(7, Stream::Tick(3), 5, 0), 0);
        // The draw of 1..=1000 as the one-expression hash computed it before
        // `Seeded` took the seed's mix out: the same numbers for every seed.
        let before = |seed: u64, stream: Stream, index: u64, bound: u64| {
            let h = mix(mix(seed ^ 0x9e37_79b9_7f4a_7c15).wrapping_add(stream.key()) ^ mix(index.wrapping_add(0x632b_e59b_d9b4_e019)));
            ((h as u128 * bound as u128) >> 64) as u64
        };
        for i in 0..1000 {
            assert_eq!(uniform(i, Stream::Tick(i as usize % 7), i * 31, 1 + i * 977), before(i, Stream::Tick(i as usize % 7), i * 31, 1 + i * 977));
            assert_eq!(Seeded::new(3).uniform(Stream::Arrival(2), i, 1 << 53), before(3, Stream::Arrival(2), i, 1 << 53));
        }
    }

    #[test]
    fn request_costs_have_their_mean_and_spread() {
        assert_eq!(request_cost_ns(3, 0, 7, 5_000_000, 0.0), 5_000_000);
        let n = 40_000;
        let draws: Vec<f64> = (0..n).map(|i| request_cost_ns(3, 1, i, 5_000_000, 0.5) as f64).collect();
        let mean = draws.iter().sum::<f64>() / n as f64;
        let sd = (draws.iter().map(|d| (d - mean).powi(2)).sum::<f64>() / n as f64).sqrt();
        // Standard error of the mean: 0.5 x 5 ms / 200 = 12.5 us; of the cv about 0.005.
        assert!((mean - 5e6).abs() < 60e3, "mean {mean}");
        assert!((sd / mean - 0.5).abs() < 0.03, "cv {}", sd / mean);
        let mut sorted = draws.clone();
        sorted.sort_by(f64::total_cmp);
        // A lognormal's median is below its mean: exp(-sigma^2 / 2) = 0.894 of it at cv 0.5.
        assert!((sorted[n as usize / 2] / 5e6 - 0.894).abs() < 0.02, "p50 {}", sorted[n as usize / 2]);
    }

    #[test]
    fn exponential_has_its_mean() {
        let n = 20_000;
        let mean = (0..n).map(|i| exponential(3, Stream::Background(0), i, 50.0)).sum::<f64>() / n as f64;
        assert!((mean - 50.0).abs() < 2.0, "mean {mean}");
    }

    #[test]
    fn log_normal_has_its_median_and_mean() {
        // The edge row's host (docs/fidelity.md): preemptions of 23 us at the
        // median and 219 us on average; and a narrow one.
        for (median, mean, tol) in [(23.0, 219.0, 0.1), (100.0, 110.0, 0.01)] {
            let n = 200_000;
            let mut draws: Vec<f64> = (0..n).map(|i| log_normal(5, Stream::BackgroundLength(1), i, median, mean)).collect();
            let got_mean = draws.iter().sum::<f64>() / n as f64;
            draws.sort_by(f64::total_cmp);
            let got_median = draws[n as usize / 2];
            assert!((got_median / median - 1.0).abs() < 0.02, "median {got_median} of {median}");
            assert!((got_mean / mean - 1.0).abs() < tol, "mean {got_mean} of {mean}");
        }
        // A median equal to the mean: every draw is it.
        assert_eq!(log_normal(5, Stream::BackgroundLength(0), 7, 40.0, 40.0), 40.0);
    }

    #[test]
    fn interarrivals_have_the_rate() {
        assert_eq!(interarrival_ns(1, 0, 5, Arrival::Uniform, 20.0), 50_000_000);
        let n = 20_000;
        let mean = (0..n).map(|i| interarrival_ns(1, 2, i, Arrival::Poisson, 20.0)).sum::<u64>() as f64 / n as f64;
        assert!((mean / 50e6 - 1.0).abs() < 0.03, "mean {mean}");
        assert_ne!(interarrival_ns(1, 0, 0, Arrival::Poisson, 20.0), interarrival_ns(1, 1, 0, Arrival::Poisson, 20.0));
    }
}
