//! The simulator: machine state, its setup and the event loop. The rest are
//! `impl Sim` blocks in their own modules, the way the kernel's
//! `kernel/sched/*.c` files share `struct rq`: the scheduler core (`core`),
//! the classes (`fair`, `bandwidth`, `deadline`), the tick grid (`tick`) and
//! the workloads that drive them (`workload`).

use crate::bandwidth::CfsBandwidth;
use crate::deadline::DlEntity;
use crate::event::{Event, EventQueue, Irq};
use crate::noise::{self, Stream};
use crate::output::{self, Output, Request, Requests};
use crate::phases::TaskPhases;
use crate::program::Program;
use crate::profile::{Feature, Profile};
use crate::scenario::{dl_capacity_bw, secs_to_ns, Scenario};
use crate::smt::{self, Smt};
use crate::trace::{Trace, TraceKind, TraceOptions};
use crate::types::{CpuId, SeId, ThreadId, Time, NSEC_PER_MSEC, NSEC_PER_USEC};
use crate::workload::{Driver, Service};
use std::rc::Rc;
use std::sync::Arc;

/// Simulated time 0 is uniformly between this and twice this after boot.
const UPTIME_MIN_NS: u64 = 600 * 1_000_000_000;

/// Per-CPU state: `struct rq`.
#[derive(Debug, Default)]
pub struct Rq {
    /// The running thread; `None` = idle.
    pub curr: Option<ThreadId>,
    /// When `curr` last had its thread-level time (work, cpu time) accounted.
    pub since: Time,
    pub need_resched: bool,
    /// Invalidates a pending `RunDone`.
    pub run_gen: u64,
    /// Invalidates a pending `Tick`.
    pub tick_gen: u64,
    /// The pending tick, if any: (index, time).
    pub tick_armed: Option<(u64, Time)>,
    /// Index of the first tick whose effects have not been applied yet.
    pub next_tick: u64,
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
    /// When its `CatchUp` or `Schedule` sleep ended, until it next gets a
    /// CPU: how late it was then, its program makes up (`Program::woke_late`).
    pub catch_up_woke_at: Option<Time>,
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
    fn of(list: &[Feature]) -> Self {
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
    fn new(s: &Scenario) -> Self {
        let factor = 1 + (s.machine.cpus.min(8) as u64).ilog2() as u64;
        Tunables {
            tick_ns: (1_000_000_000 + s.machine.hz as u64 / 2) / s.machine.hz as u64,
            slice_ns: s.kernel.slice_us * NSEC_PER_USEC,
            latency_ns: 6 * NSEC_PER_MSEC * factor,
            min_granularity_ns: 750 * NSEC_PER_USEC * factor,
            wakeup_granularity_ns: NSEC_PER_MSEC * factor,
            base_slice_ns: 750 * NSEC_PER_USEC * factor,
        }
    }
}

/// How a run is observed and stepped: fixed at construction, as the running
/// simulation has no switches.
#[derive(Default)]
pub struct SimOptions {
    /// Record the bandwidth trace (pools, throttles, switches) of this window,
    /// kept or handed to a sink.
    pub trace: Option<TraceOptions>,
    /// Simulate every tick, also those that cannot change the outcome: only to
    /// check that skipping them changes nothing.
    pub every_tick: bool,
}

pub struct Sim<'s> {
    pub(crate) scenario: &'s Scenario,
    pub(crate) profile: Profile,
    pub(crate) tun: Tunables,
    pub(crate) now: Time,
    pub(crate) end: Time,
    pub(crate) seed: u64,
    pub(crate) events: EventQueue,
    pub(crate) rqs: Vec<Rq>,
    pub(crate) cfs_rqs: Vec<crate::fair::CfsRq>,
    pub(crate) ses: Vec<crate::fair::Se>,
    pub(crate) threads: Vec<Thread>,
    pub(crate) tgs: Vec<TaskGroup>,
    pub(crate) services: Vec<Service>,
    /// CPUs whose `need_resched` was set during the current event.
    pub(crate) resched: Vec<CpuId>,
    /// CPUs touched during the current event; their tick is re-armed after it.
    pub(crate) dirty: Vec<CpuId>,
    /// A bit per CPU, set while it is idle (`is_idle`), for the idle-CPU search.
    pub(crate) idle_mask: Vec<u64>,
    /// A bit per CPU, set while more than one task is runnable on it
    /// (`is_overloaded`), for newly idle balancing.
    pub(crate) overload_mask: Vec<u64>,
    /// Phase-driven threads that have not finished (ends a run without `duration_s`).
    pub(crate) finite_left: usize,
    pub(crate) trace: Option<Trace>,
    pub(crate) features: Features,
    pub(crate) hw: Smt,
    /// What each task's threads run (`phases`, or trace windows expanded).
    pub(crate) task_phases: Vec<Arc<TaskPhases>>,
    /// Each task's first thread: a `Wake` phase's target.
    pub(crate) task_threads: Vec<ThreadId>,
    /// Runnable, not throttled deadline threads (running or waiting).
    pub(crate) dl_runnable: Vec<ThreadId>,
    /// Per task: CPU time in each `sample_ms` interval, and the total sampled.
    pub(crate) cpu_series: Vec<Vec<u64>>,
    cpu_sampled_ns: Vec<u64>,
    /// Per task woken from outside or by a sibling
    /// (`TaskPhases::has_requests`): its requests, each from its wake-up to
    /// the thread's next block.
    pub(crate) task_requests: Vec<Option<Requests>>,
    /// Bandwidth of the admitted deadline threads, and what admission allows.
    pub(crate) dl_total_bw: u64,
    pub(crate) dl_capacity_bw: u64,
    /// Simulate every tick (`SimOptions::every_tick`).
    pub(crate) every_tick: bool,
    pub(crate) tick_jitter_ns: u64,
    pub(crate) timer_jitter_ns: u64,
    idle_exit_ns: u64,
    pub(crate) tick_irq_ns: u64,
    /// CLOCK_MONOTONIC at simulated time 0: how long the machine has been up.
    pub(crate) uptime_ns: u64,
    /// Offset of the first tick after time 0.
    pub(crate) tick_phase: u64,
}

