//! How busy the host is with other work. A spinner pinned to each CPU the
//! scenario uses, outside every measured cgroup, counts its involuntary
//! context switches (`ru_nivcsw`) and the time it lost to them. The simulator
//! models this as background activity (`machine.background_per_s`,
//! `machine.background_us`); `compare` passes the measured values, so that
//! the simulator sees the same noise as the kernel does. Marginal
//! configurations (quota exactly the demand) depend on it: each preemption
//! accounts a runqueue's runtime between ticks and can move the tick on which
//! its next refill falls (docs/fidelity.md).
//!
//! The same spinners run the calibrated busy loop, so the probe also says
//! how fast the host sustains it: against the calibration (the fastest of
//! short timed runs, `host.work_speed`), a `run_us` of work costs `run_us /
//! work_speed` of CPU.
//! On the development VM that moved between 0.96 and 1.0 from run to run,
//! enough to tip a group whose demand is the quota (docs/fidelity.md).
//!
//! How long each preemption lasts is read from the spinner's own schedstat
//! (`run_delay`: from its switch away to its switch back, as the scheduler
//! accounts it), after every gap between clock reads that is longer than the
//! loop's step. The gap itself is no measure: it also holds the interrupt
//! that woke the other task, which the spinner is charged for. Traced on the
//! fidelity host, the gaps' median was twice `sched_switch`'s in the same
//! 0.5 s (docs/fidelity.md, "The background's shape, traced through the probe
//! and the runs").
//!
//! Meanwhile a tracefs instance of its own records the hrtimer events, and
//! the probe reports how late the tick's interrupt runs after its expiry
//! (the simulator's `machine.tick_jitter_us` and `timer_jitter_us`): some
//! 7 us on the 6.18 development host, several times that in a VM under
//! QEMU's TCG, where an interrupt waits for the emulated CPU's next block
//! of translated code.

use crate::timer_trace::Instance;
use throttlelab_core::output::TickLateness;
use throttlelab_core::scenario::measured_background_lengths;
use crate::worker::{calibrate, now_ns, set_affinity, spin, thread_cpu_ns};
use std::collections::{HashMap, HashSet};
use std::fs;
use std::thread;

/// What the probe measured, per CPU.
#[derive(Debug, Clone, PartialEq)]
pub struct Background {
    /// Preemptions by other work per CPU and second.
    pub per_s: f64,
    /// Mean time each took from the spinner, in microseconds.
    pub us: f64,
    /// The median of their lengths, in microseconds (see
    /// [`preemptions_ns`]); None without a preemption.
    pub p50_us: Option<f64>,
    /// Their lengths, in microseconds: every CPU's, pooled and sorted, or at
    /// most 64 of their quantiles (`measured_background_lengths`).
    pub lengths_us: Vec<f64>,
    /// The median lateness of the tick's interrupt, in microseconds; None
    /// without tracefs.
    pub tick_latency_us: Option<f64>,
    /// The ticks that ran far later than that ([`tick_late`]); None where
    /// the probe could not tell.
    pub tick_late: Option<TickLateness>,
    /// Iterations of the calibrated loop per microsecond of the spinners' CPU
    /// time: against the calibration's, the host's work speed.
    pub loops_per_cpu_us: f64,
    /// How much that speed varies from one run of work to the next: the
    /// coefficient of variation of the CPU time of each `WORK_BLOCK_US` of
    /// the loop (see [`work_speed_cv`]); None with too few blocks.
    pub work_speed_cv: Option<f64>,
}

