//! Python bindings for `throttlelab-core` and `throttlelab-real`: conversion and errors only.
//! Everything that decides a number lives in the core crate.

use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyValueError};
use pyo3::prelude::*;
use std::path::PathBuf;

create_exception!(_native, ScenarioError, PyValueError, "A scenario file or --set override is invalid.");
create_exception!(_native, HarnessError, PyException, "The real backend refused the run or the host failed it (one line).");
create_exception!(_native, Interrupted, PyException, "SIGINT or SIGTERM ended a real run; its cgroups and workers are gone.");

fn scenario_err(e: throttlelab_core::ScenarioError) -> PyErr {
    ScenarioError::new_err(e.to_string())
}

/// Parse and validate a scenario (TOML text) with `key=value` overrides applied;
/// returns the resolved scenario as JSON.
#[pyfunction]
#[pyo3(signature = (scenario, overrides = Vec::new()))]
fn validate(scenario: &str, overrides: Vec<String>) -> PyResult<String> {
    let s = throttlelab_core::load(scenario, &overrides).map_err(scenario_err)?;
    Ok(serde_json::to_string(&s).expect("scenario serialises"))
}

/// Simulate a scenario (TOML text) with `key=value` overrides applied;
/// returns the output document as JSON. Releases the GIL while simulating.
#[pyfunction]
#[pyo3(signature = (scenario, overrides = Vec::new()))]
fn run(py: Python<'_>, scenario: &str, overrides: Vec<String>) -> PyResult<String> {
    let s = throttlelab_core::load(scenario, &overrides).map_err(scenario_err)?;
    let out = py.detach(|| throttlelab_core::simulate(&s));
    Ok(serde_json::to_string(&out).expect("output serialises"))
}

/// Simulate like `run`, also recording the trace; returns JSON
/// `{"output": <output document>, "trace": {"cpus", "groups", "threads", "records"}}`.
#[pyfunction]
#[pyo3(signature = (scenario, overrides = Vec::new()))]
fn trace(py: Python<'_>, scenario: &str, overrides: Vec<String>) -> PyResult<String> {
    let s = throttlelab_core::load(scenario, &overrides).map_err(scenario_err)?;
    let (output, trace) = py.detach(|| throttlelab_core::simulate_traced(&s));
    Ok(serde_json::json!({ "output": output, "trace": trace }).to_string())
}

/// Run a scenario (TOML text) with `key=value` overrides on the host kernel, in
/// real cgroups; `python_executable` runs the workers. Returns the output
/// document as JSON. Releases the GIL while running.
#[pyfunction]
fn real(py: Python<'_>, scenario: &str, overrides: Vec<String>, python_executable: PathBuf) -> PyResult<String> {
    let s = throttlelab_core::load(scenario, &overrides).map_err(scenario_err)?;
    let out = py.detach(|| throttlelab_real::run(&s, &python_executable)).map_err(|e| match e {
        throttlelab_real::Error::Interrupted(_) => Interrupted::new_err(e.to_string()),
        throttlelab_real::Error::Harness(m) => HarnessError::new_err(m),
    })?;
    Ok(serde_json::to_string(&out).expect("output serialises"))
}

/// The main of a real run's worker process (`python -m throttlelab._worker`).
#[pyfunction]
fn worker_main(py: Python<'_>) -> PyResult<()> {
    py.detach(throttlelab_real::worker_main).map_err(HarnessError::new_err)
}

/// A scenario file's text with its relative `trace_csv` paths made absolute
/// against `base_dir`, the file's directory.
#[pyfunction]
fn rebase_paths(scenario: &str, base_dir: PathBuf) -> String {
    throttlelab_core::rebase_paths(scenario, &base_dir)
}

/// Kernel profiles the simulator models.
#[pyfunction]
fn profiles() -> Vec<&'static str> {
    throttlelab_core::Profile::ALL.iter().map(|p| p.as_str()).collect()
}

/// Names accepted in `kernel.features`.
#[pyfunction]
fn features() -> Vec<&'static str> {
    throttlelab_core::Feature::ALL.iter().map(|f| f.as_str()).collect()
}

/// A panic reaches Python as a `PanicException`, whose message the CLI
/// prints in one line; Rust's own report of it (several lines) only with
/// `RUST_BACKTRACE` set.
fn quiet_panics() {
    let report = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if std::env::var_os("RUST_BACKTRACE").is_some() {
            report(info);
        }
    }));
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    quiet_panics();
    m.add("ScenarioError", m.py().get_type::<ScenarioError>())?;
    m.add("PanicException", m.py().get_type::<pyo3::panic::PanicException>())?;
    m.add("HarnessError", m.py().get_type::<HarnessError>())?;
    m.add("Interrupted", m.py().get_type::<Interrupted>())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_function(wrap_pyfunction!(validate, m)?)?;
    m.add_function(wrap_pyfunction!(run, m)?)?;
    m.add_function(wrap_pyfunction!(trace, m)?)?;
    m.add_function(wrap_pyfunction!(real, m)?)?;
    m.add_function(wrap_pyfunction!(worker_main, m)?)?;
    m.add_function(wrap_pyfunction!(rebase_paths, m)?)?;
    m.add_function(wrap_pyfunction!(profiles, m)?)?;
    m.add_function(wrap_pyfunction!(features, m)?)?;
    Ok(())
}
