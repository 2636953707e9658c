//! The worker process: one per cgroup, it runs that cgroup's task threads and
//! service workers as native threads from a common CLOCK_MONOTONIC start time,
//! and reports what they did.
//!
//! Protocol, one line per message. Controller to worker (stdin): the
//! [`WorkerSpec`] as JSON, then `go <start_ns>` once the worker sits in its
//! cgroups, then maybe `stop`; `stop` or EOF ends the run early. Worker to
//! controller (stdout): `ready` once the spec is read, `finished <ns>` when its
//! finite tasks are done (ns since start), and last `report <WorkerReport JSON>`;
//! or, at any point, `error <message>` as it fails (the controller says why).
//!
//! A task's threads follow its plan's `TaskPhases`, the simulator's own sequence: its
//! phase list, or its trace windows expanded one phase at a time.

use serde::{Deserialize, Serialize};
use std::collections::VecDeque;
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::thread::{self, JoinHandle};
use std::time::Duration;
use throttlelab_core::noise;
use throttlelab_core::output::{Request, Requests, ThreadStart};
use throttlelab_core::dl::{DlParams, DlPlan, OnRefused};
use throttlelab_core::plan::{Plan, ServicePlan, TaskPlan, ThreadPlan};
use throttlelab_core::{Program, Step};

/// Calibrated work runs in chunks of this many us between checks for the end.
const CHUNK_US: f64 = 50.0;
const STACK_BYTES: usize = 256 * 1024;

/// What one worker runs: its cgroup's slice of the scenario's [`Plan`]
/// (`Plan::group`), every seeded draw taken by the controller as the
/// simulator takes it. Times are ns relative to the common start.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WorkerSpec {
    /// Iterations of [`spin`] per microsecond, calibrated by the controller.
    pub loops_per_us: f64,
    pub plan: Plan,
}

impl WorkerSpec {
    /// The spec as the controller sends it, one line of JSON.
    pub fn from_json(line: &str) -> Result<WorkerSpec, String> {
        serde_json::from_str(line).map_err(|e| format!("bad worker spec: {e}"))
    }
}

/// `struct sched_attr` of the sched_setattr(2) system call.
#[repr(C)]
struct SchedAttr {
    size: u32,
    sched_policy: u32,
    sched_flags: u64,
    sched_nice: i32,
    sched_priority: u32,
    sched_runtime: u64,
    sched_deadline: u64,
    sched_period: u64,
}

const SCHED_DEADLINE: u32 = 6;

/// Switch thread `tid` (0: the caller) to SCHED_DEADLINE with `dl`, or change
/// its parameters to `dl`; Err(errno) if refused.
fn sched_setattr_dl(tid: libc::pid_t, dl: DlParams) -> Result<(), i32> {
    let attr = SchedAttr {
        size: std::mem::size_of::<SchedAttr>() as u32,
        sched_policy: SCHED_DEADLINE,
        sched_flags: 0,
        sched_nice: 0,
        sched_priority: 0,
        sched_runtime: dl.runtime_ns,
        sched_deadline: dl.deadline_ns,
        sched_period: dl.period_ns,
    };
    // SAFETY: attr is a valid, fully initialised sched_attr of the size it states.
    let r = unsafe { libc::syscall(libc::SYS_sched_setattr, tid, &attr as *const SchedAttr, 0) };
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(0))
    }
}

/// Whether the calling thread is scheduled by SCHED_DEADLINE (admitted).
fn is_sched_deadline() -> bool {
    // SAFETY: sched_getscheduler(0) asks about the calling thread; no memory involved.
    unsafe { libc::sched_getscheduler(0) == SCHED_DEADLINE as i32 }
}

/// The error of a `sched_setattr` that failed other than by admission control.
fn setattr_failed(task: &str, errno: i32) -> String {
    format!(
        "task.{task}: sched_setattr(SCHED_DEADLINE) failed: {}",
        std::io::Error::from_raw_os_error(errno)
    )
}

/// What one task or service did, summed over its threads.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct DriverReport {
    pub name: String,
    pub threads: u64,
    /// CLOCK_THREAD_CPUTIME_ID, summed.
    pub cpu_ns: u64,
    /// Calibrated work done.
    pub work_ns: u64,
    /// When the last thread finished; None if one did not.
    pub finished_ns: Option<u64>,
    /// The longest a thread took from its start to its finish; None if one
    /// did not finish.
    pub response_ns: Option<u64>,
    /// Services only: every completed request, from its arrival and from
    /// when a worker took it off the queue.
    pub requests: Option<Requests>,
    /// Deadline tasks only: jobs (run phases after a sleep) done after their
    /// deadline, and refused `sched_setattr` calls.
    pub deadline_misses: Option<u64>,
    pub admission_refusals: Option<u64>,
    /// Tasks, with `sample_ns`: CPU time in each whole interval from the start.
    pub cpu_ns_series: Option<Vec<u64>>,
    /// Tasks: each thread's start, in thread order.
    #[serde(default)]
    pub starts: Vec<ThreadStart>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WorkerReport {
    /// The spec's tasks, then its services.
    pub drivers: Vec<DriverReport>,
}

/// `clock` in ns; None if it does not exist (a thread's clock after it ended).
fn try_clock_ns(clock: libc::clockid_t) -> Option<u64> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid timespec.
    let r = unsafe { libc::clock_gettime(clock, &mut ts) };
    (r == 0).then(|| ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64)
}

fn clock_ns(clock: libc::clockid_t) -> u64 {
    try_clock_ns(clock).expect("the clocks used always exist")
}

