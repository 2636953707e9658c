//! `throttlelab-real SCENARIO.toml [--set KEY=VALUE]...`: `throttlelab real`
//! without Python. Loads the scenario by the core's rules (`load`), runs it in
//! real cgroups with the `throttlelab-worker` beside this executable, and
//! prints the output document as JSON. The VM backend runs it as the guest's
//! controller, where there is no Python.
//!
//! Exit codes as `throttlelab`'s: 2 bad input or a refusal, 128 + the signal's
//! number when a signal ended the run.

use std::path::PathBuf;
use std::process::ExitCode;

const USAGE: &str = "usage: throttlelab-real SCENARIO.toml [--set KEY=VALUE]...";
const EXIT_INPUT: u8 = 2;

fn main() -> ExitCode {
    match real(std::env::args().skip(1)) {
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

fn real(mut args: impl Iterator<Item = String>) -> Result<String, (String, u8)> {
    let input = |m: String| (m, EXIT_INPUT);
    let mut path = None;
    let mut overrides = Vec::new();
    while let Some(arg) = args.next() {
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
    match throttlelab_real::run(&scenario, &worker) {
        Ok(out) => Ok(serde_json::to_string(&out).expect("output serialises")),
        Err(e @ throttlelab_real::Error::Interrupted(sig)) => Err((e.to_string(), 128 + sig as u8)),
        Err(e) => Err(input(e.to_string())),
    }
}