impl<'s> Sim<'s> {
    pub fn new(scenario: &'s Scenario, options: SimOptions) -> Self {
        let nr_cpus = scenario.machine.cpus;
        let tun = Tunables::new(scenario);
        let mut tgs = vec![TaskGroup {
            name: String::new(),
            parent: None,
            subtree: vec![0],
            shares: 1024,
            load_sum: 0,
            cfs_b: CfsBandwidth::new(scenario.kernel.profile, 0, scenario.seed, None),
        }];
        for (i, c) in scenario.cgroups.iter().enumerate() {
            let tg = i + 1;
            let parent = c.parent.as_ref().map(|p| scenario.cgroup_index(p).expect("validated") + 1).unwrap_or(0);
            tgs.push(TaskGroup {
                name: c.name.clone(),
                parent: Some(parent),
                subtree: vec![tg],
                shares: c.weight * 1024 / 100,
                load_sum: 0,
                cfs_b: CfsBandwidth::new(
                    scenario.kernel.profile,
                    tg,
                    scenario.seed,
                    c.period_timer_offset_us.map(|o| (o * 1e3) as u64),
                ),
            });
            let mut p = Some(parent);
            while let Some(a) = p {
                tgs[a].subtree.push(tg);
                p = tgs[a].parent;
            }
        }
        let task_phases: Vec<_> = scenario
            .tasks
            .iter()
            .enumerate()
            .map(|(ti, t)| {
                Arc::new(TaskPhases::seeded(t, ti, TaskPhases::threads(t), scenario.seed))
            })
            .collect();
        let task_requests = task_phases.iter().map(|p| p.has_requests().then(Requests::default)).collect();
        let mut sim = Sim {
            scenario,
            profile: scenario.kernel.profile,
            tun,
            now: 0,
            end: scenario.duration_ns(),
            seed: scenario.seed,
            events: EventQueue::default(),
            rqs: (0..nr_cpus).map(|_| Rq::default()).collect(),
            cfs_rqs: Vec::new(),
            ses: Vec::new(),
            threads: Vec::new(),
            tgs,
            services: Vec::new(),
            resched: Vec::new(),
            dirty: Vec::new(),
            idle_mask: (0..nr_cpus.div_ceil(64)).map(|w| if (w + 1) * 64 <= nr_cpus { u64::MAX } else { (1u64 << (nr_cpus % 64)) - 1 }).collect(),
            overload_mask: vec![0; nr_cpus.div_ceil(64)],
            finite_left: 0,
            trace: None,
            features: Features::of(&scenario.kernel.features),
            hw: Smt::new(nr_cpus, scenario.machine.smt, &scenario.machine.smt_speed, scenario.machine.work_speed),
            task_phases,
            task_threads: Vec::with_capacity(scenario.tasks.len()),
            dl_runnable: Vec::new(),
            cpu_series: vec![Vec::new(); scenario.tasks.len()],
            cpu_sampled_ns: vec![0; scenario.tasks.len()],
            task_requests,
            dl_total_bw: 0,
            dl_capacity_bw: dl_capacity_bw(nr_cpus, scenario.kernel.profile),
            every_tick: options.every_tick,
            tick_jitter_ns: (scenario.machine.tick_jitter_us * 1e3) as u64,
            timer_jitter_ns: (scenario.machine.timer_jitter_us * 1e3) as u64,
            idle_exit_ns: (scenario.machine.idle_exit_us * 1e3) as u64,
            tick_irq_ns: (scenario.machine.tick_irq_us * 1e3) as u64,
            uptime_ns: 0,
            tick_phase: 0,
        };
        // Simulated time 0 is some minutes after boot. The jiffy grid sits on
        // multiples of TICK_NSEC since boot (6.5+) or wherever boot left it.
        let m = &scenario.machine;
        sim.uptime_ns = match m.uptime_s {
            Some(u) => secs_to_ns(u),
            None => UPTIME_MIN_NS + noise::uniform(sim.seed, Stream::Uptime, 0, UPTIME_MIN_NS),
        };
        let boot_phase = match m.tick_phase_us {
            Some(p) => (p * 1e3) as u64,
            None if sim.profile.has_aligned_tick() => 0,
            None => noise::uniform(sim.seed, Stream::TickPhase, 0, tun.tick_ns),
        };
        sim.tick_phase = (boot_phase + tun.tick_ns - sim.uptime_ns % tun.tick_ns) % tun.tick_ns;
        sim.init_fair();
        sim.spawn_workloads();
        sim.schedule_writes();
        if scenario.sample_ms > 0 {
            sim.events.push(scenario.sample_ms * NSEC_PER_MSEC, Event::Sample(1));
        }
        if let Some(trace) = options.trace {
            sim.start_trace(trace);
        }
        sim
    }

