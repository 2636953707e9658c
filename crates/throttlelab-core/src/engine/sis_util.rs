//! SIS_UTIL's scan depth (70fb5ccf2ebb, 5.19): the hint a wake-up's
//! `select_idle_cpu` reads, `sd_llc_shared->nr_idle_scan`, and when it is
//! written.
//!
//! `update_idle_cpu_scan` writes it at the end of `update_sd_lb_stats`, from
//! the LLC's utilization at that instant, in a periodic or idle balance of the
//! LLC domain, never a newly idle one. In a 6.12 guest (docs/fidelity.md,
//! "SIS_UTIL's hint, written at an idle CPU's first tick") most writes were
//! the idle balance at an idle CPU's tick. That tick ran at the first jiffy of
//! nearly every idle interval and seldom after it: NOHZ stops the tick on the
//! next idle entry. The hint the kernel held at each wake-up was the one
//! written there, from the utilization of that tick, and not the one of the
//! wake-up's instant. So the simulator writes the hint at the first tick of
//! each CPU's idle interval, from the CPUs' `util_avg`s then, and a wake-up
//! reads the last one written. Not modelled: the later ticks of a long idle
//! interval, and the busy CPUs' periodic balances (every 15 jiffies on two
//! CPUs at HZ=250), which in the traces wrote nothing the idle ticks had not.

use crate::engine::event::Queue;
use crate::engine::sim::Sim;
use crate::vocab::types::{CpuId, Time};

/// `imbalance_pct` of the LLC's (MC) domain, which the scan depth uses.
const SIS_UTIL_PCT: u64 = 117;

/// The LLC's stored hint and the idle ticks that will write it.
#[derive(Debug)]
pub struct SisUtil {
    /// `nr_idle_scan` as last written: at the start, what the idle machine
    /// before the run wrote (every CPU).
    pub nr_idle_scan: usize,
    /// Per CPU, when the first tick of its idle interval runs, until it has
    /// run or the CPU has left idle (`Time::MAX`: none).
    first_idle_tick: Vec<Time>,
    /// The soonest of them, or earlier (a CPU that left idle leaves it).
    next_due: Time,
}

impl SisUtil {
    pub fn new(nr_cpus: usize) -> Self {
        SisUtil { nr_idle_scan: nr_cpus, first_idle_tick: vec![Time::MAX; nr_cpus], next_due: Time::MAX }
    }
}

impl<Q: Queue> Sim<'_, Q> {
    /// `cpu` went idle: its tick, already armed, runs once more.
    pub(crate) fn idle_entered(&mut self, cpu: CpuId) {
        let (_, at) = self.first_tick_at_or_after_timed(cpu, self.now + 1);
        self.sis_util.first_idle_tick[cpu] = at;
        self.sis_util.next_due = self.sis_util.next_due.min(at);
    }

    /// `cpu` runs again: no idle tick of its is due.
    pub(crate) fn idle_left(&mut self, cpu: CpuId) {
        self.sis_util.first_idle_tick[cpu] = Time::MAX;
    }

    /// The idle ticks that ran since the last switch write the hint; the last
    /// of them is what stays, computed from the utilization at its time (the
    /// CPUs' signals have not changed since: this runs before each switch's).
    /// Inlined up to its test: most switches find no idle tick due.
    #[inline]
    pub(crate) fn update_idle_cpu_scan(&mut self) {
        if self.sis_util.next_due <= self.now {
            self.write_idle_cpu_scan();
        }
    }

    /// The ticks due by now: each written in turn, so the last of them is
    /// what stays; a pass over the CPUs, once per due time passed.
    fn write_idle_cpu_scan(&mut self) {
        let now = self.now;
        let (mut last, mut next) = (None, Time::MAX);
        for at in self.sis_util.first_idle_tick.iter_mut() {
            if *at <= now {
                last = last.max(Some(*at));
                *at = Time::MAX;
            } else {
                next = next.min(*at);
            }
        }
        self.sis_util.next_due = next;
        if let Some(at) = last {
            self.sis_util.nr_idle_scan = self.nr_idle_scan_at(at);
        }
    }

    /// `update_idle_cpu_scan`'s depth from the CPUs' `util_avg`s summed at
    /// `at`, as `update_sd_lb_stats` sums them, in O(1) (`util_sum`). The
    /// kernel sums integers; the simulator's PELT is continuous, and its sum
    /// is truncated once, not per CPU (less than a unit per CPU apart).
    pub(crate) fn nr_idle_scan_at(&self, at: Time) -> usize {
        let sum_util = self.util_sum.sum(at).floor().max(0.0) as u64;
        idle_scan_of(sum_util, self.nr_cpus() as u64)
    }
}

/// `nr_idle_scan` for the LLC's utilization sum `sum_util` (an integer): with
/// `x` the utilization per CPU, `llc_weight * (1024 - x^2 * pct^2 / (10000 *
/// 1024)) / 1024` CPUs, in integers as the kernel computes it: none above
/// about 60 % on two CPUs.
fn idle_scan_of(sum_util: u64, llc_weight: u64) -> usize {
    let x = sum_util / llc_weight;
    let tmp = (x * x * SIS_UTIL_PCT * SIS_UTIL_PCT / (10_000 * 1024)).min(1024);
    ((1024 - tmp) * llc_weight / 1024) as usize
}

