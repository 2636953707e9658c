//! `throttlelab capture`: record what a cgroup's (or some processes') threads
//! do, from the kernel's scheduler events in a tracefs instance of our own,
//! and write it as a scenario the simulator runs as it is: the machine and
//! the cgroup as found, each thread's phases in a gzip side file
//! (`phases_file`, see the core's `phases_file`), and the cgroup's `cpu.stat`
//! deltas over the capture in `[capture]`, to hold the replay against.

use crate::cgroupfs::{Found, Layout, Version};
use crate::error::{Error, Result};
use crate::sched_trace::{Context, Event, Kind, Phase, Recorder, Thread, END_MARK, START_MARK};
use crate::timer_trace::Instance;
use crate::trace_raw::{self, Formats};
use crate::thread_sched::{FifoWhile, Scheduling};
use crate::{cgroup_root, host, signals};
use std::collections::VecDeque;
use std::fs;
use std::io::{Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use throttlelab_core::phases_file;
use throttlelab_core::scenario::Phase as FilePhase;
use throttlelab_core::scenario::{measured_background_p50_us, parse_cpu_list, CaptureSpec};
use throttlelab_core::output::Limit;
use throttlelab_core::write::{captured_task, seconds, value, Array, ScenarioToml, Table};
use throttlelab_core::{Profile, Quota};

/// What to capture.
#[derive(Debug, Clone)]
pub enum Target {
    /// Every thread in this cgroup (a directory of the cpu hierarchy, or a
    /// path below its root), and what they fork.
    Cgroup(PathBuf),
    /// These processes' threads and what they fork; the cgroup is the first's.
    Pids(Vec<u32>),
}

/// The per-CPU ring buffer (tracefs's `buffer_size_kb`) unless `--buffer-kb`
/// says: the trace is read while it is written (see [`Stream`]), so the
/// buffer only has to hold what comes between two reads, and what the
/// kernel holds does not grow with the capture's length. The instance takes
/// `BUFFER_KB_TOTAL` in all, less a few pages a CPU the kernel adds (the
/// reader's page: `buffer_total_size_kb` reads 16390 for 2 x 8192), up to
/// 32 MiB a CPU: on this 2-CPU host 32 MiB a CPU holds about a second of
/// `stress-ng --switch 2` at its busiest (about 2 million events a second,
/// 40-72 bytes each), twenty reads apart, which a reader delayed by the
/// scheduler needs; on a 64-CPU node 1 MiB a CPU.
const BUFFER_KB_MAX: u64 = 32_768;
const BUFFER_KB_TOTAL: u64 = 65_536;
const BUFFER_KB_SLACK: u64 = 64;
const BUFFER_KB_MIN: u64 = 1024;

/// How often the buffers are read. A read costs a few syscalls a CPU and a
/// page's copy for every 4 KiB of events; reading more often does not lose
/// fewer events, reading less often needs more buffer.
const READ_EVERY: Duration = Duration::from_millis(50);
/// Events are given to the recorder in time order up to this long before
/// the last read: an event being written as a buffer is read, its time
/// already taken, is read the next time, still in order.
const READ_MARGIN_NS: u64 = 20_000_000;

/// The scheduler events read, by tracefs's directory; `sched_waking` (4.5+)
/// is when a wake-up is asked for, `sched_wakeup` the fallback. The events
/// are the whole host's: `set_event_pid` would follow forks, but on 6.18 it
/// drops some switches to a traced thread from one that is not (seen: a
/// tokio worker's switch back to a throttled spinner), and a missed switch
/// in loses a burst. (scripts/eventpid_check.sh did not see it with
/// stress-ng or a threaded ping-pong: docs/capture.md, "Filtering in the
/// kernel"; and set_event_pid would not make stress-ng's capture cheaper.)
const EVENTS: [&str; 4] = ["sched/sched_switch", "sched/sched_waking", "sched/sched_process_fork", "sched/sched_process_exit"];

/// Read where the kernel has them: `update_curr`'s deltas measure the bursts
/// whose switch in the trace leaves out; `epoll_wait`'s entries and the
/// exits that found something ready (the filter) tell requests an event loop
/// took up without blocking (see `sched_trace`). Syscall tracepoints need
/// CONFIG_FTRACE_SYSCALLS.
const OPTIONAL_EVENTS: [(&str, &str); 7] = [
    ("sched/sched_stat_runtime", ""),
    ("syscalls/sys_enter_epoll_wait", ""),
    ("syscalls/sys_enter_epoll_pwait", ""),
    ("syscalls/sys_enter_epoll_pwait2", ""),
    ("syscalls/sys_exit_epoll_wait", "ret > 0"),
    ("syscalls/sys_exit_epoll_pwait", "ret > 0"),
    ("syscalls/sys_exit_epoll_pwait2", "ret > 0"),
];

/// How to capture, besides what.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// How long; None: until a signal (Ctrl-C).
    pub duration: Option<Duration>,
    /// The per-CPU ring buffer, KiB; None: the default (`BUFFER_KB_MAX`, within `BUFFER_KB_TOTAL`).
    pub buffer_kb: Option<u64>,
    /// With `Target::Pids`: their descendants' threads too.
    pub children: bool,
    /// Fail, rather than warn, if the kernel lost events.
    pub strict: bool,
}

/// What a capture wrote: its `[capture]` table, and the signal that ended
/// it early, if one did.
#[derive(Debug, Clone)]
pub struct Captured {
    pub spec: CaptureSpec,
    pub signal: Option<libc::c_int>,
    /// Where the capture went when the output's directory could not take it.
    pub kept_elsewhere: Option<KeptElsewhere>,
}

/// A capture written to a spare directory, and why not where asked.
#[derive(Debug, Clone)]
pub struct KeptElsewhere {
    pub scenario: PathBuf,
    pub cause: String,
}

/// Capture `target` as `options` say; write the scenario to `out` and the
/// phases beside it (`<stem>.phases.gz`). Both files are created before the
/// capture starts (with the scenario's directory, if missing), so that an
/// output that cannot be written is refused before a minute of capturing
/// rather than after; they are removed again if the capture fails. A
/// signal (SIGINT, SIGTERM, SIGHUP, SIGQUIT) ends the capture, which keeps
/// what it has: `Captured::signal` says which.
pub fn capture(target: &Target, options: &Options, out: &Path) -> Result<Captured> {
    // SAFETY: geteuid cannot fail.
    host::check_root(unsafe { libc::geteuid() }).map_err(|_| Error::harness("capture needs root (tracefs and the cgroups' files)"))?;
    let phases_path = out.with_extension("phases.gz");
    if let Some(dir) = out.parent().filter(|d| !d.as_os_str().is_empty()) {
        fs::create_dir_all(dir).map_err(|e| Error::io("create", dir, e))?;
    }
    let scenario_file = fs::File::create(out).map_err(|e| Error::io("create", out, e))?;
    let phases_file = fs::File::create(&phases_path).map_err(|e| Error::io("create", &phases_path, e))?;
    let captured = record(target, options, out, scenario_file, &phases_path, phases_file);
    if captured.is_err() {
        let _ = fs::remove_file(out);
        let _ = fs::remove_file(&phases_path);
    }
    captured.map_err(|e| match e {
        // Before the capture started: nothing to keep.
        Error::Interrupted(sig) => Error::harness(format!("interrupted by {} before the capture started; nothing written", signals::name(sig))),
        e => e,
    })
}

