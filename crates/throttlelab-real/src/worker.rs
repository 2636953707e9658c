//! The worker process: one per cgroup, it runs that cgroup's task threads and
//! service workers as native threads from a common CLOCK_MONOTONIC start time,
//! and reports what they did.
//!
//! Protocol, one line per message. Controller to worker (stdin): the
//! [`WorkerSpec`] as JSON, then `go <start_ns>` once the worker sits in its
//! cgroups, then maybe `stop`; `stop` or EOF ends the run early. Worker to
//! controller (stdout): `ready` once the spec is read, `finished <ns>` when its
//! finite tasks are done (ns since start), and last `report <WorkerReport JSON>`.

use rand::SeedableRng;
use rand_distr::{Distribution, Exp};
use rand_pcg::Pcg64;
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::{self, JoinHandle};
use std::time::Duration;
use throttlelab_core::scenario::{Arrival, Phase, PhaseSpec};

/// A sleeping thread wakes at least this often to notice `stop`.
const SLEEP_SLICE_NS: u64 = 20_000_000;
/// Calibrated work runs in chunks of this many us between checks for the end.
const CHUNK_US: f64 = 50.0;
const STACK_BYTES: usize = 256 * 1024;

/// What one worker runs. Times are ns relative to the common start.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WorkerSpec {
    /// Iterations of [`spin`] per microsecond, calibrated by the controller.
    pub loops_per_us: f64,
    pub duration_ns: u64,
    pub tasks: Vec<TaskPlan>,
    pub services: Vec<ServicePlan>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TaskPlan {
    pub name: String,
    /// Times the phase list runs; -1 = until the end.
    pub loops: i64,
    pub phases: Vec<PhaseSpec>,
    pub threads: Vec<ThreadPlan>,
    /// SCHED_DEADLINE parameters, for `policy = "deadline"` tasks.
    pub dl: Option<DlPlan>,
}

/// `sched_setattr(SCHED_DEADLINE)` for every thread of a task; refused
/// (EBUSY), a thread runs as a normal one and retries every `retry_ns`, or,
/// without `retry_ns`, fails the run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DlPlan {
    pub runtime_ns: u64,
    pub deadline_ns: u64,
    pub period_ns: u64,
    pub retry_ns: Option<u64>,
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

