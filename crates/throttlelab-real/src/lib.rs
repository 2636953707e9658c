//! throttlelab-real: runs a scenario on the host kernel, in real cgroups (v1
//! or v2), and reads the kernel's own `cpu.stat`.
//!
//! The controller (this process) calibrates the busy loop, creates the
//! scenario's cgroups under one parent `throttlelab-<pid>`, starts one worker
//! process per cgroup that has tasks or services (see [`worker`]), moves each
//! into its cgroup before it starts working, performs the `[[write]]`s on time,
//! and reads the counters before and after. It stays outside every measured
//! cgroup, and removes what it created on every path out, Ctrl-C included;
//! what a run killed outright left behind, the next run removes. One run at
//! a time (see [`lock`]).

pub mod bw_trace;
pub mod capture;
mod cgroupfs;
mod error;
mod host;
pub mod kubelet;
mod lock;
mod probe;
mod signals;
mod spill;
mod thread_sched;
mod timer_trace;
mod trace_raw;
mod wakeup_cost;
pub mod sched_trace;
pub mod worker;

pub use cgroupfs::{Version, ROOT_ENV};
pub use error::{Error, Result};
pub use host::Host;
pub use lock::{RunLock, LOCK_PATH};
pub use worker::{worker_main, Failure};

use cgroupfs::{GroupId, Layout, RawStats, Stale, Tree};
use timer_trace::TimerTrace;
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, SystemTime};
use throttlelab_core::output::{CgroupStats, Limit, Output, Requests, TaskStats};
use throttlelab_core::Quota;
use throttlelab_core::plan::{Plan, WritePlan};
use throttlelab_core::scenario::{Phase, Scenario};
use throttlelab_core::TaskPhases;
use worker::{nanosleep_until, now_ns, DriverReport, WorkerReport, WorkerSpec};

/// How long the background probe spins on every CPU before the run.
const PROBE_NS: u64 = 500_000_000;

/// Time between `go` and the common start: the workers create their threads.
const START_DELAY_NS: u64 = 50_000_000;
/// Overrides [`START_DELAY_NS`], in milliseconds, for a slow machine: a guest
/// under QEMU's TCG may take longer to create and park the threads.
pub const START_DELAY_ENV: &str = "THROTTLELAB_START_DELAY_MS";
/// The workers' threads must sleep this long before the start, when the
/// cgroups' bandwidth is reset.
const START_MARGIN_NS: u64 = 5_000_000;
/// How long before the start the controller reads the counters the run
/// starts from, where no period timer can expire in between
/// ([`baseline_read_ns`]); a read took 0.05-0.3 ms on the host (start14).
const EARLY_READ_NS: u64 = 2_000_000;
/// How late a period timer's expiry may be handled after its time (an
/// interrupt held off, a busy CPU): the early read keeps this far from one.
const EXPIRY_LATENESS_NS: u64 = 1_000_000;
/// How often the controller looks whether they do.
const ASLEEP_POLL_NS: u64 = 1_000_000;
/// How long a worker may take to start and read its spec.
const READY_TIMEOUT_NS: u64 = 30_000_000_000;
/// How long workers may take to report after the end.
const REPORT_TIMEOUT_NS: u64 = 5_000_000_000;

/// [`START_DELAY_NS`], or what [`START_DELAY_ENV`] says.
fn start_delay_ns() -> Result<u64> {
    parse_start_delay(std::env::var(START_DELAY_ENV).ok().as_deref())
}

/// The start delay an environment value asks for (None: unset).
fn parse_start_delay(value: Option<&str>) -> Result<u64> {
    match value {
        None => Ok(START_DELAY_NS),
        Some(ms) => match ms.parse::<u64>() {
            Ok(ms @ 1..=60_000) => Ok(ms * 1_000_000),
            _ => Err(Error::harness(format!("{START_DELAY_ENV} must be milliseconds in 1..=60000, got {ms:?}"))),
        },
    }
}
/// The file name of the worker executable (src/bin/throttlelab-worker.rs).
const WORKER_EXE: &str = "throttlelab-worker";
/// A process that started this long after a stale group's mtime cannot be
/// the run that made it: /proc/stat's `btime` is whole seconds.
const PID_REUSE_MARGIN: Duration = Duration::from_secs(1);

/// One worker process: the group it runs in and what it runs.
struct WorkerPlan {
    group: GroupId,
    spec: WorkerSpec,
}

/// One worker per group with tasks or services, root group first, each
/// with its group's slice of the scenario's plan: start offsets, start CPUs,
/// a captured thread's rotation, as the simulator draws them.
fn worker_plans(plan: &Plan, groups: usize, loops_per_us: f64) -> Vec<WorkerPlan> {
    std::iter::once(None)
        .chain((0..groups).map(Some))
        .map(|group| WorkerPlan { group, spec: WorkerSpec { loops_per_us, plan: plan.group(group) } })
        .filter(|p| !p.spec.plan.is_empty())
        .collect()
}

/// The scenario's name for a group, for messages.
fn group_name(s: &Scenario, g: GroupId) -> &str {
    g.map_or("(root)", |i| s.cgroups[i].name.as_str())
}

struct Worker {
    child: Child,
    stdin: ChildStdin,
}

/// What wakes the controller.
enum Wake {
    /// A line from worker i's stdout, None at EOF.
    Line(usize, Option<String>),
    /// A signal that ends the run (the guard says which).
    Signal,
}

/// The worker processes; dropping them kills them (SIGKILL, then wait).
struct Workers {
    list: Vec<Worker>,
    /// Every worker's lines, and the signals.
    wakes: Receiver<Wake>,
}

