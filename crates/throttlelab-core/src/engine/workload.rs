//! The workloads that drive the scheduler: phase-driven tasks, services'
//! workers and their request arrivals, background activity on the host, and
//! the scenario's `[[write]]`s to cpu.max. Each thread is moved on by its
//! driver (`advance`), which wakes or blocks it through the core.

use crate::engine::deadline::DlEntity;
use crate::engine::event::Event;
use crate::vocab::noise::{self, Arrival, Stream};
use crate::vocab::output::{Request, Requests};
use crate::format::phases::TaskPhases;
use crate::vocab::phase::{Phase, TimerMode};
use crate::format::scenario::Policy;
use crate::engine::rq::{Thread, ThreadState};
use crate::engine::sim::Sim;
use crate::vocab::types::{ms_to_ns, CpuId, ThreadId, Time, NSEC_PER_MSEC, NSEC_PER_USEC};
use std::collections::VecDeque;
use std::rc::Rc;

/// A `runtime` phase of `ns` gives its thread this many times `ns` of work:
/// at full speed (1, the most `smt_speed` allows) it cannot finish before
/// its `RuntimeEnd`.
const RUNTIME_WORK_BOUND: u64 = 2;

/// What drives a thread: a phase list, or requests of a service.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Driver {
    Task(usize),
    Worker(usize),
    /// Background activity on the host, from a home CPU (not reported).
    Background,
}

pub struct Service {
    pub arrival: Arrival,
    pub rate_per_s: f64,
    pub cost_ns: u64,
    /// Requests drawn so far: the index of the next arrival's draw.
    pub arrivals: u64,
    pub queue: VecDeque<Time>,
    pub idle_workers: Vec<ThreadId>,
    pub requests: Requests,
}