/// `capture` once its output files are open.
fn record(target: &Target, options: &Options, out: &Path, scenario_file: fs::File, phases_path: &Path,
          phases_file: fs::File) -> Result<Captured> {
    let signals = signals::Guard::install()?;
    // Raised first, before the cgroup is read and the events enabled: set up
    // at the captured service's weight, on a busy host the capture took
    // seconds to its first read while the buffers filled, and beside
    // `stress-ng --switch 2` on the idle host 5 s to read the cgroup's
    // threads (docs/capture.md, "A late start").
    let (priority, warning) = ReaderPriority::raise();
    if let Some(warning) = warning {
        eprintln!("throttlelab: warning: {warning}");
    }
    let layout = Layout::detect(&cgroup_root())?;
    let (group, threads, source) = match target {
        Target::Cgroup(dir) => {
            let group = layout.found(dir)?;
            let threads = group.threads()?;
            let source = group.dir().display().to_string();
            (group, threads, source)
        }
        Target::Pids(pids) => {
            let first = *pids.first().ok_or_else(|| Error::harness("give --cgroup or at least one --pid"))?;
            let group = layout.found(&cgroup_of(first, layout.version)?)?;
            let mut procs = pids.clone();
            if options.children {
                procs.extend(descendants(pids));
            }
            let threads = procs.iter().map(|&p| threads_of(p)).collect::<Result<Vec<_>>>()?.concat();
            let children = if options.children { " and their children" } else { "" };
            (group, threads, format!("pids {}{children}", pids.iter().map(u32::to_string).collect::<Vec<_>>().join(",")))
        }
    };
    if threads.is_empty() {
        return Err(Error::harness(format!("{source}: no threads to capture")));
    }
    let named: Vec<(u32, String)> = threads.iter().map(|&t| (t, comm_of(t))).collect();
    let trace = Instance::open(&format!("{INSTANCE_PREFIX}{}", std::process::id())).map_err(|e| {
        Error::harness(if e.contains("Operation not permitted") || e.contains("Permission denied") {
            format!("{e} (capture needs root with CAP_SYS_ADMIN, as a privileged container has)")
        } else {
            e
        })
    })?;
    remove_stale_instances(&trace);
    let nr_cpus = host::online_cpus()?.len().max(1) as u64;
    let buffer_kb = options.buffer_kb.unwrap_or((BUFFER_KB_TOTAL / nr_cpus).saturating_sub(BUFFER_KB_SLACK).clamp(BUFFER_KB_MIN, BUFFER_KB_MAX));
    trace.write("buffer_size_kb", &buffer_kb.to_string()).map_err(Error::harness)?;
    // One clock for every CPU, which user space reads too (CLOCK_MONOTONIC):
    // the CPUs' buffers are merged by time, and read up to a time.
    trace.write("trace_clock", "mono").map_err(Error::harness)?;
    // An instance inherits `record-cmd` (it has no options file for it):
    // every event then makes the next switch save the task's comm into
    // saved_cmdlines, which only the text output reads.
    let _ = trace.write("trace_options", "norecord-cmd");
    // The longest time between two reads' starts, the first from the events' enabling: what the buffers had to hold.
    let (mut last_read, mut max_gap) = (Instant::now(), Duration::ZERO);
    // The longest read and feed of one interval: the gap's part that is the reader's own work.
    let mut max_work = Duration::ZERO;
    let mut read = EVENTS.to_vec();
    for event in EVENTS {
        let fallback = event.replace("waking", "wakeup");
        trace
            .write(&format!("events/{event}/enable"), "1")
            .or_else(|e| trace.write(&format!("events/{fallback}/enable"), "1").map(|_| read.push(leak(fallback))).map_err(|_| e))
            .map_err(Error::harness)?;
    }
    for (event, filter) in OPTIONAL_EVENTS {
        if (filter.is_empty() || trace.write(&format!("events/{event}/filter"), filter).is_ok())
            && trace.write(&format!("events/{event}/enable"), "1").is_ok()
        {
            read.push(event);
        }
    }
    let mut stream = Stream::open(&trace, &read)?;
    let trace_buffer_kb = stream.buffer_total_kb(&trace)?;
    // The phases go to spill files beside the output as they are recognised.
    let spill_dir = out.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let mut recorder = Recorder::new(&named, spill_dir).map_err(Error::harness)?;
    let before = group.stats()?;
    let start_ns = now_ns();
    let started = Instant::now();
    stream.mark(start_ns, START_MARK);
    let mut signal = None;
    loop {
        let left = options.duration.map(|d| d.saturating_sub(started.elapsed()));
        if left.is_some_and(|l| l.is_zero()) {
            break;
        }
        std::thread::sleep(left.map_or(READ_EVERY, |l| l.min(READ_EVERY)));
        if let Err(Error::Interrupted(sig)) = signals.check() {
            signal = Some(sig);
            break;
        }
        let now = now_ns();
        max_gap = max_gap.max(last_read.elapsed());
        last_read = Instant::now();
        stream.read(now)?;
        stream.feed(now.saturating_sub(READ_MARGIN_NS), &mut recorder);
        max_work = max_work.max(last_read.elapsed());
    }
    let end_ns = now_ns();
    let reader_policy = priority.policy.to_string();
    drop(priority);
    let after = group.stats()?;
    stream.mark(end_ns, END_MARK);
    trace.write("tracing_on", "0").map_err(Error::harness)?;
    stream.read(u64::MAX)?;
    stream.feed(u64::MAX, &mut recorder);
    let spill = recorder.spill_writes();
    let lost = stream.lost(&trace, start_ns)?;
    if signal.is_some() {
        eprintln!(
            "throttlelab: capture interrupted by {} after {:.3} s: writing what was captured",
            signals::name(signal.unwrap_or(0)),
            (end_ns - start_ns) as f64 / 1e9
        );
    }
    drop(signals);
    let preempted = recorder.preempted(end_ns).map_err(Error::harness)?;
    let finished = recorder.finish().map_err(Error::harness)?;
    let window_ns = finished.window_ns;
    // The threads that ran, by their index in `finished`.
    let kept: Vec<usize> = (0..finished.threads.len()).filter(|&i| finished.threads[i].ran).collect();
    let captured: Vec<&Thread> = kept.iter().map(|&i| &finished.threads[i]).collect();
    let limit = group.limit()?;
    let stats = after.since(&before, limit);
    let release = host::release()?;
    let cpu_usec = captured.iter().map(|t| t.cpu_ns).sum::<u64>() / 1_000;
    let background = preempted.background(cpu_usec * 1_000, BACKGROUND_MIN_WANTED_NS).map(|(per_s, us)| Met {
        per_s,
        us,
        lengths_us: preempted.lengths_ns.iter().map(|&ns| ns as f64 / 1e3).collect(),
    });
    let spec = CaptureSpec {
        source: source.clone(),
        release: release.clone(),
        duration_s: window_ns as f64 / 1e9,
        threads: captured.len() as u64,
        usage_usec: group.has_usage().then_some(stats.usage_usec),
        nr_periods: stats.nr_periods,
        nr_throttled: stats.nr_throttled,
        throttled_usec: stats.throttled_usec,
        cpu_usec,
        untraced_switches: captured.iter().map(|t| t.untraced_switches).sum(),
        lost_events: lost.total,
        trace_events: stream.events,
        trace_buffer_kb,
        reader_policy,
        reader_max_gap_us: max_gap.as_micros() as u64,
        reader_peak_kb: stream.peak_bytes.div_ceil(1024),
        reader_max_work_us: max_work.as_micros() as u64,
        spill_write_max_us: spill.times.max.as_micros() as u64,
        spill_write_us: spill.times.total.as_micros() as u64,
        spill_waits: spill.waits,
        spill_wait_us: spill.waited.as_micros() as u64,
        writer_policy: spill.policy.map_or(String::new(), |p| p.to_string()),
        // Where the threads tell the background, how it was measured.
        background_preemptions: background.as_ref().and(Some(preempted.count)),
        background_p50_us: background.as_ref().and(preempted.quantile_us(0.5)),
        background_p90_us: background.as_ref().and(preempted.quantile_us(0.9)),
        background_max_us: background.as_ref().and(preempted.quantile_us(1.0)),
    };
    if let Some(warning) = lost.warning(&spec, buffer_kb) {
        if options.strict {
            return Err(Error::harness(format!("{warning} (--strict)")));
        }
        eprintln!("throttlelab: warning: {warning}");
    }
    if spec.spill_waits > 0 {
        eprintln!(
            "throttlelab: warning: the spill's writer fell behind (its writes slower than the phases came: the disk beside the output, or the writer kept off its CPU): \
             the trace's reader waited for it {} times, {} ms in all, and the kernel may have lost events meanwhile (see lost_events)",
            spec.spill_waits,
            spec.spill_wait_us / 1_000
        );
    }
    let untraced = spec.untraced_switches;
    if untraced > 0 {
        eprintln!(
            "throttlelab: warning: the kernel left {untraced} switches to captured threads out of the trace, \
             with no runtime events to measure them: their bursts are missing (captured {} ms of CPU against cpu.stat's {} ms)",
            spec.cpu_usec / 1_000,
            spec.usage_usec.map_or("?".to_string(), |u| (u / 1_000).to_string())
        );
    }
    empty_capture(&spec, target)?;
    let names = task_names(&captured);
    let file_name = phases_path.file_name().expect("a file name").to_string_lossy();
    let text = scenario_text(&spec, &group, &captured, &names, &file_name, background)?;
    let write = |out: &Path, mut scenario_file: fs::File, phases_path: &Path, phases_file: fs::File| {
        let pids: Vec<u32> = captured.iter().map(|t| t.pid).collect();
        write_phases(phases_file, &pids, &names, |k, out| finished.each_phase(kept[k], out))
            .map_err(|e| Error::io("write", phases_path, std::io::Error::other(e)))?;
        scenario_file.write_all(text.as_bytes()).and_then(|_| scenario_file.sync_all()).map_err(|e| Error::io("write", out, e))
    };
    let kept_elsewhere = match write(out, scenario_file, phases_path, phases_file) {
        Ok(()) => None,
        Err(e) => Some(keep_elsewhere(out, phases_path, e, write)?),
    };
    Ok(Captured { spec, signal, kept_elsewhere })
}