impl Workers {
    /// Start the worker executable `worker` once per plan, each in its own
    /// process group (a terminal's Ctrl-C reaches the controller only) and
    /// killed by the kernel if the controller dies.
    fn spawn(worker: &Path, n: usize, signals: &mut signals::Guard) -> Result<Workers> {
        let (tx, rx) = mpsc::channel();
        let signal = tx.clone();
        signals.wake_with(move || {
            let _ = signal.send(Wake::Signal);
        });
        let mut workers = Workers {
            list: Vec::new(),
            wakes: rx,
        };
        for i in 0..n {
            let mut cmd = Command::new(worker);
            cmd.stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .process_group(0);
            // SAFETY: prctl is async-signal-safe and touches no memory of the parent.
            unsafe {
                cmd.pre_exec(|| {
                    if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
            let mut child = cmd.spawn().map_err(|e| {
                Error::harness(format!("cannot start the worker `{}`: {e}", worker.display()))
            })?;
            let (stdin, stdout) = (
                child.stdin.take().expect("piped"),
                child.stdout.take().expect("piped"),
            );
            workers.list.push(Worker { child, stdin });
            let tx = tx.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(stdout).lines() {
                    match line {
                        Ok(l) => {
                            let _ = tx.send(Wake::Line(i, Some(l)));
                        }
                        Err(_) => break,
                    }
                }
                let _ = tx.send(Wake::Line(i, None));
            });
        }
        Ok(workers)
    }

    fn send(&mut self, i: usize, line: &str) -> std::io::Result<()> {
        let stdin = &mut self.list[i].stdin;
        stdin
            .write_all(line.as_bytes())
            .and_then(|_| stdin.write_all(b"\n"))
            .and_then(|_| stdin.flush())
    }

    fn pid(&self, i: usize) -> u32 {
        self.list[i].child.id()
    }

    /// Wait until every thread of every worker sleeps (state S in
    /// /proc/PID/task/TID/stat), by `deadline_ns`. Polls: it runs before the
    /// start, outside what is measured. A worker's line meanwhile (none is
    /// due before the start: an `error`, or EOF) ends the wait and is returned.
    fn wait_asleep(
        &mut self,
        signals: &signals::Guard,
        deadline_ns: u64,
    ) -> Result<Option<(usize, Option<String>)>> {
        loop {
            let mut awake = Vec::new();
            for w in &self.list {
                awake.extend(awake_threads(w.child.id())?);
            }
            if awake.is_empty() {
                return Ok(None);
            }
            // Past the deadline, still take a line that is waiting: it says why.
            let poll_ns = if now_ns() < deadline_ns { ASLEEP_POLL_NS } else { 0 };
            if let Some(line) = self.next(signals, poll_ns)? {
                return Ok(Some(line));
            }
            if now_ns() >= deadline_ns {
                return Err(Error::harness(format!(
                    "worker threads {awake:?} were still running {} ms before the start (on a slow machine, give them longer: {START_DELAY_ENV}, default {})",
                    START_MARGIN_NS / 1_000_000,
                    START_DELAY_NS / 1_000_000
                )));
            }
        }
    }

    /// The next line from any worker within `timeout_ns`; blocks without
    /// polling, and returns early with `Err(Interrupted)` on a signal.
    fn next(
        &mut self,
        signals: &signals::Guard,
        timeout_ns: u64,
    ) -> Result<Option<(usize, Option<String>)>> {
        let deadline = now_ns() + timeout_ns;
        loop {
            signals.check()?;
            let wait = Duration::from_nanos(deadline.saturating_sub(now_ns()));
            match self.wakes.recv_timeout(wait) {
                Ok(Wake::Line(i, line)) => return Ok(Some((i, line))),
                // The check above returns the interruption.
                Ok(Wake::Signal) => {}
                Err(RecvTimeoutError::Timeout) => return Ok(None),
                // The guard's waker holds a sender for as long as the guard
                // lives; without it a signal could no longer end the wait.
                Err(RecvTimeoutError::Disconnected) => {
                    return Err(Error::harness("the signal waker ended before the run"))
                }
            }
        }
    }
}

/// Threads of process `pid` not in interruptible sleep; an exited (zombie)
/// worker's main thread counts: its EOF says what happened.
fn awake_threads(pid: u32) -> Result<Vec<u32>> {
    let dir = PathBuf::from(format!("/proc/{pid}/task"));
    let tasks = std::fs::read_dir(&dir).map_err(|e| Error::harness(format!("{}: {e}", dir.display())))?;
    let mut awake = Vec::new();
    for task in tasks.flatten() {
        // A thread that exits meanwhile is not awake.
        let Ok(stat) = std::fs::read_to_string(task.path().join("stat")) else { continue };
        if thread_state(&stat) != Some('S') {
            awake.extend(task.file_name().to_str().and_then(|t| t.parse::<u32>().ok()));
        }
    }
    Ok(awake)
}

/// The state letter of a /proc/.../stat line.
fn thread_state(stat: &str) -> Option<char> {
    host::stat_fields(stat).first()?.chars().next()
}

/// Whether process `pid` is a worker of a run: it runs an executable named
/// [`WORKER_EXE`], wherever installed, replaced since or not.
fn is_worker(pid: u32) -> bool {
    std::fs::read_link(format!("/proc/{pid}/exe")).is_ok_and(|exe| is_worker_exe(&exe))
}

/// Whether `exe`, a /proc/PID/exe link's target, is a worker executable.
fn is_worker_exe(exe: &Path) -> bool {
    let name = exe.file_name().map(|n| n.as_encoded_bytes()).unwrap_or_default();
    name.strip_suffix(b" (deleted)").unwrap_or(name) == WORKER_EXE.as_bytes()
}

impl Drop for Workers {
    fn drop(&mut self) {
        for w in &mut self.list {
            let _ = w.child.kill();
            let _ = w.child.wait();
        }
    }
}

/// A `[[write]]` due at `at_ns` (since start); `n` counts repetitions.
#[derive(Debug, Clone, Copy)]
struct DueWrite {
    at_ns: u64,
    index: usize,
    n: u64,
}

/// The next occurrence of write `index` after occurrence `n`, if it is periodic.
fn next_write(writes: &[WritePlan], w: DueWrite) -> Option<DueWrite> {
    let n = w.n + 1;
    Some(DueWrite { at_ns: writes[w.index].at_ns(n)?, index: w.index, n })
}

/// Perform a `[[write]]` (`WritePlan::applied_to`).
fn apply_write(tree: &mut Tree, w: &WritePlan) -> Result<()> {
    tree.set_bandwidth(w.cgroup, w.applied_to(tree.bandwidth(w.cgroup)))
}

/// When to read the counters the run starts from: [`EARLY_READ_NS`] before
/// the start, while every worker sleeps, so that the controller does not
/// wake on a worker's CPU at the start. There its SCHED_FIFO wake-up made the
/// CPU busy as the workers woke, and `select_idle_sibling` moved one of that
/// CPU's workers to the other (15 of 20 host runs started 1 + 3 or 3 + 1,
/// docs/fidelity.md's start14 section). While the workers sleep only a
/// period timer's expiry moves the counters (`nr_periods`), so the read
/// stays at the start where a limited cgroup's timer (expiring at its traced
/// `expiry_ns` plus whole periods: `start_cfs_bandwidth` forwards it) could
/// expire between the read, less [`EXPIRY_LATENESS_NS`], and the start, or
/// where its phase is unknown.
fn baseline_read_ns(start: u64, timers: &[(Limit, Option<u64>)]) -> u64 {
    let early = start.saturating_sub(EARLY_READ_NS);
    let from = early.saturating_sub(EXPIRY_LATENESS_NS);
    let clear = timers.iter().all(|&(limit, expiry_ns)| {
        if limit.quota_us == Quota::Max {
            return true;
        }
        let Some(expiry) = expiry_ns else { return false };
        let period = limit.period_us as i128 * 1_000;
        // The first expiry at or after `from`.
        let next = from as i128 + (expiry as i128 - from as i128).rem_euclid(period);
        next > start as i128
    });
    if clear {
        early
    } else {
        start
    }
}

/// What the run measured, before it is put into the output's shape.
struct Measured {
    stats: Vec<CgroupStats>,
    reports: Vec<WorkerReport>,
    duration_ns: u64,
    /// CLOCK_MONOTONIC when the workers started.
    start_ns: u64,
}

/// Drive the workers through the protocol of [`worker`]: spec, ready, attach,
/// go, writes, end, stop, reports.
fn measure(
    s: &Scenario,
    writes: &[WritePlan],
    plans: &[WorkerPlan],
    tree: &mut Tree,
    workers: &mut Workers,
    signals: &signals::Guard,
) -> Result<Measured> {
    let label = |i: usize| group_name(s, plans[i].group).to_string();
    // Worker i's line out of turn: its own `error`, or EOF.
    let failed = |i: usize, line: Option<String>| match line {
        Some(l) => match l.strip_prefix("error ") {
            Some(why) => Error::harness(format!("the worker for cgroup {}: {why}", label(i))),
            None => Error::harness(format!("the worker for cgroup {} said {l:?} out of turn", label(i))),
        },
        None => Error::harness(format!("the worker for cgroup {} exited before reporting", label(i))),
    };
    let send = |workers: &mut Workers, i: usize, line: &str| {
        workers.send(i, line).map_err(|e| {
            Error::harness(format!(
                "cannot talk to the worker for cgroup {}: {e}",
                label(i)
            ))
        })
    };
    for (i, p) in plans.iter().enumerate() {
        let spec = serde_json::to_string(&p.spec).expect("a spec serialises");
        send(workers, i, &spec)?;
    }
    let deadline = now_ns() + READY_TIMEOUT_NS;
    let mut ready = 0;
    while ready < plans.len() {
        match workers.next(signals, deadline.saturating_sub(now_ns()))? {
            Some((_, Some(l))) if l == "ready" => ready += 1,
            Some((i, line)) => return Err(failed(i, line)),
            None => return Err(Error::harness("the workers did not start within 30 s")),
        }
    }
    for (i, p) in plans.iter().enumerate() {
        tree.attach(workers.pid(i), p.group)?;
    }
    let start = now_ns() + start_delay_ns()?;
    for i in 0..plans.len() {
        send(workers, i, &format!("go {start}"))?;
    }
    // Traced: two spinners at 20 ms / 20 ms ran 23.1 ms before the first
    // refill after the start; the workers' start-up had left the runqueues
    // 3 ms or more (a thread's first run takes a slice; `return_cfs_rq_runtime`
    // keeps 1 ms of it, all of it when EEVDF delays the dequeue).
    if let Some((i, line)) = workers.wait_asleep(signals, start.saturating_sub(START_MARGIN_NS))? {
        return Err(failed(i, line));
    }
    tree.reset_bandwidth()?;
    // The counters start when the workers do: periods that pass while they
    // wait for `start` would count as unthrottled ones. So they are read
    // just before the start where no period timer expires in between, else
    // at the start (`baseline_read_ns`). At SCHED_FIFO until the last read,
    // so that they are read then and at the end whatever the kernel's fair
    // class does with the workers.
    let timers: Vec<(Limit, Option<u64>)> =
        (0..s.cgroups.len()).map(|i| (tree.bandwidth(i), tree.period_timer_expiry_ns[i])).collect();
    let fifo = thread_sched::FifoWhile::begin(1).ok();
    nanosleep_until(baseline_read_ns(start, &timers));
    let before: Vec<RawStats> = (0..s.cgroups.len())
        .map(|i| tree.stats(i))
        .collect::<Result<_>>()?;

    let end = start + s.duration_ns();
    let mut due: Vec<DueWrite> = (0..writes.len()).map(|index| DueWrite { at_ns: writes[index].first_ns, index, n: 0 }).collect();
    let finite: Vec<bool> = plans
        .iter()
        .map(|p| p.spec.plan.tasks.iter().any(|t| t.loops >= 0))
        .collect();
    let mut finished: Vec<Option<u64>> = vec![None; plans.len()];
    let mut reports: Vec<Option<WorkerReport>> = vec![None; plans.len()];
    let all_finished =
        |finished: &[Option<u64>]| finite.iter().zip(finished).all(|(&f, d)| !f || d.is_some());
    loop {
        let now = now_ns();
        if now >= end || (s.duration_s.is_none() && all_finished(&finished)) {
            break;
        }
        while let Some(k) = due.iter().position(|w| start + w.at_ns <= now_ns()) {
            let w = due.swap_remove(k);
            apply_write(tree, &writes[w.index])?;
            due.extend(next_write(writes, w).filter(|n| start + n.at_ns < end));
        }
        let next_at = due
            .iter()
            .map(|w| start + w.at_ns)
            .min()
            .unwrap_or(end)
            .min(end);
        if let Some((i, line)) = workers.next(signals, next_at.saturating_sub(now_ns()))? {
            handle_line(line.as_deref(), &mut finished[i], &mut reports[i]).ok_or_else(|| failed(i, line))?;
        }
    }
    let stats: Vec<CgroupStats> = before
        .iter()
        .enumerate()
        .map(|(i, b)| Ok(tree.stats(i)?.since(b, tree.bandwidth(i))))
        .collect::<Result<_>>()?;
    drop(fifo);
    let duration_ns = match s.duration_s {
        Some(_) => s.duration_ns(),
        None => finished.iter().flatten().copied().max().unwrap_or(0),
    };
    for (i, report) in reports.iter().enumerate() {
        if report.is_none() {
            // A worker that is gone shows as EOF below.
            let _ = workers.send(i, "stop");
        }
    }
    let deadline = now_ns() + REPORT_TIMEOUT_NS;
    while reports.iter().any(Option::is_none) {
        match workers.next(signals, deadline.saturating_sub(now_ns()))? {
            Some((i, line)) => {
                handle_line(line.as_deref(), &mut finished[i], &mut reports[i]).ok_or_else(|| failed(i, line))?
            }
            None => {
                return Err(Error::harness(
                    "the workers did not report within 5 s of the end",
                ))
            }
        }
    }
    Ok(Measured {
        stats,
        reports: reports.into_iter().flatten().collect(),
        duration_ns,
        start_ns: start,
    })
}

/// Record a worker's `finished` or `report` line; None for anything else,
/// or for EOF before the report.
fn handle_line(
    line: Option<&str>,
    finished: &mut Option<u64>,
    report: &mut Option<WorkerReport>,
) -> Option<()> {
    let Some(line) = line else {
        return report.is_some().then_some(());
    };
    if let Some(t) = line.strip_prefix("finished ") {
        *finished = Some(t.parse().ok()?);
    } else {
        *report = Some(serde_json::from_str(line.strip_prefix("report ")?).ok()?);
    }
    Some(())
}

/// A task's or service's output. `trace_ns`: a trace task's length, for
/// `delay_s` (response minus length, as the simulator's); `intervals`: how
/// many whole `sample_ms` intervals the run had, for a task's series;
/// `keep_latencies`: the scenario's, every request's latency.
fn task_stats(
    d: &DriverReport,
    class: Option<String>,
    trace_ns: Option<u64>,
    intervals: Option<usize>,
    keep_latencies: bool,
) -> TaskStats {
    TaskStats {
        threads: d.threads,
        cpu_usec: d.cpu_ns / 1_000,
        work_usec: d.work_ns / 1_000,
        finished_s: d.finished_ns.map(|ns| ns as f64 / 1e9),
        class,
        requests: d.requests.as_ref().map(Requests::count),
        latency_us: d.requests.as_ref().map(Requests::latency_us),
        service_latency_us: d.requests.as_ref().map(Requests::service_latency_us),
        latencies_us: d.requests.as_ref().filter(|_| keep_latencies).map(Requests::latencies_us),
        delay_s: trace_ns
            .zip(d.response_ns)
            .map(|(trace, response)| (response as f64 - trace as f64) / 1e9),
        deadline_misses: d.deadline_misses,
        admission_refusals: d.admission_refusals,
        // A task without threads has no report: it used nothing.
        cpu_usec_series: intervals.map(|n| match &d.cpu_ns_series {
            Some(ns) => ns.iter().take(n).map(|ns| ns / 1_000).collect(),
            None => vec![0; n],
        }),
    }
}

fn output(s: &Scenario, m: Measured, mut host: Host) -> Output {
    let cgroups = s
        .cgroups
        .iter()
        .map(|c| c.name.clone())
        .zip(m.stats)
        .collect();
    let by_name: BTreeMap<&str, &DriverReport> = m
        .reports
        .iter()
        .flat_map(|r| &r.drivers)
        .map(|d| (d.name.as_str(), d))
        .collect();
    let none = DriverReport::default();
    let intervals = (s.sample_ms > 0).then(|| (m.duration_ns / (s.sample_ms * 1_000_000)) as usize);
    let mut tasks = BTreeMap::new();
    for t in &s.tasks {
        let d = by_name.get(t.name.as_str()).copied().unwrap_or(&none);
        if !d.starts.is_empty() {
            host.thread_starts.insert(t.name.clone(), d.starts.clone());
        }
        tasks.insert(
            t.name.clone(),
            task_stats(
                d,
                t.class.clone(),
                TaskPhases::trace_ns(t),
                intervals,
                s.keep_latencies,
            ),
        );
    }
    for svc in &s.services {
        tasks.insert(
            svc.name.clone(),
            task_stats(by_name[svc.name.as_str()], None, None, None, s.keep_latencies),
        );
    }
    Output {
        scenario: s.name.clone(),
        backend: "real",
        profile: s.kernel.profile.as_str().to_string(),
        seed: s.seed,
        duration_s: m.duration_ns as f64 / 1e9,
        stopped: None,
        cgroups,
        tasks,
        engine: None,
        host: Some(host),
    }
}

/// Whether the run whose parent `throttlelab-<pid>` was made at `made` is
/// over: no live process `pid`, or one that started after the parent was
/// made (the pid was reused).
fn run_is_gone(pid: u32, made: SystemTime) -> bool {
    host::live_process_start(pid).is_none_or(|start| start > made + PID_REUSE_MARGIN)
}

/// SIGKILL worker `pid`, through a pidfd: a pid reused after the check is
/// never signalled.
fn kill_worker(pid: u32) {
    // SAFETY: pidfd_open takes a pid and flags, and returns a new fd or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) };
    if fd < 0 {
        return; // gone already
    }
    // SAFETY: the fd is new and ours.
    let fd = unsafe { OwnedFd::from_raw_fd(fd as RawFd) };
    if is_worker(pid) {
        // SAFETY: a valid pidfd; no siginfo.
        unsafe { libc::syscall(libc::SYS_pidfd_send_signal, fd.as_raw_fd(), libc::SIGKILL, std::ptr::null::<libc::siginfo_t>(), 0) };
    }
}

/// Remove a stale parent after killing the workers left in it; refuses if
/// it holds any other live process.
fn remove_stale_group(group: &Stale) -> Result<()> {
    let procs = group.procs()?;
    let others: Vec<u32> =
        procs.iter().copied().filter(|&p| !is_worker(p) && host::live_process_start(p).is_some()).collect();
    if !others.is_empty() {
        return Err(Error::harness(format!("it holds processes that are not throttlelab workers: {others:?}")));
    }
    procs.into_iter().for_each(kill_worker);
    group.remove()
}

/// Remove the parents of earlier runs that are over (a SIGKILL of the
/// controller leaves them: only the workers die with it), and say so in one
/// line; a parent that cannot go gets a warning, and the run goes on.
fn remove_stale(layout: &Layout) {
    let stale = match layout.stale(run_is_gone) {
        Ok(stale) => stale,
        Err(e) => return eprintln!("throttlelab: warning: cannot look for cgroups of earlier runs: {e}"),
    };
    let removed: Vec<&str> = stale
        .iter()
        .filter(|g| match remove_stale_group(g) {
            Ok(()) => true,
            Err(e) => {
                eprintln!("throttlelab: warning: cannot remove {}, left by an earlier run: {e}", g.name);
                false
            }
        })
        .map(|g| g.name.as_str())
        .collect();
    if !removed.is_empty() {
        eprintln!("throttlelab: removed cgroups left by earlier runs that are over: {}", removed.join(", "));
    }
}

/// Refuse, touching nothing, what `run` refuses before it starts: not root,
/// a captured wake-up between cgroups, more CPUs than the host has, no cpu controller. `compare` asks first, so
/// that it does not let the host settle only to be refused.
pub fn preflight(s: &Scenario) -> Result<()> {
    // Each cgroup's threads run in a process of its own: a captured wake-up
    // between them must stay inside one.
    for t in &s.tasks {
        for p in t.captured.iter().flat_map(|c| c.iter()) {
            if let Phase::Wake(target) = *p {
                let other = &s.tasks[target];
                if s.group_of(&other.cgroup) != s.group_of(&t.cgroup) {
                    return Err(Error::harness(format!(
                        "task.{}: wakes task {} of another cgroup, which the real backend runs in another process",
                        t.name, other.name
                    )));
                }
            }
        }
    }
    // SAFETY: geteuid cannot fail.
    host::check_root(unsafe { libc::geteuid() })?;
    host::check_cpus(s.machine.cpus, &host::online_cpus()?)?;
    Layout::detect(&cgroup_root())?;
    Ok(())
}

/// Where the cgroup hierarchies are mounted (THROTTLELAB_CGROUP_ROOT overrides).
pub(crate) fn cgroup_root() -> PathBuf {
    std::env::var_os(ROOT_ENV).map_or(PathBuf::from(cgroupfs::DEFAULT_ROOT), PathBuf::from)
}

/// What the real backend measures of the host before a run: its kernel, the
/// background activity on the run's CPUs, and the calibration of its busy loop.
struct Probed {
    release: String,
    hz: Option<u32>,
    background: probe::Background,
    loops_per_us: f64,
    /// Run/sleep work's CPU against its work, at that calibration.
    wakeup: Option<wakeup_cost::WakeupCost>,
}

impl Probed {
    /// Probe `cpus` (a signal stops it at once).
    fn take(cpus: &[usize], signals: &signals::Guard) -> Result<Probed> {
        let release = host::release()?;
        let hz = host::config_hz(&release);
        let background =
            probe::background(cpus, PROBE_NS, &|| signals.interrupted()).map_err(Error::harness)?;
        signals.check()?;
        // Calibration takes milliseconds: a check after it is soon enough. After
        // the probe, as the workers will run: on CPUs kept busy (calibrated first,
        // from idle, the loop timed 4 % slower than it then ran).
        let loops_per_us = worker::calibrate();
        signals.check()?;
        // Last: the workers' own run/sleep code, at the calibration they get.
        let wakeup = wakeup_cost::wakeup_cost(cpus, loops_per_us, &|| signals.interrupted()).map_err(Error::harness)?;
        signals.check()?;
        Ok(Probed { release, hz, background, loops_per_us, wakeup })
    }