/// One spinner's count and loss.
#[derive(Debug, Default, Clone)]
struct Sample {
    nivcsw: u64,
    wall_ns: u64,
    cpu_ns: u64,
    iters: u64,
    /// Its schedstat ([`SchedStat`]) at the start and after each gap that
    /// was longer than the loop's step: (run_delay ns, pcount).
    sched_reads: Vec<(u64, u64)>,
    /// Its thread's CPU clock at the end of each block of `block_iters`.
    block_cpu_ns: Vec<u64>,
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

/// The calling thread's `/proc/thread-self/schedstat` (CONFIG_SCHED_INFO):
/// `run_delay`, the time it has waited runnable for a CPU, from each switch
/// away to the switch back (as `sched_switch` shows a preemption, without
/// the interrupt before it, which the thread is charged for), and `pcount`,
/// its switches onto a CPU. None where the kernel has no schedstat.
struct SchedStat(fs::File);

impl SchedStat {
    fn open() -> Option<SchedStat> {
        fs::File::open("/proc/thread-self/schedstat").ok().map(SchedStat)
    }

    /// (run_delay ns, pcount) now.
    fn read(&self) -> Option<(u64, u64)> {
        use std::os::unix::fs::FileExt;
        let mut buf = [0u8; 96];
        let n = self.0.read_at(&mut buf, 0).ok()?;
        let mut fields = std::str::from_utf8(&buf[..n]).ok()?.split_whitespace().skip(1).map(|f| f.parse::<u64>());
        Some((fields.next()?.ok()?, fields.next()?.ok()?))
    }
}

/// Iterations of the busy loop between clock reads.
const SPIN_ITERS: u64 = 10_000;
/// The shortest a step of SPIN_ITERS can take: each iteration is three
/// dependent shift-xors, at least 3 cycles.
const MIN_STEP_NS: u64 = 4_000;

/// Whether a gap between clock reads may hold a preemption: half again the
/// fastest step so far (a preemption takes microseconds; a tick's interrupt
/// stretches a step too, and reading schedstat then finds no wait).
fn irregular(gap_ns: u64, fastest_ns: u64) -> bool {
    gap_ns > fastest_ns.saturating_add(fastest_ns / 2)
}

fn spin_on(cpu: usize, duration_ns: u64, block_iters: u64, stop: &(dyn Fn() -> bool + Sync)) -> Result<Sample, String> {
    set_affinity(&Some(vec![cpu]))?;
    let sched = SchedStat::open();
    // Room for a read at each tick of a 1000 Hz kernel, allocated before the clock starts.
    let mut sched_reads = Vec::with_capacity(2 * (duration_ns / 1_000_000) as usize + 2);
    sched_reads.extend(sched.as_ref().and_then(SchedStat::read));
    let mut block_cpu_ns = Vec::with_capacity((duration_ns / (WORK_BLOCK_US * 1_000) + 2) as usize);
    let (nivcsw0, cpu0) = (nivcsw(), thread_cpu_ns());
    let start = now_ns();
    let (mut iters, mut last, mut fastest) = (0, start, u64::MAX);
    while last < start + duration_ns && !stop() {
        spin(SPIN_ITERS);
        iters += SPIN_ITERS;
        let now = now_ns();
        let gap = now - last;
        if irregular(gap, fastest) {
            sched_reads.extend(sched.as_ref().and_then(SchedStat::read));
        }
        if iters % block_iters == 0 {
            block_cpu_ns.push(thread_cpu_ns());
        }
        fastest = fastest.min(gap.max(MIN_STEP_NS));
        // After the reads: the next step's gap is the loop's alone.
        last = now_ns();
    }
    let wall_ns = now_ns() - start;
    let (nivcsw1, cpu1) = (nivcsw(), thread_cpu_ns());
    sched_reads.extend(sched.as_ref().and_then(SchedStat::read));
    Ok(Sample { nivcsw: nivcsw1 - nivcsw0, wall_ns, cpu_ns: cpu1 - cpu0, iters, sched_reads, block_cpu_ns })
}

/// The work a block of the probe's loop does, in microseconds at the
/// calibrated speed: the run phase of the edge grid's run/sleep threads
/// (docs/fidelity.md, "The worker's runs, run by run").
const WORK_BLOCK_US: u64 = 10_000;

/// Iterations in a block of `WORK_BLOCK_US` at `loops_per_us`, a whole
/// number of the loop's steps between clock reads.
fn block_iters(loops_per_us: f64) -> u64 {
    ((WORK_BLOCK_US as f64 * loops_per_us / SPIN_ITERS as f64).round() as u64).max(1) * SPIN_ITERS
}

/// The spread of the CPU time the same work costs, block by block: the
/// coefficient of variation of every spinner's blocks pooled (each block's
/// CPU from the clock at its end less the one before; the first block of a
/// spinner, from before its first read, is left out). The kernel charges a
/// task the interrupts it takes (without IRQ_TIME_ACCOUNTING) and whatever
/// slows the loop (a hypervisor's neighbours), as it does a worker's runs.
/// None under 10 blocks.
fn work_speed_cv(samples: &[Sample]) -> Option<f64> {
    let blocks: Vec<f64> = samples.iter().flat_map(|s| s.block_cpu_ns.windows(2).map(|w| (w[1] - w[0]) as f64)).collect();
    if blocks.len() < 10 {
        return None;
    }
    let n = blocks.len() as f64;
    let mean = blocks.iter().sum::<f64>() / n;
    let var = blocks.iter().map(|b| (b - mean).powi(2)).sum::<f64>() / n;
    (mean > 0.0).then(|| var.sqrt() / mean)
}

/// The lengths of a spinner's preemptions, in nanoseconds, from its
/// successive schedstat reads: between two reads, the wait that run_delay
/// grew by, shared evenly among the switches back that pcount grew by
/// (nearly always one: the spinner reads after every long gap).
fn preemptions_ns(reads: &[(u64, u64)]) -> Vec<u64> {
    let mut out = Vec::new();
    for w in reads.windows(2) {
        let (waited, switches) = (w[1].0.saturating_sub(w[0].0), w[1].1.saturating_sub(w[0].1));
        if waited > 0 && switches > 0 {
            out.extend(std::iter::repeat_n(waited / switches, switches as usize));
        }
    }
    out
}

/// Spin on every CPU of `cpus` at once for `duration_ns`, or until `stop`
/// (a signal: Ctrl-C must not wait for the probe).
pub fn background(cpus: &[usize], duration_ns: u64, stop: &(dyn Fn() -> bool + Sync)) -> Result<Background, String> {
    let trace = tick_latency_wanted().then(|| timer_events(&format!("throttlelab-probe-{}", std::process::id()))).flatten();
    let block = block_iters(calibrate());
    let samples = on_each_cpu(cpus, |c| spin_on(c, duration_ns, block, stop))?;
    let tick_latency_us = trace.and_then(|t| {
        let _ = t.write("tracing_on", "0");
        tick_latency_us(&fs::read_to_string(t.dir.join("trace")).ok()?)
    });
    // After the spin, not in it: its reads would slow the loop it times.
    let charges = on_each_cpu(cpus, |c| tick_charges_on(c, TICK_PROBE_NS.min(duration_ns), stop))?;
    Ok(Background { tick_latency_us, tick_late: tick_late(&charges), ..summarise(&samples) })
}

/// `probe` on a thread for each CPU of `cpus`, all at once: their results in
/// the CPUs' order, or the first error (a thread that panicked is one).
pub(crate) fn on_each_cpu<T: Send>(cpus: &[usize], probe: impl Fn(usize) -> Result<T, String> + Sync) -> Result<Vec<T>, String> {
    let probe = &probe;
    thread::scope(|scope| {
        let handles: Vec<_> = cpus.iter().map(|&c| scope.spawn(move || probe(c))).collect();
        handles.into_iter().map(|h| h.join().unwrap_or_else(|_| Err("the probe panicked".into()))).collect()
    })
}

/// How long the probe watches the tick's charges (after its spin).
const TICK_PROBE_NS: u64 = 300_000_000;

/// A charge of a probe's spinner: when its `se.sum_exec_runtime` was seen to
/// move, and whether it was switched out since the read before (schedstat's
/// `pcount` moved: the read after it runs when the spinner is back, off any
/// grid, and the tick it missed charged another task).
#[derive(Debug, Clone, Copy, PartialEq)]
struct Charge {
    at_ns: u64,
    switched: bool,
}

/// A spinner on `cpu` that reads its own `se.sum_exec_runtime` and `pcount`
/// (the first and third fields of `/proc/thread-self/schedstat`, which the
/// read does not update) as fast as it can for `duration_ns`: the
/// CLOCK_MONOTONIC times at which the sum moved. Alone on its CPU, it moves at
/// each tick (`task_tick_fair` -> `update_curr`); also at each preemption
/// (`put_prev_entity`) and at each wake-up of another task onto the CPU
/// (`check_preempt_wakeup_fair` -> `update_curr`), which are no ticks. Empty
/// without schedstat.
fn tick_charges_on(cpu: usize, duration_ns: u64, stop: &(dyn Fn() -> bool + Sync)) -> Result<Vec<Charge>, String> {
    use std::os::unix::fs::FileExt;
    set_affinity(&Some(vec![cpu]))?;
    let Ok(file) = fs::File::open("/proc/thread-self/schedstat") else { return Ok(Vec::new()) };
    let read = || -> Option<(u64, u64)> {
        let mut buf = [0u8; 96];
        let n = file.read_at(&mut buf, 0).ok()?;
        let mut fields = std::str::from_utf8(&buf[..n]).ok()?.split_whitespace().map(|f| f.parse().ok());
        Some((fields.next()??, fields.nth(1)??))
    };
    // A tick a millisecond: room for every one, allocated before the clock starts.
    let mut moved = Vec::with_capacity((duration_ns / 1_000_000) as usize + 16);
    let start = now_ns();
    let mut last = read();
    while now_ns() < start + duration_ns && !stop() {
        let now = read();
        if now.map(|n| n.0) != last.map(|l| l.0) {
            let switched = now.map(|n| n.1) != last.map(|l| l.1);
            moved.push(Charge { at_ns: now_ns(), switched });
        }
        last = now;
    }
    Ok(moved)
}

/// The late ticks among each CPU's charges (`tick_charges_on`): the tick is
/// the median gap between charges, rounded to a CONFIG_HZ's; every CPU's
/// ticks expire on one grid (6.5+ aligns them, no `skew_tick`), whose phase
/// is the start of the densest `TickLateness::LATE_NS` of the charges'
/// offsets within a tick. A tick is late when its charge is that far off
/// the grid and no charge fell on the grid at its index: a charge off the
/// grid beside an on-time tick is a wake-up's or a switch's (docs/fidelity.md,
/// probe11), and a charge read after a switch is when the spinner ran again.
/// Their share of the ticks, how late beyond the ticks' median (the median of
/// them), and the share of them whose tick (the same grid index) was late on
/// another CPU too (all 0 where none was late: looked for, not found). None
/// with too few charges to tell the tick.
fn tick_late(charges: &[Vec<Charge>]) -> Option<TickLateness> {
    let mut gaps: Vec<u64> = charges.iter().flat_map(|c| c.windows(2).map(|w| w[1].at_ns - w[0].at_ns)).collect();
    if gaps.len() < 10 {
        return None;
    }
    gaps.sort_unstable();
    let gap = gaps[gaps.len() / 2];
    let tick_ns = [100u64, 250, 300, 1000].map(|hz| 1_000_000_000 / hz).into_iter().min_by_key(|t| t.abs_diff(gap))?;
    let mut offsets: Vec<u64> = charges.iter().flatten().map(|c| c.at_ns % tick_ns).collect();
    offsets.sort_unstable();
    // The densest window, wrapping around the tick: its first offset is the grid's phase.
    let within = |i: usize| offsets.iter().filter(|&&o| (o + tick_ns - offsets[i]) % tick_ns < TickLateness::LATE_NS).count();
    let phase = offsets[(0..offsets.len()).max_by_key(|&i| (within(i), std::cmp::Reverse(i)))?];
    let late_of = |t: u64| (t + tick_ns - phase) % tick_ns;
    let index_of = |t: u64| t.saturating_sub(phase) / tick_ns;
    // Each CPU's ticks: its charges on the grid, and those off it at an index without one.
    let mut ticks: Vec<(usize, u64, u64)> = Vec::new();
    for (cpu, c) in charges.iter().enumerate() {
        let on_grid: HashSet<u64> =
            c.iter().filter(|c| late_of(c.at_ns) <= TickLateness::LATE_NS).map(|c| index_of(c.at_ns)).collect();
        ticks.extend(
            c.iter()
                .filter(|c| !c.switched && (late_of(c.at_ns) <= TickLateness::LATE_NS || !on_grid.contains(&index_of(c.at_ns))))
                .map(|c| (cpu, index_of(c.at_ns), late_of(c.at_ns))),
        );
    }
    if ticks.is_empty() {
        return None;
    }
    let late: Vec<(usize, u64, u64)> = ticks.iter().copied().filter(|&(_, _, ns)| ns > TickLateness::LATE_NS).collect();
    if late.is_empty() {
        return Some(TickLateness { share: 0.0, late_us: 0.0, together: 0.0 });
    }
    let together = late.iter().filter(|&&(cpu, k, _)| late.iter().any(|&(c, j, _)| c != cpu && j == k)).count();
    let median = |mut v: Vec<u64>| {
        v.sort_unstable();
        v[v.len() / 2] as f64
    };
    Some(TickLateness {
        share: late.len() as f64 / ticks.len() as f64,
        late_us: (median(late.iter().map(|&(_, _, ns)| ns).collect()) - median(ticks.iter().map(|&(_, _, ns)| ns).collect())) / 1e3,
        together: together as f64 / late.len() as f64,
    })
}

/// Whether to trace the tick's lateness: not where `THROTTLELAB_TICK_LATENCY`
/// is `0`. The VM's guest sets it: switching the hrtimer tracepoints on and
/// off patches code that both CPUs run in every interrupt, and under QEMU's
/// multi-threaded TCG that crashed Debian's 6.12 now and then (an int3 oops
/// in `dequeue_entities`: a stale translation of the patched code; docs/vm.md).
fn tick_latency_wanted() -> bool {
    std::env::var_os("THROTTLELAB_TICK_LATENCY").is_none_or(|v| v != "0")
}

/// A tracefs instance recording every CPU's `hrtimer_start` and
/// `hrtimer_expire_entry`; None (said once) where tracefs cannot.
fn timer_events(name: &str) -> Option<Instance> {
    let open = || -> Result<Instance, String> {
        let trace = Instance::open(name)?;
        trace.write("events/timer/hrtimer_start/enable", "1")?;
        trace.write("events/timer/hrtimer_expire_entry/enable", "1")?;
        Ok(trace)
    };
    open().map_err(|why| eprintln!("throttlelab: tick latency not reported: {why}")).ok()
}

/// The median of `now - expires` over the tick's expiries in a tracefs
/// `trace` text, in microseconds: each `hrtimer_expire_entry` of the tick's
/// handler (`tick_nohz_handler` since 6.11, `tick_sched_timer` before)
/// against the expiry its timer was last started with. Fields are read by
/// name: their order changed between releases.
fn tick_latency_us(trace: &str) -> Option<f64> {
    let field = |line: &str, key: &str| -> Option<String> {
        line.split_whitespace().find_map(|w| w.strip_prefix(key)).map(str::to_string)
    };
    let mut expires: HashMap<String, u64> = HashMap::new();
    let mut late_ns: Vec<u64> = Vec::new();
    for line in trace.lines() {
        let (Some(timer), Some(function)) = (field(line, "hrtimer="), field(line, "function=")) else { continue };
        if line.contains(" hrtimer_start: ") {
            if let Some(ns) = field(line, "expires=").and_then(|v| v.parse().ok()) {
                expires.insert(timer, ns);
            }
        } else if line.contains(" hrtimer_expire_entry: ") && matches!(function.as_str(), "tick_nohz_handler" | "tick_sched_timer") {
            let now: Option<u64> = field(line, "now=").and_then(|v| v.parse().ok());
            if let (Some(now), Some(&at)) = (now, expires.get(&timer)) {
                late_ns.push(now.saturating_sub(at));
            }
        }
    }
    late_ns.sort_unstable();
    late_ns.get(late_ns.len() / 2).map(|&ns| ns as f64 / 1e3)
}

fn summarise(samples: &[Sample]) -> Background {
    let switches: u64 = samples.iter().map(|s| s.nivcsw).sum();
    let wall_s: f64 = samples.iter().map(|s| s.wall_ns as f64 / 1e9).sum();
    let lost_ns: u64 = samples.iter().map(|s| s.wall_ns.saturating_sub(s.cpu_ns)).sum();
    let cpu_us: f64 = samples.iter().map(|s| s.cpu_ns as f64 / 1e3).sum();
    let iters: u64 = samples.iter().map(|s| s.iters).sum();
    // Every CPU's preemptions, pooled: the median of them all.
    let mut lengths_ns: Vec<u64> = samples.iter().flat_map(|s| preemptions_ns(&s.sched_reads)).collect();
    lengths_ns.sort_unstable();
    Background {
        per_s: if wall_s > 0.0 { switches as f64 / wall_s } else { 0.0 },
        us: if switches > 0 { lost_ns as f64 / switches as f64 / 1e3 } else { 0.0 },
        p50_us: lengths_ns.get(lengths_ns.len() / 2).map(|&ns| ns as f64 / 1e3),
        lengths_us: measured_background_lengths(lengths_ns.iter().map(|&ns| ns as f64 / 1e3).collect()),
        tick_latency_us: None,
        tick_late: None,
        loops_per_cpu_us: if cpu_us > 0.0 { iters as f64 / cpu_us } else { 0.0 },
        work_speed_cv: work_speed_cv(samples),
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
            Sample { nivcsw: 10, wall_ns: 500_000_000, cpu_ns: 499_000_000, iters: 998_000_000, sched_reads: Vec::new(), block_cpu_ns: Vec::new() },
            Sample { nivcsw: 30, wall_ns: 500_000_000, cpu_ns: 497_000_000, iters: 994_000_000, sched_reads: Vec::new(), block_cpu_ns: Vec::new() },
        ];
        assert_eq!(summarise(&s), Background { per_s: 40.0, us: 100.0, p50_us: None, lengths_us: vec![], tick_latency_us: None, tick_late: None, loops_per_cpu_us: 2_000.0, work_speed_cv: None });
        assert_eq!(
            summarise(&[Sample { wall_ns: 1, cpu_ns: 1, nivcsw: 0, iters: 0, sched_reads: vec![(5_000, 1)], block_cpu_ns: Vec::new() }]),
            Background { per_s: 0.0, us: 0.0, p50_us: None, lengths_us: vec![], tick_latency_us: None, tick_late: None, loops_per_cpu_us: 0.0, work_speed_cv: None }
        );
    }