/// Write a capture that its own directory could not take (a full disk) into
/// the first spare directory that can, under the same names (with the pid
/// if taken), and remove the partial files: what was captured is not lost.
fn keep_elsewhere(out: &Path, phases_path: &Path, cause: Error,
                  write: impl Fn(&Path, fs::File, &Path, fs::File) -> Result<()>) -> Result<KeptElsewhere> {
    let _ = fs::remove_file(out);
    let _ = fs::remove_file(phases_path);
    let mut spares: Vec<PathBuf> = std::env::var_os("TMPDIR").map(PathBuf::from).into_iter().collect();
    spares.extend(["/var/tmp", "/dev/shm", "/tmp"].map(PathBuf::from));
    let stem = out.file_stem().unwrap_or_default().to_string_lossy();
    for dir in spares.iter().filter(|d| d.is_dir() && Some(d.as_path()) != out.parent()) {
        for name in [stem.to_string(), format!("{stem}-{}", std::process::id())] {
            let (o, p) = (dir.join(format!("{name}.toml")), dir.join(format!("{name}.phases.gz")));
            let create = |path: &Path| fs::OpenOptions::new().write(true).create_new(true).open(path);
            let written = match (create(&o), create(&p)) {
                (Ok(sf), Ok(pf)) => write(&o, sf, &p, pf).is_ok(),
                (Ok(_), Err(_)) => { let _ = fs::remove_file(&o); continue; }
                (Err(_), Ok(_)) => { let _ = fs::remove_file(&p); continue; }
                (Err(_), Err(_)) => continue,
            };
            if written {
                return Ok(KeptElsewhere { scenario: o, cause: cause.to_string() });
            }
            let _ = fs::remove_file(&o);
            let _ = fs::remove_file(&p);
            break;
        }
    }
    Err(cause)
}

/// How the trace's reader runs while it captures. The ring buffer holds
/// about a second of a busy host's events (`BUFFER_KB_MAX`), and a reader at
/// nice -10, woken every `READ_EVERY`, was kept off its CPU for 2-9 s at a
/// time on this 2-CPU host under `stress-ng --switch 2` (docs/capture.md,
/// "The reader"), losing most of the events. At `SCHED_FIFO` it runs as soon
/// as it wakes, ahead of every normal task, the captured ones included; the
/// lowest real-time priority leaves the kernel's own real-time threads and
/// any real-time service ahead of it, and the kernel's real-time throttling
/// (`sched_rt_runtime_us`) bounds what it can take. Only the reading thread
/// is raised (`sched_setscheduler` on thread 0, reset on fork), never the
/// captured threads. Where the policy is refused (no CAP_SYS_NICE, or a
/// cgroup with no real-time runtime), nice `READER_NICE`, with a warning.
const READER_RT_PRIORITY: libc::c_int = 1;
const READER_NICE: libc::c_int = -10;

/// The reader's scheduling while it captures, as `[capture] reader_policy` names it.
#[derive(Debug, Clone, Copy, PartialEq)]
enum ReaderPolicy {
    /// `SCHED_FIFO` at this priority.
    Fifo(libc::c_int),
    /// `SCHED_OTHER` at this nice.
    Nice(libc::c_int),
}