    /// The `host` block: this probe, and what the run itself found.
    fn host(self, cgroup: String, period_timer_offset_us: BTreeMap<String, f64>, uptime_s: f64) -> Host {
        Host {
            release: self.release,
            hz: self.hz,
            cgroup,
            background_per_s: self.background.per_s,
            background_us: self.background.us,
            background_p50_us: self.background.p50_us,
            background_lengths_us: self.background.lengths_us,
            tick_latency_us: self.background.tick_latency_us,
            tick_late: self.background.tick_late,
            work_speed: Some(self.background.loops_per_cpu_us / self.loops_per_us),
            work_speed_cv: self.background.work_speed_cv,
            wakeup_cost_us: self.wakeup.map(|w| w.cost_us),
            run_sleep_work_speed: self.wakeup.map(|w| w.work_speed),
            period_timer_offset_us,
            thread_starts: BTreeMap::new(),
            uptime_s,
        }
    }
}

/// Probe the host as [`run`] does before it starts, running nothing else
/// (`--like-host`): on its first `cpus` online CPUs (all of them when it has
/// fewer), holding the run lock so that no real run measures it, nor it a
/// run. Root, as a run: tracefs times the tick, and the lock is in /run.
/// `cgroup` is the hierarchy a run would use, "none" without one; no period
/// timers; `uptime_s` is the probe's start.
pub fn probe_host(cpus: usize) -> Result<Host> {
    // SAFETY: geteuid cannot fail.
    let euid = unsafe { libc::geteuid() };
    if euid != 0 {
        return Err(Error::harness(format!(
            "probing the host needs root, as a real run does (tracefs times its ticks; the run lock is in /run); the effective uid is {euid}"
        )));
    }
    let signals = signals::Guard::install()?;
    let _lock = RunLock::acquire(Path::new(lock::LOCK_PATH))?;
    let online = host::online_cpus()?;
    let cpus = &online[..cpus.max(1).min(online.len())];
    let cgroup = Layout::detect(&cgroup_root()).map_or("none", |l| l.version.as_str()).to_string();
    let uptime_s = now_ns() as f64 / 1e9;
    Ok(Probed::take(cpus, &signals)?.host(cgroup, BTreeMap::new(), uptime_s))
}

/// Run a validated scenario on the host kernel; `worker` is the path of the
/// worker executable ([`WORKER_EXE`]). Cgroups go under the hierarchies at
/// `$THROTTLELAB_CGROUP_ROOT`, default /sys/fs/cgroup.
pub fn run(s: &Scenario, worker: &Path) -> Result<Output> {
    preflight(s)?;
    // From here on a signal ends the run within moments, the probe included.
    let mut signals = signals::Guard::install()?;
    let _lock = RunLock::acquire(Path::new(lock::LOCK_PATH))?;
    let layout = Layout::detect(&cgroup_root())?;
    remove_stale(&layout);
    let cpus: Vec<usize> = (0..s.machine.cpus).collect();
    let probed = Probed::take(&cpus, &signals)?;
    if let Some(hz) = probed.hz.filter(|&hz| hz != s.machine.hz) {
        eprintln!(
            "throttlelab: warning: machine.hz is {} but the host's CONFIG_HZ is {hz}",
            s.machine.hz
        );
    }
    let cgroup = layout.version.as_str().to_string();
    let plan = Plan::of(s);
    let plans = worker_plans(&plan, s.cgroups.len(), probed.loops_per_us);
    signals.check()?;
    let groups: Vec<GroupId> = plans.iter().map(|p| p.group).collect();
    let name = cgroupfs::parent_name(std::process::id());
    let mut tree = {
        let timer_trace = TimerTrace::open(&name)
            .map_err(|why| eprintln!("throttlelab: period timer offsets not reported: {why}"))
            .ok();
        Tree::create(layout, &name, s, &groups, timer_trace.as_ref())?
    };
    let period_timer_offset_us = s
        .cgroups
        .iter()
        .zip(&tree.period_timer_expiry_ns)
        .filter_map(|(c, expiry)| {
            expiry.map(|ns| (c.name.clone(), (ns % (c.period_us * 1_000)) as f64 / 1e3))
        })
        .collect();
    signals.check()?;
    let measured = Workers::spawn(worker, plans.len(), &mut signals)
        .and_then(|mut workers| measure(s, &plan.writes, &plans, &mut tree, &mut workers, &signals));
    // The workers are dead (dropped) before their cgroups go.
    match (measured, tree.remove()) {
        (Ok(m), Ok(())) => {
            let uptime_s = m.start_ns as f64 / 1e9;
            Ok(output(s, m, probed.host(cgroup, period_timer_offset_us, uptime_s)))
        }
        (Err(e), Ok(())) | (Ok(_), Err(e)) => Err(e),
        // Cgroups left behind matter most; say why the run stopped too.
        (Err(Error::Interrupted(sig)), Err(r)) => {
            Err(Error::harness(format!("interrupted by {}, then: {r}", signals::name(sig))))
        }
        (Err(e), Err(r)) => Err(Error::harness(format!("{e}; then: {r}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_counters_are_read_before_the_start_unless_a_period_timer_may_expire_between() {
        let ms = 1_000_000;
        let start = 1_000 * ms;
        let limited = Limit { quota_us: Quota::Us(50_000), period_us: 100_000, burst_us: 0 };
        let max = Limit { quota_us: Quota::Max, period_us: 100_000, burst_us: 0 };
        // The timer expires 50 ms after the start, modulo its period: read 2 ms early.
        assert_eq!(baseline_read_ns(start, &[(limited, Some(start - 250 * ms))]), start - EARLY_READ_NS);
        assert_eq!(baseline_read_ns(start, &[(limited, Some(start + 50 * ms)), (max, None)]), start - EARLY_READ_NS);
        // An expiry 1, 2.5 ms before the start or at it: at the start.
        for before in [ms, 5 * ms / 2, 0] {
            assert_eq!(baseline_read_ns(start, &[(limited, Some(start - 100 * ms - before))]), start);
        }
        // 3.5 ms before, and just after the start, are clear.
        assert_eq!(baseline_read_ns(start, &[(limited, Some(start - 7 * ms / 2))]), start - EARLY_READ_NS);
        assert_eq!(baseline_read_ns(start, &[(limited, Some(start + 1))]), start - EARLY_READ_NS);
        // A limited cgroup whose timer's phase is unknown: at the start.
        assert_eq!(baseline_read_ns(start, &[(max, None), (limited, None)]), start);
    }

    #[test]
    fn the_start_delay_is_milliseconds_from_the_environment() {
        assert_eq!(parse_start_delay(None).unwrap(), START_DELAY_NS);
        assert_eq!(parse_start_delay(Some("500")).unwrap(), 500_000_000);
        for bad in ["0", "60001", "-5", "0.5", "fast", ""] {
            let e = parse_start_delay(Some(bad)).unwrap_err().to_string();
            assert!(e.contains("THROTTLELAB_START_DELAY_MS must be milliseconds in 1..=60000"), "{bad}: {e}");
        }
    }

    #[test]
    fn the_state_follows_a_command_with_spaces_and_parentheses() {
        assert_eq!(thread_state("4242 (python3) S 1 4242 0"), Some('S'));
        assert_eq!(thread_state("17 (a) b) R 1 17 0"), Some('R'));
        assert_eq!(thread_state("no state"), None);
    }

    #[test]
    fn a_worker_is_told_by_its_executables_name() {
        assert!(is_worker_exe(Path::new("/venv/lib/python3.12/site-packages/throttlelab/throttlelab-worker")));
        // Reinstalled while a run had it open.
        assert!(is_worker_exe(Path::new("/init/throttlelab-worker (deleted)")));
        assert!(!is_worker_exe(Path::new("/usr/bin/python3.12")));
        assert!(!is_worker_exe(Path::new("/usr/bin/throttlelab-worker2")));
        assert!(!is_worker_exe(Path::new("/")));
        // This test binary is not one.
        assert!(!is_worker(std::process::id()));
    }

    #[test]
    fn a_running_thread_is_awake_and_a_blocked_one_is_not() {
        let (tx, rx) = mpsc::channel::<()>();
        let (tid_tx, tid_rx) = mpsc::channel();
        let sleeper = std::thread::spawn(move || {
            // SAFETY: gettid has no preconditions.
            tid_tx.send(unsafe { libc::gettid() } as u32).unwrap();
            rx.recv().ok();
        });
        let sleeper_tid = tid_rx.recv().unwrap();
        // SAFETY: gettid has no preconditions.
        let me = unsafe { libc::gettid() } as u32;
        let deadline = now_ns() + 5_000_000_000;
        // Wait until the sleeper has blocked in recv.
        while awake_threads(std::process::id()).unwrap().contains(&sleeper_tid) {
            assert!(now_ns() < deadline, "the sleeper never slept");
        }
        assert!(awake_threads(std::process::id()).unwrap().contains(&me));
        tx.send(()).unwrap();
        sleeper.join().unwrap();
    }

    fn load(text: &str) -> Scenario {
        throttlelab_core::load(text, &[]).unwrap()
    }

    #[test]
    fn one_worker_per_group_that_runs_something() {
        // b runs in a's cpuset; "idle" and the root run nothing (the core's
        // tests in format/plan.rs check the draws, start CPUs and affinities).
        let s = load(
            "name = \"g\"\nduration_s = 1\n[machine]\ncpus = 4\n\
             [[cgroup]]\nname = \"a\"\ncpus = \"2-3\"\n[[cgroup]]\nname = \"b\"\nparent = \"a\"\n[[cgroup]]\nname = \"idle\"\n\
             [[task]]\nname = \"pinned\"\ncgroup = \"b\"\nthreads = 2\npin = true\nphases = [{ run_us = 10 }]\n\
             [[service]]\nname = \"svc\"\ncgroup = \"a\"\nrate_per_s = 10\ncost_us = 10\n",
        );
        let plan = Plan::of(&s);
        let plans = worker_plans(&plan, s.cgroups.len(), 100.0);
        assert_eq!(plans.iter().map(|p| p.group).collect::<Vec<GroupId>>(), [Some(0), Some(1)]);
        assert_eq!(plans[0].spec.plan.services[0].name, "svc");
        let pinned = &plans[1].spec.plan.tasks[0].threads;
        assert_eq!(*pinned, plan.tasks[0].threads);
        let cpus: Vec<_> = pinned.iter().map(|t| t.affinity().unwrap().to_vec()).collect();
        assert_eq!(cpus, [vec![2], vec![3]]);
    }

    #[test]
    fn a_trace_task_goes_to_its_worker_whole() {
        let s = load(
            r#"name = "t"
[machine]
cpus = 2
[[task]]
name = "dl"
threads = 0
windows = [[10, 11, 0.5], [12, 12.5, 1.5]]
policy = "deadline"
runtime_us = 10_000
period_us = 100_000
profile_ms = 200
"#,
        );
        let plans = worker_plans(&Plan::of(&s), s.cgroups.len(), 100.0);
        // Through the worker's pipe.
        let json = serde_json::to_string(&plans[0].spec).unwrap();
        let spec = WorkerSpec::from_json(&json).unwrap();
        let task = &spec.plan.tasks[0];
        assert_eq!(
            task.threads.len(),
            2,
            "the busiest window's rate, rounded up"
        );
        assert_eq!(task.loops, 1);
        let (sent, got) = (TaskPhases::of(&s.tasks[0], 2), &task.phases);
        assert_eq!(got.len(), sent.len());
        assert!((0..sent.len()).all(|i| got.get(i) == sent.get(i)));
        let dl = task.dl.as_ref().unwrap();
        assert_eq!(
            (dl.profile_ns, dl.retry_ns),
            (Some(200_000_000), 100_000_000)
        );
    }

    #[test]
    fn a_seed_starts_a_captured_thread_where_the_simulator_does() {
        // stress-ng's published capture: workers on timers, each begun where
        // the seed draws in its cycle, after a start spread the seed draws too.
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/acceptance-captures");
        let text = std::fs::read_to_string(dir.join("stress-ng.toml")).unwrap();
        let first_steps = |seed: u64| {
            let mut s = load(&throttlelab_core::rebase_paths(&text, &dir));
            (s.seed, s.duration_s) = (seed, Some(0.5));
            for t in &mut s.tasks {
                t.start_spread_us = 20_000;
            }
            assert!(s.tasks.iter().any(|t| TaskPhases::of(t, 1).independent_cycle_ns().is_some()));
            let simulated: Vec<_> = throttlelab_core::Sim::new(&s, Default::default()).run_steps().iter().map(|steps| steps[0]).collect();
            // Through the worker's pipe: the plan, rotation and starts as sent.
            let plan = Plan::of(&s);
            let plans = worker_plans(&plan, s.cgroups.len(), 100.0);
            assert_eq!(plans.len(), 1, "one cgroup");
            let spec = WorkerSpec::from_json(&serde_json::to_string(&plans[0].spec).unwrap()).unwrap();
            let mut worker = Vec::new();
            for (task, sent) in spec.plan.tasks.iter().zip(&plan.tasks) {
                assert_eq!(task.threads, sent.threads);
                let (got, rotated) = (&task.phases, &sent.phases);
                assert!(got.len() == rotated.len() && (0..got.len()).all(|i| got.get(i) == rotated.get(i)));
                for thread in &task.threads {
                    let mut program = throttlelab_core::Program::new(task.phases.clone(), task.loops, task.timers);
                    worker.push(program.next(thread.start_ns, None));
                }
            }
            assert_eq!(worker, simulated, "seed {seed}");
            worker
        };
        assert_ne!(first_steps(1), first_steps(2), "each seed draws again");
    }

    #[test]
    fn delay_and_series_as_the_simulator_reports_them() {
        let d = DriverReport {
            response_ns: Some(2_600_000_000),
            cpu_ns_series: Some(vec![5_000_999, 7_000_000, 1_000]),
            ..DriverReport::default()
        };
        let t = task_stats(&d, None, Some(2_500_000_000), Some(2), false);
        assert!((t.delay_s.unwrap() - 0.1).abs() < 1e-9);
        assert_eq!(
            t.cpu_usec_series,
            Some(vec![5_000, 7_000]),
            "whole intervals only"
        );
        let unfinished = DriverReport::default();
        let t = task_stats(&unfinished, None, Some(2_500_000_000), Some(3), false);
        assert_eq!(t.delay_s, None);
        assert_eq!(
            t.cpu_usec_series,
            Some(vec![0; 3]),
            "a task without threads"
        );
        assert_eq!(
            task_stats(&d, None, None, None, false).delay_s,
            None,
            "not a trace"
        );
    }

    #[test]
    fn periodic_writes_repeat() {
        let s = load(
            r#"name = "w"
duration_s = 1
[[cgroup]]
name = "a"
quota_us = 5000
[[task]]
name = "t"
cgroup = "a"
phases = [{ run_us = 10 }]
[[write]]
cgroup = "a"
start_ms = 100
every_ms = 50
[[write]]
cgroup = "a"
at_ms = 10
"#,
        );
        let writes = Plan::of(&s).writes;
        assert_eq!((writes[0].first_ns, writes[1].first_ns), (100_000_000, 10_000_000));
        let first = DueWrite {
            at_ns: 100_000_000,
            index: 0,
            n: 0,
        };
        let second = next_write(&writes, first).unwrap();
        assert_eq!((second.at_ns, second.n), (150_000_000, 1));
        assert!(next_write(
            &writes,
            DueWrite {
                at_ns: 10_000_000,
                index: 1,
                n: 0
            }
        )
        .is_none());
    }
}