/// The calling thread's CPU time (CLOCK_THREAD_CPUTIME_ID).
pub(crate) fn thread_cpu_ns() -> u64 {
    clock_ns(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// CLOCK_MONOTONIC in ns: the clock of start times and latencies.
pub fn now_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

/// Sleep until CLOCK_MONOTONIC reaches `at_ns` (clock_nanosleep, TIMER_ABSTIME).
pub(crate) fn nanosleep_until(at_ns: u64) {
    let ts = libc::timespec {
        tv_sec: (at_ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (at_ns % 1_000_000_000) as libc::c_long,
    };
    // SAFETY: ts is valid; a null remainder is allowed with TIMER_ABSTIME.
    while unsafe {
        libc::clock_nanosleep(
            libc::CLOCK_MONOTONIC,
            libc::TIMER_ABSTIME,
            &ts,
            std::ptr::null_mut(),
        )
    } == libc::EINTR
    {}
}

/// Timer slack for this thread and the threads it creates: 1 ns, the least
/// the kernel takes. The default, 50 us, lets every sleep of a normal task end
/// up to 50 us late (traced: `hrtimer_wakeup` armed with `softexpires` 50 us
/// before `expires`): each `sleep_us` phase would last longer than the
/// scenario says, and than in the simulator, which wakes on time.
pub(crate) fn set_exact_timers() -> Result<(), String> {
    // SAFETY: PR_SET_TIMERSLACK takes a number and touches no memory.
    if unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong) } != 0 {
        return Err(format!("cannot set the timer slack: {}", std::io::Error::last_os_error()));
    }
    Ok(())
}

/// The calibrated busy loop: `iters` dependent steps the optimiser cannot drop.
#[inline(never)]
pub fn spin(iters: u64) -> u64 {
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    for _ in 0..iters {
        x = std::hint::black_box(x ^ (x << 13));
        x ^= x >> 7;
        x ^= x << 17;
    }
    x
}

/// Iterations of [`spin`] per microsecond: the fastest of several timed runs
/// (rt-app's calibration). Run before joining any cgroup, so that no
/// throttling can slow it.
pub fn calibrate() -> f64 {
    const ITERS: u64 = 200_000;
    const RUNS: usize = 20;
    let fastest_ns = (0..RUNS)
        .map(|_| {
            let t0 = now_ns();
            spin(ITERS);
            (now_ns() - t0).max(1)
        })
        .min()
        .expect("RUNS > 0");
    ITERS as f64 * 1_000.0 / fastest_ns as f64
}

/// The common clock of one worker's threads. A sleeping thread wakes only
/// when its time comes, the run ends or `stop` arrives: a thread that woke to
/// poll would run in the measured cgroup, account runtime between ticks and
/// return slack on every sleep.
pub(crate) struct Run {
    start_ns: u64,
    end_ns: u64,
    loops_per_us: f64,
    /// Set once by [`Run::stop`]; busy threads read it without the lock.
    stop: AtomicBool,
    /// Sleepers wait on `woken` under this lock, which holds each task's
    /// wakes not yet taken (a captured `Wake` of a thread not at its `Wait`,
    /// counted as a futex word would); `stop` wakes them all.
    sleepers: Mutex<Vec<u64>>,
    woken: Condvar,
    /// A captured task's thread at its `Wait`, by the task's place in `tasks`.
    waiting: Vec<Condvar>,
    /// The scenario's number of each of this worker's tasks.
    tasks: Vec<usize>,
}

impl Run {
    pub(crate) fn new(start_ns: u64, end_ns: u64, loops_per_us: f64, tasks: Vec<usize>) -> Run {
        Run {
            start_ns,
            end_ns,
            loops_per_us,
            stop: AtomicBool::new(false),
            sleepers: Mutex::new(vec![0; tasks.len()]),
            woken: Condvar::new(),
            waiting: tasks.iter().map(|_| Condvar::new()).collect(),
            tasks,
        }
    }

    /// End the run early: work stops at its next chunk, sleepers wake now.
    fn stop(&self) {
        let _sleepers = self.sleepers.lock().expect("sleepers lock");
        self.stop.store(true, Ordering::Relaxed);
        self.woken.notify_all();
        self.waiting.iter().for_each(Condvar::notify_all);
    }

    /// Where the scenario's task `index` is among this worker's.
    fn local(&self, index: usize) -> Option<usize> {
        self.tasks.iter().position(|&i| i == index)
    }

    /// A captured `Wake` of the scenario's task `index` (one thread; in this
    /// worker, which `preflight` sees to).
    fn wake(&self, index: usize) {
        if let Some(task) = self.local(index) {
            self.sleepers.lock().expect("sleepers lock")[task] += 1;
            self.waiting[task].notify_one();
        }
    }

    /// A captured `Wait` of this worker's `task`th task: take a wake, or
    /// sleep until one comes; false if the run ended first.
    fn wait(&self, task: usize) -> bool {
        let mut pending = self.sleepers.lock().expect("sleepers lock");
        loop {
            if self.over() {
                return false;
            }
            if pending[task] > 0 {
                pending[task] -= 1;
                return true;
            }
            let wait = Duration::from_nanos(self.end_ns.saturating_sub(now_ns()));
            pending = self.waiting[task].wait_timeout(pending, wait).expect("sleepers lock").0;
        }
    }

    fn over(&self) -> bool {
        self.stop.load(Ordering::Relaxed) || now_ns() >= self.end_ns
    }

    /// Sleep until `at_ns` (absolute); false if the run ended first.
    pub(crate) fn sleep_until(&self, at_ns: u64) -> bool {
        let mut sleepers = self.sleepers.lock().expect("sleepers lock");
        loop {
            if self.over() {
                return false;
            }
            let now = now_ns();
            if now >= at_ns {
                return true;
            }
            let wait = Duration::from_nanos(at_ns.min(self.end_ns) - now);
            sleepers = self.woken.wait_timeout(sleepers, wait).expect("sleepers lock").0;
        }
    }

    /// Do `work_ns` of calibrated work; adds the iterations done to `iters`.
    /// False if the run ended first.
    pub(crate) fn work(&self, work_ns: u64, iters: &mut u64) -> bool {
        let mut left = (work_ns as f64 * self.loops_per_us / 1_000.0).round() as u64;
        let chunk = ((CHUNK_US * self.loops_per_us) as u64).max(1);
        while left > 0 {
            if self.over() {
                return false;
            }
            let n = chunk.min(left);
            spin(n);
            left -= n;
            *iters += n;
        }
        true
    }

    /// Work until `until_ns` (absolute), however much CPU that gets; adds
    /// the iterations done to `iters`. False if the run ended first.
    fn work_until(&self, until_ns: u64, iters: &mut u64) -> bool {
        let chunk = ((CHUNK_US * self.loops_per_us) as u64).max(1);
        while now_ns() < until_ns {
            if self.over() {
                return false;
            }
            spin(chunk);
            *iters += chunk;
        }
        true
    }

    fn work_ns(&self, iters: u64) -> u64 {
        (iters as f64 * 1_000.0 / self.loops_per_us) as u64
    }
}

/// What one thread did.
#[derive(Default)]
struct ThreadResult {
    cpu_ns: u64,
    iters: u64,
    /// Since the run's start, when the thread started its phases.
    started_ns: u64,
    /// A task thread's CPU and lateness at that point.
    start: Option<ThreadStart>,
    finished_ns: Option<u64>,
    requests: Requests,
    misses: u64,
    refusals: u64,
}

pub(crate) fn set_affinity(cpus: &Option<Vec<usize>>) -> Result<(), String> {
    let Some(cpus) = cpus else { return Ok(()) };
    // SAFETY: cpu_set_t is plain data; CPU_SET stays within it for ids < CPU_SETSIZE.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for &c in cpus {
            libc::CPU_SET(c, &mut set);
        }
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(format!(
                "sched_setaffinity to CPUs {cpus:?}: {}",
                std::io::Error::last_os_error()
            ));
        }
    }
    Ok(())
}