impl std::fmt::Display for ReaderPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        let scheduling = match *self {
            ReaderPolicy::Fifo(priority) => Scheduling { policy: libc::SCHED_FIFO, priority, nice: 0 },
            ReaderPolicy::Nice(nice) => Scheduling { policy: libc::SCHED_OTHER, priority: 0, nice },
        };
        scheduling.fmt(f)
    }
}

/// The reader's policy: `SCHED_FIFO` if `set_fifo` takes, else the nice
/// `set_nice` leaves (it is not lowered from a nicer one), with a warning
/// saying why and what it risks; the nice it had if that fails too.
fn choose_policy(set_fifo: impl FnOnce() -> std::io::Result<()>, set_nice: impl FnOnce() -> std::io::Result<libc::c_int>,
                 was_nice: libc::c_int) -> (ReaderPolicy, Option<String>) {
    let refused = match set_fifo() {
        Ok(()) => return (ReaderPolicy::Fifo(READER_RT_PRIORITY), None),
        Err(e) => e,
    };
    let (nice, how) = match set_nice() {
        Ok(nice) => (nice, String::new()),
        Err(e) => (was_nice, format!(" (nice {READER_NICE} refused too: {e})")),
    };
    (ReaderPolicy::Nice(nice), Some(format!(
        "the trace reader cannot run at SCHED_FIFO ({refused}; it needs CAP_SYS_NICE and real-time runtime in its cgroup): \
         it reads at nice {nice}{how}, and on a busy host it may fall behind and the kernel lose events"
    )))
}

/// The calling thread raised as `choose_policy` says, and put back on drop.
struct ReaderPriority {
    policy: ReaderPolicy,
    /// Puts the policy back, where SCHED_FIFO took.
    _fifo: Option<FifoWhile>,
    /// The nice to put back, where it did not.
    was_nice: libc::c_int,
}

impl ReaderPriority {
    fn raise() -> (ReaderPriority, Option<String>) {
        let nice = Scheduling::of_this_thread().nice;
        let mut fifo = None;
        let set_fifo = || FifoWhile::begin(READER_RT_PRIORITY).map(|held| fifo = Some(held));
        let set_nice = || {
            if nice <= READER_NICE {
                return Ok(nice);
            }
            // SAFETY: this thread (who 0).
            match unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, READER_NICE) } {
                0 => Ok(READER_NICE),
                _ => Err(std::io::Error::last_os_error()),
            }
        };
        let (chosen, warning) = choose_policy(set_fifo, set_nice, nice);
        (ReaderPriority { policy: chosen, _fifo: fifo, was_nice: nice }, warning)
    }
}

impl Drop for ReaderPriority {
    fn drop(&mut self) {
        if let ReaderPolicy::Nice(_) = self.policy {
            // SAFETY: this thread, back to the nice it had.
            unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, self.was_nice) };
        }
    }
}

/// The name of a capture's tracefs instance: `throttlelab-capture-<pid>`.
const INSTANCE_PREFIX: &str = "throttlelab-capture-";

/// Remove the tracefs instances of captures killed outright (SIGKILL, the
/// OOM killer): their events stay enabled, the whole host's switches
/// recorded into their buffers, until someone removes them. An instance
/// is a capture's while its process lives.
fn remove_stale_instances(ours: &Instance) {
    let Some(instances) = ours.dir.parent() else { return };
    for entry in fs::read_dir(instances).into_iter().flatten().flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(|n| n.strip_prefix(INSTANCE_PREFIX)).and_then(|p| p.parse::<u32>().ok()) else { continue };
        if pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists() {
            match fs::remove_dir(entry.path()) {
                Ok(()) => eprintln!("throttlelab: removed the trace instance {} of a capture killed before it could (pid {pid})", entry.path().display()),
                Err(e) => eprintln!("throttlelab: warning: cannot remove the trace instance {} of a killed capture: {e}", entry.path().display()),
            }
        }
    }
}

/// A `'static` name for an event found at run time (a handful per capture).
fn leak(s: String) -> &'static str {
    Box::leak(s.into_boxed_str())
}

/// CLOCK_MONOTONIC, the trace's clock (`mono`: `ktime_get_mono_fast_ns`), in ns.
fn now_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: a valid timespec to write; CLOCK_MONOTONIC always exists.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Refuse a capture that caught nothing, and warn about one whose threads
/// account for little of their cgroup's CPU: with `--pid`, the cgroup's
/// other processes (a parent that forked its workers before the capture).
fn empty_capture(spec: &CaptureSpec, target: &Target) -> Result<()> {
    let hint = match target {
        Target::Pids(_) if !spec.source.ends_with("children") => " (its workers may be child processes: add --children)",
        _ => "",
    };
    let usage = spec.usage_usec.map_or(String::new(), |u| format!(", while the cgroup used {:.3} s of CPU", u as f64 / 1e6));
    if spec.threads == 0 {
        return Err(Error::harness(format!(
            "{}: no captured thread ran in {:.3} s{usage}: nothing to replay{hint}",
            spec.source, spec.duration_s
        )));
    }
    if let Some(usage) = spec.usage_usec.filter(|&u| u > 0 && (spec.cpu_usec as f64) < EMPTY_SHARE * u as f64) {
        eprintln!(
            "throttlelab: warning: the captured threads ran {:.3} s of the {:.3} s of CPU the cgroup used: the replay leaves the rest out{hint}",
            spec.cpu_usec as f64 / 1e6,
            usage as f64 / 1e6
        );
    }
    Ok(())
}

/// Below this share of their cgroup's CPU, the captured threads are not
/// the workload: a warning says so.
const EMPTY_SHARE: f64 = 0.5;

/// The processes descended from `pids` (by their parent pid in `/proc/N/stat`), not `pids`.
fn descendants(pids: &[u32]) -> Vec<u32> {
    let parents: Vec<(u32, u32)> = fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .filter_map(|e| {
            let pid: u32 = e.ok()?.file_name().to_str()?.parse().ok()?;
            let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            // `pid (comm) state ppid ...`: the comm may hold anything, up to the last ')'.
            let ppid = stat.rsplit_once(')')?.1.split_whitespace().nth(1)?.parse().ok()?;
            Some((pid, ppid))
        })
        .collect();
    let mut found: Vec<u32> = Vec::new();
    let mut frontier = pids.to_vec();
    while let Some(p) = frontier.pop() {
        for &(child, parent) in &parents {
            if parent == p && !pids.contains(&child) && !found.contains(&child) {
                found.push(child);
                frontier.push(child);
            }
        }
    }
    found
}

/// Events lost, counted by the ring buffer (`per_cpu/cpuN/stats`) and
/// placed by the pages that came after them.
#[derive(Debug, Default)]
struct Lost {
    total: u64,
    /// Per CPU: (its count, the first and last time, s into the capture, a page said events were lost before it).
    per_cpu: Vec<(u32, u64, Option<(f64, f64)>)>,
}

