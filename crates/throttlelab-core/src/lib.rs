//! throttlelab-core: a deterministic discrete-event simulator of Linux CFS
//! bandwidth control (`cpu.max`), and the scenario format both backends read.
//!
//! ```no_run
//! let text = std::fs::read_to_string("scenario.toml").unwrap();
//! let scenario = throttlelab_core::load(&text, &[]).unwrap();
//! let out = throttlelab_core::simulate(&scenario);
//! println!("{}", serde_json::to_string(&out).unwrap());
//! ```

// Three layers, each importing only those above it (tests/layers.rs).
mod vocab;
mod format;
mod engine;

pub use format::{phases_file, program, rt_app, scenario, write};
pub use vocab::{dl, noise, output, plan, stop, trace};

pub use format::error::ScenarioError;
pub use format::load::{load, parse_value, rebase_paths, Document};
pub use vocab::phase::TaskPhases;
pub use format::program::{Program, Step};
pub use format::scenario::Scenario;
pub use engine::sim::{Sim, SimOptions};
pub use vocab::output::Output;
pub use vocab::profile::{Feature, Profile};
pub use vocab::types::Quota;

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