/// The calling thread's CPU affinity.
fn affinity() -> Result<Vec<usize>, String> {
    // SAFETY: cpu_set_t is plain data that sched_getaffinity fills in.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return Err(format!("sched_getaffinity: {}", std::io::Error::last_os_error()));
        }
        Ok((0..libc::CPU_SETSIZE as usize).filter(|&c| libc::CPU_ISSET(c, &set)).collect())
    }
}

/// Move to `plan.start_cpu`, then take the plan's affinity (or the one the
/// cpuset gave): the thread stays on that CPU, sleeps there and wakes there at
/// its start. Traced: two threads spawned on one CPU both woke there at the
/// start, in one timer interrupt, and one waited 3 ms for the load balancer,
/// which left its group unthrottled in a first period the simulator throttled.
fn start_on(plan: &ThreadPlan) -> Result<(), String> {
    let inherited = affinity()?;
    set_affinity(&Some(vec![plan.start_cpu]))?;
    set_affinity(&Some(plan.affinity().map_or(inherited, <[usize]>::to_vec)))
}

/// One thread of a task: its phases, `loops` times or until the end, with its
/// CPU time readable by the sampler through `clock`.
fn task_thread(
    run: &Run,
    task: &TaskPlan,
    plan: &ThreadPlan,
    clock: &CpuClock,
) -> Result<ThreadResult, String> {
    clock.publish();
    start_on(plan)?;
    let going = run.sleep_until(run.start_ns + plan.start_ns);
    let started_ns = now_ns().saturating_sub(run.start_ns);
    // SAFETY: sched_getcpu has no preconditions.
    let cpu = unsafe { libc::sched_getcpu() };
    let late_us = started_ns.saturating_sub(plan.start_ns) as f64 / 1e3;
    let mut r = match task.dl.as_ref().filter(|_| going) {
        None => run_phases(run, task, going)?,
        Some(dl) => match sched_setattr_dl(0, dl.admission()) {
            Ok(()) => run_phases(run, task, going)?,
            Err(libc::EBUSY) if dl.on_refused == OnRefused::Retry => {
                // SAFETY: gettid has no preconditions.
                let tid = unsafe { libc::gettid() };
                let phases_done = AtomicBool::new(false);
                thread::scope(|scope| {
                    let retries = scope.spawn(|| retry_setattr(run, tid, dl, &phases_done));
                    let r = run_phases(run, task, going);
                    phases_done.store(true, Ordering::Relaxed);
                    let refused = retries.join().unwrap_or(1);
                    r.map(|r| ThreadResult {
                        refusals: r.refusals + refused,
                        ..r
                    })
                })?
            }
            Err(libc::EBUSY) => {
                return Err(format!(
                    "task.{}: SCHED_DEADLINE admission refused by the kernel (EBUSY)",
                    task.name
                ))
            }
            Err(e) => return Err(setattr_failed(&task.name, e)),
        },
    };
    r.started_ns = started_ns;
    r.start = u32::try_from(cpu).ok().map(|cpu| ThreadStart { cpu, late_us });
    r.cpu_ns = clock.end(); // read again, after every live reading of the sampler
    Ok(r)
}

/// A task thread's phases, `loops` times or until the end. For a deadline
/// task a job is a run phase released by the end of a sleep; it misses when
/// it ends later than its relative deadline after it began.
fn run_phases(run: &Run, task: &TaskPlan, going: bool) -> Result<ThreadResult, String> {
    let mut program = Program::new(task.phases.clone(), task.loops, task.timers);
    let mut r = ThreadResult::default();
    if going {
        drive(run, task, &mut program, &mut r)?;
    }
    r.cpu_ns = thread_cpu_ns();
    Ok(r)
}

/// Take `program`'s steps by blocking until it is done or the run ends.
fn drive(run: &Run, task: &TaskPlan, program: &mut Program, r: &mut ThreadResult) -> Result<(), String> {
    let local = run.local(task.index);
    let deadline_ns = task.dl.as_ref().map(|d| d.params.deadline_ns);
    let mut reservation = task
        .dl
        .as_ref()
        .map(|dl| Reservation::new(&task.name, dl));
    // Times since the start, as the program counts them.
    let since_start = || now_ns().saturating_sub(run.start_ns);
    loop {
        let step = program.next(since_start(), Some(&mut r.requests));
        if let Some(res) = reservation.as_mut() {
            let entry = match step {
                Step::Run { window_rate, .. } => window_rate,
                _ => None,
            };
            res.at_phase(entry)?;
        }
        let going = match step {
            Step::Run { work_ns, .. } => {
                let start = now_ns();
                let done = run.work(work_ns, &mut r.iters);
                r.misses += u64::from(done && program.released() && deadline_ns.is_some_and(|d| now_ns() > start + d));
                done
            }
            Step::Busy { wall_ns } => {
                let start = now_ns();
                let done = run.work_until(start + wall_ns, &mut r.iters);
                r.misses += u64::from(done && program.released() && deadline_ns.is_some_and(|d| now_ns() > start + d));
                done
            }
            Step::SleepUntil { at, catch_up } => {
                let going = run.sleep_until(run.start_ns + at);
                if catch_up {
                    program.woke_late(since_start().saturating_sub(at));
                }
                going
            }
            Step::Wait => run.wait(local.expect("a captured task is its worker's")),
            Step::Wake(index) => {
                run.wake(index);
                true
            }
            Step::Done => {
                r.finished_ns = Some(since_start());
                r.refusals = reservation.map_or(0, |res| res.refusals);
                return Ok(());
            }
        };
        if !going {
            r.refusals = reservation.map_or(0, |res| res.refusals);
            return Ok(());
        }
    }
}

/// A deadline thread's parameters through a trace's windows, as the
/// simulator's (004 3.3): each window reserves its rate, or with
/// `profile_ns` first a whole core, then the rate the thread used on it.
/// Checked at phase boundaries, which a window's 50 ms slices keep frequent.
struct Reservation<'a> {
    task: &'a str,
    dl: &'a DlPlan,
    stage: Stage,
    /// `sched_setattr` calls refused by admission control (EBUSY).
    refusals: u64,
}

