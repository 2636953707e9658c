//! From the kernel's scheduler events, in tracefs's text format, to each
//! captured thread's demand: CPU bursts and what ended each sleep.
//!
//! A burst is time on a CPU between blocking: a `sched_switch` whose
//! `prev_state` is `R`/`R+` is a preemption (or a throttle) and the burst goes
//! on. A sleep ends with a `sched_waking`; its waker decides its kind: a
//! hard interrupt (a timer: user space's sleeps all end in `hrtimer_wakeup`),
//! the idle task or the thread itself is a timer, and the sleep keeps its
//! length; a captured thread is a sibling, whose `wake` the sleeper `wait`s
//! for; any other task, and a softirq (the network: a TCP request over
//! loopback wakes its server from the client's `NET_RX` softirq), is a request
//! from outside, which keeps its time. So is a request an event loop takes
//! up without sleeping, where the syscall tracepoints are read: an
//! `epoll_wait` that returns something ready with no sleep since its entry.
//!
//! A burst's CPU time is the wall time between a thread's switch in and its
//! switch out, exact where both are traced. Where the kernel left the switch
//! in out of the trace, it is what `sched_stat_runtime` reported for the
//! thread since it last left a CPU (each event is `update_curr`'s delta:
//! ticks, the switch out itself, other updates); without such events (the
//! event is optional), the later of the thread's wake-up and the CPU's last
//! switch to idle bounds it, or it is not known.

use crate::spill::{get_varint, put_varint, Chain, Sorter, Spill, Writer, WriterStats, QUEUE_BYTES};
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use throttlelab_core::scenario::{even_quantile_ranks, MEASURED_BACKGROUND_LENGTHS};

/// What the trace marker says where the capture window starts and ends.
pub const START_MARK: &str = "throttlelab capture start";
pub const END_MARK: &str = "throttlelab capture end";

/// Where an event ran: the trace's irq-info flag (`h`, `H`: a hard
/// interrupt; `s`: a softirq).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Context {
    Task,
    SoftIrq,
    HardIrq,
}

/// One line of the `trace` file that matters here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    pub ts_ns: u64,
    /// The task the event ran in (its header's `comm-pid`).
    pub pid: u32,
    /// Whether it ran in a task, a softirq or a hard interrupt.
    pub context: Context,
    /// The CPU whose buffer it is in.
    pub cpu: u32,
    pub kind: Kind,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    Switch { prev_pid: u32, prev_comm: Comm, preempted: bool, next_pid: u32, next_comm: Comm },
    Waking { pid: u32 },
    Fork { child_pid: u32, child_comm: Comm },
    Exit { pid: u32 },
    /// `sched_stat_runtime`: task `pid` ran `runtime_ns` since its last update.
    Runtime { pid: u32, runtime_ns: u64 },
    /// The event's task entered `epoll_wait` (or `epoll_pwait`, `epoll_pwait2`).
    PollEnter,
    /// It returned from it, with something `ready` (a positive count).
    PollExit { ready: bool },
    Mark(String),
}

/// A task's name as the kernel keeps it (`comm`: TASK_COMM_LEN, 16 bytes
/// with its NUL), inline: a switch carries two, and a busy host switches
/// hundreds of thousands of times a second, which allocating them cost the
/// capture's reader.
#[derive(Clone, Copy, PartialEq, Eq, Default)]
pub struct Comm {
    bytes: [u8; 16],
    len: u8,
}

impl Comm {
    /// The bytes up to the first NUL, at most 16.
    pub fn new(bytes: &[u8]) -> Comm {
        let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len()).min(16);
        let mut c = Comm { bytes: [0; 16], len: end as u8 };
        c.bytes[..end].copy_from_slice(&bytes[..end]);
        c
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..self.len as usize]
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl std::fmt::Display for Comm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&String::from_utf8_lossy(self.as_bytes()))
    }
}

impl std::fmt::Debug for Comm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", self.to_string())
    }
}

impl From<&str> for Comm {
    fn from(s: &str) -> Comm {
        Comm::new(s.as_bytes())
    }
}

impl PartialEq<str> for Comm {
    fn eq(&self, other: &str) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

impl PartialEq<&str> for Comm {
    fn eq(&self, other: &&str) -> bool {
        self == *other
    }
}

/// The value of `key=` in `text` (the last one: a comm may hold anything).
fn value<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    let at = text.rfind(&format!(" {key}=")).map(|i| i + 1).or_else(|| text.starts_with(&format!("{key}=")).then_some(0))?;
    let rest = &text[at + key.len() + 1..];
    Some(rest.split(' ').next().unwrap_or(rest))
}

fn number<T: std::str::FromStr>(text: &str, key: &str) -> Result<T, String> {
    value(text, key).and_then(|v| v.parse().ok()).ok_or_else(|| format!("no {key}= number"))
}

/// `comm=` of a comm that is followed by `next` (`prev_comm=a b prev_pid=`).
fn comm<'a>(text: &'a str, key: &str, next: &str) -> &'a str {
    let start = text.find(&format!("{key}=")).map_or(0, |i| i + key.len() + 1);
    let end = text.rfind(&format!(" {next}=")).unwrap_or(text.len()).max(start);
    &text[start..end]
}

/// `1234.567890` (seconds) as ns.
fn timestamp_ns(text: &str) -> Option<u64> {
    let (s, frac) = text.split_once('.')?;
    if frac.is_empty() || frac.len() > 9 || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let frac_ns: u64 = frac.parse::<u64>().ok()? * 10u64.pow(9 - frac.len() as u32);
    s.parse::<u64>().ok()?.checked_mul(1_000_000_000)?.checked_add(frac_ns)
}

/// The syscalls that wait for a socket, as their tracepoints name them: the
/// entry prints `sys_epoll_wait(epfd: 5, ...)`, the exit `sys_epoll_wait -> 0x1`.
const POLL_CALLS: [&str; 3] = ["sys_epoll_wait", "sys_epoll_pwait", "sys_epoll_pwait2"];

/// Parse one line of `trace`: None for comments and other events, Err for
/// a line of ours that does not read.
pub fn parse_line(line: &str) -> Option<Result<Event, String>> {
    if line.starts_with('#') {
        return None;
    }
    const EVENTS: [&str; 7] = [
        ": sched_switch: ",
        ": sched_waking: ",
        ": sched_wakeup: ",
        ": sched_process_fork: ",
        ": sched_process_exit: ",
        ": sched_stat_runtime: ",
        ": tracing_mark_write: ",
    ];
    let (head, name, body) = EVENTS
        .iter()
        .find_map(|e| line.find(e).map(|i| (&line[..i], &e[2..e.len() - 2], &line[i + e.len()..])))
        .or_else(|| {
            let i = line.find(": sys_epoll_")?;
            let rest = &line[i + 2..];
            let name = &rest[..rest.find(['(', ' ']).unwrap_or(rest.len())];
            POLL_CALLS.contains(&name).then(|| (&line[..i], name, &rest[name.len()..]))
        })?;
    Some(parse_event(head, name, body).map_err(|m| format!("{m} in {:?}", line.trim())))
}

fn parse_event(head: &str, name: &str, body: &str) -> Result<Event, String> {
    // `comm-pid [cpu] flags timestamp`, flags absent without irq-info.
    let words: Vec<&str> = head.split_whitespace().collect();
    let ts_ns = words.last().and_then(|w| timestamp_ns(w)).ok_or("no timestamp")?;
    let cpu_at = words.iter().rposition(|w| w.starts_with('[') && w.ends_with(']')).ok_or("no [cpu]")?;
    let context = match words.get(cpu_at + 1).filter(|_| cpu_at + 2 < words.len()).and_then(|f| f.as_bytes().get(2)) {
        Some(b'h' | b'H') => Context::HardIrq,
        Some(b's') => Context::SoftIrq,
        _ => Context::Task,
    };
    let cpu = words[cpu_at][1..words[cpu_at].len() - 1].parse().map_err(|_| "no [cpu]")?;
    let task = head[..head.find(words[cpu_at]).expect("a word of head")].trim();
    let pid = task.rsplit_once('-').and_then(|(_, p)| p.parse().ok()).ok_or("no comm-pid")?;
    let kind = match name {
        "sched_switch" => {
            let (prev, next) = body.split_once(" ==> ").ok_or("no ==>")?;
            let state = value(prev, "prev_state").ok_or("no prev_state=")?;
            Kind::Switch {
                prev_pid: number(prev, "prev_pid")?,
                prev_comm: comm(prev, "prev_comm", "prev_pid").into(),
                preempted: state.starts_with('R'),
                next_pid: number(next, "next_pid")?,
                next_comm: comm(next, "next_comm", "next_pid").into(),
            }
        }
        "sched_waking" | "sched_wakeup" => Kind::Waking { pid: number(body, "pid")? },
        "sched_process_fork" => Kind::Fork {
            child_pid: number(body, "child_pid")?,
            child_comm: comm(body, "child_comm", "child_pid").into(),
        },
        "sched_process_exit" => Kind::Exit { pid: number(body, "pid")? },
        // `comm=a pid=1 runtime=5 [ns]` (before 6.8 followed by `vruntime=`).
        "sched_stat_runtime" => Kind::Runtime { pid: number(body, "pid")?, runtime_ns: number(body, "runtime")? },
        _ if POLL_CALLS.contains(&name) => match body.strip_prefix(" -> ") {
            // An error is negative: 0xfffffffffffffffc, -EINTR.
            Some(ret) => Kind::PollExit {
                ready: (u64::from_str_radix(ret.trim().trim_start_matches("0x"), 16).map_err(|_| "no return value")? as i64) > 0,
            },
            None => Kind::PollEnter,
        },
        _ => Kind::Mark(body.trim().to_string()),
    };
    Ok(Event { ts_ns, pid, context, cpu, kind })
}

/// A phase of a captured thread, as the phases file writes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    Run { ns: u64 },
    /// A timed sleep of this length; `late_ns` from its wake-up to the
    /// thread's next switch in (0 where that is not traced).
    Sleep { ns: u64, late_ns: u64 },
    /// A timed sleep of this length less how late the last one ended
    /// ([`catch_up`]).
    CatchUp { ns: u64 },
    /// As `CatchUp`, and lateness no sleep made up carries on: a thread
    /// that keeps a schedule of random gaps ([`catch_up`]).
    Schedule { ns: u64 },
    /// Woken from outside at this time of the capture.
    Until { ns: u64 },
    /// Woken by a sibling.
    Wait,
    /// Wakes the sibling of this pid.
    Wake { pid: u32 },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Not seen yet in the window.
    Unknown,
    /// In a burst: running (`on_cpu_since`) or waiting for a CPU.
    Burst,
    /// Blocked since this time.
    Sleeping(u64),
    Exited,
}

/// Wake-ups at least this late tell whether a thread makes up for them.
const LATE_NS: u64 = 1_000_000;
/// How many of them (each followed by runs and a timed sleep) it takes.
const LATE_WAKE_UPS: usize = 10;
/// A stint on a CPU at most this long that ends runnable, right after a
/// timed wake-up, does not end its lateness: 6.18 throttles a task woken
/// into a throttled group at its return to user space, so it is back in its
/// program only at its next switch in (on the development host 3-18 us
/// after the switch in, then 1-55 ms off its CPU: 11 of 368 wake-ups of
/// sysbench's event generator under 39/100 ms in 8 s).
const LATE_STINT_NS: u64 = 50_000;

/// A timed sleep that followed another with only runs (and wakes of
/// siblings) between: its index, the one before's lateness, the CPU time
/// between and its length.
type LatePair = (usize, f64, f64, f64);

/// A thread's [`LatePair`]s, found as its phases go by.
#[derive(Default)]
struct LatePairs {
    at: usize,
    before: Option<u64>,
    run_ns: u64,
}

