//! The simulator: machine state, its setup and the event loop. The rest are
//! `impl Sim` blocks in their own modules, the way the kernel's
//! `kernel/sched/*.c` files share `struct rq`: the scheduler core (`core`),
//! the classes (`fair`, `bandwidth`, `deadline`), the tick grid (`tick`) and
//! the workloads that drive them (`workload`); the state they share is in
//! `rq`.

use crate::engine::cfs_bandwidth::CfsBandwidth;
use crate::engine::event::{wheel_pays, Event, HeapQueue, Irq, Queue, Slot};
use crate::engine::fair::{CfsRq, NewidleStats, Se};
use crate::engine::rq::{Features, Rq, TaskGroup, Thread, Tunables};
use crate::engine::smt::{self, Smt};
use crate::engine::stop::StopAt;
use crate::engine::tick::{TickGrid, TickLate};
use crate::engine::sis_util::SisUtil;
use crate::engine::util_sum::UtilSum;
use crate::engine::wheel::WheelQueue;
use crate::engine::workload::{Driver, Service};
use crate::format::program::Step;
use crate::format::scenario::Scenario;
use crate::vocab::dl::dl_capacity_bw;
use crate::vocab::plan::Plan;
use crate::vocab::noise::{self, Stream};
use crate::vocab::output::{Output, Requests};
use crate::vocab::profile::Profile;
use crate::vocab::stop::Stop;
use crate::vocab::trace::{Trace, TraceKind, TraceOptions};
use crate::vocab::types::{secs_to_ns, CpuId, ThreadId, Time, NSEC_PER_MSEC};

/// Simulated time 0 is uniformly between this and twice this after boot.
const UPTIME_MIN_NS: u64 = 600 * 1_000_000_000;

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
    /// Stop once this cgroup's verdict is certain (`engine::stop`): the
    /// output then says `stopped` and is not a whole run's.
    pub stop: Option<Stop>,
}

/// A run's state, generic over its event queue (`event::Queue`): the engine
/// is built once per queue, so that the queue costs no dispatch per event.
pub struct Sim<'s, Q = HeapQueue> {
    pub(crate) scenario: &'s Scenario,
    /// What it runs: the scenario with its seeded draws taken.
    pub(crate) plan: Plan,
    pub(crate) profile: Profile,
    pub(crate) tun: Tunables,
    pub(crate) now: Time,
    pub(crate) end: Time,
    pub(crate) seed: u64,
    pub(crate) events: Q,
    pub(crate) rqs: Vec<Rq>,
    pub(crate) cfs_rqs: Vec<CfsRq>,
    pub(crate) ses: Vec<Se>,
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
    /// The CPUs' utilization sum in closed form, for SIS_UTIL's scan depth.
    pub(crate) util_sum: UtilSum,
    /// SIS_UTIL's stored scan depth and the idle ticks that write it.
    pub(crate) sis_util: SisUtil,
    /// `rd->overloaded`: set when a CPU gets a second runnable task, cleared
    /// only by a balance that finds none with two.
    pub(crate) rd_overloaded: bool,
    /// The machine's (one LLC domain's) newly idle balance statistics.
    pub(crate) newidle: NewidleStats,
    /// Phase-driven threads that have not finished (ends a run without `duration_s`).
    pub(crate) finite_left: usize,
    pub(crate) trace: Option<Trace>,
    pub(crate) features: Features,
    pub(crate) hw: Smt,
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
    pub(crate) timer_jitter_ns: u64,
    idle_exit_ns: u64,
    pub(crate) tick_irq_ns: u64,
    /// `machine.wakeup_cost_us`: CPU charged to a task's or worker's thread
    /// per wake-up, before its run's work (`advance`).
    pub(crate) wakeup_cost_ns: u64,
    /// CLOCK_MONOTONIC at simulated time 0: how long the machine has been up.
    pub(crate) uptime_ns: u64,
    /// Where each CPU's ticks fall.
    pub(crate) ticks: TickGrid,
    /// The armed stop (`SimOptions::stop`), and when it ended the run.
    pub(crate) stop: Option<StopAt>,
    pub(crate) stopped_at: Option<Time>,
    /// The CPU whose `RunDone` this event re-arms before it ends (`run_done`:
    /// its thread runs on or blocks, and the next one's is armed), until it
    /// does: a stall on it meanwhile need not arm one that is replaced.
    pub(crate) rearm_run_done: Option<CpuId>,
    /// `(t, n)`: the CPUs below `n` have had their tick at `t` (at an
    /// instant every other event runs first, then the ticks and the timers
    /// of their interrupts by CPU: `event::key`), so a catch-up at `t`
    /// applies a skipped tick at `t` only on those (`tick_due_by`). Set by
    /// the class-1 events only, so that other events pay nothing.
    pub(crate) ticks_run_at: (Time, CpuId),
}