impl Lost {
    /// One line on what was lost and what it means, None if nothing was.
    fn warning(&self, spec: &CaptureSpec, buffer_kb: u64) -> Option<String> {
        if self.total == 0 {
            return None;
        }
        let wheres: Vec<String> = self
            .per_cpu
            .iter()
            .filter(|(_, n, _)| *n > 0)
            .map(|(cpu, n, when)| match when {
                Some((a, b)) if b > a => format!("CPU {cpu}: {n} between {a:.3} and {b:.3} s"),
                Some((a, _)) => format!("CPU {cpu}: {n} before {a:.3} s"),
                None => format!("CPU {cpu}: {n}"),
            })
            .collect();
        Some(format!(
            "the kernel lost {} trace events ({}; the ring buffer was full: --buffer-kb {} a CPU was too small, or the reader was starved): \
             bursts of captured threads on those CPUs then are cut or missing, so the {:.3} s of CPU captured may be short of cpu.stat's",
            self.total,
            wheres.join(", "),
            buffer_kb,
            spec.cpu_usec as f64 / 1e6,
        ))
    }
}

/// Each CPU's `trace_pipe_raw`, read as the trace is written (without
/// blocking, every `READ_EVERY`), its pages decoded into events (see
/// [`trace_raw`]); the events of all CPUs go to the recorder in time order
/// once every CPU has been read past them. What is held: the events of one
/// read interval; the recorder holds each thread's phases (a few dozen
/// bytes each), which the conversion needs whole (catch-up sleeps are told
/// from all of a thread's sleeps).
struct Stream {
    readers: Vec<CpuReader>,
    formats: Formats,
    commit_size: usize,
    page: Vec<u8>,
    decoded: Vec<Event>,
    /// The window's marks, given to the recorder in their place.
    marks: Vec<Event>,
    /// Per CPU: (cpu, the first and last page's time that said events were lost before it).
    lost_at: Vec<(u32, u64, u64)>,
    /// Events read.
    events: u64,
    /// The most one CPU's buffer gave in one read, bytes.
    peak_bytes: u64,
}

struct CpuReader {
    cpu: u32,
    file: fs::File,
    pending: VecDeque<Event>,
}

impl Stream {
    fn open(trace: &Instance, events: &[&str]) -> Result<Stream> {
        let root = trace.dir.join("events");
        let formats = Formats::read(&root, events).map_err(Error::harness)?;
        let header = fs::read_to_string(root.join("header_page")).map_err(|e| Error::io("read", &root.join("header_page"), e))?;
        let commit_size = trace_raw::commit_size(&header);
        let per_cpu = trace.dir.join("per_cpu");
        let mut cpus: Vec<u32> = fs::read_dir(&per_cpu)
            .map_err(|e| Error::io("list", &per_cpu, e))?
            .filter_map(|e| e.ok()?.file_name().to_str()?.strip_prefix("cpu")?.parse().ok())
            .collect();
        cpus.sort_unstable();
        let readers = cpus
            .into_iter()
            .map(|cpu| {
                let path = per_cpu.join(format!("cpu{cpu}/trace_pipe_raw"));
                let file = fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(&path).map_err(|e| Error::io("open", &path, e))?;
                Ok(CpuReader { cpu, file, pending: VecDeque::new() })
            })
            .collect::<Result<Vec<_>>>()?;
        // SAFETY: sysconf cannot fail for _SC_PAGESIZE.
        let page_size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(4096) as usize;
        Ok(Stream { readers, formats, commit_size, page: vec![0; page_size], decoded: Vec::new(), marks: Vec::new(), lost_at: Vec::new(), events: 0, peak_bytes: 0 })
    }

    /// The kernel memory of the trace: every CPU's buffer (`buffer_total_size_kb`).
    fn buffer_total_kb(&self, trace: &Instance) -> Result<u64> {
        let path = trace.dir.join("buffer_total_size_kb");
        let text = fs::read_to_string(&path).map_err(|e| Error::io("read", &path, e))?;
        text.split_whitespace().next().and_then(|n| n.parse().ok()).ok_or_else(|| Error::harness(format!("{}: not a number: {text:?}", path.display())))
    }

    /// A mark of the window at `ts_ns`, given to the recorder in time order.
    fn mark(&mut self, ts_ns: u64, text: &str) {
        self.marks.push(Event { ts_ns, pid: std::process::id(), context: Context::Task, cpu: 0, kind: Kind::Mark(text.to_string()) });
    }

    /// Read every CPU's buffer to its end, or to a page begun after
    /// `upto_ns`: read to its end, a busy CPU's buffer had no end (on the
    /// 2-CPU host under `stress-ng --switch 2`, one read chased CPU 0's
    /// writer for 4 s, 2.2 million events, while CPU 1's buffer overflowed).
    fn read(&mut self, upto_ns: u64) -> Result<()> {
        for r in &mut self.readers {
            let mut bytes = 0;
            loop {
                let n = match r.file.read(&mut self.page) {
                    Ok(0) => break,
                    Ok(n) => n,
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    Err(e) => return Err(Error::harness(format!("cannot read CPU {}'s trace: {e}", r.cpu))),
                };
                let info = trace_raw::decode_page(&self.page[..n], self.commit_size, r.cpu, &self.formats, &mut self.decoded)
                    .map_err(|e| Error::harness(format!("CPU {}'s trace: {e}", r.cpu)))?;
                if info.lost.is_some() {
                    match self.lost_at.iter_mut().find(|(cpu, ..)| *cpu == r.cpu) {
                        Some(at) => at.2 = info.ts_ns,
                        None => self.lost_at.push((r.cpu, info.ts_ns, info.ts_ns)),
                    }
                }
                self.events += info.events as u64;
                bytes += n as u64;
                r.pending.extend(self.decoded.drain(..));
                if info.ts_ns > upto_ns {
                    break;
                }
            }
            self.peak_bytes = self.peak_bytes.max(bytes);
        }
        Ok(())
    }

    /// Give the recorder every event read up to `upto_ns`, in time order
    /// (a tie goes to the lower CPU, as tracefs's `trace` has it).
    fn feed(&mut self, upto_ns: u64, recorder: &mut Recorder) {
        loop {
            let next = self
                .readers
                .iter()
                .enumerate()
                .filter_map(|(i, r)| Some((r.pending.front()?.ts_ns, i)))
                .filter(|&(ts, _)| ts <= upto_ns)
                .min();
            let mark = self.marks.first().map(|m| m.ts_ns).filter(|&ts| ts <= upto_ns);
            match (next, mark) {
                (_, Some(m)) if next.is_none_or(|(ts, _)| m <= ts) => recorder.event(&self.marks.remove(0)),
                (Some((_, i)), _) => recorder.event(&self.readers[i].pending.pop_front().expect("a front")),
                _ => return,
            }
        }
    }