impl LatePairs {
    /// The pair phase `p` (the next) ends, if it is a timed sleep after another.
    fn next(&mut self, p: &Phase) -> Option<LatePair> {
        let mut pair = None;
        match *p {
            Phase::Run { ns } => self.run_ns += ns,
            Phase::Wake { .. } => {}
            Phase::Sleep { ns, late_ns } => {
                pair = self.before.map(|late| (self.at, late as f64, self.run_ns as f64, ns as f64));
                (self.before, self.run_ns) = (Some(late_ns), 0);
            }
            _ => self.before = None,
        }
        self.at += 1;
        pair
    }
}

/// Whether sleeps make up for the lateness before them: the coefficient of
/// that lateness in the least-squares fit of a sleep's length on it and on
/// the CPU time before the sleep (a program may sleep in proportion to its
/// work, as stress-ng's `--cpu-load` does). Near 0 for plain sleeps, near -1
/// for a program that sleeps to a wall-clock schedule. Yes if below -1/2
/// (adding the lateness back makes the sleeps more regular) with a standard
/// error below 1/4, given at least `LATE_WAKE_UPS` wake-ups `LATE_NS` late;
/// otherwise (or if the runs do not vary) the data cannot tell. `pairs`
/// gives every pair, in order, to its argument (twice: the fit, then its residuals).
fn makes_up(pairs: impl Fn(&mut dyn FnMut(&LatePair)) -> Result<(), String>) -> Result<bool, String> {
    // In ms, each sleep's regressors: 1, the CPU time before it, the lateness before it.
    let row = |&(_, late, run, _): &LatePair| [1.0, run / 1e6, late / 1e6];
    let (mut xtx, mut xty) = ([[0.0; 3]; 3], [0.0; 3]);
    let (mut n, mut late) = (0usize, 0usize);
    pairs(&mut |p| {
        n += 1;
        late += usize::from(p.1 >= LATE_NS as f64);
        let (x, y) = (row(p), p.3 / 1e6);
        for i in 0..3 {
            xty[i] += x[i] * y;
            for j in 0..3 {
                xtx[i][j] += x[i] * x[j];
            }
        }
    })?;
    if late < LATE_WAKE_UPS {
        return Ok(false);
    }
    let Some(inv) = inverse(xtx) else { return Ok(false) };
    let beta: Vec<f64> = inv.iter().map(|r| r.iter().zip(xty).map(|(a, b)| a * b).sum()).collect();
    let mut rss = -0.0;
    pairs(&mut |p| rss += (p.3 / 1e6 - row(p).iter().zip(&beta).map(|(x, b)| x * b).sum::<f64>()).powi(2))?;
    let standard_error = (rss / (n as f64 - 3.0) * inv[2][2]).sqrt();
    Ok(beta[2] < -0.5 && standard_error < 0.25)
}

/// Timed sleeps, at least this many, tell whether a thread keeps a schedule
/// of random gaps.
const SCHEDULE_SLEEPS: u64 = 50;
/// Stephens' 5 % point of the Kolmogorov-Smirnov statistic against an
/// exponential whose mean is the sample's (M. A. Stephens, "EDF statistics
/// for goodness of fit", JASA 69, 1974, table 1A).
const EXPONENTIAL_KS_5PCT: f64 = 1.094;

/// Whether sleeps of these lengths (`sum_ns` in all) are exponential
/// (Stephens' modified Kolmogorov-Smirnov test at 5 %, from at least
/// `SCHEDULE_SLEEPS`): the gaps of a Poisson schedule, as an open-loop load
/// generator keeps one (sysbench's `--rate` event generator: 2671 sleeps in
/// 60 s, statistic 0.73; stress-ng's duty cycles 9.4-10.3, Apache's 1 s
/// timeouts 5.0).
fn exponential(sleeps_ns: &Sorter, sum_ns: u64) -> Result<bool, String> {
    let n = sleeps_ns.len();
    if n < SCHEDULE_SLEEPS {
        return Ok(false);
    }
    let mean = sum_ns as f64 / n as f64;
    let (mut d, mut i) = (0.0_f64, 0);
    sleeps_ns.each(|ns| {
        let cdf = 1.0 - (-(ns as f64) / mean).exp();
        d = d.max((i + 1) as f64 / n as f64 - cdf).max(cdf - i as f64 / n as f64);
        i += 1;
    }).map_err(|e| e.to_string())?;
    let rn = (n as f64).sqrt();
    Ok((d - 0.2 / n as f64) * (rn + 0.26 + 0.5 / rn) < EXPONENTIAL_KS_5PCT)
}

/// The inverse of a symmetric 3x3 matrix, by cofactors; None if singular.
fn inverse(m: [[f64; 3]; 3]) -> Option<[[f64; 3]; 3]> {
    let cofactor = |i: usize, j: usize| m[(i + 1) % 3][(j + 1) % 3] * m[(i + 2) % 3][(j + 2) % 3] - m[(i + 1) % 3][(j + 2) % 3] * m[(i + 2) % 3][(j + 1) % 3];
    let det: f64 = (0..3).map(|j| m[0][j] * cofactor(0, j)).sum();
    let scale = m[0][0] * m[1][1] * m[2][2];
    if det.abs() <= 1e-9 * scale.abs() {
        return None;
    }
    Some(std::array::from_fn(|i| std::array::from_fn(|j| cofactor(j, i) / det)))
}

/// What becomes of a thread's timed sleeps at the end ([`sleeps_rewrites`]).
#[derive(Debug, Clone, Copy, PartialEq)]
enum Sleeps {
    Keep,
    /// [`Phase::CatchUp`]s: each sleep's length plus the lateness of the one before.
    CatchUp,
    /// [`Phase::Schedule`]s: from one timed wake-up to the next ([`Rewrite::phase`]).
    Schedule,
}

/// Threads that make up for late wake-ups (stress-ng's `--cpu-load` workers
/// take each sleep's lateness off the next) get [`Phase::CatchUp`]s of what
/// they asked for: each timed sleep's length plus the lateness of the one
/// before it. Threads whose sleeps are exponential get [`Phase::Schedule`]s
/// of the same: a Poisson schedule (each event due a random gap after the
/// last was due, no sleep while behind) shortens its sleeps by its lateness
/// too, but what is left of an exponential gap that outlasts the lateness is
/// exponential with the same mean, so no fit of the sleeps on the lateness
/// tells it from plain sleeps of random lengths, and what does (sleeps
/// skipped while behind) leaves no scheduler event. The capture takes such
/// a thread to keep its schedule, as open-loop load generators do. Threads of
/// one name (a pool running the same code) are told together, since one
/// thread is seldom late often enough to tell. Read from the log, in passes:
/// what it holds is a group's sums and a sorter's run.
fn sleeps_rewrites(log: &Log, threads: &[Thread]) -> Result<Vec<Sleeps>, String> {
    let mut by_comm: HashMap<&str, Vec<usize>> = HashMap::new();
    for (i, t) in threads.iter().enumerate() {
        by_comm.entry(&t.comm).or_default().push(i);
    }
    let mut rewrites = vec![Sleeps::Keep; threads.len()];
    for ids in by_comm.values() {
        let pairs = |f: &mut dyn FnMut(&LatePair)| -> Result<(), String> {
            for &i in ids {
                let mut pairs = LatePairs::default();
                log.each(&threads[i], |l| if let Some(p) = pairs.next(&l.phase) { f(&p) })?;
            }
            Ok(())
        };
        let rewrite = if makes_up(pairs)? {
            Sleeps::CatchUp
        } else {
            let (mut sleeps_ns, mut sum_ns) = (log.sorter()?, 0u64);
            for &i in ids {
                let mut failed = Ok(());
                log.each(&threads[i], |l| if let Phase::Sleep { ns, .. } = l.phase {
                    sum_ns = sum_ns.wrapping_add(ns);
                    failed = failed.clone().and(sleeps_ns.push(ns).map_err(|e| e.to_string()));
                })?;
                failed?;
            }
            if exponential(&sleeps_ns, sum_ns)? { Sleeps::Schedule } else { Sleeps::Keep }
        };
        ids.iter().for_each(|&i| rewrites[i] = rewrite);
    }
    Ok(rewrites)
}

/// Bursts after a sibling's wake-up, at least this many, tell whether a
/// thread takes requests of one cost from a queue.
const QUEUE_BURSTS: u64 = 50;
/// Of those at least half the median long, the share within a fifth of the
/// median of a whole multiple of it (uniform lengths give 2/5).
const QUEUE_MULTIPLES: f64 = 0.9;

/// The bursts after a sibling's wake-up, as a thread's phases go by: each
/// one's phases are its runs, and the wakes of siblings that split it,
/// up to the thread's next block.
#[derive(Default)]
struct QueueBursts {
    /// Since a `Wait`: the burst so far.
    open: Option<Vec<Logged>>,
}

impl QueueBursts {
    /// Take phase `l`: a burst it ends, if one; then `l` itself is the caller's.
    fn next(&mut self, l: Logged) -> (Option<Vec<Logged>>, Option<Logged>) {
        match &mut self.open {
            Some(burst) if matches!(l.phase, Phase::Run { .. } | Phase::Wake { .. }) => {
                burst.push(l);
                (None, None)
            }
            _ => {
                let ended = self.open.take();
                if l.phase == Phase::Wait {
                    self.open = Some(Vec::new());
                }
                (ended, Some(l))
            }
        }
    }

    /// The burst the end of the phases ends, if one.
    fn end(&mut self) -> Option<Vec<Logged>> {
        self.open.take()
    }
}

/// A burst's CPU time.
fn burst_ns(burst: &[Logged]) -> u64 {
    burst.iter().map(|l| if let Phase::Run { ns } = l.phase { ns } else { 0 }).sum()
}

/// A worker that takes requests from a queue a sibling fills (sysbench's
/// `--rate` workers: the generator enqueues an event and signals a condition
/// variable, which wakes a waiting worker if there is one) blocks only when
/// the queue is empty: a request that came while it was busy is taken up in
/// the same burst, with no scheduler event, and the burst is several
/// requests long. Under a throttled limit most of them queue so (sysbench at
/// 35/100 ms: 640 of 2090 events). Replayed as one burst from the wake-up,
/// their work would all come at the first's time under a looser limit. When
/// a thread's bursts after a sibling's wake are whole multiples of one cost
/// (`QUEUE_MULTIPLES`), a burst k times that long is k requests: the first
/// at the wake-up, and the others, whose arrivals no event tells, where k-1
/// arrivals of a Poisson stream in the burst's span are expected: at i/k of
/// it (`until_us`, as an event loop's requests taken up without sleeping;
/// [`split_burst`]). A burst is all its runs up to the thread's next block,
/// the wakes of siblings that split it included: sysbench's worker, woken,
/// may wake the generator (a `sched_waking` of it from the worker's burst),
/// and under 34.5/100 ms 0.5 s of 3.4 s of its bursts ran after such a wake,
/// up to a 381 ms backlog replayed at once from its wake-up. The one cost
/// (the median burst), if the thread's bursts are such.
fn queue_unit(log: &Log, t: &Thread) -> Result<Option<f64>, String> {
    let mut lengths = log.sorter()?;
    let mut bursts = QueueBursts::default();
    let mut failed = Ok(());
    let mut push = |burst: Option<Vec<Logged>>| {
        let total = burst.as_deref().map_or(0, burst_ns);
        if total > 0 {
            failed = failed.clone().and(lengths.push(total).map_err(|e| e.to_string()));
        }
    };
    log.each(t, |l| push(bursts.next(l).0))?;
    push(bursts.end());
    failed?;
    let n = lengths.len();
    if n < QUEUE_BURSTS {
        return Ok(None);
    }
    let (mut i, mut unit) = (0, 0.0);
    lengths.each(|ns| {
        if i == n / 2 {
            unit = ns as f64;
        }
        i += 1;
    }).map_err(|e| e.to_string())?;
    let (mut counted, mut whole) = (0usize, 0usize);
    lengths.each(|ns| {
        let k = ns as f64 / unit;
        if k >= 0.5 {
            counted += 1;
            whole += usize::from((k - k.round()).abs() <= 0.2);
        }
    }).map_err(|e| e.to_string())?;
    Ok((unit != 0.0 && (whole as f64) >= QUEUE_MULTIPLES * counted as f64).then_some(unit))
}