    /// CLOCK_MONOTONIC now: what hrtimer expiries are compared against.
    pub(crate) fn monotonic(&self) -> Time {
        self.uptime_ns + self.now
    }

    pub(crate) fn nr_cpus(&self) -> usize {
        self.rqs.len()
    }

    pub(crate) fn record(&mut self, cpu: Option<CpuId>, tg: usize, kind: TraceKind) {
        if self.trace.is_some() {
            let local = cpu.map(|c| self.cfs_rqs[self.cfs_rq_id(tg, c)].runtime_remaining);
            let (now, global) = (self.now, self.tgs[tg].cfs_b.runtime);
            self.trace.as_mut().expect("tracing").push(now, cpu, tg, kind, local, global);
        }
    }

    /// Run to the end (or to the end of the trace's window, whichever comes
    /// first) and collect the output, and the trace if one was asked for.
    pub fn run(mut self) -> (Output, Option<Trace>) {
        let wall = std::time::Instant::now();
        let end = self.run_events();
        for cpu in 0..self.nr_cpus() {
            self.account_thread_time(cpu);
        }
        let out = output::collect(&self, end, self.events.processed, wall.elapsed().as_secs_f64());
        let trace = self.trace.take().map(|mut trace| {
            trace.finish((out.duration_s * 1e9).round() as Time);
            trace
        });
        (out, trace)
    }

