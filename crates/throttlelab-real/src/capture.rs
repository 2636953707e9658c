//! `throttlelab capture`: record what a cgroup's (or some processes') threads
//! do, from the kernel's scheduler events in a tracefs instance of our own,
//! and write it as a scenario the simulator runs as it is: the machine and
//! the cgroup as found, each thread's phases in a gzip side file
//! (`phases_file`, see the core's `phases_file`), and the cgroup's `cpu.stat`
//! deltas over the capture in `[capture]`, to hold the replay against.

use crate::cgroupfs::{Found, Layout, Version};
use crate::error::{Error, Result};
use crate::sched_trace::{Phase, Recorder, Thread, END_MARK, START_MARK};
use crate::timer_trace::Instance;
use crate::{cgroup_root, host, signals};
use std::fmt::Write as _;
use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use throttlelab_core::phases_file::HEADER;
use throttlelab_core::scenario::{parse_cpu_list, CaptureSpec};
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

/// Per-CPU trace buffer for each second captured (tracefs's `buffer_size_kb`),
/// within bounds. The events are the whole host's: `set_event_pid` would
/// follow forks, but on 6.18 it drops some switches to a traced thread from
/// one that is not (seen: a tokio worker's switch back to a throttled spinner),
/// and a missed switch-in loses a burst. A busy host switches some 10^4
/// times a second, about 1 MiB of buffer; `sched_stat_runtime` adds half as
/// many events again (4 s of tests/test_capture.py's workload on the 6.18
/// host: 15269 lines without it, 22735 with it).
const BUFFER_KB_PER_S: u64 = 1024;
const BUFFER_KB_MAX: u64 = 131_072;

/// The scheduler events read, by tracefs's directory; `sched_waking` (4.5+)
/// is when a wake-up is asked for, `sched_wakeup` the fallback.
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

/// Capture `target` for `duration`; write the scenario to `out` and the
/// phases beside it (`<stem>.phases.gz`). Returns the `[capture]` table.
/// Both files are created before the capture starts (with the scenario's
/// directory, if missing), so that an output that cannot be written is
/// refused before a minute of capturing rather than after; they are removed
/// again if the capture fails.
pub fn capture(target: &Target, duration: Duration, out: &Path) -> Result<CaptureSpec> {
    // SAFETY: geteuid cannot fail.
    host::check_root(unsafe { libc::geteuid() })?;
    let phases_path = out.with_extension("phases.gz");
    if let Some(dir) = out.parent().filter(|d| !d.as_os_str().is_empty()) {
        fs::create_dir_all(dir).map_err(|e| Error::io("create", dir, e))?;
    }
    let scenario_file = fs::File::create(out).map_err(|e| Error::io("create", out, e))?;
    let phases_file = fs::File::create(&phases_path).map_err(|e| Error::io("create", &phases_path, e))?;
    let captured = record(target, duration, out, scenario_file, &phases_path, phases_file);
    if captured.is_err() {
        let _ = fs::remove_file(out);
        let _ = fs::remove_file(&phases_path);
    }
    captured
}

