//! Python bindings for `throttlelab-core` and `throttlelab-real`: conversion and errors only.
//! Everything that decides a number lives in the core crate.

use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyValueError};
use pyo3::prelude::*;
use std::path::PathBuf;

create_exception!(_native, ScenarioError, PyValueError, "A scenario file or --set override is invalid.");
create_exception!(_native, HarnessError, PyException, "The real backend refused the run or the host failed it (one line).");
create_exception!(
    _native,
    Interrupted,
    PyException,
    "SIGINT, SIGTERM, SIGHUP or SIGQUIT ended a real run (its number in `signal`); its cgroups and workers are gone."
);

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
/// real cgroups; `worker` is the path of the worker executable
/// (`throttlelab-worker`). Returns the output document as JSON. Releases the
/// GIL while running.
#[pyfunction]
fn real(py: Python<'_>, scenario: &str, overrides: Vec<String>, worker: PathBuf) -> PyResult<String> {
    let s = throttlelab_core::load(scenario, &overrides).map_err(scenario_err)?;
    let out = match py.detach(|| throttlelab_real::run(&s, &worker)) {
        Ok(out) => out,
        Err(e @ throttlelab_real::Error::Interrupted(sig)) => {
            let err = Interrupted::new_err(e.to_string());
            err.value(py).setattr("signal", sig)?;
            return Err(err);
        }
        Err(throttlelab_real::Error::Harness(m)) => return Err(HarnessError::new_err(m)),
    };
    Ok(serde_json::to_string(&out).expect("output serialises"))
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

/// The profile whose semantics kernel `release` has (`6.18.44-fc` → `6.18`).
#[pyfunction]
fn profile_for_release(release: &str) -> PyResult<&'static str> {
    throttlelab_core::Profile::for_release(release)
        .map(|p| p.as_str())
        .ok_or_else(|| PyValueError::new_err(format!("cannot read a kernel version from {release:?}")))
}

/// Whether `profile` has `cpu.max.burst`.
#[pyfunction]
fn profile_has_burst(profile: &str) -> PyResult<bool> {
    throttlelab_core::Profile::parse(profile)
        .map(|p| p.has_burst())
        .ok_or_else(|| PyValueError::new_err(format!("unknown profile {profile:?}")))
}

/// Names accepted in `kernel.features`.
#[pyfunction]
fn features() -> Vec<&'static str> {
    throttlelab_core::Feature::ALL.iter().map(|f| f.as_str()).collect()
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("ScenarioError", m.py().get_type::<ScenarioError>())?;
    m.add("HarnessError", m.py().get_type::<HarnessError>())?;
    m.add("Interrupted", m.py().get_type::<Interrupted>())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_function(wrap_pyfunction!(validate, m)?)?;
    m.add_function(wrap_pyfunction!(run, m)?)?;
    m.add_function(wrap_pyfunction!(trace, m)?)?;
    m.add_function(wrap_pyfunction!(real, m)?)?;
    m.add_function(wrap_pyfunction!(rebase_paths, m)?)?;
    m.add_function(wrap_pyfunction!(profiles, m)?)?;
    m.add_function(wrap_pyfunction!(features, m)?)?;
    m.add_function(wrap_pyfunction!(profile_for_release, m)?)?;
    m.add_function(wrap_pyfunction!(profile_has_burst, m)?)?;
    Ok(())
}