/// A run with the event queue its machine takes (`event::wheel_pays`).
pub enum Queued<'s> {
    Heap(Sim<'s, HeapQueue>),
    Wheel(Sim<'s, WheelQueue>),
}

impl<'s> Sim<'s> {
    /// A run of `scenario`, its event queue chosen by the machine's tick
    /// rate; the queue changes the speed only, not the outcome.
    pub fn new(scenario: &'s Scenario, options: SimOptions) -> Queued<'s> {
        let tick_ns = Tunables::new(scenario).tick_ns;
        if wheel_pays(scenario.machine.cpus, tick_ns) {
            Queued::Wheel(Sim::build(scenario, options))
        } else {
            Queued::Heap(Sim::build(scenario, options))
        }
    }
}

impl Queued<'_> {
    /// `Sim::run` on the chosen queue.
    pub fn run(self) -> (Output, Option<Trace>) {
        match self {
            Queued::Heap(sim) => sim.run(),
            Queued::Wheel(sim) => sim.run(),
        }
    }

    /// `Sim::run_steps` on the chosen queue.
    pub fn run_steps(self) -> Vec<Vec<Step>> {
        match self {
            Queued::Heap(sim) => sim.run_steps(),
            Queued::Wheel(sim) => sim.run_steps(),
        }
    }
}

impl<'s, Q: Queue> Sim<'s, Q> {
    /// A run of `scenario` on the queue `Q`.
    pub fn build(scenario: &'s Scenario, options: SimOptions) -> Self {
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
        let plan = Plan::of(scenario);
        let task_requests = plan.tasks.iter().map(|t| t.phases.has_requests().then(Requests::default)).collect();
        let mut sim = Sim {
            scenario,
            plan,
            profile: scenario.kernel.profile,
            tun,
            now: 0,
            end: scenario.duration_ns(),
            seed: scenario.seed,
            events: Q::new(nr_cpus, tun.tick_ns),
            rqs: (0..nr_cpus).map(|_| Rq { run_done_at: Time::MAX, ..Rq::default() }).collect(),
            cfs_rqs: Vec::new(),
            ses: Vec::new(),
            threads: Vec::new(),
            tgs,
            services: Vec::new(),
            resched: Vec::new(),
            dirty: Vec::new(),
            idle_mask: (0..nr_cpus.div_ceil(64)).map(|w| if (w + 1) * 64 <= nr_cpus { u64::MAX } else { (1u64 << (nr_cpus % 64)) - 1 }).collect(),
            overload_mask: vec![0; nr_cpus.div_ceil(64)],
            util_sum: UtilSum::new(nr_cpus),
            sis_util: SisUtil::new(nr_cpus),
            rd_overloaded: false,
            newidle: NewidleStats::default(),
            finite_left: 0,
            trace: None,
            features: Features::of(&scenario.kernel.features),
            hw: Smt::new(nr_cpus, scenario.machine.smt, &scenario.machine.smt_speed, scenario.machine.work_speed),
            task_threads: Vec::with_capacity(scenario.tasks.len()),
            dl_runnable: Vec::new(),
            cpu_series: vec![Vec::new(); scenario.tasks.len()],
            cpu_sampled_ns: vec![0; scenario.tasks.len()],
            task_requests,
            dl_total_bw: 0,
            dl_capacity_bw: dl_capacity_bw(nr_cpus, scenario.kernel.profile),
            every_tick: options.every_tick,
            ticks: TickGrid {
                tick_ns: tun.tick_ns,
                phase_ns: 0,
                skew_ns: TickGrid::skew_ns(tun.tick_ns, scenario.kernel.skew_tick, nr_cpus),
                jitter_ns: (scenario.machine.tick_jitter_us * 1e3) as u64,
                late: TickLate::new(scenario.machine.tick_late_share, scenario.machine.tick_late_us, scenario.machine.tick_late_together),
                noise: noise::Seeded::new(scenario.seed),
            },
            timer_jitter_ns: (scenario.machine.timer_jitter_us * 1e3) as u64,
            idle_exit_ns: (scenario.machine.idle_exit_us * 1e3) as u64,
            tick_irq_ns: (scenario.machine.tick_irq_us * 1e3) as u64,
            wakeup_cost_ns: (scenario.machine.wakeup_cost_us * 1e3).round() as u64,
            uptime_ns: 0,
            stop: None,
            stopped_at: None,
            rearm_run_done: None,
            ticks_run_at: (0, 0),
        };
        // Simulated time 0 is some minutes after boot. The jiffy grid sits on
        // multiples of TICK_NSEC since boot (`has_aligned_tick`) or wherever boot left it.
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
        sim.ticks.phase_ns = (boot_phase + tun.tick_ns - sim.uptime_ns % tun.tick_ns) % tun.tick_ns;
        sim.init_fair();
        sim.spawn_workloads();
        if scenario.sample_ms > 0 {
            sim.events.push(scenario.sample_ms * NSEC_PER_MSEC, Event::Sample(1));
        }
        if let Some(trace) = options.trace {
            sim.start_trace(trace);
        }
        if let Some(stop) = &options.stop {
            sim.arm_stop(stop); // after the trace's window, which may end the run first
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
        let out = crate::engine::collect::collect(&self, end, self.events.processed(), wall.elapsed().as_secs_f64());
        let trace = self.trace.take().map(|mut trace| {
            trace.finish((out.duration_s * 1e9).round() as Time);
            trace
        });
        (out, trace)
    }

    /// Dispatch the events to the end; returns when that is.
    pub(crate) fn run_events(&mut self) -> Time {
        let until_done = self.scenario.duration_s.is_none();
        while !(until_done && self.finite_left == 0) {
            let Some((t, ev)) = self.events.pop_until(self.end) else { break };
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
            // The queue holds only the last one armed: re-arming replaced
            // (and disarming cancelled) the ones before.
            Event::RunDone { cpu, gen } => {
                debug_assert_eq!(self.rqs[cpu].run_gen, gen, "a replaced RunDone was popped");
                self.rqs[cpu].run_done_at = Time::MAX;
                self.run_done(cpu);
            }
            Event::Tick { cpu, index, gen } => {
                debug_assert_eq!(self.rqs[cpu].tick_gen, gen, "a replaced Tick was popped");
                self.tick_runs(cpu);
                (self.rqs[cpu].tick_armed, self.rqs[cpu].tick_queued) = (None, false);
                self.sched_tick(cpu, index);
                // Its interrupt lasts until the period timers expiring
                // before it ends have run.
                if self.rqs[cpu].tick_timers.iter().any(|&(k, _)| k == index) {
                    self.rqs[cpu].irq_tick = Some(index);
                }
            }
            Event::PeriodTimer { tg, irq } => {
                let in_tick_irq = match irq {
                    Irq::Tick(cpu) => {
                        self.tick_runs(cpu);
                        self.run_in_tick_irq(cpu, tg)
                    }
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
        if let Some(cpu) = self.rearm_run_done {
            debug_assert!(false, "CPU {cpu}'s RunDone was to be re-armed in the event");
            self.arm_run_done(cpu);
        }
    }

    /// Account the running thread's CPU time and work up to now.
    /// Nothing to do when it was accounted up to now already (a switch
    /// after the event's own account): every term would add 0.
    pub(crate) fn account_thread_time(&mut self, cpu: CpuId) {
        let rq = &self.rqs[cpu];
        if rq.since == self.now {
            return;
        }
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
                if self.rearm_run_done != Some(cpu) {
                    self.arm_run_done(cpu);
                }
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

    /// Arm the `RunDone` of the thread now running on `cpu` (replacing the
    /// pending one), or cancel it when the CPU is idle.
    pub(crate) fn arm_run_done(&mut self, cpu: CpuId) {
        if self.rearm_run_done == Some(cpu) {
            self.rearm_run_done = None;
        }
        let speed = self.hw.speed_ppm(cpu);
        let rq = &mut self.rqs[cpu];
        rq.run_gen += 1;
        if let Some(tid) = rq.curr {
            let th = &self.threads[tid];
            let at = self.now + th.stall_left + smt::time_for(th.work_left, speed);
            let gen = rq.run_gen;
            rq.run_done_at = at;
            self.events.push(at, Event::RunDone { cpu, gen });
            if let Some(dl) = th.dl.as_ref().filter(|d| d.admitted) {
                self.events.push(self.now + dl.runtime.max(0) as u64, Event::DlRuntimeEnd { cpu, gen });
            }
        } else if rq.run_done_at != Time::MAX {
            // One is queued (`run_done_at` is `Time::MAX` once it ran or
            // was cancelled): most CPUs go idle at their `RunDone`, which
            // left none to cancel.
            rq.run_done_at = Time::MAX;
            self.events.cancel(Slot::RunDone(cpu));
        }
        // A CPU touched by this event has its tick armed at the event's end.
        if !self.rqs[cpu].dirty {
            self.queue_tick_if_before_run_done(cpu);
        }
    }

}