    #[test]
    fn a_preemption_is_the_wait_schedstat_adds_between_two_reads() {
        // Reads after long gaps: a tick's interrupt (no wait), preemptions of 21 and
        // 900 us, then two between two reads (40 us in all: 20 each).
        let reads = [(1_000, 3), (1_000, 3), (22_000, 4), (922_000, 5), (962_000, 7)];
        assert_eq!(preemptions_ns(&reads), vec![21_000, 900_000, 20_000, 20_000]);
        assert_eq!(preemptions_ns(&reads[..1]), Vec::<u64>::new());
        assert_eq!(preemptions_ns(&[]), Vec::<u64>::new());
        // Two spinners pooled: the median of all five lengths (17, 20, 21, 35, 900 us).
        let s = [
            Sample { nivcsw: 3, wall_ns: 1_000_000, cpu_ns: 0, iters: 0, sched_reads: reads[1..4].to_vec(), block_cpu_ns: Vec::new() },
            Sample { nivcsw: 3, wall_ns: 1_000_000, cpu_ns: 0, iters: 0, sched_reads: vec![(0, 1), (17_000, 2), (37_000, 3), (72_000, 4)], block_cpu_ns: Vec::new() },
        ];
        assert_eq!(summarise(&s).p50_us, Some(21.0));
    }