    /// Dispatch the events to the end; returns when that is.
    pub(crate) fn run_events(&mut self) -> Time {
        let until_done = self.scenario.duration_s.is_none();
        while let Some(t) = self.events.peek_time() {
            if t > self.end || (until_done && self.finite_left == 0) {
                break;
            }
            let (t, ev) = self.events.pop().expect("peeked");
            self.now = t;
            self.dispatch(ev);
            self.finish_event();
        }
        let end = if until_done && self.finite_left == 0 { self.now } else { self.end };
        self.now = end;
        end
    }

    /// Start recording the bandwidth trace as `options` say, and end the run
    /// with its window.
    fn start_trace(&mut self, options: TraceOptions) {
        let sc = self.scenario;
        let threads = self
            .threads
            .iter()
            .map(|t| match t.driver {
                Driver::Task(i) => sc.tasks[i].name.clone(),
                Driver::Worker(i) => sc.services[i].name.clone(),
                Driver::Background => "[background]".to_string(),
            })
            .collect();
        let groups = self.tgs.iter().map(|g| g.name.clone()).collect();
        self.end = self.end.min(options.window.to_ns);
        self.trace = Some(Trace::new(self.nr_cpus(), groups, threads, options));
    }

    fn dispatch(&mut self, ev: Event) {
        match ev {
            Event::Start(tid) => {
                self.threads[tid].started_at = self.now;
                self.sched_setattr_dl(tid);
                self.advance(tid, true)
            }
            Event::Wake(tid) => self.advance(tid, true),
            Event::Signal(tid) => {
                // It takes the wake it was woken for.
                self.threads[tid].wakes_pending -= 1;
                self.advance(tid, true)
            }
            Event::RuntimeEnd { tid, gen } => self.runtime_end(tid, gen),
            Event::RunDone { cpu, gen } => {
                if self.rqs[cpu].run_gen == gen {
                    self.run_done(cpu);
                }
            }
            Event::Tick { cpu, index, gen } => {
                if self.rqs[cpu].tick_gen == gen {
                    self.rqs[cpu].tick_armed = None;
                    self.sched_tick(cpu, index);
                    // Its interrupt lasts until the period timers expiring
                    // before it ends have run.
                    if self.rqs[cpu].tick_timers.iter().any(|&(k, _)| k == index) {
                        self.rqs[cpu].irq_tick = Some(index);
                    }
                }
            }
            Event::PeriodTimer { tg, irq } => {
                let in_tick_irq = match irq {
                    Irq::Tick(cpu) => self.run_in_tick_irq(cpu, tg),
                    _ => false,
                };
                let b = &self.tgs[tg].cfs_b;
                // An idle CPU has no tick to share: the timer takes its own
                // interrupt, once the CPU has left its idle state.
                let delay = match irq {
                    _ if in_tick_irq || !self.is_idle(b.timer_cpu) => 0,
                    Irq::Own => self.idle_exit_ns,
                    Irq::Tick(_) => self.timer_jitter(Stream::PeriodTimer(tg), b.period_fired) + self.idle_exit_ns,
                    Irq::AfterIdle => 0,
                };
                if delay > 0 {
                    self.events.push(self.now + delay, Event::PeriodTimer { tg, irq: Irq::AfterIdle });
                } else {
                    self.sched_cfs_period_timer(tg);
                }
            }
            Event::SlackTimer(tg) => self.sched_cfs_slack_timer(tg),
            Event::Write { index, n } => self.cpu_max_write(index, n),
            Event::Arrival(si) => self.arrival(si),
            Event::DlRuntimeEnd { cpu, gen } => {
                if self.rqs[cpu].run_gen == gen {
                    self.dl_runtime_exceeded(cpu);
                }
            }
            Event::DlReplenish(tid) => self.dl_replenish(tid),
            Event::DlRetry(tid) => self.dl_retry(tid),
            Event::DlProfile { tid, gen } => self.dl_profile_start(tid, gen),
            Event::DlProfileEnd { tid, gen } => self.dl_profile_end(tid, gen),
            Event::Sample(n) => self.sample(n),
        }
    }