impl Sim<'_> {
    /// Allowed CPUs: the task's list within its cgroup's cpuset (tg 0 is the root).
    fn allowed_cpus(&self, tg: usize, cpus: &Option<String>) -> Rc<[CpuId]> {
        self.scenario.allowed_cpus(tg.checked_sub(1), cpus).into()
    }

    fn tg_of(&self, cgroup: &Option<String>) -> usize {
        self.scenario.group_of(cgroup).map_or(0, |i| i + 1)
    }

    fn add_thread(&mut self, driver: Driver, tg: usize, allowed: Rc<[CpuId]>) -> ThreadId {
        let tid = self.threads.len();
        let cpu = allowed[0];
        let se = self.new_task_se(tid, tg, cpu);
        self.threads.push(Thread {
            driver,
            tg,
            se,
            cpu,
            allowed,
            state: ThreadState::NotStarted,
            phase: 0,
            loops_done: 0,
            work_left: 0,
            cpu_ns: 0,
            work_ns: 0,
            finished_at: None,
            request: None,
            stall_left: 0,
            dl: None,
            started_at: 0,
            timers: Vec::new(),
            runtime_gen: 0,
            wakes_pending: 0,
            recent_used_cpu: cpu,
            catch_up_woke_at: None,
            catch_up_late_ns: 0,
        });
        tid
    }

    pub(crate) fn spawn_workloads(&mut self) {
        let s = self.scenario;
        for (ti, t) in s.tasks.iter().enumerate() {
            self.task_threads.push(self.threads.len());
            let tg = self.tg_of(&t.cgroup);
            let allowed = self.allowed_cpus(tg, &t.cpus);
            for i in 0..TaskPhases::threads(t) {
                let cpus = if t.pin { Rc::from([allowed[i % allowed.len()]]) } else { allowed.clone() };
                let tid = self.add_thread(Driver::Task(ti), tg, cpus);
                if t.policy == Policy::Deadline {
                    let (runtime, deadline, period) = t.dl_params_ns().expect("validated");
                    let profile_ns = t.profile_ms.map(|ms| ms * NSEC_PER_MSEC);
                    self.threads[tid].dl = Some(DlEntity::new(runtime, deadline, period, t.retry_ms * NSEC_PER_MSEC, profile_ns));
                }
                let start = t.start_us * NSEC_PER_USEC
                    + noise::uniform(self.seed, Stream::ThreadStart(tid), 0, t.start_spread_us * NSEC_PER_USEC);
                self.events.push(start, Event::Start(tid));
                if t.effective_loops() >= 0 {
                    self.finite_left += 1;
                }
            }
        }
        if s.machine.background_per_s > 0.0 && s.machine.background_us > 0.0 {
            // One source per CPU, woken like any task: on an idle CPU if there
            // is one (ftrace on the host: a spinner alone on a CPU next to an
            // idle one was preempted 1.5 times a second, two spinners on both
            // CPUs 20 times a second per CPU). The home CPU comes first.
            let n = self.nr_cpus();
            for cpu in 0..n {
                let tid = self.add_thread(Driver::Background, 0, (0..n).map(|i| (cpu + i) % n).collect());
                self.threads[tid].state = ThreadState::Sleeping;
                let at = self.background_gap(tid);
                self.events.push(at, Event::Wake(tid));
            }
        }
        for (si, svc) in s.services.iter().enumerate() {
            let tg = self.tg_of(&svc.cgroup);
            let allowed = self.allowed_cpus(tg, &svc.cpus);
            let mut idle = Vec::new();
            for _ in 0..svc.workers {
                let tid = self.add_thread(Driver::Worker(si), tg, allowed.clone());
                self.threads[tid].state = ThreadState::Sleeping;
                idle.push(tid);
            }
            idle.reverse();
            self.services.push(Service {
                arrival: svc.arrival,
                rate_per_s: svc.rate_per_s,
                cost_ns: svc.cost_us * NSEC_PER_USEC,
                arrivals: 0,
                queue: VecDeque::new(),
                idle_workers: idle,
                requests: Requests::default(),
            });
            let first = self.interarrival(si);
            self.events.push(first, Event::Arrival(si));
        }
    }

    pub(crate) fn schedule_writes(&mut self) {
        for (index, w) in self.scenario.writes.iter().enumerate() {
            let at = ms_to_ns(w.at_ms.or(w.start_ms).expect("validated"));
            self.events.push(at, Event::Write { index, n: 0 });
        }
    }

    /// When the next request arrives at service `si`.
    fn interarrival(&mut self, si: usize) -> Time {
        let svc = &mut self.services[si];
        let n = svc.arrivals;
        svc.arrivals += 1;
        self.now + noise::interarrival_ns(self.seed, si, n, svc.arrival, svc.rate_per_s)
    }

    pub(crate) fn arrival(&mut self, si: usize) {
        self.services[si].queue.push_back(self.now);
        if let Some(tid) = self.services[si].idle_workers.pop() {
            self.advance(tid, true, false);
        }
        let next = self.interarrival(si);
        self.events.push(next, Event::Arrival(si));
    }

    /// A `[[write]]`: `tg_set_cfs_bandwidth` with the given (or unchanged) values.
    pub(crate) fn cpu_max_write(&mut self, index: usize, n: u64) {
        let w = &self.scenario.writes[index];
        let tg = self.scenario.cgroup_index(&w.cgroup).expect("validated") + 1;
        let new = w.applied_to(self.tgs[tg].cfs_b.limit());
        self.tg_set_cfs_bandwidth(tg, new.period_us * NSEC_PER_USEC, new.quota_us.ns(), new.burst_us * NSEC_PER_USEC);
        if let (Some(start), Some(every)) = (w.start_ms, w.every_ms) {
            let at = ms_to_ns(start) + (n + 1) * ms_to_ns(every);
            self.events.push(at, Event::Write { index, n: n + 1 });
        }
    }

    /// A `runtime` phase's wall time is up: a running thread ends it now, a
    /// waiting one as soon as it runs again (rt-app reads the clock between
    /// chunks of 32 us of work, here taken as none).
    pub(crate) fn runtime_end(&mut self, tid: ThreadId, gen: u64) {
        let th = &self.threads[tid];
        if th.runtime_gen != gen || th.state == ThreadState::Done {
            return;
        }
        let cpu = th.cpu;
        if self.rqs[cpu].curr == Some(tid) {
            self.touch(cpu);
            self.account_thread_time(cpu);
            self.threads[tid].work_left = 0;
            self.run_done(cpu);
        } else {
            self.threads[tid].work_left = 0;
        }
    }

    /// The running thread finished its run phase.
    pub(crate) fn run_done(&mut self, cpu: CpuId) {
        self.touch(cpu);
        self.account_thread_time(cpu);
        let tid = self.rqs[cpu].curr.expect("RunDone on an idle CPU");
        self.dl_job_done(tid);
        self.advance(tid, false, true);
    }

    /// Move a thread on from where it stands. `waking`: it is not on a
    /// runqueue (start, end of sleep, new request); otherwise it is running.
    /// `completed`: the phase it was in is over.
    pub(crate) fn advance(&mut self, tid: ThreadId, waking: bool, completed: bool) {
        let runnable = match self.threads[tid].driver {
            Driver::Task(ti) => self.next_phase(tid, ti, completed),
            Driver::Worker(si) => self.next_request(tid, si),
            Driver::Background => self.next_background(tid, waking),
        };
        match (waking, runnable, self.is_dl(tid)) {
            (true, true, true) => self.dl_wakeup(tid),
            (true, true, false) => self.try_to_wake_up(tid),
            (false, true, _) => self.arm_run_done(self.threads[tid].cpu),
            (true, false, _) => {}
            (false, false, true) => self.dl_block(tid),
            (false, false, false) => self.block(tid),
        }
    }

    /// Step a phase-driven thread; returns whether it now has work to run.
    fn next_phase(&mut self, tid: ThreadId, ti: usize, completed: bool) -> bool {
        let task = &self.scenario.tasks[ti];
        let phases = &self.task_phases[ti];
        // A `SleepUntil` woken at its time is passed below, which notes its request.
        if completed && !matches!(phases.get(self.threads[tid].phase), Phase::SleepUntil(_)) {
            self.threads[tid].phase += 1;
        }
        self.threads[tid].state = ThreadState::Runnable;
        loop {
            let th = &mut self.threads[tid];
            if th.phase >= phases.len() {
                th.phase = 0;
                th.loops_done += 1;
                if task.effective_loops() >= 0 && th.loops_done >= task.effective_loops() {
                    th.state = ThreadState::Done;
                    th.finished_at = Some(self.now);
                    self.finite_left -= 1;
                    return false;
                }
            }
            let phase = phases.get(th.phase);
            if phase.blocks() {
                // The request it was woken for is answered: a captured
                // thread blocked here, after sending its response.
                if let (Some(request), Some(requests)) = (th.request, &mut self.task_requests[ti]) {
                    requests.answered(request, self.now);
                    th.request = None;
                }
            }
            match phase {
                Phase::Run(0) | Phase::Runtime(0) | Phase::Sleep(0) => th.phase += 1,
                Phase::Run(w) => {
                    th.work_left = w;
                    // 004 3.3: a deadline thread's runtime follows each window's rate.
                    if let Some(rate) = phases.window_entry(th.phase) {
                        self.dl_window_entry(tid, rate);
                    }
                    return true;
                }
                Phase::Sleep(d) => {
                    th.state = ThreadState::Sleeping;
                    self.events.push(self.now + d, Event::Wake(tid));
                    return false;
                }
                Phase::CatchUp(_) | Phase::Schedule(_) => {
                    let (sleep, carried) = phase.catch_up(th.catch_up_late_ns);
                    th.catch_up_late_ns = carried;
                    match sleep {
                        None => th.phase += 1,
                        Some(d) => {
                            th.state = ThreadState::Sleeping;
                            th.catch_up_woke_at = Some(self.now + d);
                            self.events.push(self.now + d, Event::Wake(tid));
                            return false;
                        }
                    }
                }
                Phase::Runtime(ns) => {
                    // Work it cannot finish in `ns` of wall time; `RuntimeEnd` ends it.
                    th.work_left = ns.saturating_mul(RUNTIME_WORK_BOUND);
                    th.runtime_gen += 1;
                    self.events.push(self.now + ns, Event::RuntimeEnd { tid, gen: th.runtime_gen });
                    return true;
                }
                Phase::Timer(p) => {
                    th.state = ThreadState::Sleeping;
                    self.events.push((self.now / p + 1) * p, Event::Wake(tid));
                    return false;
                }
                Phase::RtTimer { period, timer, mode } => {
                    if th.timers.is_empty() {
                        th.timers = vec![None; task.timer_names().len()];
                    }
                    let expiry = th.timers[timer].unwrap_or(th.started_at) + period;
                    if self.now < expiry {
                        th.timers[timer] = Some(expiry);
                        th.state = ThreadState::Sleeping;
                        self.events.push(expiry, Event::Wake(tid));
                        return false;
                    }
                    // Late: no sleep (rt-app's `timer` event).
                    th.timers[timer] = Some(match mode {
                        TimerMode::Relative => self.now,
                        TimerMode::Absolute => expiry,
                    });
                    th.phase += 1;
                }
                Phase::SleepUntil(at) if at > self.now => {
                    th.state = ThreadState::Sleeping;
                    self.events.push(at, Event::Wake(tid));
                    return false;
                }
                Phase::SleepUntil(at) => {
                    // A request arrived at `at` (later than now if the thread was busy).
                    th.request = Some(Request { arrived_ns: at, started_ns: self.now });
                    th.phase += 1;
                }
                Phase::Wait if th.wakes_pending > 0 => {
                    // A sibling's request, from when this thread takes it up.
                    th.wakes_pending -= 1;
                    th.request = Some(Request { arrived_ns: self.now, started_ns: self.now });
                    th.phase += 1;
                }
                Phase::Wait => {
                    th.state = ThreadState::Sleeping;
                    return false;
                }
                Phase::Wake(target_task) => {
                    th.phase += 1;
                    let target = self.task_threads[target_task];
                    let t = &mut self.threads[target];
                    t.wakes_pending += 1;
                    // The first wake of a thread that waits wakes it; later
                    // ones wait for its next `Wait`.
                    let target_phases = &self.task_phases[target_task];
                    let waits = t.phase < target_phases.len() && target_phases.get(t.phase) == Phase::Wait;
                    if t.state == ThreadState::Sleeping && waits && t.wakes_pending == 1 {
                        self.events.push(self.now, Event::Signal(target));
                    }
                }
            }
        }
    }

    /// A worker finished a request (or was just woken for one): record the
    /// latency and take the next request; returns whether it has work.
    fn next_request(&mut self, tid: ThreadId, si: usize) -> bool {
        let now = self.now;
        let th = &mut self.threads[tid];
        let svc = &mut self.services[si];
        if th.work_left == 0 {
            if let Some(request) = th.request.take() {
                svc.requests.answered(request, now);
            }
        }
        if th.request.is_some() {
            return true;
        }
        match svc.queue.pop_front() {
            Some(arrived) => {
                th.request = Some(Request { arrived_ns: arrived, started_ns: now });
                th.work_left = svc.cost_ns;
                th.state = ThreadState::Runnable;
                true
            }
            None => {
                th.state = ThreadState::Sleeping;
                svc.idle_workers.push(tid);
                false
            }
        }
    }

    /// When the next background activity arrives from this thread's home CPU.
    fn background_gap(&mut self, tid: ThreadId) -> Time {
        let th = &mut self.threads[tid];
        th.loops_done += 1;
        let mean_ns = 1e9 / self.scenario.machine.background_per_s;
        let gap = noise::exponential(self.seed, Stream::Background(th.allowed[0]), th.loops_done as u64, mean_ns);
        self.now + gap.round() as u64
    }

    /// Background activity: woken, it runs `background_us`; done, it sleeps
    /// until the next arrival. Returns whether it has work.
    fn next_background(&mut self, tid: ThreadId, waking: bool) -> bool {
        if waking {
            self.threads[tid].work_left = (self.scenario.machine.background_us * 1e3) as u64;
            return true;
        }
        self.threads[tid].state = ThreadState::Sleeping;
        let at = self.background_gap(tid);
        self.events.push(at, Event::Wake(tid));
        false
    }
}