    #[test]
    fn a_gap_half_again_the_fastest_step_is_read() {
        assert!(!irregular(14_000, 10_000));
        assert!(!irregular(15_000, 10_000));
        assert!(irregular(15_001, 10_000));
        // Before the first step nothing is irregular.
        assert!(!irregular(900_000, u64::MAX));
    }

    #[test]
    fn the_probe_reads_its_own_preemptions_from_schedstat() {
        // This thread's schedstat reads, and a run_delay that never falls.
        let Some(stat) = SchedStat::open() else { return };
        let (a, b) = (stat.read().unwrap(), stat.read().unwrap());
        assert!(b.0 >= a.0 && b.1 >= a.1, "{a:?} then {b:?}");
    }

    #[test]
    fn the_work_speed_cv_is_the_spread_of_the_blocks_cpu_time() {
        // Two spinners' clocks at their blocks' ends (the first read only starts the clock):
        // six blocks of 10 ms, then 12, 8, 12 and 8 ms. Mean 10 ms, sd sqrt(4 x 4 / 10) ms.
        let spinner = |clock_ms: &[u64]| Sample { block_cpu_ns: clock_ms.iter().map(|ms| ms * 1_000_000).collect(), ..Sample::default() };
        let s = [spinner(&[3, 13, 23, 33, 43, 53, 63]), spinner(&[1, 13, 21, 33, 41])];
        let cv = work_speed_cv(&s).unwrap();
        assert!((cv - 1.6f64.sqrt() / 10.0).abs() < 1e-12, "{cv}");
        // Under 10 blocks: not measured.
        assert_eq!(work_speed_cv(&[spinner(&[0, 10, 20, 30])]), None);
        let even: Vec<u64> = (0..12).map(|k| k * 10).collect();
        assert_eq!(work_speed_cv(&[spinner(&even)]), Some(0.0));
        // A block is a whole number of steps, about WORK_BLOCK_US at the calibration.
        assert_eq!(block_iters(150.0), 1_500_000);
        assert_eq!(block_iters(0.0), SPIN_ITERS);
    }