    /// After every event: reschedule the CPUs that asked for it, then re-arm
    /// the ticks of every CPU whose state changed.
    fn finish_event(&mut self) {
        while let Some(cpu) = self.resched.pop() {
            if self.rqs[cpu].need_resched && !self.preemption_held(cpu) {
                self.schedule(cpu);
            }
        }
        while let Some(cpu) = self.dirty.pop() {
            self.rqs[cpu].dirty = false;
            self.arm_tick(cpu);
        }
    }

    /// Account the running thread's CPU time and work up to now.
    pub(crate) fn account_thread_time(&mut self, cpu: CpuId) {
        let speed = self.hw.speed_ppm(cpu);
        let rq = &mut self.rqs[cpu];
        if let Some(tid) = rq.curr {
            let delta = self.now - rq.since;
            rq.since = self.now;
            let th = &mut self.threads[tid];
            th.cpu_ns += delta;
            let stalled = delta.min(th.stall_left);
            th.stall_left -= stalled;
            let work = smt::work_in(delta - stalled, speed).min(th.work_left);
            th.work_left -= work;
            th.work_ns += work;
            self.update_curr_dl(tid, delta);
        }
    }

    /// `cpu` spends `ns` in the kernel: its thread runs (and is charged) but
    /// does no work meanwhile.
    pub(crate) fn stall(&mut self, cpu: CpuId, ns: u64) {
        match self.rqs[cpu].curr {
            Some(tid) => {
                self.account_thread_time(cpu);
                self.threads[tid].stall_left += ns;
                self.arm_run_done(cpu);
            }
            None => self.rqs[cpu].pending_stall += ns,
        }
    }

    /// A thread's CPU time up to now, without accounting it (read-only).
    pub(crate) fn thread_cpu_ns(&self, tid: ThreadId) -> u64 {
        let th = &self.threads[tid];
        let rq = &self.rqs[th.cpu];
        th.cpu_ns + if rq.curr == Some(tid) { self.now - rq.since } else { 0 }
    }

    /// The n-th `sample_ms` boundary: every task's CPU time since the last one.
    /// One pass over the threads, whatever the number of tasks.
    fn sample(&mut self, n: u64) {
        let mut totals = vec![0u64; self.scenario.tasks.len()];
        for tid in 0..self.threads.len() {
            if let Driver::Task(ti) = self.threads[tid].driver {
                totals[ti] += self.thread_cpu_ns(tid);
            }
        }
        for (ti, total) in totals.into_iter().enumerate() {
            self.cpu_series[ti].push(total - self.cpu_sampled_ns[ti]);
            self.cpu_sampled_ns[ti] = total;
        }
        self.events.push((n + 1) * self.scenario.sample_ms * NSEC_PER_MSEC, Event::Sample(n + 1));
    }

    /// Arm the `RunDone` of the thread now running on `cpu`.
    pub(crate) fn arm_run_done(&mut self, cpu: CpuId) {
        let speed = self.hw.speed_ppm(cpu);
        let rq = &mut self.rqs[cpu];
        rq.run_gen += 1;
        if let Some(tid) = rq.curr {
            let th = &self.threads[tid];
            let at = self.now + th.stall_left + smt::time_for(th.work_left, speed);
            let gen = rq.run_gen;
            self.events.push(at, Event::RunDone { cpu, gen });
            if let Some(dl) = th.dl.as_ref().filter(|d| d.admitted) {
                self.events.push(self.now + dl.runtime.max(0) as u64, Event::DlRuntimeEnd { cpu, gen });
            }
        }
    }

}