    /// The events the ring buffer lost (per CPU: `overrun`, those
    /// overwritten before they were read; `dropped events`, those it
    /// refused), where the pages say so, at times from `start_ns`.
    fn lost(&self, trace: &Instance, start_ns: u64) -> Result<Lost> {
        let mut lost = Lost::default();
        for r in &self.readers {
            let path = trace.dir.join(format!("per_cpu/cpu{}/stats", r.cpu));
            let text = fs::read_to_string(&path).map_err(|e| Error::io("read", &path, e))?;
            let n: u64 = ["overrun", "commit overrun", "dropped events"].iter().map(|k| stat(&text, k)).sum();
            let s = |ns: u64| ns.saturating_sub(start_ns) as f64 / 1e9;
            let when = self.lost_at.iter().find(|(cpu, ..)| *cpu == r.cpu).map(|&(_, a, b)| (s(a), s(b)));
            lost.total += n;
            lost.per_cpu.push((r.cpu, n, when));
        }
        Ok(lost)
    }
}

/// `key: N` in a `per_cpu/cpuN/stats` file; 0 if absent.
fn stat(text: &str, key: &str) -> u64 {
    text.lines().find_map(|l| l.strip_prefix(key)?.strip_prefix(':')?.trim().parse().ok()).unwrap_or(0)
}

/// The cgroup (below the hierarchies' roots) of process `pid`.
fn cgroup_of(pid: u32, version: Version) -> Result<PathBuf> {
    let path = PathBuf::from(format!("/proc/{pid}/cgroup"));
    let text = fs::read_to_string(&path).map_err(|e| Error::io("read", &path, e))?;
    // `id:controllers:path`: v2's controllers are empty, v1's list `cpu`.
    let line = text.lines().find_map(|l| {
        let mut parts = l.splitn(3, ':');
        let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        let ours = match version {
            Version::V2 => controllers.is_empty(),
            Version::V1 => controllers.split(',').any(|c| c == "cpu"),
        };
        ours.then(|| PathBuf::from(path))
    });
    line.ok_or_else(|| Error::harness(format!("{}: no {} cpu cgroup", path.display(), version.as_str())))
}

fn threads_of(pid: u32) -> Result<Vec<u32>> {
    let dir = PathBuf::from(format!("/proc/{pid}/task"));
    let entries = fs::read_dir(&dir).map_err(|e| Error::io("list", &dir, e))?;
    Ok(entries.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok()).collect())
}

/// A thread's name (`comm`); empty if it is gone.
fn comm_of(tid: u32) -> String {
    fs::read_to_string(format!("/proc/{tid}/comm")).map(|c| c.trim().to_string()).unwrap_or_default()
}

/// Each thread's task name: its comm in the characters names allow, and its pid.
fn task_names(threads: &[&Thread]) -> Vec<String> {
    threads
        .iter()
        .map(|t| {
            let comm: String = t.comm.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '_' }).take(40).collect();
            if comm.is_empty() {
                format!("t{}", t.pid)
            } else {
                format!("{comm}-{}", t.pid)
            }
        })
        .collect()
}

/// Write the captured threads' phases (thread k's, `pids[k]`, given by
/// `phases(k, out)` in order) to `file`, each thread's section under its
/// task name `names[k]`; a wake of a thread left out (it never ran) is left
/// out too. A thread's phases are read back and written one at a time.
fn write_phases(file: impl Write, pids: &[u32], names: &[String],
                phases: impl Fn(usize, &mut dyn FnMut(Phase)) -> std::result::Result<(), String>) -> std::result::Result<(), String> {
    let index_of: std::collections::HashMap<u32, usize> = pids.iter().enumerate().map(|(k, &pid)| (pid, k)).collect();
    let mut w = phases_file::Writer::new(file)?;
    for (k, name) in names.iter().enumerate() {
        w.section(name)?;
        let mut failed = Ok(());
        phases(k, &mut |p| {
            let p = match p {
                Phase::Run { ns } => FilePhase::Run(ns),
                Phase::Sleep { ns, .. } => FilePhase::Sleep(ns),
                Phase::CatchUp { ns } => FilePhase::CatchUp(ns),
                Phase::Schedule { ns } => FilePhase::Schedule(ns),
                Phase::Until { ns } => FilePhase::SleepUntil(ns),
                Phase::Wait => FilePhase::Wait,
                Phase::Wake { pid } => match index_of.get(&pid) {
                    Some(&k) => FilePhase::Wake(k),
                    None => return,
                },
            };
            if failed.is_ok() {
                failed = w.phase(&p, name, names);
            }
        })?;
        failed?;
    }
    w.finish().map(drop)
}

/// Below this much time wanting a CPU (on one, or preempted from it) the
/// captured threads tell too little of the host's background: `[machine]`
/// keeps its defaults, and `[capture]` has no `background_*` keys.
const BACKGROUND_MIN_WANTED_NS: u64 = 1_000_000_000;

/// The background the captured threads met: `[machine]`'s preemptions per
/// second, their mean length and their lengths at even quantiles, us.
#[derive(Debug, Clone, PartialEq)]
struct Met {
    per_s: f64,
    us: f64,
    lengths_us: Vec<f64>,
}

/// The scenario of a capture: the machine (with the background the captured
/// threads met, where they tell it), the kernel and the cgroup as found.
fn scenario_text(spec: &CaptureSpec, group: &Found, threads: &[&Thread], names: &[String], phases_file: &str,
                 background: Option<Met>) -> Result<String> {
    let cpus = host::online_cpus()?;
    let nr_cpus = cpus.iter().max().map_or(1, |c| c + 1);
    let hz = host::config_hz(&spec.release).unwrap_or_else(|| {
        eprintln!("throttlelab: warning: CONFIG_HZ not found (no /boot/config-{} or /proc/config.gz): machine.hz = 250", spec.release);
        250
    });
    let cgroup: String = group
        .dir()
        .file_name()
        .map(|n| n.to_string_lossy().chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '_' }).take(64).collect())
        .filter(|n: &String| !n.is_empty())
        .unwrap_or_else(|| "captured".to_string());
    let group_cpus = group.cpus()?.filter(|list| parse_cpu_list(list).is_ok_and(|c| c != (0..nr_cpus).collect::<Vec<_>>()));
    let host = Host {
        nr_cpus,
        hz,
        profile: Profile::for_release(&spec.release).unwrap_or_default(),
        cgroup,
        limit: group.limit()?,
        weight: group.weight()?,
        cpus: group_cpus,
    };
    let tasks: Vec<(&str, u64)> = names.iter().map(String::as_str).zip(threads.iter().map(|t| t.start_ns)).collect();
    Ok(scenario_toml(spec, &host, &tasks, phases_file, background))
}

/// What a capture's scenario says of the host and the cgroup as found.
struct Host {
    nr_cpus: usize,
    hz: u32,
    profile: Profile,
    /// The cgroup's name in the scenario.
    cgroup: String,
    limit: Limit,
    weight: u64,
    /// Its CPUs, where not all the machine's.
    cpus: Option<String>,
}