    #[test]
    fn late_ticks_are_charges_far_from_the_grid_together_by_index() {
        const MS: u64 = 1_000_000;
        let at = |ns: &[u64]| -> Vec<Charge> { ns.iter().map(|&at_ns| Charge { at_ns, switched: false }).collect() };
        // HZ=250, the grid at 7 ms + k x 4 ms, ticks 50 us late; ticks 10-19
        // on both CPUs and 30-34 on CPU 1 alone 3.4 ms late.
        let cpu = |alone: std::ops::Range<u64>| -> Vec<u64> {
            (0..100u64).map(|k| 7 * MS + k * 4 * MS + if (10..20).contains(&k) || alone.contains(&k) { 3_450_000 } else { 50_000 }).collect()
        };
        let late = tick_late(&[at(&cpu(0..0)), at(&cpu(30..35))]).unwrap();
        assert_eq!(late.share, 25.0 / 200.0);
        assert_eq!(late.late_us, 3_400.0, "beyond the median");
        assert_eq!(late.together, 20.0 / 25.0);
        // None late: a share of 0; too few charges to tell the tick: none.
        let on_time: Vec<u64> = (0..100u64).map(|k| 7 * MS + k * 4 * MS + 30_000).collect();
        assert_eq!(tick_late(&[at(&on_time), at(&on_time)]), Some(TickLateness { share: 0.0, late_us: 0.0, together: 0.0 }));
        assert_eq!(tick_late(&[at(&[MS, 5 * MS])]), None);
    }

