//! The state the scheduler's files share, as `kernel/sched/sched.h` declares
//! it: `struct rq`, the threads (`task_struct`), task groups, the proposed
//! mechanisms switched on (`sched_feat`'s analogue) and the tunables.

use crate::engine::cfs_bandwidth::CfsBandwidth;
use crate::engine::deadline::DlEntity;
use crate::engine::workload::Driver;
use crate::format::program::Program;
use crate::format::scenario::Scenario;
use crate::vocab::output::Request;
use crate::vocab::profile::Feature;
use crate::vocab::types::{CpuId, SeId, ThreadId, Time, NSEC_PER_MSEC, NSEC_PER_USEC};
use std::rc::Rc;

/// Per-CPU state: `struct rq`.
#[derive(Debug, Default)]
pub struct Rq {
    /// The running thread; `None` = idle.
    pub curr: Option<ThreadId>,
    /// When `curr` last had its thread-level time (work, cpu time) accounted.
    pub since: Time,
    pub need_resched: bool,
    /// The generation of the pending `RunDone` (and `DlRuntimeEnd`).
    pub run_gen: u64,
    /// The generation of the pending `Tick`.
    pub tick_gen: u64,
    /// The next tick that can change something (`next_interesting_tick`), if any.
    pub tick_armed: Option<u64>,
    /// Whether `tick_armed` is in the event queue: a tick that expires at
    /// or after the pending `RunDone` waits out of it (`arm_tick`).
    pub tick_queued: bool,
    /// When the pending `RunDone` fires (`Time::MAX`: none pending).
    pub run_done_at: Time,
    /// Index of the first tick whose effects have not been applied yet.
    pub next_tick: u64,
    /// When tick `next_tick` runs (`TickGrid::tick_time`), or 0 when not
    /// computed yet: a memo that spares the tick grid's noise hash.
    pub next_tick_at: Time,
    /// Period timers that run in the interrupt of one of this CPU's ticks
    /// (`Irq::Tick`), until they fire: (tick index, task group).
    pub tick_timers: Vec<(u64, usize)>,
    /// The tick whose interrupt is running: it has period timers still to
    /// run, and a preemption waits for them (the kernel reschedules on the
    /// return from the interrupt).
    pub irq_tick: Option<u64>,
    /// Touched during the current event (listed in `Sim::dirty`).
    pub dirty: bool,
    /// The deadline thread global EDF assigned to this CPU; it runs ahead of
    /// every fair thread.
    pub dl: Option<ThreadId>,
    /// Threads enqueued on this CPU (running or waiting), for idle pulling.
    pub runnable: Vec<ThreadId>,
    /// CPU time spent in the kernel (global-pool accesses) while no thread
    /// was current; the next thread to run pays it.
    pub pending_stall: u64,
    /// The CPU's utilization as PELT's `util_avg` tracks it (0..=1024, a
    /// 32 ms half-life), as of `util_at`; SIS_UTIL reads it.
    pub util_avg: f64,
    pub util_at: Time,
    /// Newly idle balances this CPU has thrown `NI_RANDOM`'s dice for.
    pub newidle_draws: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ThreadState {
    NotStarted,
    Runnable,
    Sleeping,
    Done,
}

#[derive(Debug)]
pub struct Thread {
    pub driver: Driver,
    /// Task group (index into `tgs`).
    pub tg: usize,
    pub se: SeId,
    pub cpu: CpuId,
    /// Shared by the threads of a task: a run may have many threads and many CPUs.
    pub allowed: Rc<[CpuId]>,
    pub state: ThreadState,
    /// A task's thread's place in its phases.
    pub program: Option<Program>,
    /// Background activity: arrivals drawn so far.
    pub loops_done: i64,
    /// Work left in the current run phase, in ns at nominal speed.
    pub work_left: u64,
    /// Run phases begun: the index of the next one's draw of its spread
    /// (`machine.work_speed_cv`).
    pub runs: u64,
    pub cpu_ns: u64,
    pub work_ns: u64,
    pub finished_at: Option<Time>,
    /// The request a worker is serving, or that a phase-driven thread was
    /// woken for (`SleepUntil`, `Wait`) and has not answered.
    pub request: Option<Request>,
    /// CPU time still to spend before work resumes (kernel overhead charged
    /// to this thread).
    pub stall_left: u64,
    /// SCHED_DEADLINE state, for threads of `policy = "deadline"` tasks.
    pub dl: Option<DlEntity>,
    /// When the thread started (its first wake-up).
    pub started_at: Time,
    /// Counts `runtime` phases begun, so that a `RuntimeEnd` meets its own.
    pub runtime_gen: u64,
    /// `Wake`s of siblings not yet met by a `Wait` of this thread.
    pub wakes_pending: u64,
    /// `p->recent_used_cpu`: the CPU it ran on before its previous one.
    pub recent_used_cpu: CpuId,
    /// When its `CatchUp` sleep ended, until it next gets a CPU: how late it
    /// was then, its program makes up (`Program::woke_late`).
    pub catch_up_woke_at: Option<Time>,
}

impl Thread {
    /// Whether it may run on `cpu`, of a machine of `nr_cpus`. Its list holds
    /// distinct CPUs of the machine, so one as long as the machine's is every
    /// CPU: no scan of it on each wake-up.
    pub fn allows(&self, cpu: CpuId, nr_cpus: usize) -> bool {
        debug_assert!(self.allowed.len() != nr_cpus || self.allowed.iter().all(|&c| c < nr_cpus));
        self.allowed.len() == nr_cpus || self.allowed.contains(&cpu)
    }
}

/// A task group (cgroup) and its `cfs_bandwidth`.
#[derive(Debug)]
pub struct TaskGroup {
    pub name: String,
    pub parent: Option<usize>,
    /// Descendants including itself, in tree order (`walk_tg_tree_from`).
    pub subtree: Vec<usize>,
    /// `tg->shares`: cpu.weight scaled to 1024 = weight 100.
    pub shares: u64,
    /// Sum over CPUs of this group's cfs_rq load (instantaneous `tg->load_avg`).
    pub load_sum: u64,
    pub cfs_b: CfsBandwidth,
}

/// The proposed mechanisms switched on in `kernel.features`.
#[derive(Debug, Clone, Copy, Default)]
pub struct Features {
    pub slush_fund: bool,
    pub noop_update: bool,
    pub interleave_timers: bool,
    pub atomic_pool: bool,
    pub hard_limits: bool,
}

impl Features {
    pub(crate) fn of(list: &[Feature]) -> Self {
        Features {
            slush_fund: list.contains(&Feature::SlushFund),
            noop_update: list.contains(&Feature::NoopUpdate),
            interleave_timers: list.contains(&Feature::InterleaveTimers),
            atomic_pool: list.contains(&Feature::AtomicPool),
            hard_limits: list.contains(&Feature::HardLimits),
        }
    }
}

/// Scheduler constants derived from the machine (`sched_init_granularity`).
#[derive(Debug, Clone, Copy)]
pub struct Tunables {
    pub tick_ns: u64,
    pub slice_ns: u64,
    /// `sysctl_sched_latency`, scaled by 1 + ilog2(min(cpus, 8)).
    pub latency_ns: u64,
    pub min_granularity_ns: u64,
    pub wakeup_granularity_ns: u64,
    /// EEVDF `sysctl_sched_base_slice`.
    pub base_slice_ns: u64,
}

impl Tunables {
    pub(crate) fn new(s: &Scenario) -> Self {
        let factor = 1 + (s.machine.cpus.min(8) as u64).ilog2() as u64;
        Tunables {
            tick_ns: (1_000_000_000 + s.machine.hz as u64 / 2) / s.machine.hz as u64,
            slice_ns: s.kernel.slice_us * NSEC_PER_USEC,
            latency_ns: 6 * NSEC_PER_MSEC * factor,
            min_granularity_ns: 750 * NSEC_PER_USEC * factor,
            wakeup_granularity_ns: NSEC_PER_MSEC * factor,
            base_slice_ns: if s.kernel.profile.has_base_slice_700us() { 700 } else { 750 } * NSEC_PER_USEC * factor,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Tunables;
    use crate::format::load::load;

    fn base_slice_ns(profile: &str, cpus: u32) -> u64 {
        let text = format!("name = \"t\"\nduration_s = 1\n[machine]\ncpus = {cpus}\n[kernel]\nprofile = \"{profile}\"\n");
        Tunables::new(&load(&text, &[]).unwrap()).base_slice_ns
    }

    /// 0.75 ms before 2ae891b82695 and 0.70 ms after, times 1 + ilog2(min(cpus, 8)).
    #[test]
    fn the_base_slice_is_0_70_ms_from_6_12_on() {
        assert_eq!(base_slice_ns("6.6", 2), 1_500_000);
        assert_eq!(base_slice_ns("6.12", 2), 1_400_000);
        assert_eq!(base_slice_ns("6.18", 1), 700_000);
        assert_eq!(base_slice_ns("6.18", 64), 2_800_000);
    }
}