#[cfg(test)]
mod tests {
    use super::idle_scan_of;
    use crate::{load, Sim, SimOptions};

    /// `update_idle_cpu_scan` on two CPUs: both scanned when idle, one at half
    /// the LLC's capacity, none from about 60 % on (integer truncation).
    #[test]
    fn sis_util_scans_less_as_the_llc_fills() {
        assert_eq!(idle_scan_of(0, 2), 2);
        assert_eq!(idle_scan_of(1024, 2), 1); // x = 512: y = 674
        assert_eq!(idle_scan_of(1238, 2), 1); // x = 619: y = 512
        assert_eq!(idle_scan_of(1240, 2), 0); // x = 620: y = 511
    }

    /// Two CPUs at HZ=250 on `profile`, fully used since 0: `a` runs on CPU 0,
    /// `c` on CPU 1; `b` and `d` last ran on CPU 0 and sleep. `c` sleeps at
    /// 1 ms; the clock is at 100 ms, CPU 1 idle since. The simulator, and the
    /// threads `[a, b, c, d]`.
    fn cpu1_idle_after_a_full_llc(profile: &str) -> (Sim<'static>, [usize; 4]) {
        let text = format!(
            "name = \"t\"\nduration_s = 1\n[machine]\ncpus = 2\nhz = 250\n[kernel]\nprofile = \"{profile}\"\n\
             [[task]]\nname = \"rs\"\nthreads = 4\nphases = [{{ run_us = 100000 }}]\n"
        );
        let s: &'static _ = Box::leak(Box::new(load(&text, &[]).unwrap()));
        let mut sim = Sim::build(s, SimOptions::default());
        let [a, b, c, d] = [0, 1, 2, 3].map(|k| sim.task_threads[0] + k);
        for (t, cpu) in [(a, 0), (b, 0), (c, 1), (d, 0)] {
            sim.set_task_cpu(t, cpu, true);
            (sim.threads[t].recent_used_cpu, sim.threads[t].cpu_ns) = (cpu, 1);
        }
        for (t, cpu) in [(a, 0), (c, 1)] {
            sim.try_to_wake_up(t);
            sim.schedule(cpu);
            (sim.rqs[cpu].util_avg, sim.rqs[cpu].util_at) = (1024.0, 0);
            sim.util_changed(cpu);
        }
        sim.now = 1_000_000;
        sim.block(c);
        sim.schedule(1);
        sim.now = 100_000_000;
        (sim, [a, b, c, d])
    }

    /// `cpu1_idle_after_a_full_llc`: at CPU 1's first idle tick (by 5 ms) the
    /// LLC is at about 95 %: no scan. `b`'s wake-up at 100 ms reads that hint
    /// and stays behind busy CPU 0, though CPU 1's utilization has decayed to
    /// about 12 % by then (the depth of that instant is one). `a` sleeps, `c`
    /// runs on CPU 1 again and sleeps at once; the first tick of that idle
    /// interval writes one, and `d`'s wake-up after it moves `d` to CPU 1.
    #[test]
    fn a_wake_up_reads_the_hint_of_the_last_idle_tick() {
        let (mut sim, [a, b, c, d]) = cpu1_idle_after_a_full_llc("6.18");
        assert_eq!(sim.nr_idle_scan_at(sim.now), 1, "the depth at the wake-up's instant");
        sim.try_to_wake_up(b);
        assert_eq!((sim.sis_util.nr_idle_scan, sim.threads[b].cpu), (0, 0), "the hint of CPU 1's first idle tick");
        // `a` sleeps and `b` runs: nothing waits for CPU 1 to pull.
        sim.block(a);
        sim.schedule(0);
        sim.try_to_wake_up(c);
        sim.schedule(1);
        assert_eq!(sim.rqs[1].curr, Some(c));
        sim.block(c);
        sim.schedule(1);
        sim.now = 105_000_000;
        sim.try_to_wake_up(d);
        assert_eq!((sim.sis_util.nr_idle_scan, sim.threads[d].cpu), (1, 1), "the hint of the next idle interval's first tick");
    }

    /// The same wake-up on each profile: 5.14 scans the LLC whatever its
    /// utilization and moves `b` to idle CPU 1; 6.1 on (SIS_UTIL, 5.19: the
    /// 6.1 guest's `sched/features` lists it, and its traced wake-ups stayed
    /// behind a busy previous CPU, the other idle, 57 times and moved 10)
    /// leave it on CPU 0.
    #[test]
    fn a_full_llc_is_not_scanned_from_6_1_on() {
        for (profile, cpu) in [("5.14", 1), ("6.1", 0), ("6.6", 0), ("6.18", 0)] {
            let (mut sim, [_, b, _, _]) = cpu1_idle_after_a_full_llc(profile);
            sim.try_to_wake_up(b);
            assert_eq!(sim.threads[b].cpu, cpu, "{profile}");
        }
    }
}