/// `capture` once its output files are open.
fn record(target: &Target, duration: Duration, out: &Path, mut scenario_file: fs::File, phases_path: &Path,
          phases_file: fs::File) -> Result<CaptureSpec> {
    let signals = signals::Guard::install()?;
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
            let threads = pids.iter().map(|&p| threads_of(p)).collect::<Result<Vec<_>>>()?.concat();
            (group, threads, format!("pids {}", pids.iter().map(u32::to_string).collect::<Vec<_>>().join(",")))
        }
    };
    if threads.is_empty() {
        return Err(Error::harness(format!("{source}: no threads to capture")));
    }
    let named: Vec<(u32, String)> = threads.iter().map(|&t| (t, comm_of(t))).collect();
    let trace = Instance::open(&format!("throttlelab-capture-{}", std::process::id())).map_err(Error::harness)?;
    let buffer_kb = (duration.as_secs().max(1) * BUFFER_KB_PER_S).min(BUFFER_KB_MAX);
    trace.write("buffer_size_kb", &buffer_kb.to_string()).map_err(Error::harness)?;
    // One clock for every CPU: with the default per-CPU `local` clock a
    // thread's switch in on one CPU can sort before its switch out on the
    // other, and its burst is lost.
    trace.write("trace_clock", "mono").map_err(Error::harness)?;
    for event in EVENTS {
        let fallback = event.replace("waking", "wakeup");
        trace
            .write(&format!("events/{event}/enable"), "1")
            .or_else(|_| trace.write(&format!("events/{fallback}/enable"), "1"))
            .map_err(Error::harness)?;
    }
    for (event, filter) in OPTIONAL_EVENTS {
        if filter.is_empty() || trace.write(&format!("events/{event}/filter"), filter).is_ok() {
            let _ = trace.write(&format!("events/{event}/enable"), "1");
        }
    }
    let before = group.stats()?;
    trace.write("trace_marker", START_MARK).map_err(Error::harness)?;
    let end = Instant::now() + duration;
    while let Some(left) = end.checked_duration_since(Instant::now()).filter(|d| !d.is_zero()) {
        std::thread::sleep(left.min(Duration::from_millis(100)));
        signals.check()?;
    }
    trace.write("trace_marker", END_MARK).map_err(Error::harness)?;
    let after = group.stats()?;
    trace.write("tracing_on", "0").map_err(Error::harness)?;
    let (captured, window_ns) = read_trace(&trace.dir.join("trace"), &named)?;
    let limit = group.limit()?;
    let stats = after.since(&before, limit);
    let release = host::release()?;
    let spec = CaptureSpec {
        source,
        release: release.clone(),
        duration_s: window_ns as f64 / 1e9,
        threads: captured.len() as u64,
        usage_usec: group.has_usage().then_some(stats.usage_usec),
        nr_periods: stats.nr_periods,
        nr_throttled: stats.nr_throttled,
        throttled_usec: stats.throttled_usec,
        cpu_usec: captured.iter().map(|t| t.cpu_ns).sum::<u64>() / 1_000,
        untraced_switches: captured.iter().map(|t| t.untraced_switches).sum(),
    };
    let untraced = spec.untraced_switches;
    if untraced > 0 {
        eprintln!(
            "throttlelab: warning: the kernel left {untraced} switches to captured threads out of the trace, \
             with no runtime events to measure them: their bursts are missing (captured {} ms of CPU against cpu.stat's {} ms)",
            spec.cpu_usec / 1_000,
            spec.usage_usec.map_or("?".to_string(), |u| (u / 1_000).to_string())
        );
    }
    let names = task_names(&captured);
    write_phases(phases_path, phases_file, &captured, &names)?;
    let file_name = phases_path.file_name().expect("a file name").to_string_lossy();
    let text = scenario_text(&spec, &group, &captured, &names, &file_name)?;
    scenario_file.write_all(text.as_bytes()).map_err(|e| Error::io("write", out, e))?;
    Ok(spec)
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

/// Read a stopped instance's `trace` into each thread's phases; Err if the
/// buffer lost events (the header says so) or a line does not read.
fn read_trace(path: &Path, threads: &[(u32, String)]) -> Result<(Vec<Thread>, u64)> {
    let file = fs::File::open(path).map_err(|e| Error::io("read", path, e))?;
    let mut recorder = Recorder::new(threads);
    for line in BufReader::new(file).lines() {
        let line = line.map_err(|e| Error::io("read", path, e))?;
        if let Some((kept, written)) = entries(&line).filter(|(kept, written)| kept < written) {
            return Err(Error::harness(format!(
                "the trace buffer kept {kept} of {written} events: capture for less time, or fewer threads"
            )));
        }
        if let Some(event) = crate::sched_trace::parse_line(&line) {
            recorder.event(&event.map_err(Error::harness)?);
        }
    }
    let (captured, window_ns) = recorder.finish().map_err(Error::harness)?;
    Ok((captured.into_iter().filter(|t| t.phases.iter().any(|p| matches!(p, Phase::Run { .. }))).collect(), window_ns))
}

/// `# entries-in-buffer/entries-written: 120/140   #P:2`: (kept, written).
fn entries(line: &str) -> Option<(u64, u64)> {
    let rest = line.strip_prefix("# entries-in-buffer/entries-written: ")?;
    let (kept, written) = rest.split_whitespace().next()?.split_once('/')?;
    Some((kept.parse().ok()?, written.parse().ok()?))
}