/// A burst of a queue's worker ([`queue_unit`]), `unit` its one cost, as
/// its requests: request j (1..k) begins at j/k of the burst's CPU time and
/// is due at j/k of its span; the wakes of siblings stay where they ran. A
/// burst of one request, or one whose runs' spans are not all known, as it is.
fn split_burst(burst: &[Logged], unit: f64, out: &mut impl FnMut(Phase)) {
    let total = burst_ns(burst);
    let k = (total as f64 / unit).round() as u64;
    let mut runs = burst.iter().filter(|l| matches!(l.phase, Phase::Run { .. }));
    let span = runs.clone().next().zip(runs.next_back()).and_then(|(first, last)| Some((first.span?.0, last.span?.1)));
    let all_spans = burst.iter().all(|l| !matches!(l.phase, Phase::Run { .. }) || l.span.is_some());
    let Some((from, to)) = span.filter(|_| total > 0 && k >= 2 && all_spans) else {
        burst.iter().for_each(|l| out(l.phase));
        return;
    };
    let (mut done, mut j) = (0, 1);
    for l in burst {
        let Phase::Run { ns } = l.phase else {
            out(l.phase);
            continue;
        };
        let seg_end = done + ns;
        while j < k && total * j / k <= seg_end {
            let b = total * j / k;
            if b > done {
                out(Phase::Run { ns: b - done });
                done = b;
            }
            out(Phase::Until { ns: from + (to - from) * j / k });
            j += 1;
        }
        if seg_end > done {
            out(Phase::Run { ns: seg_end - done });
            done = seg_end;
        }
    }
}

/// How a thread's logged phases are written at the end: its timed sleeps
/// ([`sleeps_rewrites`]), and its bursts if it is a queue's worker ([`queue_unit`]).
#[derive(Debug, Clone, Copy)]
struct Rewrite {
    sleeps: Sleeps,
    queue_unit: Option<f64>,
}

impl Rewrite {
    /// Thread `t`'s phases, rewritten, to `out` in order.
    fn write(&self, log: &Log, t: &Thread, out: &mut impl FnMut(Phase)) -> Result<(), String> {
        let (mut pairs, mut last_ended) = (LatePairs::default(), None);
        let mut bursts = QueueBursts::default();
        log.each(t, |l| {
            let pair = pairs.next(&l.phase);
            let phase = match (self.sleeps, l.phase, l.ended) {
                (Sleeps::CatchUp, Phase::Sleep { ns, .. }, _) => Phase::CatchUp { ns: ns + pair.map_or(0, |(_, late, ..)| late as u64) },
                // Each wake-up is when one was due, and the program (sysbench's
                // generator: its next due time less the clock) takes off its next
                // sleep all the time since, its wake-up's lateness and any waiting
                // for a CPU after (a throttle in the middle of its burst) alike.
                // Skipped sleeps (due times already past while it was behind)
                // leave no event; their time stays within the interval.
                (Sleeps::Schedule, Phase::Sleep { ns, .. }, Some(ended)) => {
                    Phase::Schedule { ns: std::mem::replace(&mut last_ended, Some(ended)).map_or(ns, |last| ended - last) }
                }
                (_, phase, _) => phase,
            };
            let l = Logged { phase, ..l };
            let Some(unit) = self.queue_unit else { return out(phase) };
            let (burst, l) = bursts.next(l);
            if let Some(burst) = burst {
                split_burst(&burst, unit, out);
            }
            l.into_iter().for_each(|l| out(l.phase));
        })?;
        if let (Some(unit), Some(burst)) = (self.queue_unit, bursts.end()) {
            split_burst(&burst, unit, out);
        }
        Ok(())
    }
}

/// A phase as the recorder logs it, with what the passes at the end need:
/// a run's span (its start and end: waiting for a CPU in the middle
/// included), and when a timed sleep ended.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Logged {
    phase: Phase,
    span: Option<(u64, u64)>,
    ended: Option<u64>,
}

impl Logged {
    fn new(phase: Phase) -> Logged {
        Logged { phase, span: None, ended: None }
    }

    /// Its bytes in the spill: a tag, then varints.
    fn encode(&self, out: &mut Vec<u8>) {
        let (tag, numbers): (u8, [Option<u64>; 3]) = match (self.phase, self.span, self.ended) {
            (Phase::Run { ns }, None, _) => (0, [Some(ns), None, None]),
            (Phase::Run { ns }, Some((from, to)), _) => (1, [Some(ns), Some(from), Some(to)]),
            (Phase::Sleep { ns, late_ns }, _, Some(ended)) => (3, [Some(ns), Some(late_ns), Some(ended)]),
            (Phase::Sleep { ns, late_ns }, _, None) => (2, [Some(ns), Some(late_ns), None]),
            (Phase::CatchUp { ns }, ..) => (4, [Some(ns), None, None]),
            (Phase::Schedule { ns }, ..) => (5, [Some(ns), None, None]),
            (Phase::Until { ns }, ..) => (6, [Some(ns), None, None]),
            (Phase::Wait, ..) => (7, [None; 3]),
            (Phase::Wake { pid }, ..) => (8, [Some(u64::from(pid)), None, None]),
        };
        out.push(tag);
        numbers.into_iter().flatten().for_each(|n| put_varint(out, n));
    }

    /// The phase at `bytes[*at..]`, `*at` moved past it.
    fn decode(bytes: &[u8], at: &mut usize) -> Logged {
        let tag = bytes[*at];
        *at += 1;
        let mut n = || get_varint(bytes, at);
        match tag {
            0 => Logged::new(Phase::Run { ns: n() }),
            1 => Logged { phase: Phase::Run { ns: n() }, span: Some((n(), n())), ended: None },
            2 => Logged::new(Phase::Sleep { ns: n(), late_ns: n() }),
            3 => Logged { phase: Phase::Sleep { ns: n(), late_ns: n() }, span: None, ended: Some(n()) },
            4 => Logged::new(Phase::CatchUp { ns: n() }),
            5 => Logged::new(Phase::Schedule { ns: n() }),
            6 => Logged::new(Phase::Until { ns: n() }),
            7 => Logged::new(Phase::Wait),
            _ => Logged::new(Phase::Wake { pid: n() as u32 }),
        }
    }
}

/// A thread's phases in memory, at most this many before they go to the spill.
const HELD_PHASES: usize = 512;

/// The captured threads' phases as they are recognised: each thread's last
/// few in memory (`Thread::held`: the last may still change, a sleep's
/// lateness), the rest in a spill file beside the capture's output, read
/// back in passes at the end. What it holds does not grow with the capture.
/// Its writes while the trace is read are queued to a thread of its own
/// (`writer`), so that the trace's reader does not wait for the disk.
#[derive(Debug)]
struct Log {
    spill: Spill,
    writer: Arc<Writer>,
    dir: PathBuf,
}

impl Log {
    fn new(dir: &Path) -> Result<Log, String> {
        let made = |e: std::io::Error| format!("cannot make a spill file in {}: {e}", dir.display());
        let writer = Arc::new(Writer::new(QUEUE_BYTES).map_err(made)?);
        let spill = Spill::queued(dir, Arc::clone(&writer)).map_err(made)?;
        Ok(Log { spill, writer, dir: dir.to_path_buf() })
    }

    /// A sorter for the end's passes, which writes itself.
    fn sorter(&self) -> Result<Sorter, String> {
        Sorter::new(&self.dir).map_err(|e| format!("cannot make a spill file in {}: {e}", self.dir.display()))
    }

    /// A sorter for while the trace is read, whose writes the writer does.
    fn queued_sorter(&self) -> Result<Sorter, String> {
        Sorter::queued(&self.dir, Arc::clone(&self.writer)).map_err(|e| format!("cannot make a spill file in {}: {e}", self.dir.display()))
    }

    /// Thread `t`'s phases held in memory go to the spill, up to the one that may still change.
    fn spill(&mut self, t: &mut Thread) -> Result<(), String> {
        let first = t.logged - t.held.len();
        let upto = t.late_sleep.map_or(t.held.len(), |(at, _)| at - first);
        if upto == 0 {
            return Ok(());
        }
        let mut bytes = Vec::with_capacity(upto * 12);
        t.held[..upto].iter().for_each(|l| l.encode(&mut bytes));
        self.spill.append(&mut t.chain, &bytes).map_err(|e| format!("cannot write the spill file in {}: {e}", self.dir.display()))?;
        t.held.drain(..upto);
        Ok(())
    }

    /// Each of thread `t`'s phases, in order.
    fn each(&self, t: &Thread, mut f: impl FnMut(Logged)) -> Result<(), String> {
        self.spill.read(&t.chain, |bytes| {
            let mut at = 0;
            while at < bytes.len() {
                f(Logged::decode(bytes, &mut at));
            }
        }).map_err(|e| format!("cannot read the spill file in {}: {e}", self.dir.display()))?;
        t.held.iter().for_each(|&l| f(l));
        Ok(())
    }
}

/// One captured thread.
#[derive(Debug, Clone)]
pub struct Thread {
    pub pid: u32,
    pub comm: String,
    /// When it was forked, from the start of the capture (0: it was there).
    pub start_ns: u64,
    /// Whether it ran in the window (a run among its phases).
    pub ran: bool,
    /// Time on a CPU within the capture.
    pub cpu_ns: u64,
    /// Switches out with no switch in before them whose time `Recorder`
    /// could neither measure (no `sched_stat_runtime`) nor bound: the kernel
    /// left the switch in out of the trace, and the time it ran is not known.
    pub untraced_switches: u64,
    state: State,
    on_cpu_since: Option<u64>,
    /// Wall time of its current stint on a CPU already closed into burst
    /// segments (a sibling's wake splits a burst).
    stint_segments_ns: u64,
    burst_ns: u64,
    /// `sched_stat_runtime` since it last left a CPU or its burst was split
    /// (None: no event since it left): the time of a burst whose switch in
    /// is not traced.
    runtime_ns: Option<u64>,
    /// Its last `sched_waking`.
    woken_ns: Option<u64>,
    /// The timed sleep that wake-up ended and its time, until the thread is
    /// back in its program (on a CPU, for more than `LATE_STINT_NS` or
    /// until it blocks).
    late_sleep: Option<(usize, u64)>,
    /// In `epoll_wait` (or kin) since an entry in the window, not blocked since.
    polling: bool,
    /// Its last wake-up, or request taken up without one.
    ready_since: Option<u64>,
    /// When its current burst (or what is left of it after a sibling's
    /// wake split it) began, if seen.
    burst_since: Option<u64>,
    /// Its last phases, not yet in the spill ([`Log`]).
    held: Vec<Logged>,
    /// How many phases it has logged, those in the spill included.
    logged: usize,
    /// Where the spill has the others.
    chain: Chain,
}

/// Pids hashed by one multiplication (Fibonacci hashing) rather than
/// SipHash: the recorder looks up two or three for every event read, and
/// pids are not chosen by an adversary.
#[derive(Default)]
struct PidHasher(u64);

