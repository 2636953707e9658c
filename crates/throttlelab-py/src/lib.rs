//! Python bindings for `throttlelab-core`: conversion and errors only.
//! Everything that decides a number lives in the core crate.

use pyo3::create_exception;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

create_exception!(_native, ScenarioError, PyValueError, "A scenario file or --set override is invalid.");

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

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("ScenarioError", m.py().get_type::<ScenarioError>())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_function(wrap_pyfunction!(validate, m)?)?;
    m.add_function(wrap_pyfunction!(run, m)?)?;
    m.add_function(wrap_pyfunction!(profiles, m)?)?;
    m.add_function(wrap_pyfunction!(features, m)?)?;
    Ok(())
}