/// Where the current window's profiling stage stands.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Stage {
    /// None under way: not asked for, or over.
    Idle,
    /// A whole core was refused: ask again at `retry_at_ns`.
    Refused { retry_at_ns: u64 },
    /// On a whole core since `since_ns`, having used `cpu_ns` by then.
    Profiling { since_ns: u64, cpu_ns: u64 },
}

impl<'a> Reservation<'a> {
    fn new(task: &'a str, dl: &'a DlPlan) -> Self {
        Reservation {
            task,
            dl,
            stage: Stage::Idle,
            refusals: 0,
        }
    }

    /// Before each phase; `entry` is each thread's rate if the phase opens a
    /// window. A thread not admitted yet keeps waiting for its retries.
    fn at_phase(&mut self, entry: Option<f64>) -> Result<(), String> {
        let now = now_ns();
        match (entry, self.stage, self.dl.profile_ns) {
            (Some(_), _, _) if !is_sched_deadline() => Ok(()),
            (Some(_), _, Some(profile_ns)) => self.ask_whole_core(profile_ns),
            (Some(rate), _, None) => {
                self.stage = Stage::Idle;
                self.set(self.dl.params.at_rate(rate)).map(drop)
            }
            (None, Stage::Refused { retry_at_ns }, Some(profile_ns)) if now >= retry_at_ns => {
                self.ask_whole_core(profile_ns)
            }
            (None, Stage::Profiling { since_ns, cpu_ns }, Some(profile_ns))
                if now >= since_ns + profile_ns =>
            {
                // Over the time it took: a boundary may come a slice late.
                let rate = (thread_cpu_ns() - cpu_ns) as f64 / (now - since_ns) as f64;
                self.stage = Stage::Idle;
                self.set(self.dl.params.at_rate(rate)).map(drop)
            }
            _ => Ok(()),
        }
    }

    /// Start the profiling stage: runtime = deadline = period = `profile_ns`.
    fn ask_whole_core(&mut self, profile_ns: u64) -> Result<(), String> {
        self.stage = if self.set(DlParams::whole_core(profile_ns))? {
            Stage::Profiling {
                since_ns: now_ns(),
                cpu_ns: thread_cpu_ns(),
            }
        } else {
            Stage::Refused {
                retry_at_ns: now_ns() + self.dl.retry_ns,
            }
        };
        Ok(())
    }

    /// `sched_setattr` on the calling thread: false if admission control
    /// refused it (the old parameters stay), an error for any other failure.
    fn set(&mut self, params: DlParams) -> Result<bool, String> {
        match sched_setattr_dl(0, params) {
            Ok(()) => Ok(true),
            Err(libc::EBUSY) => {
                self.refusals += 1;
                Ok(false)
            }
            Err(e) => Err(setattr_failed(self.task, e)),
        }
    }
}

/// After a refusal: try `sched_setattr` for thread `tid` again every
/// `retry_ns` until it is admitted, its phases are done or the run ends;
/// returns how many attempts were refused, the first included.
fn retry_setattr(run: &Run, tid: libc::pid_t, dl: &DlPlan, phases_done: &AtomicBool) -> u64 {
    let mut refused = 1;
    let mut next = now_ns() + dl.retry_ns;
    while run.sleep_until(next) && !phases_done.load(Ordering::Relaxed) {
        if sched_setattr_dl(tid, dl.admission()).is_ok() {
            break;
        }
        refused += 1;
        next += dl.retry_ns;
    }
    refused
}

/// Where the sampler reads a task thread's CPU time.
#[derive(Default)]
struct CpuClock {
    /// The thread's CPU-time clock (pthread_getcpuclockid), once it runs.
    clock: OnceLock<libc::clockid_t>,
    /// Its CPU time as it ended; its clock ends with it. Live readings take
    /// this lock too, so none falls between the last reading and the end.
    end_ns: Mutex<Option<u64>>,
}

impl CpuClock {
    /// Called by the thread itself as it starts.
    fn publish(&self) {
        let mut clock: libc::clockid_t = 0;
        // SAFETY: pthread_self() is the live calling thread; clock is a valid out pointer.
        if unsafe { libc::pthread_getcpuclockid(libc::pthread_self(), &mut clock) } == 0 {
            let _ = self.clock.set(clock);
        }
    }

    /// Called by the thread itself as it ends: its CPU time then.
    fn end(&self) -> u64 {
        let mut end = self.end_ns.lock().expect("clock lock");
        let cpu_ns = thread_cpu_ns();
        *end = Some(cpu_ns);
        cpu_ns
    }

    /// The thread's CPU time now; `last`, the previous reading, if it cannot
    /// be read (not started yet, or ending).
    fn read_ns(&self, last: u64) -> u64 {
        match *self.end_ns.lock().expect("clock lock") {
            Some(ns) => ns,
            None => self
                .clock
                .get()
                .and_then(|&c| try_clock_ns(c))
                .unwrap_or(last),
        }
    }
}

/// The sampler: at every `sample_ns` from the start, each task's CPU time
/// since the last boundary, summed over its threads (`clocks`, by task).
/// Only whole intervals: a run stopped early ends the series.
fn sample(run: &Run, sample_ns: u64, clocks: &[Vec<Arc<CpuClock>>]) -> Vec<Vec<u64>> {
    let mut last_ns: Vec<Vec<u64>> = clocks.iter().map(|c| vec![0; c.len()]).collect();
    let mut series = vec![Vec::new(); clocks.len()];
    for k in 1.. {
        let at = run.start_ns + k * sample_ns;
        if at > run.end_ns {
            break;
        }
        run.sleep_until(at);
        if now_ns() < at {
            break;
        }
        for ((task, last), series) in clocks.iter().zip(&mut last_ns).zip(&mut series) {
            let before: u64 = last.iter().sum();
            for (clock, last) in task.iter().zip(last.iter_mut()) {
                *last = clock.read_ns(*last);
            }
            series.push(last.iter().sum::<u64>() - before);
        }
    }
    series
}

/// Requests waiting for a service worker.
#[derive(Default)]
struct Queue {
    backlog: Mutex<Backlog>,
    ready: Condvar,
}

#[derive(Default)]
struct Backlog {
    /// Arrival timestamps (absolute ns) and each request's cost (ns).
    arrivals: VecDeque<(u64, u64)>,
    /// No more arrivals: the run is over.
    closed: bool,
}