impl Hasher for PidHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ b as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }

    fn write_u32(&mut self, n: u32) {
        self.0 = (self.0 ^ n as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

/// Turns the events of a capture window into each thread's phases.
#[derive(Debug)]
pub struct Recorder {
    threads: Vec<Thread>,
    by_pid: HashMap<u32, usize, BuildHasherDefault<PidHasher>>,
    /// Start of the window (the start mark), once seen.
    start_ns: Option<u64>,
    end_ns: Option<u64>,
    /// Per CPU, by its number.
    cpus: Vec<CpuSeen>,
    /// The preemptions that ended, each one's length, and their sum.
    preempted_ns: Sorter,
    preempted_sum_ns: u64,
    /// The phases, as they are recognised.
    log: Log,
    /// The first spill file's failure, reported at the end.
    failed: Option<String>,
}

/// What the recorder keeps of one CPU.
#[derive(Debug, Clone, Copy, Default)]
struct CpuSeen {
    /// When its last switch in the window went to the idle task (None: to a
    /// task, or none seen yet).
    idle_since: Option<u64>,
    /// Since when other tasks have held it from a captured thread they
    /// preempted (see [`Preempted`]).
    others_since: Option<u64>,
}

/// Other tasks' preemptions of the captured threads, the host's background
/// as the target met it: a captured thread leaves a CPU runnable and the CPU
/// switches to a task that is neither captured nor idle; the preemption lasts
/// until that CPU runs a captured thread again or idles. It is what the real
/// backend's probe counts for its spinners (`ru_nivcsw` and the time lost),
/// counted on the CPUs the target used, while it wanted them. A throttle that
/// hands the CPU to another task reads as one too (the trace does not tell
/// them apart): on a host whose other tasks keep the CPUs busy while the
/// target is throttled, the background is overstated.
#[derive(Debug, Clone, PartialEq)]
pub struct Preempted {
    /// How many there were, and their lengths: in all, and the 50th and
    /// 90th percentiles and the longest (nearest rank; None without any).
    pub count: u64,
    pub sum_ns: u64,
    pub p50_ns: Option<u64>,
    pub p90_ns: Option<u64>,
    pub max_ns: Option<u64>,
    /// The lengths at even quantiles (`machine.background_lengths_us`):
    /// all of them up to 64.
    pub lengths_ns: Vec<u64>,
}

impl Preempted {
    /// The background, given the captured threads' CPU time: preemptions per
    /// second the target wanted a CPU (its time on CPUs and what the
    /// preemptions took, as the probe's spinners' wall time is), and the
    /// mean length; None below `min_wanted_ns` of it (too little to tell).
    pub fn background(&self, cpu_ns: u64, min_wanted_ns: u64) -> Option<(f64, f64)> {
        let lost_ns = self.sum_ns;
        let wanted_ns = cpu_ns + lost_ns;
        if wanted_ns < min_wanted_ns.max(1) {
            return None;
        }
        let n = self.count as f64;
        Some((n / (wanted_ns as f64 / 1e9), if n > 0.0 { lost_ns as f64 / n / 1e3 } else { 0.0 }))
    }

    /// The quantiles [`Preempted`] keeps, as `nearest_rank` takes them.
    const QUANTILES: [f64; 3] = [0.5, 0.9, 1.0];

    /// Those of `sorted`'s lengths (`count` of them, ascending, `sum_ns` in all).
    fn of(count: u64, sum_ns: u64, sorted: impl FnOnce(&mut dyn FnMut(u64)) -> Result<(), String>) -> Result<Preempted, String> {
        // Nearest rank (throttlelab_core::output::nearest_rank): the 1-based rank's value.
        let rank = |q: f64| ((q * count as f64).ceil() as u64).clamp(1, count.max(1)) - 1;
        let ranks = Preempted::QUANTILES.map(rank);
        let mut even = even_quantile_ranks(count as usize, MEASURED_BACKGROUND_LENGTHS).peekable();
        let (mut at, mut found, mut lengths_ns) = (0, [None; 3], Vec::new());
        sorted(&mut |ns| {
            for (r, f) in ranks.iter().zip(&mut found) {
                if *r == at {
                    *f = Some(ns);
                }
            }
            if even.next_if_eq(&(at as usize)).is_some() {
                lengths_ns.push(ns);
            }
            at += 1;
        })?;
        Ok(Preempted { count, sum_ns, p50_ns: found[0], p90_ns: found[1], max_ns: found[2], lengths_ns })
    }

    /// The length at quantile `q` (0.5, 0.9 or 1), in us; None without preemptions.
    pub fn quantile_us(&self, q: f64) -> Option<f64> {
        let ns = match Preempted::QUANTILES.iter().position(|&k| k == q) {
            Some(0) => self.p50_ns,
            Some(1) => self.p90_ns,
            Some(_) => self.max_ns,
            None => panic!("quantile {q} is not kept"),
        };
        ns.map(|ns| ns as f64 / 1e3)
    }
}

impl Recorder {
    /// Capture the threads `pids` (`comm` of each), and those they fork;
    /// what it cannot hold goes to spill files (unlinked) in `dir`.
    pub fn new(threads: &[(u32, String)], dir: &Path) -> Result<Recorder, String> {
        let log = Log::new(dir)?;
        let preempted_ns = log.queued_sorter()?;
        let mut r = Recorder { threads: Vec::new(), by_pid: HashMap::default(), start_ns: None, end_ns: None, cpus: Vec::new(), preempted_ns, preempted_sum_ns: 0, log, failed: None };
        for (pid, comm) in threads {
            r.add(*pid, comm, 0, State::Unknown);
        }
        Ok(r)
    }

    /// What it holds in memory, bytes: its threads (and the phases each
    /// holds), its CPUs and the preemptions' sorter; not what is spilled,
    /// nor the spill writer's queue (at most `QUEUE_BYTES`).
    pub fn held_bytes(&self) -> usize {
        let threads: usize = self.threads.iter().map(|t| t.held.capacity() * std::mem::size_of::<Logged>() + t.comm.capacity()).sum();
        threads
            + self.threads.capacity() * std::mem::size_of::<Thread>()
            + self.by_pid.capacity() * std::mem::size_of::<(u32, usize)>()
            + self.cpus.capacity() * std::mem::size_of::<CpuSeen>()
            + self.preempted_ns.held_bytes()
    }

    /// Its spill files' writes so far (the phases' and the preemptions'):
    /// how long they took, and how often and how long the events' side
    /// waited for the writer (fallen behind: its queue full).
    pub fn spill_writes(&self) -> WriterStats {
        let writer = self.log.writer.stats();
        WriterStats { times: writer.times.and(self.log.spill.times()).and(self.preempted_ns.times()), ..writer }
    }

    /// Thread `pid`'s held phases to the spill if it holds `HELD_PHASES`.
    fn spill(&mut self, pid: u32) {
        let Some(t) = self.by_pid.get(&pid).map(|&i| &mut self.threads[i]) else { return };
        if t.held.len() >= HELD_PHASES {
            if let Err(e) = self.log.spill(t) {
                self.failed.get_or_insert(e);
            }
        }
    }

    fn preemption(&mut self, ns: u64) {
        self.preempted_sum_ns += ns;
        if let Err(e) = self.preempted_ns.push(ns) {
            self.failed.get_or_insert(e.to_string());
        }
    }

    fn add(&mut self, pid: u32, comm: &str, start_ns: u64, state: State) {
        self.by_pid.insert(pid, self.threads.len());
        self.threads.push(Thread::new(pid, comm, start_ns, state));
    }

    /// Take one event; those outside the window only move the marks.
    pub fn event(&mut self, e: &Event) {
        let Some(start) = self.start_ns else {
            if e.kind == Kind::Mark(START_MARK.to_string()) {
                self.start_ns = Some(e.ts_ns);
            }
            return;
        };
        if self.end_ns.is_some() {
            return;
        }
        let now = e.ts_ns.saturating_sub(start);
        match &e.kind {
            Kind::Mark(m) if m == END_MARK => self.end_ns = Some(e.ts_ns),
            Kind::Mark(_) => {}
            Kind::Switch { prev_pid, prev_comm, preempted, next_pid, next_comm } => {
                let cpu = e.cpu as usize;
                if self.cpus.len() <= cpu {
                    self.cpus.resize(cpu + 1, CpuSeen::default());
                }
                let idle_since = std::mem::replace(&mut self.cpus[cpu].idle_since, (*next_pid == 0).then_some(now));
                if *next_pid == 0 || self.captured(*next_pid) {
                    if let Some(since) = self.cpus[cpu].others_since.take() {
                        self.preemption(now.saturating_sub(since));
                    }
                } else if *preempted && self.captured(*prev_pid) {
                    self.cpus[cpu].others_since.get_or_insert(now);
                }
                if let Some(t) = self.thread(*prev_pid, prev_comm) {
                    // The 6.18 host leaves some switches from the idle task
                    // out of the trace (all of CPU 1's on one host). Without
                    // `sched_stat_runtime` to measure the burst: this CPU
                    // went idle, and the thread, woken since it last left a
                    // CPU, ran on it since the later of that and its
                    // wake-up. One that left a CPU runnable (preempted,
                    // throttled) has no wake-up to bound it: the CPU may
                    // have idled from its own throttle to its unthrottle.
                    if t.state == State::Burst && t.on_cpu_since.is_none() && t.runtime_ns.is_none() {
                        t.on_cpu_since = idle_since.zip(t.woken_ns).map(|(idle, woken)| idle.max(woken));
                    }
                    t.off_cpu(now, *preempted);
                }
                if let Some(t) = self.thread(*next_pid, next_comm) {
                    if t.state == State::Unknown {
                        t.state = State::Burst;
                    }
                    t.on_cpu_since = Some(now);
                    t.stint_segments_ns = 0;
                    if let Some((i, woken)) = t.late_sleep {
                        if let Some(Logged { phase: Phase::Sleep { late_ns, .. }, .. }) = t.held_mut(i) {
                            *late_ns = now.saturating_sub(woken);
                        }
                    }
                }
            }
            Kind::Waking { pid } => self.waking(now, e.pid, e.context, *pid),
            Kind::Runtime { pid, runtime_ns } => {
                if let Some(t) = self.by_pid.get(pid).map(|&i| &mut self.threads[i]).filter(|t| t.state != State::Exited) {
                    *t.runtime_ns.get_or_insert(0) += runtime_ns;
                }
            }
            Kind::PollEnter | Kind::PollExit { .. } => {
                if let Some(t) = self.by_pid.get(&e.pid).map(|&i| &mut self.threads[i]).filter(|t| t.state == State::Burst) {
                    let polling = std::mem::replace(&mut t.polling, e.kind == Kind::PollEnter);
                    if polling && e.kind == (Kind::PollExit { ready: true }) {
                        t.took_up(now);
                    }
                }
            }
            Kind::Fork { child_pid, child_comm } => {
                if self.by_pid.contains_key(&e.pid) && !self.by_pid.contains_key(child_pid) {
                    self.add(*child_pid, &child_comm.to_string(), now, State::Burst);
                }
            }
            Kind::Exit { pid } => {
                if let Some(t) = self.by_pid.get(pid).map(|&i| &mut self.threads[i]) {
                    t.off_cpu(now, false);
                    t.state = State::Exited;
                }
            }
        }
        // The threads whose phases it may have added.
        let (a, b) = match e.kind {
            Kind::Switch { prev_pid, next_pid, .. } => (prev_pid, next_pid),
            Kind::Waking { pid } => (e.pid, pid),
            Kind::Exit { pid } => (pid, pid),
            _ => (e.pid, e.pid),
        };
        self.spill(a);
        if b != a {
            self.spill(b);
        }
    }

    /// Whether thread `pid` is captured and has not exited.
    fn captured(&self, pid: u32) -> bool {
        self.by_pid.get(&pid).is_some_and(|&i| self.threads[i].state != State::Exited)
    }

    /// Other tasks' preemptions of the captured threads in the window so
    /// far; those still going on end at the end mark (or the last event).
    pub fn preempted(&self, last_ns: u64) -> Result<Preempted, String> {
        let end = self.end_ns.unwrap_or(last_ns).saturating_sub(self.start_ns.unwrap_or(0));
        let mut going_on: Vec<u64> = self.cpus.iter().filter_map(|c| c.others_since).map(|since| end.saturating_sub(since)).collect();
        going_on.sort_unstable();
        let count = self.preempted_ns.len() + going_on.len() as u64;
        let sum_ns = self.preempted_sum_ns + going_on.iter().sum::<u64>();
        Preempted::of(count, sum_ns, |f| {
            // The ended ones (sorted) and those going on, merged.
            let mut going_on = going_on.iter().copied().peekable();
            self.preempted_ns.each(|ns| {
                while let Some(g) = going_on.next_if(|&g| g < ns) {
                    f(g);
                }
                f(ns);
            }).map_err(|e| e.to_string())?;
            going_on.for_each(f);
            Ok(())
        })
    }

    /// Thread `pid`, if captured and not exited; `comm` renames it (exec).
    fn thread(&mut self, pid: u32, comm: &Comm) -> Option<&mut Thread> {
        let t = &mut self.threads[*self.by_pid.get(&pid)?];
        if t.state == State::Exited {
            return None;
        }
        if t.comm.as_bytes() != comm.as_bytes() && !comm.is_empty() {
            t.comm = comm.to_string();
        }
        Some(t)
    }

    fn waking(&mut self, now: u64, waker: u32, context: Context, pid: u32) {
        let Some(&i) = self.by_pid.get(&pid) else { return };
        let slept_since = match self.threads[i].state {
            State::Sleeping(since) => Some(since),
            State::Unknown => None,
            // Already runnable (woken before it blocked): nothing to replay.
            State::Burst | State::Exited => return,
        };
        // A softirq runs in whatever task it interrupted or followed: the
        // sibling's own send to a socket, or a packet from outside.
        let sibling = (context != Context::HardIrq && waker != pid).then(|| self.by_pid.get(&waker).copied()).flatten();
        let outside = sibling.is_none()
            && match context {
                Context::HardIrq => false,
                Context::SoftIrq => true,
                Context::Task => waker != 0 && waker != pid,
            };
        let phase = match (sibling, slept_since) {
            (Some(w), _) if self.threads[w].state != State::Exited => {
                let waker = &mut self.threads[w];
                waker.end_burst_segment(now);
                waker.push(Logged::new(Phase::Wake { pid }));
                Phase::Wait
            }
            // A timed sleep that began before the window: only its end is known.
            (_, None) => Phase::Until { ns: now },
            _ if outside => Phase::Until { ns: now },
            (_, Some(since)) => Phase::Sleep { ns: now.saturating_sub(since), late_ns: 0 },
        };
        let t = &mut self.threads[i];
        let sleep = matches!(phase, Phase::Sleep { .. });
        t.late_sleep = sleep.then_some((t.logged, now));
        t.push(Logged { ended: sleep.then_some(now), ..Logged::new(phase) });
        t.state = State::Burst;
        t.woken_ns = Some(now);
        t.ready_since = Some(now);
        t.burst_since = Some(now);
    }

    /// The captured threads once the trace is read, their last bursts closed
    /// at the end mark; Err if a mark is missing; and the window's length.
    pub fn finish(mut self) -> Result<Finished, String> {
        let start = self.start_ns.ok_or("the trace has no start mark (its buffer overflowed, or tracing did not run)")?;
        let end = self.end_ns.ok_or("the trace has no end mark")?.saturating_sub(start);
        for t in &mut self.threads {
            if t.state == State::Burst {
                t.end_burst_segment(end);
            }
        }
        if let Some(e) = self.failed {
            return Err(e);
        }
        let sleeps = sleeps_rewrites(&self.log, &self.threads)?;
        let rewrites = self.threads.iter().zip(sleeps).map(|(t, sleeps)| Ok(Rewrite { sleeps, queue_unit: queue_unit(&self.log, t)? })).collect::<Result<_, String>>()?;
        Ok(Finished { threads: self.threads, window_ns: end, log: self.log, rewrites })
    }
}

/// A capture window's threads once the trace is read; their phases are
/// read back (from the spill) as the phases file is written.
#[derive(Debug)]
pub struct Finished {
    pub threads: Vec<Thread>,
    /// The window's length.
    pub window_ns: u64,
    log: Log,
    rewrites: Vec<Rewrite>,
}

impl Finished {
    /// Thread `i`'s phases, in order, to `out`.
    pub fn each_phase(&self, i: usize, mut out: impl FnMut(Phase)) -> Result<(), String> {
        self.rewrites[i].write(&self.log, &self.threads[i], &mut out)
    }

    /// Thread `i`'s phases (all of them in memory: for tests and short captures).
    pub fn phases(&self, i: usize) -> Result<Vec<Phase>, String> {
        let mut phases = Vec::new();
        self.each_phase(i, |p| phases.push(p))?;
        Ok(phases)
    }
}

impl Thread {
    fn new(pid: u32, comm: &str, start_ns: u64, state: State) -> Thread {
        Thread { pid, comm: comm.to_string(), start_ns, ran: false, cpu_ns: 0, untraced_switches: 0, state, on_cpu_since: None, stint_segments_ns: 0, burst_ns: 0, runtime_ns: None, woken_ns: None, late_sleep: None, polling: false, ready_since: None, burst_since: None, held: Vec::new(), logged: 0, chain: Chain::default() }
    }

    /// Log phase `l`, the next.
    fn push(&mut self, l: Logged) {
        self.ran |= matches!(l.phase, Phase::Run { .. });
        self.held.push(l);
        self.logged += 1;
    }

    /// Its phase `at`, if still held.
    fn held_mut(&mut self, at: usize) -> Option<&mut Logged> {
        let first = self.logged - self.held.len();
        at.checked_sub(first).and_then(|i| self.held.get_mut(i))
    }

    /// Off its CPU at `now`: preempted (the burst goes on) or blocked. A
    /// stint whose switch in is traced is measured by the runtime the
    /// kernel charged it where it reports one (`update_curr`'s, what
    /// bandwidth control charges and cpu.stat counts), else by its wall
    /// time: the two differ by the time a hypervisor stole from the CPU
    /// (PARAVIRT_TIME_ACCOUNTING leaves it out of the task's clock) and,
    /// with IRQ_TIME_ACCOUNTING, interrupts.
    fn off_cpu(&mut self, now: u64, preempted: bool) {
        self.woken_ns = None; // its wake-up is spent
        if !(preempted && self.on_cpu_since.is_some_and(|since| now.saturating_sub(since) <= LATE_STINT_NS)) {
            self.late_sleep = None;
        }
        self.first_seen(now);
        let ran_ns = match (self.on_cpu_since.take(), self.runtime_ns.take()) {
            // The stint's runtime less what its earlier segments took.
            (Some(_), Some(runtime_ns)) => runtime_ns.saturating_sub(self.stint_segments_ns),
            (Some(since), None) => now.saturating_sub(since),
            (None, Some(runtime_ns)) => runtime_ns,
            (None, None) => {
                self.untraced_switches += 1;
                0
            }
        };
        self.burst_ns += ran_ns;
        self.cpu_ns += ran_ns;
        if !preempted && self.state == State::Burst {
            self.push_run(now);
            self.state = State::Sleeping(now);
        }
        self.polling &= preempted;
    }

    /// Took up a request at `now` without blocking: an `epoll_wait` that
    /// found a socket ready (an event loop's next connection, come while it
    /// served the last: nginx, a third of its requests), so no wake-up ends a
    /// sleep there. No scheduler event says when the request came; given
    /// one arrival of a Poisson stream in the span since the thread's last
    /// wake-up or take-up, it is uniform over it: the middle of the span.
    fn took_up(&mut self, now: u64) {
        self.end_burst_segment(now);
        let since = self.ready_since.unwrap_or(now);
        self.push(Logged::new(Phase::Until { ns: since + now.saturating_sub(since) / 2 }));
        self.ready_since = Some(now);
    }

    /// The burst so far ends at `now` (a wake of a sibling, or the end). On
    /// a CPU whose switch in is not traced, the segment is the runtime
    /// reported so far: the time since the thread's last update (up to a
    /// tick; a wake on its own CPU's group updates it) goes to the next one.
    fn end_burst_segment(&mut self, now: u64) {
        self.first_seen(now);
        let ran_ns = match self.on_cpu_since.as_mut() {
            Some(since) => {
                let wall_ns = now.saturating_sub(std::mem::replace(since, now));
                self.stint_segments_ns += wall_ns;
                wall_ns
            }
            None => self.runtime_ns.as_mut().map_or(0, std::mem::take),
        };
        self.burst_ns += ran_ns;
        self.cpu_ns += ran_ns;
        self.push_run(now);
        // The next run's span begins here, or, if nothing ran since the
        // wake-up (a wake of a sibling as it was switched in), at the wake-up.
        self.burst_since.get_or_insert(now);
    }

    /// In a burst when the capture began, first seen at `now` leaving its CPU
    /// with no switch in before: running since the start, or runnable
    /// (throttled, preempted) until a switch in the trace left out. Its
    /// runtime tells them apart, within the window (the first update's delta
    /// may reach back before it); without runtime events it ran since the start.
    fn first_seen(&mut self, now: u64) {
        if self.state != State::Unknown {
            return;
        }
        self.state = State::Burst;
        match self.runtime_ns.as_mut() {
            Some(runtime_ns) => *runtime_ns = (*runtime_ns).min(now),
            None => self.on_cpu_since = Some(0),
        }
    }

    fn push_run(&mut self, now: u64) {
        if self.burst_ns > 0 {
            let span = self.burst_since.take().map(|since| (since, now));
            self.push(Logged { span, ..Logged::new(Phase::Run { ns: self.burst_ns }) });
            self.burst_ns = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A recorded thread and its phases.
    struct Done {
        thread: Thread,
        phases: Vec<Phase>,
    }

    impl std::ops::Deref for Done {
        type Target = Thread;
        fn deref(&self) -> &Thread {
            &self.thread
        }
    }

    fn recorder(threads: &[(u32, String)]) -> Recorder {
        Recorder::new(threads, &std::env::temp_dir()).unwrap()
    }

    /// The threads a trace records with tasks 10 (`a`) and 11 (`b`) captured, and where it ends.
    fn recorded(trace: &str) -> (Vec<Done>, u64) {
        let mut r = recorder(&[(10, "a".into()), (11, "b".into())]);
        trace.lines().filter_map(parse_line).for_each(|e| r.event(&e.unwrap()));
        done(r)
    }

    /// The threads `r` recorded, with their phases, and where the window ends.
    fn done(r: Recorder) -> (Vec<Done>, u64) {
        let f = r.finish().unwrap();
        let phases: Vec<Vec<Phase>> = (0..f.threads.len()).map(|i| f.phases(i).unwrap()).collect();
        (f.threads.into_iter().zip(phases).map(|(thread, phases)| Done { thread, phases }).collect(), f.window_ns)
    }

    /// A thread's phases as built by a test, with each timed sleep's end
    /// (the phase's index, the time) and each run's span (index, start, end).
    #[derive(Clone)]
    struct Built {
        pid: u32,
        comm: String,
        phases: Vec<Phase>,
        sleeps_ended: Vec<(usize, u64)>,
        run_spans: Vec<(usize, u64, u64)>,
    }

    impl Built {
        fn new(pid: u32, comm: &str) -> Built {
            Built { pid, comm: comm.into(), phases: Vec::new(), sleeps_ended: Vec::new(), run_spans: Vec::new() }
        }
    }

    /// Built threads logged as the recorder logs them, through the spill.
    fn logged(threads: &[Built]) -> (Log, Vec<Thread>) {
        let mut log = Log::new(&std::env::temp_dir()).unwrap();
        let threads = threads.iter().map(|b| {
            let mut t = Thread::new(b.pid, &b.comm, 0, State::Burst);
            for (i, &phase) in b.phases.iter().enumerate() {
                let ended = b.sleeps_ended.iter().find(|e| e.0 == i).map(|e| e.1);
                let span = b.run_spans.iter().find(|s| s.0 == i).map(|s| (s.1, s.2));
                t.push(Logged { phase, span, ended });
                if t.held.len() >= 7 {
                    log.spill(&mut t).unwrap();
                }
            }
            t
        }).collect();
        (log, threads)
    }

    /// Their sleeps rewritten as the end of a capture does.
    fn catch_up(threads: &mut [Built]) {
        let (log, logged) = logged(threads);
        let sleeps = sleeps_rewrites(&log, &logged).unwrap();
        for ((b, t), sleeps) in threads.iter_mut().zip(&logged).zip(sleeps) {
            b.phases.clear();
            Rewrite { sleeps, queue_unit: None }.write(&log, t, &mut |p| b.phases.push(p)).unwrap();
        }
    }

    /// Its bursts split as the end of a capture does.
    fn queued_requests(b: &mut Built) {
        let (log, logged) = logged(std::slice::from_ref(b));
        let queue_unit = queue_unit(&log, &logged[0]).unwrap();
        b.phases.clear();
        Rewrite { sleeps: Sleeps::Keep, queue_unit }.write(&log, &logged[0], &mut |p| b.phases.push(p)).unwrap();
    }

    /// Their phases alone.
    fn phases(trace: &str) -> Vec<Vec<Phase>> {
        recorded(trace).0.into_iter().map(|t| t.phases).collect()
    }

    fn switch(ts: &str, prev: u32, state: &str, next: u32) -> String {
        let name = |p| if p == 0 { "swapper/0".to_string() } else { format!("t {p}") };
        format!(
            "  {}-{prev}  [000] d..2.  {ts}: sched_switch: prev_comm={} prev_pid={prev} prev_prio=120 prev_state={state} ==> next_comm={} next_pid={next} next_prio=120\n",
            name(prev), name(prev), name(next)
        )
    }

    fn waking(ts: &str, waker: u32, flags: &str, pid: u32) -> String {
        format!("  w-{waker}  [001] {flags}  {ts}: sched_waking: comm=x pid={pid} prio=120 target_cpu=000\n")
    }

    /// A `sched_stat_runtime` of `pid` on CPU 1.
    fn runtime(ts: &str, pid: u32, ns: u64) -> String {
        format!("  t {pid}-{pid}  [001] d..2.  {ts}: sched_stat_runtime: comm=t {pid} pid={pid} runtime={ns} [ns]\n")
    }

    fn mark(ts: &str, m: &str) -> String {
        format!("  tl-99  [000] .....  {ts}: tracing_mark_write: {m}\n")
    }

    /// `pid`'s `epoll_wait` entry, or its exit with `ret` (hex, as traced).
    fn epoll(ts: &str, pid: u32, ret: Option<&str>) -> String {
        let event = ret.map_or("sys_epoll_wait(epfd: 7, events: 7ffc, maxevents: 512, timeout: ffffffff)".into(), |r| format!("sys_epoll_wait -> 0x{r}"));
        format!("  t {pid}-{pid}  [000] .....  {ts}: {event}\n")
    }

    #[test]
    fn parses_the_text_format() {
        let e = parse_line("  my task-4321  [001] d.h2.  17247.880505: sched_waking: comm=b c pid=12 prio=120 target_cpu=001").unwrap().unwrap();
        assert_eq!(e, Event { ts_ns: 17_247_880_505_000, pid: 4321, context: Context::HardIrq, cpu: 1, kind: Kind::Waking { pid: 12 } });
        let e = parse_line(&switch("1.000001", 10, "R+", 0)).unwrap().unwrap();
        assert!(matches!(e.kind, Kind::Switch { prev_pid: 10, preempted: true, next_pid: 0, ref prev_comm, .. } if prev_comm == "t 10"));
        let e = parse_line("  sh-5  [000] .....  2.5: sched_process_fork: comm=sh pid=5 child_comm=sh child_pid=6").unwrap().unwrap();
        assert_eq!(e.kind, Kind::Fork { child_pid: 6, child_comm: "sh".into() });
        assert_eq!(e.ts_ns, 2_500_000_000);
        assert!(parse_line("# tracer: nop").is_none());
        assert!(parse_line("  sh-5  [000] .....  2.5: hrtimer_start: x").is_none());
        let e = parse_line("  sh-5  [000] .....  2.5: sched_waking: comm=x prio=1").unwrap().unwrap_err();
        assert!(e.starts_with("no pid= number in"), "{e}");
        let e = parse_line(&runtime("2.5", 7, 5_000_000_000)).unwrap().unwrap();
        assert_eq!((e.pid, e.cpu, e.kind), (7, 1, Kind::Runtime { pid: 7, runtime_ns: 5_000_000_000 }));
        // Before 6.8 the event also carried the task's vruntime.
        let e = parse_line("  a b-7  [000] .....  2.5: sched_stat_runtime: comm=a b pid=7 runtime=12 [ns] vruntime=99 [ns]").unwrap().unwrap();
        assert_eq!(e.kind, Kind::Runtime { pid: 7, runtime_ns: 12 });
        let e = parse_line("  sh-5  [000] .....  2.5: sched_stat_runtime: comm=sh pid=5 runtime=-1 [ns]").unwrap().unwrap_err();
        assert!(e.starts_with("no runtime= number in"), "{e}");
    }

    #[test]
    fn other_tasks_preemptions_are_counted_until_the_cpu_is_back_or_idle() {
        // Captured 10 on CPU 0: preempted by 50 for 200 us; then by 50 and 51
        // in turn, 1 ms until the CPU idles; blocking before 52 runs is no
        // preemption, nor is 11 taking over from 10. The last one is still
        // going on at the end mark.
        let t = [
            mark("1.000000", START_MARK),
            switch("1.000000", 0, "R", 10),
            switch("1.001000", 10, "R+", 50),
            switch("1.001200", 50, "S", 10),
            switch("1.002000", 10, "R", 50),
            switch("1.002500", 50, "S", 51),
            switch("1.003000", 51, "S", 0),
            switch("1.004000", 0, "R", 10),
            switch("1.005000", 10, "S", 52),
            switch("1.006000", 52, "S", 11),
            switch("1.007000", 11, "R", 10),
            switch("1.008000", 10, "R", 53),
            mark("1.008500", END_MARK),
        ]
        .concat();
        let mut r = recorder(&[(10, "a".into()), (11, "b".into())]);
        t.lines().filter_map(parse_line).for_each(|e| r.event(&e.unwrap()));
        let p = r.preempted(0).unwrap();
        assert_eq!((p.count, p.sum_ns), (3, 1_700_000));
        assert_eq!((p.quantile_us(0.5), p.quantile_us(0.9), p.quantile_us(1.0)), (Some(500.0), Some(1000.0), Some(1000.0)));
        assert_eq!(p.lengths_ns, vec![200_000, 500_000, 1_000_000], "few: every length");
        // 3 preemptions in the 3.3 ms the target wanted a CPU (6.6 ms on one at 1.7 ms lost).
        let (per_s, us) = p.background(1_600_000, 0).unwrap();
        assert!((per_s - 3.0 / 3.3e-3).abs() < 1e-6 && (us - 1700.0 / 3.0).abs() < 1e-9, "{per_s} {us}");
        assert_eq!(p.background(1_600_000, 4_000_000), None, "too little to tell");
        let none = Preempted { count: 0, sum_ns: 0, p50_ns: None, p90_ns: None, max_ns: None, lengths_ns: vec![] };
        assert_eq!(none.background(2_000_000_000, 1_000_000_000), Some((0.0, 0.0)));
        assert_eq!(none.quantile_us(0.5), None);
    }

    #[test]
    fn many_preemptions_keep_their_lengths_at_even_quantiles() {
        // 128 sorted lengths, read as a stream: every other one, from the second.
        let p = Preempted::of(128, (0..128u64).sum(), |f| {
            (0..128u64).for_each(&mut *f);
            Ok(())
        })
        .unwrap();
        assert_eq!(p.lengths_ns, (0..64u64).map(|i| 2 * i + 1).collect::<Vec<_>>());
        assert_eq!((p.p50_ns, p.max_ns), (Some(63), Some(127)));
    }

    #[test]
    fn preemption_continues_a_burst_and_blocking_ends_it() {
        let t = [
            mark("1.000000", START_MARK),
            switch("1.000000", 0, "R", 10),
            switch("1.002000", 10, "R+", 0), // preempted or throttled: not demand
            switch("1.005000", 0, "R", 10),
            switch("1.006000", 10, "S", 0), // 3 ms burst
            waking("1.016000", 0, "d.h2.", 10), // a timer, 10 ms later
            switch("1.017000", 0, "R", 10),
            mark("1.018000", END_MARK),
        ]
        .concat();
        let p = phases(&t);
        // Woken at 16 ms, on a CPU at 17: 1 ms late.
        assert_eq!(p[0], vec![Phase::Run { ns: 3_000_000 }, Phase::Sleep { ns: 10_000_000, late_ns: 1_000_000 }, Phase::Run { ns: 1_000_000 }]);
        assert!(p[1].is_empty(), "b never ran");
    }

    #[test]
    fn a_wake_up_throttled_on_its_return_to_user_space_is_late_until_it_is_back() {
        // Woken by a timer at 10 ms and switched in 10 us later: 6.18 throttles
        // it 8 us on, at its return to user space, until 40 ms. A stint of
        // 1 ms that ends runnable is its program preempted: its lateness ended.
        let trace = |stint: &str, back: &str| {
            [
                mark("1.000000", START_MARK),
                switch("1.000000", 0, "R", 10),
                switch("1.001000", 10, "S", 0),
                waking("1.010000", 0, "d.h2.", 10),
                switch("1.010010", 0, "R", 10),
                switch(stint, 10, "R", 0),
                switch(back, 0, "R", 10),
                switch("1.041000", 10, "S", 0),
                mark("1.050000", END_MARK),
            ]
            .concat()
        };
        let late = |p: &[Phase]| p.iter().find_map(|p| if let Phase::Sleep { late_ns, .. } = p { Some(*late_ns) } else { None });
        assert_eq!(late(&phases(&trace("1.010018", "1.040000"))[0]), Some(30_000_000));
        assert_eq!(late(&phases(&trace("1.011010", "1.040000"))[0]), Some(10_000));
    }

    #[test]
    fn a_switch_from_idle_left_out_is_bounded_by_the_idle_and_the_wake_up() {
        let on_cpu1 = |line: String| line.replacen("[000]", "[001]", 1);
        let t = [
            mark("1.000000", START_MARK),
            on_cpu1(switch("1.001000", 11, "S", 0)), // CPU 1 idles from 1 ms
            waking("1.004000", 500, "d..2.", 10),     // a woken from outside at 4 ms
            // (the switch from idle to a, on CPU 1, left out)
            on_cpu1(switch("1.006000", 10, "S", 0)), // a ran 2 ms
            waking("1.008000", 500, "d..2.", 10),
            switch("1.009000", 0, "R", 10), // traced: 1 ms
            switch("1.010000", 10, "S", 0),
            on_cpu1(switch("1.010200", 0, "R", 11)),
            waking("1.010400", 500, "d..2.", 10),
            on_cpu1(switch("1.010600", 10, "S", 0)), // CPU 1 ran b last: not bounded
            mark("1.011000", END_MARK),
        ]
        .concat();
        let (threads, _) = recorded(&t);
        let ms = |n: u64| n * 1_000_000;
        assert_eq!(threads[0].phases[..4], [Phase::Until { ns: ms(4) }, Phase::Run { ns: ms(2) }, Phase::Until { ns: ms(8) }, Phase::Run { ns: ms(1) }]);
        assert_eq!((threads[0].cpu_ns, threads[0].untraced_switches), (ms(3), 1));
    }

    #[test]
    fn a_switch_from_idle_left_out_after_a_throttle_is_not_bounded() {
        // a, throttled at 2 ms, leaves CPU 1 runnable; CPU 1 idles until the
        // unthrottle, whose switch back to a is left out: the 6 ms idle is not a's.
        let on_cpu1 = |line: String| line.replacen("[000]", "[001]", 1);
        let t = [
            mark("1.000000", START_MARK),
            waking("1.001000", 500, "d..2.", 10),
            on_cpu1(switch("1.001000", 0, "R", 10)),
            on_cpu1(switch("1.002000", 10, "R", 0)), // throttled
            on_cpu1(switch("1.009000", 10, "S", 0)), // ran from its unthrottle, untraced
            mark("1.010000", END_MARK),
        ]
        .concat();
        let mut r = recorder(&[(10, "a".into())]);
        t.lines().filter_map(parse_line).for_each(|e| r.event(&e.unwrap()));
        let (threads, _) = done(r);
        assert_eq!((threads[0].cpu_ns, threads[0].untraced_switches), (1_000_000, 1));
    }

    #[test]
    fn a_switch_from_idle_left_out_after_a_throttle_is_measured_by_its_runtime() {
        // As above, with the kernel's `sched_stat_runtime`: a's untraced run
        // from its unthrottle is the runtime reported since it left CPU 1
        // (a tick and its switch out); the traced burst is its runtime too.
        let on_cpu1 = |line: String| line.replacen("[000]", "[001]", 1);
        let t = [
            mark("1.000000", START_MARK),
            waking("1.001000", 500, "d..2.", 10),
            on_cpu1(switch("1.001000", 0, "R", 10)),
            runtime("1.002000", 10, 999_000), // traced burst: 1 us less than its wall time
            on_cpu1(switch("1.002000", 10, "R", 0)), // throttled
            runtime("1.008000", 10, 500_000), // a tick, from its unthrottle at 7.5 ms
            runtime("1.009000", 10, 1_000_000), // its switch out
            on_cpu1(switch("1.009000", 10, "S", 0)),
            mark("1.010000", END_MARK),
        ]
        .concat();
        let mut r = recorder(&[(10, "a".into())]);
        t.lines().filter_map(parse_line).for_each(|e| r.event(&e.unwrap()));
        let (threads, _) = done(r);
        assert_eq!((threads[0].cpu_ns, threads[0].untraced_switches), (2_499_000, 0));
        assert_eq!(threads[0].phases, [Phase::Until { ns: 1_000_000 }, Phase::Run { ns: 2_499_000 }]);
    }

    #[test]
    fn runtime_events_measure_an_untraced_burst_before_the_idle_bound_and_a_wake_splits_them() {
        let on_cpu1 = |line: String| line.replacen("[000]", "[001]", 1);
        let t = [
            mark("1.000000", START_MARK),
            on_cpu1(switch("1.001000", 11, "S", 0)), // CPU 1 idles from 1 ms
            waking("1.004000", 500, "d..2.", 10),     // a woken from outside at 4 ms
            // (the switch from idle to a, on CPU 1, left out; it runs from 4.2 ms)
            runtime("1.005000", 10, 800_000),
            waking("1.005500", 10, "d..2.", 11), // a wakes b: the 0.8 ms so far is before it
            runtime("1.007000", 10, 2_000_000),
            on_cpu1(switch("1.007000", 10, "S", 0)),
            mark("1.010000", END_MARK),
        ]
        .concat();
        let (threads, _) = recorded(&t);
        let run = |us: u64| Phase::Run { ns: us * 1_000 };
        assert_eq!(threads[0].phases, [Phase::Until { ns: 4_000_000 }, run(800), Phase::Wake { pid: 11 }, run(2000)]);
        assert_eq!((threads[0].cpu_ns, threads[0].untraced_switches), (2_800_000, 0));
    }

    #[test]
    fn a_traced_burst_is_its_runtime_less_the_stolen_time() {
        // a runs 5 ms of wall time on CPU 0, 2 ms of it stolen by the
        // hypervisor: the kernel charges 3 ms. It wakes b 1 ms in: that
        // segment keeps its wall time, the rest is the runtime less it.
        let t = [
            mark("1.000000", START_MARK),
            waking("1.000500", 500, "d..2.", 10),
            switch("1.001000", 0, "R", 10),
            waking("1.002000", 10, "d..2.", 11),
            runtime("1.004000", 10, 1_500_000), // a tick: 3 ms of wall, 2 of them stolen
            runtime("1.006000", 10, 1_500_000),
            switch("1.006000", 10, "S", 0),
            mark("1.010000", END_MARK),
        ]
        .concat();
        let (threads, _) = recorded(&t);
        let run = |us: u64| Phase::Run { ns: us * 1_000 };
        assert_eq!(threads[0].phases, [Phase::Until { ns: 500_000 }, run(1000), Phase::Wake { pid: 11 }, run(2000)]);
        assert_eq!(threads[0].cpu_ns, 3_000_000);
    }

    #[test]
    fn a_thread_in_a_burst_at_the_start_is_measured_by_its_runtime() {
        // a throttled at the start, its switch in at 7 ms left out: 2 ms, not
        // 9 from the start; b running at the start: its first update's delta
        // reaches back before it, and counts from the start.
        let on_cpu1 = |line: String| line.replacen("[000]", "[001]", 1);
        let t = [
            mark("1.000000", START_MARK),
            runtime("1.001000", 11, 3_000_000),
            runtime("1.002000", 11, 1_000_000),
            switch("1.002000", 11, "S", 0),
            runtime("1.009000", 10, 2_000_000),
            on_cpu1(switch("1.009000", 10, "S", 0)),
            mark("1.010000", END_MARK),
        ]
        .concat();
        let (threads, _) = recorded(&t);
        assert_eq!(threads[0].phases, [Phase::Run { ns: 2_000_000 }]);
        assert_eq!(threads[1].phases, [Phase::Run { ns: 2_000_000 }]);
        assert_eq!((threads[0].untraced_switches, threads[1].untraced_switches), (0, 0));
    }

    #[test]
    fn a_softirq_is_the_network_and_a_hard_interrupt_a_timer() {
        let t = [
            mark("1.000000", START_MARK),
            switch("1.000000", 0, "R", 10),
            switch("1.001000", 10, "S", 0),
            waking("1.003000", 600, "d.s2.", 10), // a: a packet, in the client's softirq
            switch("1.003000", 0, "R", 10),
            switch("1.004000", 10, "S", 0),
            waking("1.006000", 0, "d.s2.", 10), // a packet from a NIC, on an idle CPU
            switch("1.006000", 0, "R", 10),
            switch("1.007000", 10, "S", 11),
            waking("1.009000", 600, "dNh2.", 10), // a timer, whatever task it interrupted
            switch("1.009000", 11, "S", 10),
            waking("1.010000", 10, "d.s2.", 11), // b: a's send over loopback
            mark("1.012000", END_MARK),
        ]
        .concat();
        let p = phases(&t);
        let ms = |ms: u64| ms * 1_000_000;
        assert_eq!(p[0][..6], [Phase::Run { ns: ms(1) }, Phase::Until { ns: ms(3) }, Phase::Run { ns: ms(1) }, Phase::Until { ns: ms(6) }, Phase::Run { ns: ms(1) }, Phase::Sleep { ns: ms(2), late_ns: 0 }]);
        assert_eq!(p[1][..2], [Phase::Run { ns: ms(2) }, Phase::Wait]);
    }

    #[test]
    fn threads_that_make_up_for_late_wake_ups_get_catch_up_sleeps() {
        // `n` cycles of a 20-23 ms run and a sleep asked for as 5 times it,
        // woken 0-7 ms late; the program takes each lateness off its next
        // sleep, or not.
        let cycles = |n: u64, makes_up: bool| {
            let mut phases = Vec::new();
            let mut late_before = 0;
            for i in 0..n {
                let late_ns = (i * 7 % 8) * 1_000_000;
                let run_ns = 20_000_000 + i % 4 * 1_000_000;
                let ns = 5 * run_ns - if makes_up { late_before } else { 0 };
                phases.extend([Phase::Run { ns: run_ns }, Phase::Sleep { ns, late_ns }]);
                late_before = late_ns;
            }
            phases
        };
        let told = |threads: &[(&str, Vec<Phase>)]| {
            let mut threads: Vec<Built> = threads
                .iter()
                .enumerate()
                .map(|(pid, (comm, phases))| Built { phases: phases.clone(), ..Built::new(pid as u32, comm) })
                .collect();
            catch_up(&mut threads);
            threads.into_iter().map(|t| t.phases).collect::<Vec<_>>()
        };
        // What it asked for, against 5 times the run before.
        let asked = |phases: &[Phase]| {
            phases.windows(2).map(|w| match w {
                [Phase::Run { ns: run }, Phase::CatchUp { ns }] => *ns as i64 - 5 * *run as i64,
                _ => 0,
            }).filter(|d| *d != 0).count()
        };
        let got = told(&[("w", cycles(40, true)), ("p", cycles(40, false))]);
        assert!(got[0].iter().all(|p| !matches!(p, Phase::Sleep { .. })), "w catches up: {:?}", got[0]);
        assert_eq!(asked(&got[0]), 0, "w asked for 5 times its runs: {:?}", got[0]);
        assert_eq!(got[1], cycles(40, false), "plain sleeps stay plain");
        // 7 late wake-ups are too few to tell; two threads of one name have 14.
        assert_eq!(told(&[("w", cycles(10, true))])[0], cycles(10, true));
        let got = told(&[("w", cycles(10, true)), ("w", cycles(10, true))]);
        assert!(got.iter().all(|p| p.iter().all(|p| !matches!(p, Phase::Sleep { .. })) && asked(p) == 0), "{got:?}");
    }

    #[test]
    fn threads_whose_sleeps_are_exponential_keep_a_schedule() {
        // A generator keeping due times `n` gaps apart (the `n`-quantiles
        // of `gap`'s lengths, shuffled): woken at each due time, 0-7 ms
        // late, 1 ms of work, 0-2 ms waiting in the middle of it, then a
        // sleep to the next due time, none if that is past (its work goes
        // on). What it replays, and the due gaps of the sleeps it made.
        let cycles = |n: u64, gap: fn(f64) -> f64| {
            let (mut t, mut due, mut now) = (Built::new(1, "gen"), 0, 0);
            let mut gaps = Vec::new();
            let mut last_due = None;
            for i in 0..n {
                due += (gap(((i * 37 % n) as f64 + 0.5) / n as f64) * 1e6) as u64;
                if due > now {
                    t.sleeps_ended.push((t.phases.len(), due));
                    t.phases.push(Phase::Sleep { ns: due - now, late_ns: (i * 7 % 8) * 1_000_000 });
                    gaps.push(last_due.map_or(due - now, |last| due - last));
                    last_due = Some(due);
                    now = due + (i * 7 % 8) * 1_000_000;
                }
                match t.phases.last_mut() {
                    Some(Phase::Run { ns }) => *ns += 1_000_000,
                    _ => t.phases.push(Phase::Run { ns: 1_000_000 }),
                }
                now += 1_000_000 + i % 3 * 1_000_000;
            }
            (t, gaps)
        };
        let told = |t: Built| {
            let mut threads = vec![t];
            catch_up(&mut threads);
            threads.remove(0).phases
        };
        let exponential = |u: f64| -20.0 * (1.0 - u).ln();
        let (t, gaps) = cycles(200, exponential);
        assert!(gaps.len() < 200, "some sleeps skipped");
        let got = told(t);
        let schedule: Vec<u64> = got.iter().filter_map(|p| match *p {
            Phase::Schedule { ns } => Some(ns),
            _ => None,
        }).collect();
        assert_eq!(schedule, gaps, "{got:?}");
        // Replayed from the first sleep, due to due, the sleeps end at the
        // due times, however late each wake-up and burst.
        assert_eq!(schedule.iter().sum::<u64>(), cycles(200, exponential).0.sleeps_ended.last().unwrap().1 - cycles(200, exponential).0.sleeps_ended[0].1 + schedule[0]);
        // Plain sleeps of those lengths, taking off no lateness: too few to
        // tell; uniform lengths; two fixed lengths whose spread (1 and 39 ms:
        // a coefficient of variation of 0.95) is an exponential's.
        let plain = |n: u64, gap: fn(f64) -> f64| {
            let mut t = Built::new(1, "gen");
            for i in 0..n {
                t.phases.push(Phase::Run { ns: 1_000_000 });
                t.sleeps_ended.push((t.phases.len(), i * 100_000_000));
                t.phases.push(Phase::Sleep { ns: (gap(((i * 37 % n) as f64 + 0.5) / n as f64) * 1e6) as u64, late_ns: (i * 7 % 8) * 1_000_000 });
            }
            t
        };
        for t in [plain(40, exponential), plain(200, |u| 10.0 + 20.0 * u), plain(200, |u| if u < 0.5 { 1.0 } else { 39.0 })] {
            let phases = t.phases.clone();
            assert_eq!(told(t), phases);
        }
    }

    #[test]
    fn a_worker_fed_by_a_queue_takes_each_request_at_its_expected_arrival() {
        // A worker woken by a sibling 60 times: bursts of one request of
        // 1.6 ms (+-3 %), every fifth three of them, in a span of 30 ms.
        let worker = |cost: fn(u64) -> u64| {
            let mut t = Built::new(2, "w");
            for i in 0..60u64 {
                t.phases.push(Phase::Wait);
                t.run_spans.push((t.phases.len(), i * 100_000_000, i * 100_000_000 + 30_000_000));
                t.phases.push(Phase::Run { ns: cost(i) });
            }
            t
        };
        fn one(i: u64) -> u64 {
            1_600_000 + i % 3 * 48_000 - 48_000
        }
        let mut t = worker(|i| if i % 5 == 0 { 3 * one(i) } else { one(i) });
        queued_requests(&mut t);
        // Burst 5 (three requests) is now three, the second and third due at
        // a third and two thirds of its span.
        let at = t.phases.iter().position(|p| *p == Phase::Until { ns: 510_000_000 }).expect("split");
        let third = 3 * one(5) / 3;
        assert_eq!(t.phases[at - 2..at + 4], [Phase::Wait, Phase::Run { ns: third }, Phase::Until { ns: 510_000_000 }, Phase::Run { ns: third }, Phase::Until { ns: 520_000_000 }, Phase::Run { ns: third }]);
        assert_eq!(t.phases.iter().filter(|p| matches!(p, Phase::Until { .. })).count(), 2 * 12);
        let cpu = |t: &Built| t.phases.iter().map(|p| if let Phase::Run { ns } = p { *ns } else { 0 }).sum::<u64>();
        assert_eq!(cpu(&t), cpu(&worker(|i| if i % 5 == 0 { 3 * one(i) } else { one(i) })));
        // Bursts of any length (not whole multiples of one cost) stay whole.
        let mut any = worker(|i| 1_000_000 + i * i * 7_919 % 2_000_000);
        let phases = any.phases.clone();
        queued_requests(&mut any);
        assert_eq!(any.phases, phases);
    }

    #[test]
    fn a_queue_burst_split_by_a_wake_of_the_generator_is_split_into_requests() {
        // Generator 10 wakes worker 11 every 100 ms; the worker runs one
        // request of 1.6 ms, or, every fifth wake-up, three (4.8 ms), waking
        // the generator (blocked in the queue's lock) 4 us into the burst, or
        // as it is switched in.
        let mut trace = mark("0.500000", START_MARK);
        for i in 0..60u64 {
            let t0 = 1_000_000 + i * 100_000; // us
            let ts = |us: u64| format!("{}.{:06}", us / 1_000_000, us % 1_000_000);
            trace += &waking(&ts(t0 - 20), 0, "d.h2.", 10);
            trace += &switch(&ts(t0 - 10), 0, "R", 10);
            trace += &waking(&ts(t0), 10, "d..2.", 11);
            trace += &switch(&ts(t0 + 5), 10, "S", 0);
            trace += &switch(&ts(t0 + 10), 0, "R", 11);
            let cost = if i % 5 == 0 {
                trace += &waking(&ts(t0 + if i % 10 == 0 { 14 } else { 10 }), 11, "d..2.", 10);
                trace += &switch(&ts(t0 + 20), 0, "R", 10);
                trace += &switch(&ts(t0 + 30), 10, "S", 0);
                4_800
            } else {
                1_600
            };
            trace += &switch(&ts(t0 + 10 + cost), 11, "S", 0);
        }
        trace += &mark("7.500000", END_MARK);
        let worker = &phases(&trace)[1];
        let cpu: u64 = worker.iter().map(|p| if let Phase::Run { ns } = p { *ns } else { 0 }).sum();
        assert_eq!(cpu, 48 * 1_600_000 + 12 * 4_800_000);
        // Wake-up 0 at 0.5 s: 4 us, the wake, then the rest; requests at
        // 1.6 and 3.2 ms of CPU, due at a third and two thirds of its 4.81 ms.
        assert_eq!(worker[..8], [Phase::Wait, Phase::Run { ns: 4_000 }, Phase::Wake { pid: 10 }, Phase::Run { ns: 1_596_000 }, Phase::Until { ns: 500_000_000 + 4_810_000 / 3 }, Phase::Run { ns: 1_600_000 }, Phase::Until { ns: 500_000_000 + 4_810_000 * 2 / 3 }, Phase::Run { ns: 1_600_000 }]);
        // Wake-up 5: the wake as it is switched in, before any run.
        let at = worker.iter().position(|p| *p == Phase::Until { ns: 1_000_000_000 + 4_810_000 / 3 }).expect("split");
        assert_eq!(worker[at - 3..at + 4], [Phase::Wait, Phase::Wake { pid: 10 }, Phase::Run { ns: 1_600_000 }, Phase::Until { ns: 1_000_000_000 + 4_810_000 / 3 }, Phase::Run { ns: 1_600_000 }, Phase::Until { ns: 1_000_000_000 + 4_810_000 * 2 / 3 }, Phase::Run { ns: 1_600_000 }]);
        assert_eq!(worker.iter().filter(|p| matches!(p, Phase::Until { .. })).count(), 2 * 12);
    }

    #[test]
    fn an_event_loop_takes_up_a_request_without_blocking() {
        let t = [
            mark("1.000000", START_MARK),
            epoll("1.000500", 10, None),
            switch("1.000500", 10, "S", 0),
            waking("1.001000", 0, "d.s2.", 10), // a request: it blocked in epoll_wait
            switch("1.001000", 0, "R", 10),
            epoll("1.001000", 10, Some("1")),
            epoll("1.003000", 10, None),
            epoll("1.003000", 10, Some("1")), // another, come meanwhile: no sleep
            epoll("1.005000", 10, None),
            epoll("1.005000", 10, Some("fffffffffffffffc")), // -EINTR: nothing taken up
            epoll("1.006000", 10, None),
            switch("1.006000", 10, "R", 0), // preempted inside: not blocked
            switch("1.007000", 0, "R", 10),
            epoll("1.007000", 10, Some("2")), // a third
            switch("1.008000", 10, "S", 0),
            mark("1.010000", END_MARK),
        ]
        .concat();
        let ms = |ms: u64| ms * 1_000_000;
        let run = |ms: u64| Phase::Run { ns: ms * 1_000_000 };
        // Running at the start, 0.5 ms; then each come, by the middle of the
        // span since the last: 2 and 5 ms.
        assert_eq!(phases(&t)[0], [Phase::Run { ns: 500_000 }, Phase::Until { ns: ms(1) }, run(2), Phase::Until { ns: ms(2) }, run(3), Phase::Until { ns: ms(5) }, run(1)]);
        let e = parse_line(&epoll("2.0", 5, Some("fffffffffffffffc"))).unwrap().unwrap();
        assert_eq!(e.kind, Kind::PollExit { ready: false });
        assert_eq!(parse_line(&epoll("2.0", 5, None)).unwrap().unwrap().kind, Kind::PollEnter);
        assert!(parse_line("  t-5  [000] .....  2.0: sys_epoll_ctl(epfd: 7)").is_none());
    }

    #[test]
    fn the_waker_decides_the_kind_of_sleep() {
        let t = [
            mark("1.000000", START_MARK),
            waking("1.001000", 500, "d..2.", 10), // a: asleep before the start, woken from outside
            switch("1.001000", 0, "R", 10),
            waking("1.002000", 10, "d..2.", 11), // a wakes b (b asleep since before the start)
            switch("1.003000", 10, "S", 11),
            switch("1.004000", 11, "D", 0),
            waking("1.010000", 11, "d..2.", 11), // b woken by itself: a timer
            switch("1.015000", 0, "R", 11),
            waking("1.020000", 11, "d..2.", 10), // b wakes a
            mark("1.030000", END_MARK),
        ]
        .concat();
        let p = phases(&t);
        let run = |ms: u64| Phase::Run { ns: ms * 1_000_000 };
        assert_eq!(p[0], vec![Phase::Until { ns: 1_000_000 }, run(1), Phase::Wake { pid: 11 }, run(1), Phase::Wait]);
        assert_eq!(p[1], vec![Phase::Wait, run(1), Phase::Sleep { ns: 6_000_000, late_ns: 5_000_000 }, run(5), Phase::Wake { pid: 10 }, run(10)]);
    }

    #[test]
    fn a_thread_running_at_the_start_and_a_fork() {
        let t = [
            mark("1.000000", START_MARK),
            "  a-10  [000] .....  1.001000: sched_process_fork: comm=a pid=10 child_comm=kid child_pid=12\n".to_string(),
            switch("1.002000", 10, "S", 12),
            "  kid-12  [000] .....  1.003000: sched_process_exit: comm=kid pid=12 prio=120\n".to_string(),
            switch("1.003000", 12, "X", 0),
            mark("1.004000", END_MARK),
            switch("1.005000", 0, "R", 11), // after the end: ignored
        ]
        .concat();
        let (threads, end_ns) = recorded(&t);
        assert_eq!(end_ns, 4_000_000);
        assert_eq!(threads[0].phases, vec![Phase::Run { ns: 2_000_000 }]);
        // Named as its last switch calls it (an exec renames a thread).
        assert_eq!((threads[2].comm.as_str(), threads[2].start_ns, threads[2].cpu_ns), ("t 12", 1_000_000, 1_000_000));
        assert_eq!(threads[2].phases, vec![Phase::Run { ns: 1_000_000 }]);
        assert!(threads[1].phases.is_empty());
    }

    /// What the recorder holds does not grow with the events it is fed:
    /// `cycles` of two captured threads waking each other, one preempted by
    /// another task and woken by a timer, 10 times over, hold the same.
    #[test]
    fn the_recorder_holds_as_much_for_ten_times_the_events() {
        let fed = |cycles: u64| {
            let mut r = recorder(&[(10, "a".into()), (11, "b".into())]);
            let event = |ts_ns: u64, pid: u32, context: Context, kind: Kind| Event { ts_ns, pid, context, cpu: 0, kind };
            let switch = |prev_pid: u32, preempted: bool, next_pid: u32| Kind::Switch { prev_pid, prev_comm: "t".into(), preempted, next_pid, next_comm: "t".into() };
            r.event(&event(0, 1, Context::Task, Kind::Mark(START_MARK.into())));
            for i in 0..cycles {
                let t = 1_000 + i * 10_000;
                for e in [
                    event(t, 10, Context::Task, Kind::Waking { pid: 11 }),
                    event(t + 1_000, 10, Context::Task, switch(10, false, 11)),
                    event(t + 2_000, 11, Context::Task, switch(11, true, 50)),
                    event(t + 3_000 + i % 7 * 100, 50, Context::Task, switch(50, false, 11)),
                    event(t + 5_000, 0, Context::HardIrq, Kind::Waking { pid: 10 }),
                    event(t + 6_000, 11, Context::Task, switch(11, false, 10)),
                ] {
                    r.event(&e);
                }
            }
            let held = r.held_bytes();
            r.event(&event(1_000 + cycles * 10_000, 1, Context::Task, Kind::Mark(END_MARK.into())));
            let logged: usize = r.threads.iter().map(|t| t.logged).sum();
            let preempted = r.preempted(0).unwrap();
            let f = r.finish().unwrap();
            (held, logged, preempted.count, f.phases(1).unwrap().len())
        };
        let (n, ten_n) = (fed(100_000), fed(1_000_000));
        assert_eq!(n.0, ten_n.0, "bytes held");
        // Ten times the phases and preemptions, and all of them read back.
        assert!(n.1 >= 400_000 && ten_n.1 >= 10 * n.1 - 10, "{n:?} {ten_n:?}");
        assert_eq!((n.2, ten_n.2), (100_000, 1_000_000));
        assert!(ten_n.3 >= 10 * n.3 - 10 && n.3 >= 200_000, "{n:?} {ten_n:?}");
    }

    #[test]
    fn a_trace_without_marks_is_refused() {
        let r = recorder(&[(10, "a".into())]);
        assert!(r.finish().unwrap_err().starts_with("the trace has no start mark"));
    }
}