/// Each thread's task name: its comm in the characters names allow, and its pid.
fn task_names(threads: &[Thread]) -> Vec<String> {
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

fn write_phases(path: &Path, file: fs::File, threads: &[Thread], names: &[String]) -> Result<()> {
    let name_of = |pid: u32| threads.iter().position(|t| t.pid == pid).map(|i| names[i].as_str());
    let mut text = format!("{HEADER}\n");
    for (t, name) in threads.iter().zip(names) {
        let _ = writeln!(text, "[{name}]");
        for p in &t.phases {
            let _ = match p {
                Phase::Run { ns } => writeln!(text, "run_us {}", ns / 1_000),
                Phase::Sleep { ns, .. } => writeln!(text, "sleep_us {}", ns / 1_000),
                Phase::CatchUp { ns } => writeln!(text, "catchup_us {}", ns / 1_000),
                Phase::Schedule { ns } => writeln!(text, "schedule_us {}", ns / 1_000),
                Phase::Until { ns } => writeln!(text, "until_us {}", ns / 1_000),
                Phase::Wait => writeln!(text, "wait"),
                // A thread that never ran was left out, and so are wakes of it.
                Phase::Wake { pid } => name_of(*pid).map_or(Ok(()), |target| writeln!(text, "wake {target}")),
            };
        }
    }
    let mut gz = flate2::write::GzEncoder::new(file, flate2::Compression::default());
    gz.write_all(text.as_bytes()).and_then(|_| gz.finish().map(drop)).map_err(|e| Error::io("write", path, e))
}

/// The scenario of a capture: the machine, the kernel and the cgroup as found.
fn scenario_text(spec: &CaptureSpec, group: &Found, threads: &[Thread], names: &[String], phases_file: &str) -> Result<String> {
    let quoted = |s: &str| serde_json::to_string(s).expect("a string serialises");
    let cpus = host::online_cpus()?;
    let nr_cpus = cpus.iter().max().map_or(1, |c| c + 1);
    let hz = host::config_hz(&spec.release).unwrap_or_else(|| {
        eprintln!("throttlelab: warning: CONFIG_HZ not found (no /boot/config-{} or /proc/config.gz): machine.hz = 250", spec.release);
        250
    });
    let profile = Profile::for_release(&spec.release).unwrap_or_default();
    let limit = group.limit()?;
    let cgroup: String = group
        .dir()
        .file_name()
        .map(|n| n.to_string_lossy().chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '_' }).take(64).collect())
        .filter(|n: &String| !n.is_empty())
        .unwrap_or_else(|| "captured".to_string());
    let mut t = format!(
        "# Captured by `throttlelab capture` (see [capture]); each thread's phases are in the side file.\n\
         name = {}\nduration_s = {}\n\n[machine]\ncpus = {nr_cpus}\nhz = {hz}\n\n[kernel]\nprofile = \"{}\"\n\n",
        quoted(&format!("capture-{cgroup}")),
        spec.duration_s,
        profile.as_str()
    );
    let _ = write!(t, "[[cgroup]]\nname = \"{cgroup}\"\nperiod_us = {}\n", limit.period_us);
    if let Quota::Us(q) = limit.quota_us {
        let _ = writeln!(t, "quota_us = {q}");
    }
    if limit.burst_us > 0 {
        let _ = writeln!(t, "burst_us = {}", limit.burst_us);
    }
    let _ = writeln!(t, "weight = {}", group.weight()?);
    let group_cpus = group.cpus()?.filter(|list| parse_cpu_list(list).is_ok_and(|c| c != (0..nr_cpus).collect::<Vec<_>>()));
    if let Some(list) = group_cpus {
        let _ = writeln!(t, "cpus = {}", quoted(&list));
    }
    let _ = write!(t, "\n[capture]\nsource = {}\nrelease = {}\nduration_s = {}\nthreads = {}\n", quoted(&spec.source), quoted(&spec.release), spec.duration_s, spec.threads);
    if let Some(usage) = spec.usage_usec {
        let _ = writeln!(t, "usage_usec = {usage}");
    }
    let _ = write!(
        t,
        "nr_periods = {}\nnr_throttled = {}\nthrottled_usec = {}\ncpu_usec = {}\nuntraced_switches = {}\n",
        spec.nr_periods,
        spec.nr_throttled,
        spec.throttled_usec,
        spec.cpu_usec,
        spec.untraced_switches
    );
    for (thread, name) in threads.iter().zip(names) {
        let _ = write!(t, "\n[[task]]\nname = \"{name}\"\ncgroup = \"{cgroup}\"\nloop = 1\nphases_file = {}\n", quoted(phases_file));
        if thread.start_ns > 0 {
            let _ = writeln!(t, "start_us = {}", thread.start_ns / 1_000);
        }
    }
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_trace_header_counts() {
        assert_eq!(entries("# entries-in-buffer/entries-written: 120/140   #P:2"), Some((120, 140)));
        assert_eq!(entries("# tracer: nop"), None);
    }
}