/// The open-loop arrival process of a service: requests arrive on schedule
/// whether or not the workers keep up; latency counts from the scheduled time.
fn arrival_thread(run: &Run, seed: u64, svc: &ServicePlan, queue: &Queue) {
    let mut at = run.start_ns;
    for n in 0.. {
        at += noise::interarrival_ns(seed, svc.index, n, svc.arrival, svc.rate_per_s);
        if !run.sleep_until(at) {
            break;
        }
        let cost_ns = noise::request_cost_ns(seed, svc.index, n, svc.cost_ns, svc.cost_cv);
        queue.backlog.lock().expect("queue lock").arrivals.push_back((at, cost_ns));
        queue.ready.notify_one();
    }
    queue.backlog.lock().expect("queue lock").closed = true;
    queue.ready.notify_all();
}

/// A service worker: takes requests in arrival order and does each one's cost of work.
fn service_worker(
    run: &Run,
    plan: &ThreadPlan,
    queue: &Queue,
) -> Result<ThreadResult, String> {
    start_on(plan)?;
    let mut r = ThreadResult::default();
    'serve: loop {
        let (arrived, cost_ns) = {
            let mut backlog = queue.backlog.lock().expect("queue lock");
            loop {
                if let Some(a) = backlog.arrivals.pop_front() {
                    break a;
                }
                if backlog.closed {
                    break 'serve;
                }
                backlog = queue.ready.wait(backlog).expect("queue lock");
            }
        };
        let request = Request { arrived_ns: arrived, started_ns: now_ns() };
        if !run.work(cost_ns, &mut r.iters) {
            break;
        }
        r.requests.answered(request, now_ns());
    }
    r.cpu_ns = thread_cpu_ns();
    Ok(r)
}

type Handle = JoinHandle<Result<ThreadResult, String>>;

/// Start thread `what` (named in the error if the kernel refuses it).
fn spawn<T: Send + 'static>(
    what: &str,
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<JoinHandle<T>, String> {
    thread::Builder::new()
        .stack_size(STACK_BYTES)
        .spawn(f)
        .map_err(|e| format!("cannot create {what}: {e}"))
}

fn join(handles: Vec<Handle>) -> Result<Vec<ThreadResult>, String> {
    handles
        .into_iter()
        .map(|h| {
            h.join()
                .map_err(|_| "a worker thread panicked".to_string())?
        })
        .collect()
}

fn summarise(
    name: &str,
    run: &Run,
    results: &[ThreadResult],
    requests: bool,
    deadline: bool,
) -> DriverReport {
    let done = !results.is_empty() && results.iter().all(|r| r.finished_ns.is_some());
    let finished = || {
        results
            .iter()
            .filter_map(|r| Some((r.started_ns, r.finished_ns?)))
    };
    DriverReport {
        name: name.to_string(),
        threads: results.len() as u64,
        cpu_ns: results.iter().map(|r| r.cpu_ns).sum(),
        work_ns: run.work_ns(results.iter().map(|r| r.iters).sum()),
        finished_ns: done.then(|| finished().map(|(_, f)| f).max().unwrap_or(0)),
        response_ns: done.then(|| finished().map(|(s, f)| f - s).max().unwrap_or(0)),
        requests: requests.then(|| {
            let mut all = Requests::default();
            results.iter().for_each(|r| all.extend(&r.requests));
            all
        }),
        deadline_misses: deadline.then(|| results.iter().map(|r| r.misses).sum()),
        admission_refusals: deadline.then(|| results.iter().map(|r| r.refusals).sum()),
        cpu_ns_series: None,
        starts: results.iter().filter_map(|r| r.start).collect(),
    }
}

/// One line from the controller, without its newline.
fn read_line() -> Result<String, String> {
    let mut line = String::new();
    match std::io::stdin().read_line(&mut line) {
        Ok(0) => Err("the controller closed the pipe".to_string()),
        Ok(_) => Ok(line.trim_end().to_string()),
        Err(e) => Err(format!("cannot read from the controller: {e}")),
    }
}

fn say(line: &str) -> Result<(), String> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{line}")
        .and_then(|_| out.flush())
        .map_err(|e| format!("cannot write to the controller: {e}"))
}

/// How a worker failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// Said to the controller (`error <message>`), which reports it.
    Told(String),
    /// Not said: the controller cannot hear it (the caller prints it).
    Untold(String),
}

/// The worker process's main (src/bin/throttlelab-worker.rs): see the module
/// documentation for the protocol. A failure goes to the controller if it can.
pub fn worker_main() -> Result<(), Failure> {
    serve().map_err(|e| match say(&format!("error {e}")) {
        Ok(()) => Failure::Told(e),
        Err(_) => Failure::Untold(e),
    })
}