    #[test]
    fn charges_beside_an_on_time_tick_or_after_a_switch_are_no_late_ticks() {
        const MS: u64 = 1_000_000;
        let on_time = |k: u64| Charge { at_ns: 7 * MS + k * 4 * MS + 30_000, switched: false };
        // Every tick on time; a wake-up onto the CPU charges the spinner 2 ms
        // after ticks 20-29 (the tick at that index is there), and the reads
        // after 10 preemptions come back 1.5 ms after ticks 40-49, whose own
        // charge went to the task that preempted.
        let mut c: Vec<Charge> = (0..100u64).filter(|k| !(40..50).contains(k)).map(on_time).collect();
        c.extend((20..30u64).map(|k| Charge { at_ns: on_time(k).at_ns + 2 * MS, ..on_time(k) }));
        c.extend((40..50u64).map(|k| Charge { at_ns: on_time(k).at_ns + 1_500_000, switched: true }));
        c.sort_by_key(|c| c.at_ns);
        assert_eq!(tick_late(&[c.clone(), c]), Some(TickLateness { share: 0.0, late_us: 0.0, together: 0.0 }));
    }

    #[test]
    fn the_probe_charges_a_spinner_at_each_tick() {
        // Wherever schedstat is: its sum moves at least every tick of a 100 Hz kernel.
        let moved = tick_charges_on(0, 100_000_000, &|| false).unwrap();
        if std::path::Path::new("/proc/thread-self/schedstat").exists() {
            assert!(moved.len() >= 5, "{} charges in 100 ms", moved.len());
        }
    }

