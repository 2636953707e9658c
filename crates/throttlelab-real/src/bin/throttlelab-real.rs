//! `throttlelab-real SCENARIO.toml [--set KEY=VALUE]...`: `throttlelab real`
//! without Python. Loads the scenario by the core's rules (`load`), runs it in
//! real cgroups with the `throttlelab-worker` beside this executable, and
//! prints the output document as JSON. The VM backend runs it as the guest's
//! controller, where there is no Python.
//!
//! `throttlelab-real capture (--cgroup PATH | --pid PID... | --pod-uid UID
//! [--container ID|NAME] | --container-id ID) --duration S -o FILE.toml`:
//! `throttlelab capture` without Python (the same library functions: a pod's
//! container found by `throttlelab_real::kubelet`), for the guest or a node
//! without Python; prints the `[capture]` table as JSON.
//!
//! `--bw-trace FILE` also records the kernel's bandwidth events around the run
//! (`throttlelab_real::bw_trace`: tracepoints, and kprobes where the kernel
//! has them) and writes their text to FILE, for `throttlelab diff`.
//!
//! Exit codes as `throttlelab`'s: 2 bad input or a refusal, 128 + the signal's
//! number when a signal ended the run.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;
use throttlelab_real::capture::Target;
use throttlelab_real::kubelet;

const USAGE: &str = "usage: throttlelab-real SCENARIO.toml [--set KEY=VALUE]... [--bw-trace FILE] | \
                     throttlelab-real capture (--cgroup PATH | --pid PID... | --pod-uid UID [--container ID|NAME] | \
                     --container-id ID) --duration S -o FILE.toml";
const EXIT_INPUT: u8 = 2;

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1).peekable();
    let done = if args.peek().is_some_and(|a| a == "capture") {
        capture(args.skip(1))
    } else {
        real(args)
    };
    match done {
        Ok(json) => {
            println!("{json}");
            ExitCode::SUCCESS
        }
        Err((message, code)) => {
            eprintln!("throttlelab-real: error: {message}");
            ExitCode::from(code)
        }
    }
}

fn input(message: String) -> (String, u8) {
    (message, EXIT_INPUT)
}

/// A run's or capture's error and its exit code.
fn failed(e: throttlelab_real::Error) -> (String, u8) {
    match e {
        e @ throttlelab_real::Error::Interrupted(sig) => (e.to_string(), 128 + sig as u8),
        e => input(e.to_string()),
    }
}

fn real(mut args: impl Iterator<Item = String>) -> Result<String, (String, u8)> {
    let mut path = None;
    let mut overrides = Vec::new();
    let mut bw_trace = None;
    while let Some(arg) = args.next() {
        if arg == "--bw-trace" {
            bw_trace = Some(PathBuf::from(args.next().ok_or_else(|| input(format!("--bw-trace needs FILE; {USAGE}")))?));
            continue;
        }
        match arg.strip_prefix("--set") {
            Some("") => overrides.push(args.next().ok_or_else(|| input(format!("--set needs KEY=VALUE; {USAGE}")))?),
            Some(eq) if eq.starts_with('=') => overrides.push(eq[1..].to_string()),
            _ if arg.starts_with('-') || path.is_some() => return Err(input(format!("unexpected {arg:?}; {USAGE}"))),
            _ => path = Some(PathBuf::from(arg)),
        }
    }
    let path = path.ok_or_else(|| input(USAGE.to_string()))?;
    let text = std::fs::read_to_string(&path).map_err(|e| input(format!("cannot read {}: {e}", path.display())))?;
    let scenario = throttlelab_core::load(&text, &overrides).map_err(|e| input(e.to_string()))?;
    let worker = std::env::current_exe()
        .map_err(|e| input(format!("cannot find this executable: {e}")))?
        .with_file_name("throttlelab-worker");
    let out = match bw_trace {
        Some(file) => traced(&scenario, &worker, &file)?,
        None => throttlelab_real::run(&scenario, &worker).map_err(failed)?,
    };
    Ok(serde_json::to_string(&out).expect("output serialises"))
}

/// The run with the kernel's bandwidth events recorded around it, written to `file`.
fn traced(
    scenario: &throttlelab_core::Scenario,
    worker: &std::path::Path,
    file: &std::path::Path,
) -> Result<throttlelab_core::output::Output, (String, u8)> {
    use throttlelab_real::bw_trace::BwTrace;
    // Per CPU: about 100 kB a second of sched_switch, hrtimer and probe
    // events for a few threads, with room for the probe and setup.
    let buffer_kb = ((scenario.duration_s.unwrap_or(10.0) + 5.0) * 1024.0).min(65536.0) as u64;
    let name = format!("throttlelab-bw-{}", std::process::id());
    let trace = BwTrace::open(&name, buffer_kb, true).map_err(|why| input(format!("--bw-trace: {why}")))?;
    let out = throttlelab_real::run(scenario, worker).map_err(failed)?;
    let text = trace.read().map_err(|why| input(format!("--bw-trace: {why}")))?;
    std::fs::write(file, text).map_err(|e| input(format!("--bw-trace: cannot write {}: {e}", file.display())))?;
    Ok(out)
}

fn capture(mut args: impl Iterator<Item = String>) -> Result<String, (String, u8)> {
    let (mut cgroup, mut pids, mut duration, mut out) = (None, Vec::new(), None, None);
    let (mut pod_uid, mut container, mut container_id) = (None, None, None);
    while let Some(arg) = args.next() {
        let value = args.next().ok_or_else(|| input(format!("{arg} needs a value; {USAGE}")));
        match arg.as_str() {
            "--cgroup" => cgroup = Some(PathBuf::from(value?)),
            "--pid" => {
                let v = value?;
                pids.push(v.parse().ok().filter(|&p: &u32| p > 0).ok_or_else(|| input(format!("--pid: not a process id: {v:?}")))?);
            }
            "--duration" => {
                let v = value?;
                let d = v.parse().ok().and_then(|s| Duration::try_from_secs_f64(s).ok()).filter(|d| !d.is_zero());
                duration = Some(d.ok_or_else(|| input(format!("--duration: must be a number of seconds > 0, got {v:?}")))?);
            }
            "-o" | "--out" => out = Some(PathBuf::from(value?)),
            "--pod-uid" => pod_uid = Some(value?),
            "--container" => container = Some(value?),
            "--container-id" => container_id = Some(value?),
            _ => return Err(input(format!("unexpected {arg:?}; {USAGE}"))),
        }
    }
    let kubernetes = pod_uid.is_some() || container.is_some() || container_id.is_some();
    let target = match (cgroup, pids.is_empty(), kubernetes) {
        (Some(dir), true, false) => Target::Cgroup(dir),
        (None, false, false) => Target::Pids(pids),
        (None, true, true) => {
            let query = kubelet::Query::new(pod_uid.as_deref(), container.as_deref(), container_id.as_deref()).map_err(failed)?;
            Target::Cgroup(kubelet::find(&query, std::path::Path::new("/proc")).map_err(failed)?.1)
        }
        _ => return Err(input(format!("give --cgroup PATH, --pid PID or --pod-uid UID / --container-id ID (one of them); {USAGE}"))),
    };
    let (Some(duration), Some(out)) = (duration, out) else {
        return Err(input(format!("capture needs --duration and -o; {USAGE}")));
    };
    let options = throttlelab_real::capture::Options { duration: Some(duration), ..Default::default() };
    let captured = throttlelab_real::capture::capture(&target, &options, &out).map_err(failed)?;
    Ok(serde_json::to_string(&captured.spec).expect("the capture serialises"))
}