/// Switch thread `tid` (0: the caller) to SCHED_DEADLINE; Err(errno) if refused.
fn sched_setattr_dl(tid: libc::pid_t, dl: &DlPlan) -> Result<(), i32> {
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

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ThreadPlan {
    pub start_ns: u64,
    /// CPU affinity (sched_setaffinity); None: whatever the cpuset allows.
    pub cpus: Option<Vec<usize>>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ServicePlan {
    pub name: String,
    pub arrival: Arrival,
    pub rate_per_s: f64,
    pub cost_ns: u64,
    /// Seeds the arrival process.
    pub seed: u64,
    pub workers: Vec<ThreadPlan>,
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
    /// Services only: completion - arrival of every completed request.
    pub latencies_ns: Option<Vec<u64>>,
    /// Deadline tasks only: jobs (run phases after a sleep) done after their
    /// deadline, and refused `sched_setattr` calls.
    pub deadline_misses: Option<u64>,
    pub admission_refusals: Option<u64>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WorkerReport {
    /// The spec's tasks, then its services.
    pub drivers: Vec<DriverReport>,
}

fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid timespec; the clocks used always exist.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
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

/// The common clock of one worker's threads.
struct Run {
    start_ns: u64,
    end_ns: u64,
    loops_per_us: f64,
    stop: AtomicBool,
}

impl Run {
    fn over(&self) -> bool {
        self.stop.load(Ordering::Relaxed) || now_ns() >= self.end_ns
    }

    /// Sleep until `at_ns` (absolute); false if the run ended first.
    fn sleep_until(&self, at_ns: u64) -> bool {
        loop {
            let now = now_ns();
            if self.stop.load(Ordering::Relaxed) || now >= self.end_ns {
                return false;
            }
            if now >= at_ns {
                return true;
            }
            nanosleep_until(at_ns.min(now + SLEEP_SLICE_NS).min(self.end_ns));
        }
    }

    /// Do `work_ns` of calibrated work; adds the iterations done to `iters`.
    /// False if the run ended first.
    fn work(&self, work_ns: u64, iters: &mut u64) -> bool {
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

    fn work_ns(&self, iters: u64) -> u64 {
        (iters as f64 * 1_000.0 / self.loops_per_us) as u64
    }
}

/// What one thread did.
#[derive(Default)]
struct ThreadResult {
    cpu_ns: u64,
    iters: u64,
    finished_ns: Option<u64>,
    latencies_ns: Vec<u64>,
    misses: u64,
    refusals: u64,
}

fn set_affinity(cpus: &Option<Vec<usize>>) -> Result<(), String> {
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

/// One thread of a task: its phases, `loops` times or until the end.
fn task_thread(run: &Run, task: &TaskPlan, plan: &ThreadPlan) -> Result<ThreadResult, String> {
    set_affinity(&plan.cpus)?;
    let going = run.sleep_until(run.start_ns + plan.start_ns);
    let Some(dl) = task.dl.as_ref().filter(|_| going) else {
        return Ok(run_phases(run, task, going));
    };
    match sched_setattr_dl(0, dl) {
        Ok(()) => Ok(run_phases(run, task, going)),
        Err(libc::EBUSY) if dl.retry_ns.is_some() => {
            // SAFETY: gettid has no preconditions.
            let tid = unsafe { libc::gettid() };
            let phases_done = AtomicBool::new(false);
            Ok(thread::scope(|scope| {
                let retries = scope.spawn(|| retry_setattr(run, tid, dl, &phases_done));
                let mut r = run_phases(run, task, going);
                phases_done.store(true, Ordering::Relaxed);
                r.refusals = retries.join().unwrap_or(1);
                r
            }))
        }
        Err(libc::EBUSY) => Err(format!(
            "task.{}: SCHED_DEADLINE admission refused by the kernel (EBUSY)",
            task.name
        )),
        Err(e) => Err(format!(
            "task.{}: sched_setattr(SCHED_DEADLINE) failed: {}",
            task.name,
            std::io::Error::from_raw_os_error(e)
        )),
    }
}

/// A task thread's phases, `loops` times or until the end. For a deadline
/// task a job is a run phase released by the end of a sleep; it misses when
/// it ends later than its relative deadline after it began.
fn run_phases(run: &Run, task: &TaskPlan, mut going: bool) -> ThreadResult {
    let phases: Vec<Phase> = task
        .phases
        .iter()
        .map(|p| p.phase().expect("validated"))
        .collect();
    let deadline_ns = task.dl.as_ref().map(|d| d.deadline_ns);
    let mut r = ThreadResult::default();
    let mut loops_done = 0;
    let mut released = false;
    while going {
        for &phase in &phases {
            going = match phase {
                Phase::Run(ns) => {
                    let start = now_ns();
                    let done = run.work(ns, &mut r.iters);
                    if let (Some(d), true, true) = (deadline_ns, released, done) {
                        r.misses += u64::from(now_ns() > start + d);
                    }
                    done
                }
                Phase::Sleep(ns) => {
                    released = true;
                    run.sleep_until(now_ns() + ns)
                }
                Phase::Timer(period) => {
                    released = true;
                    let since = now_ns().saturating_sub(run.start_ns);
                    run.sleep_until(run.start_ns + (since / period + 1) * period)
                }
            };
            if !going {
                break;
            }
        }
        if going {
            loops_done += 1;
            if task.loops >= 0 && loops_done >= task.loops {
                r.finished_ns = Some(now_ns() - run.start_ns);
                break;
            }
        }
    }
    r.cpu_ns = clock_ns(libc::CLOCK_THREAD_CPUTIME_ID);
    r
}

/// After a refusal: try `sched_setattr` for thread `tid` again every
/// `retry_ns` until it is admitted, its phases are done or the run ends;
/// returns how many attempts were refused, the first included.
fn retry_setattr(run: &Run, tid: libc::pid_t, dl: &DlPlan, phases_done: &AtomicBool) -> u64 {
    let every = dl.retry_ns.expect("retrying");
    let mut refused = 1;
    let mut next = now_ns() + every;
    while run.sleep_until(next) && !phases_done.load(Ordering::Relaxed) {
        if sched_setattr_dl(tid, dl).is_ok() {
            break;
        }
        refused += 1;
        next += every;
    }
    refused
}

/// Arrival timestamps (absolute ns) waiting for a service worker.
#[derive(Default)]
struct Queue {
    arrivals: Mutex<VecDeque<u64>>,
    ready: Condvar,
}

/// The open-loop arrival process of a service: requests arrive on schedule
/// whether or not the workers keep up; latency counts from the scheduled time.
fn arrival_thread(run: &Run, svc: &ServicePlan, queue: &Queue) {
    let mut rng = Pcg64::seed_from_u64(svc.seed);
    let mean_ns = 1e9 / svc.rate_per_s;
    let exp = Exp::new(1.0 / mean_ns).expect("rate > 0");
    let mut at = run.start_ns;
    loop {
        let gap = match svc.arrival {
            Arrival::Uniform => mean_ns,
            Arrival::Poisson => exp.sample(&mut rng),
        };
        at += (gap.round() as u64).max(1);
        if !run.sleep_until(at) {
            return;
        }
        queue.arrivals.lock().expect("queue lock").push_back(at);
        queue.ready.notify_one();
    }
}

/// A service worker: takes requests in arrival order and does `cost_ns` of work for each.
fn service_worker(
    run: &Run,
    svc: &ServicePlan,
    plan: &ThreadPlan,
    queue: &Queue,
) -> Result<ThreadResult, String> {
    set_affinity(&plan.cpus)?;
    let mut r = ThreadResult::default();
    'serve: loop {
        let arrived = {
            let mut q = queue.arrivals.lock().expect("queue lock");
            loop {
                if let Some(a) = q.pop_front() {
                    break a;
                }
                if run.over() {
                    break 'serve;
                }
                q = queue
                    .ready
                    .wait_timeout(q, Duration::from_nanos(SLEEP_SLICE_NS))
                    .expect("queue lock")
                    .0;
            }
        };
        if !run.work(svc.cost_ns, &mut r.iters) {
            break;
        }
        r.latencies_ns.push(now_ns() - arrived);
    }
    r.cpu_ns = clock_ns(libc::CLOCK_THREAD_CPUTIME_ID);
    Ok(r)
}

type Handle = JoinHandle<Result<ThreadResult, String>>;

fn spawn(
    f: impl FnOnce() -> Result<ThreadResult, String> + Send + 'static,
) -> Result<Handle, String> {
    thread::Builder::new()
        .stack_size(STACK_BYTES)
        .spawn(f)
        .map_err(|e| format!("cannot create a thread: {e}"))
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
    service: bool,
    deadline: bool,
) -> DriverReport {
    let done = !results.is_empty() && results.iter().all(|r| r.finished_ns.is_some());
    DriverReport {
        name: name.to_string(),
        threads: results.len() as u64,
        cpu_ns: results.iter().map(|r| r.cpu_ns).sum(),
        work_ns: run.work_ns(results.iter().map(|r| r.iters).sum()),
        finished_ns: done.then(|| {
            results
                .iter()
                .filter_map(|r| r.finished_ns)
                .max()
                .unwrap_or(0)
        }),
        latencies_ns: service.then(|| {
            results
                .iter()
                .flat_map(|r| r.latencies_ns.iter().copied())
                .collect()
        }),
        deadline_misses: deadline.then(|| results.iter().map(|r| r.misses).sum()),
        admission_refusals: deadline.then(|| results.iter().map(|r| r.refusals).sum()),
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

/// The worker process's main: see the module documentation for the protocol.
pub fn worker_main() -> Result<(), String> {
    let spec: WorkerSpec =
        serde_json::from_str(&read_line()?).map_err(|e| format!("bad worker spec: {e}"))?;
    say("ready")?;
    let go = read_line()?;
    let start_ns: u64 = go
        .strip_prefix("go ")
        .and_then(|t| t.parse().ok())
        .ok_or_else(|| format!("expected `go <start_ns>`, got {go:?}"))?;
    let run = Arc::new(Run {
        start_ns,
        end_ns: start_ns + spec.duration_ns,
        loops_per_us: spec.loops_per_us,
        stop: AtomicBool::new(false),
    });
    {
        let run = run.clone();
        thread::spawn(move || {
            let _ = read_line(); // `stop`, or EOF: either ends the run
            run.stop.store(true, Ordering::Relaxed);
        });
    }

    let mut tasks: Vec<Vec<Handle>> = Vec::new();
    for task in &spec.tasks {
        let mut handles = Vec::new();
        for plan in &task.threads {
            let (run, task, plan) = (run.clone(), task.clone(), plan.clone());
            handles.push(spawn(move || task_thread(&run, &task, &plan))?);
        }
        tasks.push(handles);
    }
    let mut services: Vec<Vec<Handle>> = Vec::new();
    for svc in &spec.services {
        let queue = Arc::new(Queue::default());
        let (r, s, q) = (run.clone(), svc.clone(), queue.clone());
        thread::Builder::new()
            .stack_size(STACK_BYTES)
            .spawn(move || arrival_thread(&r, &s, &q))
            .map_err(|e| format!("cannot create a thread: {e}"))?;
        let mut handles = Vec::new();
        for plan in &svc.workers {
            let (run, svc, plan, queue) = (run.clone(), svc.clone(), plan.clone(), queue.clone());
            handles.push(spawn(move || service_worker(&run, &svc, &plan, &queue))?);
        }
        services.push(handles);
    }

    // Finite tasks first: the controller may end the run when they are done.
    let finite: Vec<bool> = spec.tasks.iter().map(|t| t.loops >= 0).collect();
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
    for ((task, handles), done) in spec.tasks.iter().zip(tasks).zip(results) {
        let res = match done {
            Some(r) => r,
            None => join(handles)?,
        };
        drivers.push(summarise(&task.name, &run, &res, false, task.dl.is_some()));
    }
    for (svc, handles) in spec.services.iter().zip(services) {
        drivers.push(summarise(&svc.name, &run, &join(handles)?, true, false));
    }
    let report = serde_json::to_string(&WorkerReport { drivers })
        .map_err(|e| format!("cannot encode the report: {e}"))?;
    say(&format!("report {report}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calibrated_work_takes_about_its_time() {
        let loops_per_us = calibrate();
        assert!(loops_per_us > 1.0, "{loops_per_us}");
        let run = Run {
            start_ns: now_ns(),
            end_ns: u64::MAX,
            loops_per_us,
            stop: AtomicBool::new(false),
        };
        let mut iters = 0;
        let t0 = clock_ns(libc::CLOCK_THREAD_CPUTIME_ID);
        assert!(run.work(20_000_000, &mut iters));
        let cpu = clock_ns(libc::CLOCK_THREAD_CPUTIME_ID) - t0;
        assert!((run.work_ns(iters) as i64 - 20_000_000).abs() < 100_000);
        // The fastest run sets the rate, so the work takes at least its time, give or take noise.
        assert!(cpu > 15_000_000 && cpu < 80_000_000, "{cpu}");
    }

    #[test]
    fn the_end_stops_work_and_sleep() {
        let now = now_ns();
        let run = Run {
            start_ns: now,
            end_ns: now + 5_000_000,
            loops_per_us: calibrate(),
            stop: AtomicBool::new(false),
        };
        let mut iters = 0;
        assert!(!run.work(1_000_000_000, &mut iters));
        assert!(!run.sleep_until(now + 1_000_000_000));
        assert!(now_ns() - now < 100_000_000);
    }
}
