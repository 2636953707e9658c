//! The workloads that drive the scheduler: phase-driven tasks, services'
//! workers and their request arrivals, background activity on the host, and
//! the scenario's `[[write]]`s to cpu.max. Each thread is moved on by its
//! driver (`advance`), which wakes or blocks it through the core.

use crate::engine::deadline::DlEntity;
use crate::engine::event::{Event, Queue};
use crate::vocab::noise::{self, Arrival, Stream};
use crate::vocab::output::{Request, Requests};
use crate::format::program::{Program, Step};
use crate::engine::rq::{Thread, ThreadState};
use crate::engine::sim::Sim;
use crate::vocab::types::{CpuId, ThreadId, Time, NSEC_PER_USEC};
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
    /// Spread of request costs (noise::request_cost_ns).
    pub cost_cv: f64,
    /// Requests drawn so far: the index of the next arrival's draw.
    pub arrivals: u64,
    /// Requests taken by a worker so far (in arrival order): the index of
    /// the next request's cost draw.
    pub started: u64,
    pub queue: VecDeque<Time>,
    pub idle_workers: Vec<ThreadId>,
    pub requests: Requests,
}

impl<Q: Queue> Sim<'_, Q> {
    /// The CPUs a thread of the plan may run on: shared with the thread
    /// set up before it when they are the same.
    fn plan_cpus(&self, cpus: &[CpuId]) -> Rc<[CpuId]> {
        match self.threads.last() {
            Some(th) if *th.allowed == *cpus => th.allowed.clone(),
            _ => Rc::from(cpus),
        }
    }

    /// A thread that last ran on `cpu`: where its first wake-up looks first.
    fn add_thread(&mut self, driver: Driver, tg: usize, allowed: Rc<[CpuId]>, cpu: CpuId) -> ThreadId {
        let tid = self.threads.len();
        let se = self.new_task_se(tid, tg, cpu);
        self.threads.push(Thread {
            driver,
            tg,
            se,
            cpu,
            allowed,
            state: ThreadState::NotStarted,
            program: None,
            loops_done: 0,
            work_left: 0,
            runs: 0,
            cpu_ns: 0,
            work_ns: 0,
            finished_at: None,
            request: None,
            stall_left: 0,
            dl: None,
            started_at: 0,
            runtime_gen: 0,
            wakes_pending: 0,
            recent_used_cpu: cpu,
            catch_up_woke_at: None,
        });
        tid
    }

    /// Set up the plan's threads: each task's to start at its start, the
    /// services' workers asleep until a request arrives; then the writes.
    pub(crate) fn spawn_workloads(&mut self) {
        let plan = self.plan.clone();
        for t in &plan.tasks {
            self.task_threads.push(self.threads.len());
            let tg = t.cgroup.map_or(0, |i| i + 1);
            for th in &t.threads {
                // The real worker sleeps on `start_cpu` until the start and
                // wakes there (`start_on`), so its first `select_task_rq`
                // starts from that CPU.
                let cpus = self.plan_cpus(&th.cpus);
                let tid = self.add_thread(Driver::Task(t.index), tg, cpus, th.start_cpu);
                self.threads[tid].program = Some(Program::new(t.phases.clone(), t.loops, t.timers));
                if let Some(dl) = &t.dl {
                    let p = dl.params;
                    self.threads[tid].dl = Some(DlEntity::new(p.runtime_ns, p.deadline_ns, p.period_ns, dl.retry_ns, dl.profile_ns));
                }
                self.events.push(th.start_ns, Event::Start(tid));
                if t.loops >= 0 {
                    self.finite_left += 1;
                }
            }
        }
        if self.scenario.machine.has_background() {
            // One source per CPU, woken like any task: on an idle CPU if there
            // is one (ftrace on the host: a spinner alone on a CPU next to an
            // idle one was preempted 1.5 times a second, two spinners on both
            // CPUs 20 times a second per CPU). The home CPU comes first.
            let n = self.nr_cpus();
            for cpu in 0..n {
                let tid = self.add_thread(Driver::Background, 0, (0..n).map(|i| (cpu + i) % n).collect(), cpu);
                self.threads[tid].state = ThreadState::Sleeping;
                let at = self.background_gap(tid);
                self.events.push(at, Event::Wake(tid));
            }
        }
        for svc in &plan.services {
            let tg = svc.cgroup.map_or(0, |i| i + 1);
            let mut idle = Vec::new();
            for w in &svc.workers {
                let cpus = self.plan_cpus(&w.cpus);
                let tid = self.add_thread(Driver::Worker(svc.index), tg, cpus, w.start_cpu);
                self.threads[tid].state = ThreadState::Sleeping;
                idle.push(tid);
            }
            idle.reverse();
            self.services.push(Service {
                arrival: svc.arrival,
                rate_per_s: svc.rate_per_s,
                cost_ns: svc.cost_ns,
                cost_cv: svc.cost_cv,
                arrivals: 0,
                started: 0,
                queue: VecDeque::new(),
                idle_workers: idle,
                requests: Requests::default(),
            });
            let first = self.interarrival(svc.index);
            self.events.push(first, Event::Arrival(svc.index));
        }
        for (index, w) in plan.writes.iter().enumerate() {
            self.events.push(w.first_ns, Event::Write { index, n: 0 });
        }
    }

    /// Run to the end with every task thread's program logged
    /// ([`Program::logged`]); returns their steps, threads in order: how the
    /// simulator drives a program, to compare with the real backend's worker.
    pub fn run_steps(mut self) -> Vec<Vec<Step>> {
        for th in &mut self.threads {
            th.program = th.program.take().map(Program::logged);
        }
        self.run_events();
        self.threads.iter().filter_map(|th| Some(th.program.as_ref()?.steps()?.to_vec())).collect()
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
            self.advance(tid, true);
        }
        let next = self.interarrival(si);
        self.events.push(next, Event::Arrival(si));
    }

    /// A `[[write]]`: `tg_set_cfs_bandwidth` with the given (or unchanged) values.
    pub(crate) fn cpu_max_write(&mut self, index: usize, n: u64) {
        let w = &self.plan.writes[index];
        let tg = w.cgroup + 1;
        let new = w.applied_to(self.tgs[tg].cfs_b.limit());
        let next = w.at_ns(n + 1);
        self.tg_set_cfs_bandwidth(tg, new.period_us * NSEC_PER_USEC, new.quota_us.ns(), new.burst_us * NSEC_PER_USEC);
        if let Some(at) = next {
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
        // A fair thread's `advance` re-arms the CPU's `RunDone`: it runs on
        // (and arms its own) or blocks (and `schedule` arms the next's).
        if self.fair_curr(cpu).is_some() {
            self.rearm_run_done = Some(cpu);
        }
        self.touch(cpu);
        self.account_thread_time(cpu);
        let tid = self.rqs[cpu].curr.expect("RunDone on an idle CPU");
        self.dl_job_done(tid);
        self.advance(tid, false);
    }

    /// Move a thread on from where it stands. `waking`: it is not on a
    /// runqueue (start, end of sleep, new request); otherwise it is running.
    pub(crate) fn advance(&mut self, tid: ThreadId, waking: bool) {
        let runnable = match self.threads[tid].driver {
            Driver::Task(ti) => self.next_phase(tid, ti),
            Driver::Worker(si) => self.next_request(tid, si),
            Driver::Background => self.next_background(tid, waking),
        };
        if waking && runnable && self.threads[tid].driver != Driver::Background {
            // `machine.wakeup_cost_us`: the CPU the kernel charges the thread
            // per wake-up beyond its work (from `set_next_entity` to its
            // return to user space, and the next sleep's syscall up to
            // `dequeue_entity`), spent before its run's work.
            self.threads[tid].stall_left += self.wakeup_cost_ns;
        }
        match (waking, runnable, self.is_dl(tid)) {
            (true, true, true) => self.dl_wakeup(tid),
            (true, true, false) => self.try_to_wake_up(tid),
            (false, true, _) => self.arm_run_done(self.threads[tid].cpu),
            (true, false, _) => {}
            (false, false, true) => self.dl_block(tid),
            (false, false, false) => self.block(tid),
        }
    }

    /// Step a phase-driven thread's program (its step before is over);
    /// returns whether it now has work to run.
    fn next_phase(&mut self, tid: ThreadId, ti: usize) -> bool {
        self.threads[tid].state = ThreadState::Runnable;
        let (seed, work_speed_cv) = (self.seed, self.scenario.machine.work_speed_cv);
        loop {
            let now = self.now;
            let th = &mut self.threads[tid];
            let program = th.program.as_mut().expect("a task's thread");
            match program.next(now, self.task_requests[ti].as_mut()) {
                Step::Run { work_ns, window_rate } => {
                    // Each run its own work speed, where the machine's spreads.
                    th.work_left = match work_speed_cv {
                        Some(cv) => noise::spread_ns(seed, Stream::Work(tid), th.runs, work_ns, cv),
                        None => work_ns,
                    };
                    th.runs += 1;
                    // 004 3.3: a deadline thread's runtime follows each window's rate.
                    if let Some(rate) = window_rate {
                        self.dl_window_entry(tid, rate);
                    }
                    return true;
                }
                Step::Busy { wall_ns } => {
                    // Work it cannot finish in `wall_ns`; `RuntimeEnd` ends it.
                    th.work_left = wall_ns.saturating_mul(RUNTIME_WORK_BOUND);
                    th.runtime_gen += 1;
                    self.events.push(now + wall_ns, Event::RuntimeEnd { tid, gen: th.runtime_gen });
                    return true;
                }
                Step::SleepUntil { at, catch_up } => {
                    th.state = ThreadState::Sleeping;
                    if catch_up {
                        th.catch_up_woke_at = Some(at);
                    }
                    self.events.push(at, Event::Wake(tid));
                    return false;
                }
                // A sibling's wake, taken now: the program goes on.
                Step::Wait if th.wakes_pending > 0 => th.wakes_pending -= 1,
                Step::Wait => {
                    th.state = ThreadState::Sleeping;
                    return false;
                }
                Step::Wake(target_task) => {
                    let target = self.task_threads[target_task];
                    let t = &mut self.threads[target];
                    t.wakes_pending += 1;
                    // The first wake of a thread that waits wakes it; later
                    // ones wait for its next `Wait`.
                    let waits = t.program.as_ref().is_some_and(Program::waits);
                    if t.state == ThreadState::Sleeping && waits && t.wakes_pending == 1 {
                        self.events.push(now, Event::Signal(target));
                    }
                }
                Step::Done => {
                    th.state = ThreadState::Done;
                    th.finished_at = Some(now);
                    self.finite_left -= 1;
                    return false;
                }
            }
        }
    }

    /// A worker finished a request (or was just woken for one): record the
    /// latency and take the next request; returns whether it has work.
    fn next_request(&mut self, tid: ThreadId, si: usize) -> bool {
        let (now, seed) = (self.now, self.seed);
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
                th.work_left = noise::request_cost_ns(seed, si, svc.started, svc.cost_ns, svc.cost_cv);
                svc.started += 1;
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
            let m = &self.scenario.machine;
            // Each preemption's own length, keyed by its arrival.
            let (stream, index) = (Stream::BackgroundLength(self.threads[tid].allowed[0]), self.threads[tid].loops_done as u64);
            let us = match (m.background_lengths_us.len(), m.background_p50_us) {
                (0, Some(p50)) => noise::log_normal(self.seed, stream, index, p50, m.background_us).min(1e6),
                (0, None) => m.background_us,
                (n, _) => m.background_lengths_us[noise::uniform(self.seed, stream, index, n as u64) as usize],
            };
            self.threads[tid].work_left = (us * 1e3) as u64;
            return true;
        }
        self.threads[tid].state = ThreadState::Sleeping;
        let at = self.background_gap(tid);
        self.events.push(at, Event::Wake(tid));
        false
    }
}
