//! `throttlelab-worker`: a worker process of a real run, started by the
//! controller (throttlelab-real's `run`) once per cgroup. It speaks the line
//! protocol of throttlelab_real::worker on stdin and stdout; no Python inside.

use std::process::ExitCode;
use throttlelab_real::{worker_main, Failure};

fn main() -> ExitCode {
    match worker_main() {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Told(_)) => ExitCode::FAILURE,
        Err(Failure::Untold(why)) => {
            eprintln!("throttlelab-worker: error: {why}");
            ExitCode::FAILURE
        }
    }
}