/// The scenario's text: `tasks` are each captured thread's name and start (ns).
fn scenario_toml(spec: &CaptureSpec, host: &Host, tasks: &[(&str, u64)], phases_file: &str, background: Option<Met>) -> String {
    let mut s = ScenarioToml::new("Captured by `throttlelab capture` (see [capture]); each thread's phases are in the side file.");
    s.set("name", value(format!("capture-{}", host.cgroup)));
    s.set("duration_s", seconds(spec.duration_s));
    let machine = s.table("machine");
    machine["cpus"] = value(host.nr_cpus as i64);
    machine["hz"] = value(i64::from(host.hz));
    // The scenario's limits: a mean of 1 s or 10000 a second is a host no
    // prediction holds on anyway.
    if let Some(met) = background {
        machine["background_per_s"] = value(met.per_s.min(10_000.0));
        let us = met.us.min(1_000_000.0);
        machine["background_us"] = value(us);
        if !met.lengths_us.is_empty() {
            machine["background_lengths_us"] = value(met.lengths_us.iter().map(|&l| l.clamp(0.001, 1_000_000.0)).collect::<Array>());
        } else if let Some(p50_us) = measured_background_p50_us(spec.background_p50_us, us) {
            machine["background_p50_us"] = value(p50_us);
        }
    }
    s.table("kernel")["profile"] = value(host.profile.as_str());
    let mut cgroup = Table::new();
    cgroup["name"] = value(&host.cgroup);
    cgroup["period_us"] = value(host.limit.period_us as i64);
    if let Quota::Us(q) = host.limit.quota_us {
        cgroup["quota_us"] = value(q as i64);
    }
    if host.limit.burst_us > 0 {
        cgroup["burst_us"] = value(host.limit.burst_us as i64);
    }
    cgroup["weight"] = value(host.weight as i64);
    if let Some(list) = &host.cpus {
        cgroup["cpus"] = value(list);
    }
    s.push("cgroup", cgroup);
    let c = s.table("capture");
    c["source"] = value(&spec.source);
    c["release"] = value(&spec.release);
    c["duration_s"] = seconds(spec.duration_s);
    c["threads"] = value(spec.threads as i64);
    if let Some(usage) = spec.usage_usec {
        c["usage_usec"] = value(usage as i64);
    }
    let counts = [
        ("nr_periods", spec.nr_periods),
        ("nr_throttled", spec.nr_throttled),
        ("throttled_usec", spec.throttled_usec),
        ("cpu_usec", spec.cpu_usec),
        ("untraced_switches", spec.untraced_switches),
        ("lost_events", spec.lost_events),
        ("trace_events", spec.trace_events),
        ("trace_buffer_kb", spec.trace_buffer_kb),
    ];
    for (key, n) in counts {
        c[key] = value(n as i64);
    }
    c["reader_policy"] = value(&spec.reader_policy);
    c["reader_max_gap_us"] = value(spec.reader_max_gap_us as i64);
    c["reader_peak_kb"] = value(spec.reader_peak_kb as i64);
    c["reader_max_work_us"] = value(spec.reader_max_work_us as i64);
    c["spill_write_max_us"] = value(spec.spill_write_max_us as i64);
    c["spill_write_us"] = value(spec.spill_write_us as i64);
    c["spill_waits"] = value(spec.spill_waits as i64);
    c["spill_wait_us"] = value(spec.spill_wait_us as i64);
    if !spec.writer_policy.is_empty() {
        c["writer_policy"] = value(&spec.writer_policy);
    }
    if let Some(n) = spec.background_preemptions {
        c["background_preemptions"] = value(n as i64);
    }
    let lengths = [("background_p50_us", spec.background_p50_us), ("background_p90_us", spec.background_p90_us), ("background_max_us", spec.background_max_us)];
    for (key, us) in lengths {
        if let Some(us) = us {
            c[key] = value(us);
        }
    }
    for (name, start_ns) in tasks {
        s.push("task", captured_task(name, &host.cgroup, phases_file, start_ns / 1_000));
    }
    s.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two captures' scenarios, one with every optional key and one with
    /// none, byte for byte as capture has written them.
    #[test]
    fn a_capture_scenario_is_written_as_before() {
        let mut spec = CaptureSpec {
            source: "/sys/fs/cgroup/app".into(),
            release: "6.18.44-fc".into(),
            duration_s: 60.000186,
            threads: 2,
            usage_usec: Some(35873780),
            nr_periods: 600,
            nr_throttled: 9,
            throttled_usec: 132017,
            cpu_usec: 35873313,
            untraced_switches: 3,
            lost_events: 1,
            trace_events: 123456,
            trace_buffer_kb: 8192,
            reader_policy: "SCHED_FIFO 1".into(),
            reader_max_gap_us: 62_000,
            reader_peak_kb: 2984,
            reader_max_work_us: 31_000,
            spill_write_max_us: 120,
            spill_write_us: 4_500,
            spill_waits: 2,
            spill_wait_us: 350_000,
            writer_policy: "SCHED_FIFO 1".into(),
            background_preemptions: Some(42),
            background_p50_us: Some(12.5),
            background_p90_us: Some(40.0),
            background_max_us: Some(1234.25),
        };
        let limit = Limit { quota_us: Quota::Us(120000), period_us: 100000, burst_us: 5000 };
        let mut host = Host { nr_cpus: 4, hz: 250, profile: Profile::for_release("6.18.44").unwrap(), cgroup: "app".into(), limit, weight: 100, cpus: Some("0-1".into()) };
        let tasks = [("web-12", 0), ("web-13", 2_500_999)];
        let text = scenario_toml(&spec, &host, &tasks, "c.phases.gz", Some(Met { per_s: 3.25, us: 17.0, lengths_us: vec![] }));
        assert_eq!(
            text,
            "# Captured by `throttlelab capture` (see [capture]); each thread's phases are in the side file.\nname = \"capture-app\"\nduration_s = 60.000186\n\n[machine]\ncpus = 4\nhz = 250\nbackground_per_s = 3.25\nbackground_us = 17.0\nbackground_p50_us = 12.5\n\n[kernel]\nprofile = \"6.18\"\n\n[[cgroup]]\nname = \"app\"\nperiod_us = 100000\nquota_us = 120000\nburst_us = 5000\nweight = 100\ncpus = \"0-1\"\n\n[capture]\nsource = \"/sys/fs/cgroup/app\"\nrelease = \"6.18.44-fc\"\nduration_s = 60.000186\nthreads = 2\nusage_usec = 35873780\nnr_periods = 600\nnr_throttled = 9\nthrottled_usec = 132017\ncpu_usec = 35873313\nuntraced_switches = 3\nlost_events = 1\ntrace_events = 123456\ntrace_buffer_kb = 8192\nreader_policy = \"SCHED_FIFO 1\"\nreader_max_gap_us = 62000\nreader_peak_kb = 2984\nreader_max_work_us = 31000\nspill_write_max_us = 120\nspill_write_us = 4500\nspill_waits = 2\nspill_wait_us = 350000\nwriter_policy = \"SCHED_FIFO 1\"\nbackground_preemptions = 42\nbackground_p50_us = 12.5\nbackground_p90_us = 40.0\nbackground_max_us = 1234.25\n\n[[task]]\nname = \"web-12\"\ncgroup = \"app\"\nloop = 1\nphases_file = \"c.phases.gz\"\n\n[[task]]\nname = \"web-13\"\ncgroup = \"app\"\nloop = 1\nphases_file = \"c.phases.gz\"\nstart_us = 2500\n"
        );
        // Lengths kept: drawn from, in place of the median's log-normal.
        let met = Met { per_s: 3.25, us: 17.0, lengths_us: vec![4.5, 12.5, 1234.25] };
        let doc: throttlelab_core::write::DocumentMut = scenario_toml(&spec, &host, &tasks, "c.phases.gz", Some(met)).parse().unwrap();
        assert_eq!(doc["machine"]["background_lengths_us"].as_array().map(|a| a.iter().filter_map(|v| v.as_float()).collect::<Vec<_>>()), Some(vec![4.5, 12.5, 1234.25]));
        assert!(doc["machine"].get("background_p50_us").is_none());
        spec = CaptureSpec { duration_s: 20.0, usage_usec: None, writer_policy: String::new(), background_preemptions: None, background_p50_us: None, background_p90_us: None, background_max_us: None, ..spec };
        host.limit = Limit { quota_us: Quota::Max, period_us: 100000, burst_us: 0 };
        host.cpus = None;
        let text = scenario_toml(&spec, &host, &tasks[..1], "c.phases.gz", None);
        assert_eq!(
            text,
            "# Captured by `throttlelab capture` (see [capture]); each thread's phases are in the side file.\nname = \"capture-app\"\nduration_s = 20\n\n[machine]\ncpus = 4\nhz = 250\n\n[kernel]\nprofile = \"6.18\"\n\n[[cgroup]]\nname = \"app\"\nperiod_us = 100000\nweight = 100\n\n[capture]\nsource = \"/sys/fs/cgroup/app\"\nrelease = \"6.18.44-fc\"\nduration_s = 20\nthreads = 2\nnr_periods = 600\nnr_throttled = 9\nthrottled_usec = 132017\ncpu_usec = 35873313\nuntraced_switches = 3\nlost_events = 1\ntrace_events = 123456\ntrace_buffer_kb = 8192\nreader_policy = \"SCHED_FIFO 1\"\nreader_max_gap_us = 62000\nreader_peak_kb = 2984\nreader_max_work_us = 31000\nspill_write_max_us = 120\nspill_write_us = 4500\nspill_waits = 2\nspill_wait_us = 350000\n\n[[task]]\nname = \"web-12\"\ncgroup = \"app\"\nloop = 1\nphases_file = \"c.phases.gz\"\n"
        );
        // A name TOML's basic strings would escape is written as a literal
        // string (JSON's escapes before): the same value once parsed.
        let odd = "pids 1,2 \"a\\b\"";
        let text = scenario_toml(&CaptureSpec { source: odd.into(), ..spec }, &host, &tasks[..1], "c.phases.gz", None);
        let doc: throttlelab_core::write::DocumentMut = text.parse().unwrap();
        assert_eq!(doc["capture"]["source"].as_str(), Some(odd));
    }

    /// The phases file's text, line for line as capture has written it: a
    /// wake of a thread left out (it never ran) is left out too.
    #[test]
    fn captured_phases_are_written_as_before() {
        let a = [Phase::Run { ns: 1_500_999 }, Phase::Sleep { ns: 2_000_000, late_ns: 7 }, Phase::Wake { pid: 11 }, Phase::Wake { pid: 99 }];
        let b = [Phase::Wait, Phase::CatchUp { ns: 3_000 }, Phase::Schedule { ns: 4_000 }, Phase::Until { ns: 250_000_000 }, Phase::Run { ns: 999 }];
        let names = ["a-10".to_string(), "b-11".to_string()];
        let mut gz = Vec::new();
        let threads = [&a[..], &b[..]];
        write_phases(&mut gz, &[10, 11], &names, |k, out| {
            threads[k].iter().for_each(|&p| out(p));
            Ok(())
        }).unwrap();
        let mut text = String::new();
        flate2::read::GzDecoder::new(&gz[..]).read_to_string(&mut text).unwrap();
        assert_eq!(
            text,
            "# throttlelab phases v1\n[a-10]\nrun_us 1500\nsleep_us 2000\nwake b-11\n[b-11]\nwait\ncatchup_us 3\nschedule_us 4\nuntil_us 250000\nrun_us 0\n"
        );
    }

    #[test]
    fn reads_the_ring_buffers_stats() {
        let text = "entries: 0\noverrun: 12\ncommit overrun: 0\nbytes: 0\noldest event ts:     0.000000\ndropped events: 3\n";
        assert_eq!((stat(text, "overrun"), stat(text, "commit overrun"), stat(text, "dropped events"), stat(text, "x")), (12, 0, 3, 0));
    }

    #[test]
    fn the_reader_runs_at_sched_fifo_where_it_may() {
        let nice_not_tried = || -> std::io::Result<libc::c_int> { panic!("nice tried though SCHED_FIFO took") };
        let (policy, warning) = choose_policy(|| Ok(()), nice_not_tried, 0);
        assert_eq!((policy, warning), (ReaderPolicy::Fifo(READER_RT_PRIORITY), None));
        assert_eq!(policy.to_string(), "SCHED_FIFO 1");
    }

    #[test]
    fn the_reader_falls_back_to_nice_with_a_warning() {
        let eperm = || Err(std::io::Error::from_raw_os_error(libc::EPERM));
        let (policy, warning) = choose_policy(eperm, || Ok(READER_NICE), 0);
        assert_eq!(policy, ReaderPolicy::Nice(-10));
        assert_eq!(policy.to_string(), "nice -10");
        let warning = warning.expect("a warning");
        assert!(warning.contains("cannot run at SCHED_FIFO (Operation not permitted") && warning.contains("CAP_SYS_NICE")
            && warning.contains("reads at nice -10,"), "{warning}");
        // Nice refused too: the nice it had, and both reasons.
        let (policy, warning) = choose_policy(eperm, || Err(std::io::Error::from_raw_os_error(libc::EACCES)), 5);
        assert_eq!(policy, ReaderPolicy::Nice(5));
        let warning = warning.expect("a warning");
        assert!(warning.contains("reads at nice 5 (nice -10 refused too: Permission denied"), "{warning}");
    }

    #[test]
    fn the_reader_is_raised_and_put_back() {
        // This test's own thread: SCHED_FIFO where it may (root), nice -10 or its own nice otherwise; back after.
        let policy_before = unsafe { libc::sched_getscheduler(0) };
        let (raised, warning) = ReaderPriority::raise();
        let during = unsafe { libc::sched_getscheduler(0) } & !libc::SCHED_RESET_ON_FORK;
        match raised.policy {
            ReaderPolicy::Fifo(_) => assert_eq!((during, warning), (libc::SCHED_FIFO, None)),
            ReaderPolicy::Nice(_) => assert!(during == libc::SCHED_OTHER && warning.is_some()),
        }
        drop(raised);
        assert_eq!(unsafe { libc::sched_getscheduler(0) }, policy_before);
    }
}