    #[test]
    fn the_tick_latency_is_each_expiry_against_its_timers_last_start() {
        // 6.12's field order, then 6.1's; the period timer and a tick without a start are left out.
        let trace = "\
# tracer: nop
  <idle>-0  [001] d.h2.  2.518137: hrtimer_start: hrtimer=00000000aa function=tick_nohz_handler expires=2504000000 softexpires=2504000000 mode=ABS was_armed=0
  spin-151  [001] d.h..  2.522120: hrtimer_expire_entry: hrtimer=00000000aa function=tick_nohz_handler now=2504033183
  spin-151  [001] d.h1.  2.522121: hrtimer_start: hrtimer=00000000aa function=tick_nohz_handler expires=2508000000 softexpires=2508000000 mode=ABS was_armed=0
  spin-151  [001] d.h..  2.526120: hrtimer_expire_entry: hrtimer=00000000aa now=2508007000 function=tick_sched_timer
  spin-150  [000] d.h..  2.526120: hrtimer_expire_entry: hrtimer=00000000bb function=tick_nohz_handler now=2508009000
  <idle>-0  [000] d.h2.  2.526122: hrtimer_start: hrtimer=00000000cc function=sched_cfs_period_timer expires=2508000000 softexpires=2508000000 mode=ABS was_armed=0
  <idle>-0  [000] d.h1.  2.536122: hrtimer_expire_entry: hrtimer=00000000cc function=sched_cfs_period_timer now=2518000000
  spin-151  [001] d.h..  2.530120: hrtimer_expire_entry: hrtimer=00000000aa function=tick_nohz_handler now=2508020000
";
        // 33.183, 7 and 20 us late: the median is 20.
        assert_eq!(tick_latency_us(trace), Some(20.0));
        assert_eq!(tick_latency_us("# tracer: nop\n"), None);
    }
}