fn serve() -> Result<(), String> {
    let spec = WorkerSpec::from_json(&read_line()?)?;
    set_exact_timers()?;
    say("ready")?;
    let go = read_line()?;
    let start_ns: u64 = go
        .strip_prefix("go ")
        .and_then(|t| t.parse().ok())
        .ok_or_else(|| format!("expected `go <start_ns>`, got {go:?}"))?;
    let indices = spec.plan.tasks.iter().map(|t| t.index).collect();
    let run = Arc::new(Run::new(start_ns, start_ns + spec.plan.duration_ns, spec.loops_per_us, indices));
    {
        let run = run.clone();
        thread::spawn(move || {
            let _ = read_line(); // `stop`, or EOF: either ends the run
            run.stop();
        });
    }

    let seed = spec.plan.seed;
    let mut tasks: Vec<Vec<Handle>> = Vec::new();
    let mut clocks: Vec<Vec<Arc<CpuClock>>> = Vec::new();
    for task in &spec.plan.tasks {
        let (mut handles, mut task_clocks) = (Vec::new(), Vec::new());
        // Shared: a copy per thread holds every thread's plan, n² in all.
        let shared = Arc::new(task.clone());
        for plan in &task.threads {
            let clock = Arc::new(CpuClock::default());
            task_clocks.push(clock.clone());
            let what = format!("thread {} of {} of task {}", handles.len() + 1, task.threads.len(), task.name);
            let (run, task, plan) = (run.clone(), shared.clone(), plan.clone());
            handles.push(spawn(&what, move || task_thread(&run, &task, &plan, &clock))?);
        }
        tasks.push(handles);
        clocks.push(task_clocks);
    }
    let sampler = match spec.plan.sample_ns {
        0 => None,
        every => {
            let run = run.clone();
            Some(spawn("the sampler thread", move || sample(&run, every, &clocks))?)
        }
    };
    let mut services: Vec<Vec<Handle>> = Vec::new();
    for svc in &spec.plan.services {
        let queue = Arc::new(Queue::default());
        let shared = Arc::new(svc.clone());
        let (r, s, q) = (run.clone(), shared.clone(), queue.clone());
        spawn(&format!("the arrival thread of service {}", svc.name), move || arrival_thread(&r, seed, &s, &q))?;
        let mut handles = Vec::new();
        for plan in &svc.workers {
            let what = format!("worker {} of {} of service {}", handles.len() + 1, svc.workers.len(), svc.name);
            let (run, plan, queue) = (run.clone(), plan.clone(), queue.clone());
            handles.push(spawn(&what, move || service_worker(&run, &plan, &queue))?);
        }
        services.push(handles);
    }

    // Finite tasks first: the controller may end the run when they are done.
    let finite: Vec<bool> = spec
        .plan
        .tasks
        .iter()
        .map(|t| t.loops >= 0)
        .collect();
    let mut results: Vec<Option<Vec<ThreadResult>>> = Vec::new();
    for (handles, &f) in tasks.iter_mut().zip(&finite) {
        results.push(if f {
            Some(join(std::mem::take(handles))?)
        } else {
            None
        });
    }
    if finite.contains(&true) {
        let last = results
            .iter()
            .flatten()
            .flatten()
            .filter_map(|r| r.finished_ns)
            .max();
        say(&format!(
            "finished {}",
            last.unwrap_or_else(|| now_ns() - start_ns)
        ))?;
    }
    let mut drivers = Vec::new();
    for ((task, handles), done) in spec.plan.tasks.iter().zip(tasks).zip(results) {
        let res = match done {
            Some(r) => r,
            None => join(handles)?,
        };
        drivers.push(summarise(
            &task.name,
            &run,
            &res,
            task.phases.has_requests(),
            task.dl.is_some(),
        ));
    }
    for (svc, handles) in spec.plan.services.iter().zip(services) {
        drivers.push(summarise(&svc.name, &run, &join(handles)?, true, false));
    }
    if let Some(sampler) = sampler {
        let series = sampler.join().map_err(|_| "the sampler panicked")?;
        for (d, s) in drivers.iter_mut().zip(series) {
            d.cpu_ns_series = Some(s);
        }
    }
    let report = serde_json::to_string(&WorkerReport { drivers })
        .map_err(|e| format!("cannot encode the report: {e}"))?;
    say(&format!("report {report}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use throttlelab_core::scenario::{Phase, TaskSpec};
    use throttlelab_core::TaskPhases;

    #[test]
    fn calibrated_work_takes_about_its_time() {
        let loops_per_us = calibrate();
        assert!(loops_per_us > 1.0, "{loops_per_us}");
        let run = Run::new(now_ns(), u64::MAX, loops_per_us, Vec::new());
        let mut iters = 0;
        let t0 = thread_cpu_ns();
        assert!(run.work(20_000_000, &mut iters));
        let cpu = thread_cpu_ns() - t0;
        assert!((run.work_ns(iters) as i64 - 20_000_000).abs() < 100_000);
        // The fastest run sets the rate, so the work takes at least its time, give or take noise.
        assert!(cpu > 15_000_000 && cpu < 80_000_000, "{cpu}");
    }

    fn run_for(duration_ns: u64) -> Run {
        let now = now_ns();
        Run::new(now, now + duration_ns, calibrate(), Vec::new())
    }

    /// A thread that starts at once, wherever it is.
    const AT_ONCE: ThreadPlan = ThreadPlan { start_ns: 0, start_cpu: 0, cpus: Vec::new(), affinity: false };

    /// Task `index` of a scenario, one captured thread running `phases` once.
    fn captured_task(index: usize, phases: Vec<Phase>) -> TaskPlan {
        TaskPlan {
            name: format!("t{index}"),
            index,
            cgroup: None,
            phases: Arc::new(TaskPhases::List(phases.into())),
            loops: 1,
            timers: 0,
            threads: vec![AT_ONCE],
            dl: None,
        }
    }

    #[test]
    fn a_captured_wake_is_counted_until_a_wait_takes_it() {
        let run = Arc::new(Run::new(now_ns(), now_ns() + 5_000_000_000, 1.0, vec![7, 3]));
        // Wakes before the waits: each wait takes one at once.
        run.wake(3);
        run.wake(3);
        assert!(run.wait(1) && run.wait(1));
        // A wait with none pending sleeps until the next.
        let waker = {
            let run = run.clone();
            thread::spawn(move || {
                thread::sleep(Duration::from_millis(20));
                run.wake(3);
            })
        };
        let t0 = now_ns();
        assert!(run.wait(1));
        assert!(now_ns() - t0 >= 15_000_000);
        waker.join().unwrap();
        // Another worker's task is not this one's; the end of the run ends a wait.
        run.wake(5);
        let stopper = {
            let run = run.clone();
            thread::spawn(move || {
                thread::sleep(Duration::from_millis(20));
                run.stop();
            })
        };
        assert!(!run.wait(0));
        stopper.join().unwrap();
    }

    #[test]
    fn captured_threads_take_requests_and_wake_each_other() {
        let ms = 1_000_000;
        // Busy wall time (`Runtime`), not calibrated work: a calibration taken
        // while other tests load both CPUs finishes `Run(ms)` in under 1 ms.
        let a = captured_task(0, vec![Phase::SleepUntil(30 * ms), Phase::Runtime(ms), Phase::Wake(1), Phase::Sleep(ms)]);
        let b = captured_task(1, vec![Phase::Wait, Phase::Runtime(ms), Phase::Schedule(2 * ms), Phase::Runtime(ms)]);
        let now = now_ns();
        let run = Arc::new(Run::new(now, now + 5_000_000_000, calibrate(), vec![0, 1]));
        let woken = {
            let run = run.clone();
            thread::spawn(move || run_phases(&run, &b, true).unwrap())
        };
        let r = run_phases(&run, &a, true).unwrap();
        let b = woken.join().unwrap();
        // A's request came at 30 ms and was answered after its 1 ms burst;
        // B's, taken up at A's wake, after its own.
        assert_eq!(r.requests.count(), 1);
        assert!((ms..100 * ms).contains(&r.requests.from_arrival_ns[0]), "{:?}", r.requests);
        assert_eq!(b.requests.count(), 1);
        assert!(b.requests.from_arrival_ns[0] >= ms, "{:?}", b.requests);
        assert!(b.finished_ns.unwrap() >= 33 * ms && r.finished_ns.unwrap() >= 32 * ms);
    }

    #[test]
    fn the_worker_takes_the_steps_the_simulator_takes() {
        // Phases whose steps do not depend on how late a wake-up comes
        // (tests/program.rs covers those): a request taken from a sibling's
        // wake, work, busy time, sleeps, an empty one, a timer.
        let ms = 1_000_000;
        let a = vec![Phase::Run(ms), Phase::Wake(1), Phase::Sleep(0), Phase::Sleep(2 * ms), Phase::Runtime(ms), Phase::Timer(5 * ms), Phase::Run(ms)];
        let b = vec![Phase::Wait, Phase::Run(2 * ms), Phase::Sleep(ms), Phase::Wake(0), Phase::Run(0), Phase::Run(ms)];
        let text = "name = \"steps\"\n[machine]\ncpus = 2\n[[task]]\nname = \"t0\"\nloop = 1\nphases = [{ run_us = 1 }]\n[[task]]\nname = \"t1\"\nloop = 1\nphases = [{ run_us = 1 }]\n";
        let mut scenario = throttlelab_core::load(text, &[]).unwrap();
        for (t, phases) in scenario.tasks.iter_mut().zip([&a, &b]) {
            (t.loops, t.captured) = (1, Some(Arc::from(phases.clone())));
        }
        let simulated = throttlelab_core::Sim::new(&scenario, Default::default()).run_steps();

        // The worker's tasks as the controller plans them.
        let plan = Plan::of(&scenario);
        let (a, b) = (plan.tasks[0].clone(), plan.tasks[1].clone());
        let now = now_ns();
        let run = Arc::new(Run::new(now, now + 5_000_000_000, calibrate(), vec![0, 1]));
        let drive_logged = |run: Arc<Run>, task: TaskPlan| {
            let mut program = Program::new(task.phases.clone(), task.loops, task.timers).logged();
            let mut r = ThreadResult::default();
            drive(&run, &task, &mut program, &mut r).unwrap();
            (program.steps().unwrap().to_vec(), r.requests.count())
        };
        let woken = {
            let run = run.clone();
            thread::spawn(move || drive_logged(run, b))
        };
        let (steps_a, requests_a) = drive_logged(run, a);
        let (steps_b, requests_b) = woken.join().unwrap();
        // Times differ between the backends; the steps do not.
        let untimed = |steps: &[Step]| -> Vec<Step> {
            steps.iter().map(|&s| if let Step::SleepUntil { catch_up, .. } = s { Step::SleepUntil { at: 0, catch_up } } else { s }).collect()
        };
        assert_eq!(simulated.len(), 2);
        assert_eq!(untimed(&steps_a), untimed(&simulated[0]));
        assert_eq!(untimed(&steps_b), untimed(&simulated[1]));
        assert_eq!(steps_a.len(), 7, "{steps_a:?}");
        assert_eq!(steps_b.len(), 6, "{steps_b:?}");
        // B's request from A's wake, answered at its sleep.
        assert_eq!((requests_a, requests_b), (0, 1));
    }

    fn trace_task(windows: &str, dl: Option<DlPlan>) -> TaskPlan {
        let text = format!(r#"{{"name": "t", "windows": {windows}}}"#);
        let spec: TaskSpec = serde_json::from_str(&text).unwrap();
        let threads = TaskPhases::threads(&spec);
        TaskPlan {
            name: spec.name.clone(),
            index: 0,
            cgroup: None,
            phases: Arc::new(TaskPhases::of(&spec, threads)),
            loops: spec.effective_loops(),
            timers: 0,
            threads: vec![AT_ONCE; threads],
            dl,
        }
    }

    #[test]
    fn runtime_follows_the_rate_within_what_sched_setattr_accepts() {
        let p = DlParams {
            runtime_ns: 30_000_000,
            deadline_ns: 80_000_000,
            period_ns: 100_000_000,
        };
        let at = |rate| p.at_rate(rate).runtime_ns;
        assert_eq!(at(0.25), 25_000_000);
        assert_eq!(at(1.0 / 3.0), 33_333_334, "rounded up");
        assert_eq!(at(0.0), throttlelab_core::scenario::DL_MIN_RUNTIME_NS);
        assert_eq!(at(0.9), 80_000_000, "at most the deadline");
        assert_eq!(
            (p.at_rate(0.5).deadline_ns, p.at_rate(0.5).period_ns),
            (80_000_000, 100_000_000)
        );
        assert_eq!(
            DlParams::whole_core(200_000_000),
            DlParams {
                runtime_ns: 200_000_000,
                deadline_ns: 200_000_000,
                period_ns: 200_000_000
            }
        );
    }

    #[test]
    fn a_trace_runs_once_through_its_windows() {
        // 100 ms at 0.5, a 100 ms gap, 100 ms at 0.25: 75 ms of work in 300 ms.
        let task = trace_task("[[5.0, 5.1, 0.5], [5.2, 5.3, 0.25]]", None);
        let run = run_for(10_000_000_000);
        let r = run_phases(&run, &task, true).unwrap();
        assert!((run.work_ns(r.iters) as i64 - 75_000_000).abs() < 100_000);
        let finished = r.finished_ns.unwrap();
        assert!(
            (300_000_000..2_000_000_000).contains(&finished),
            "{finished}"
        );
        assert!(r.cpu_ns >= 50_000_000, "{}", r.cpu_ns);
    }

    #[test]
    fn a_thread_not_admitted_yet_ignores_window_entries() {
        let dl = DlPlan {
            params: DlParams {
                runtime_ns: 10_000_000,
                deadline_ns: 100_000_000,
                period_ns: 100_000_000,
            },
            retry_ns: 1_000_000,
            on_refused: OnRefused::Retry,
            profile_ns: Some(50_000_000),
        };
        let mut res = Reservation::new("t", &dl);
        res.at_phase(Some(0.5)).unwrap();
        res.at_phase(None).unwrap();
        assert_eq!((res.stage, res.refusals), (Stage::Idle, 0));
        assert!(!is_sched_deadline());
    }

    /// The calling thread's SCHED_DEADLINE parameters (sched_getattr).
    fn sched_getattr_dl() -> DlParams {
        let mut attr = SchedAttr {
            size: 0,
            sched_policy: 0,
            sched_flags: 0,
            sched_nice: 0,
            sched_priority: 0,
            sched_runtime: 0,
            sched_deadline: 0,
            sched_period: 0,
        };
        let size = std::mem::size_of::<SchedAttr>() as libc::c_uint;
        // SAFETY: attr is a writable sched_attr of the size passed.
        let r = unsafe { libc::syscall(libc::SYS_sched_getattr, 0, &mut attr, size, 0) };
        assert_eq!((r, attr.sched_policy), (0, SCHED_DEADLINE));
        DlParams {
            runtime_ns: attr.sched_runtime,
            deadline_ns: attr.sched_deadline,
            period_ns: attr.sched_period,
        }
    }

    #[test]
    fn window_entries_set_the_reservation_on_the_kernel() {
        // SAFETY: geteuid cannot fail.
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("skipped: SCHED_DEADLINE needs root");
            return;
        }
        let ms = 1_000_000;
        let dl = DlPlan {
            params: DlParams {
                runtime_ns: 10 * ms,
                deadline_ns: 100 * ms,
                period_ns: 100 * ms,
            },
            retry_ns: ms,
            on_refused: OnRefused::Retry,
            profile_ns: Some(50 * ms),
        };
        thread::spawn(move || {
            sched_setattr_dl(0, dl.params).unwrap();
            let mut profiled = Reservation::new("t", &dl);
            profiled.at_phase(Some(0.5)).unwrap();
            assert!(matches!(profiled.stage, Stage::Profiling { .. }));
            assert_eq!(sched_getattr_dl(), DlParams::whole_core(50 * ms));
            profiled.at_phase(None).unwrap();
            assert_eq!(sched_getattr_dl(), DlParams::whole_core(50 * ms), "not yet");
            // A stage spent asleep measures next to nothing.
            nanosleep_until(now_ns() + 60 * ms);
            profiled.at_phase(None).unwrap();
            assert_eq!(profiled.stage, Stage::Idle);
            let measured = sched_getattr_dl();
            assert!(measured.runtime_ns < ms, "{measured:?}");
            assert_eq!(
                (measured.deadline_ns, measured.period_ns),
                (100 * ms, 100 * ms)
            );

            let dl = DlPlan {
                profile_ns: None,
                ..dl
            };
            let mut own_rate = Reservation::new("t", &dl);
            own_rate.at_phase(Some(0.25)).unwrap();
            assert_eq!(sched_getattr_dl(), dl.params.at_rate(0.25));
            assert_eq!(own_rate.refusals + profiled.refusals, 0);
        })
        .join()
        .unwrap();
    }

    #[test]
    fn a_thread_clock_reads_from_another_thread_and_outlives_it() {
        let clock = Arc::new(CpuClock::default());
        assert_eq!(clock.read_ns(7), 7, "not started");
        let (tx, rx) = std::sync::mpsc::channel();
        let (go_on, wait) = std::sync::mpsc::channel::<()>();
        let c = clock.clone();
        let t = thread::spawn(move || {
            c.publish();
            let run = run_for(u64::MAX / 2);
            run.work(20_000_000, &mut 0);
            tx.send(()).unwrap();
            wait.recv().unwrap();
            c.end()
        });
        rx.recv().unwrap();
        let running = clock.read_ns(0);
        assert!(running >= 15_000_000, "{running}");
        go_on.send(()).unwrap();
        let cpu = t.join().unwrap();
        assert!(cpu >= running);
        assert_eq!(clock.read_ns(0), cpu, "its CPU time as it ended");
    }

    #[test]
    fn the_sampler_reports_whole_intervals() {
        let clock = Arc::new(CpuClock::default());
        let run = Arc::new(run_for(250_000_000));
        let (c, r) = (clock.clone(), run.clone());
        let spinner = thread::spawn(move || {
            c.publish();
            r.work(1_000_000_000, &mut 0);
            c.end()
        });
        let series = sample(&run, 50_000_000, &[vec![clock], vec![]]);
        let cpu = spinner.join().unwrap();
        // Boundaries at 50..=250 ms: the last one is the end.
        assert_eq!(series[0].len(), 5);
        assert_eq!(series[1], [0; 5]);
        // The last boundary is the end, where the spinner stops.
        let sampled: u64 = series[0].iter().sum();
        assert!(
            sampled <= cpu && cpu - sampled < 5_000_000,
            "{series:?} {cpu}"
        );

        // Stopped at 150 ms: one whole interval of 100 ms.
        let run = Arc::new(run_for(1_000_000_000));
        let r = run.clone();
        let stopper = thread::spawn(move || {
            nanosleep_until(r.start_ns + 150_000_000);
            r.stop();
        });
        assert_eq!(sample(&run, 100_000_000, &[vec![]]), [vec![0]]);
        stopper.join().unwrap();
    }

    /// The calling thread's voluntary context switches so far.
    fn nvcsw() -> i64 {
        // SAFETY: getrusage only writes the struct passed in.
        unsafe {
            let mut usage: libc::rusage = std::mem::zeroed();
            libc::getrusage(libc::RUSAGE_THREAD, &mut usage);
            usage.ru_nvcsw
        }
    }

    #[test]
    fn a_sleeper_sleeps_through_until_stop_wakes_it() {
        let run = Arc::new(run_for(10_000_000_000));
        let r = run.clone();
        let stopper = thread::spawn(move || {
            nanosleep_until(r.start_ns + 500_000_000);
            r.stop();
        });
        let before = nvcsw();
        assert!(!run.sleep_until(run.start_ns + 5_000_000_000));
        // One sleep, not one per slice (25 of 20 ms before): nothing in the
        // measured cgroup wakes but for a reason.
        assert!(nvcsw() - before <= 3, "{}", nvcsw() - before);
        assert!(now_ns() - run.start_ns < 2_000_000_000);
        stopper.join().unwrap();
    }

    #[test]
    fn a_thread_leaves_its_start_cpu_with_the_affinity_it_should_have() {
        thread::spawn(|| {
            let inherited = affinity().unwrap();
            let last = *inherited.last().unwrap();
            start_on(&ThreadPlan { start_cpu: last, ..AT_ONCE }).unwrap();
            assert_eq!(affinity().unwrap(), inherited);
            start_on(&ThreadPlan { start_ns: 0, start_cpu: last, cpus: vec![inherited[0]], affinity: true }).unwrap();
            assert_eq!(affinity().unwrap(), [inherited[0]]);
        })
        .join()
        .unwrap();
    }

    #[test]
    fn threads_created_after_set_exact_timers_sleep_without_slack() {
        thread::spawn(|| {
            set_exact_timers().unwrap();
            // SAFETY: PR_GET_TIMERSLACK only returns a number.
            let inherited = thread::spawn(|| unsafe { libc::prctl(libc::PR_GET_TIMERSLACK) }).join().unwrap();
            assert_eq!(inherited, 1);
        })
        .join()
        .unwrap();
    }

    #[test]
    fn the_end_stops_work_and_sleep() {
        let now = now_ns();
        let run = Run::new(now, now + 5_000_000, calibrate(), Vec::new());
        let mut iters = 0;
        assert!(!run.work(1_000_000_000, &mut iters));
        assert!(!run.sleep_until(now + 1_000_000_000));
        assert!(now_ns() - now < 100_000_000);
    }
}
