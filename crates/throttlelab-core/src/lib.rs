//! throttlelab-core: a deterministic discrete-event simulator of Linux CFS
//! bandwidth control (`cpu.max`), and the scenario format both backends read.
//!
//! ```no_run
//! let text = std::fs::read_to_string("scenario.toml").unwrap();
//! let scenario = throttlelab_core::load(&text, &[]).unwrap();
//! let out = throttlelab_core::simulate(&scenario);
//! println!("{}", serde_json::to_string(&out).unwrap());
//! ```

mod bandwidth;
mod core;
mod cpulist;
mod deadline;
mod error;
mod event;
mod fair;
mod hard_limits;
mod like_host;
mod load;
pub mod noise;
mod phases;
pub mod phases_file;
pub mod program;
pub mod output;
mod profile;
pub mod rt_app;
pub mod scenario;
mod sim;
mod smt;
mod tick;
pub mod trace;
mod types;
mod usage_csv;
mod workload;

pub use error::ScenarioError;
pub use load::{load, parse_value, rebase_paths, Document};
pub use output::Output;
pub use phases::TaskPhases;
pub use profile::{Feature, Profile};
pub use program::{Program, Step};
pub use scenario::Scenario;
pub use sim::{Sim, SimOptions};
pub use types::Quota;

/// Simulate a validated scenario to its end.
pub fn simulate(scenario: &Scenario) -> Output {
    Sim::new(scenario, SimOptions::default()).run().0
}

/// Simulate and also record the bandwidth trace (pools, throttles, switches).
pub fn simulate_traced(scenario: &Scenario) -> (Output, trace::Trace) {
    simulate_traced_with(scenario, trace::TraceOptions::default())
}

/// Simulate up to the end of `options.window` (or of the run), recording the
/// trace of that window as `options` say (kept, or handed to a sink in chunks).
pub fn simulate_traced_with(scenario: &Scenario, options: trace::TraceOptions) -> (Output, trace::Trace) {
    let (out, trace) = Sim::new(scenario, SimOptions { trace: Some(options), ..SimOptions::default() }).run();
    (out, trace.expect("tracing was on"))
}
