//! Python bindings for `throttlelab-core` and `throttlelab-real`: conversion and errors only.
//! Everything that decides a number lives in the core crate.

use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::path::PathBuf;
use std::sync::mpsc::{self, Receiver};
use std::sync::Mutex;
use std::thread::{self, JoinHandle};
use throttlelab_core::trace::{Sink, TraceOptions, Window};

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
    Document::new(scenario)?.validate(overrides, None)
}

/// Simulate a scenario (TOML text) with `key=value` overrides applied;
/// returns the output document as JSON. Releases the GIL while simulating.
#[pyfunction]
#[pyo3(signature = (scenario, overrides = Vec::new()))]
fn run(py: Python<'_>, scenario: &str, overrides: Vec<String>) -> PyResult<String> {
    Document::new(scenario)?.run(py, overrides, None, false, None)
}

/// A scenario's TOML text parsed once, for many runs with different overrides.
#[pyclass(frozen, module = "throttlelab._native")]
struct Document(throttlelab_core::Document);

#[pymethods]
impl Document {
    #[new]
    fn new(text: &str) -> PyResult<Self> {
        throttlelab_core::Document::parse(text).map(Document).map_err(scenario_err)
    }

    /// Like the module's `validate`; with `stop`, also that `run` can take it.
    #[pyo3(signature = (overrides = Vec::new(), stop = None))]
    fn validate(&self, overrides: Vec<String>, stop: Option<(String, f64)>) -> PyResult<String> {
        let s = self.0.load(&overrides).map_err(scenario_err)?;
        stop_of(&s, stop)?;
        Ok(serde_json::to_string(&s).expect("scenario serialises"))
    }

    /// Like the module's `run`; with `like_host` (a real run's `host` block as
    /// JSON), set up like that host, and `placed`, started and with its period
    /// timers where that kernel run had them; with `stop` (`(cgroup,
    /// max_throttled)`), stopped once that cgroup's throttled_ratio is
    /// certain to end above `max_throttled` (the output then says `stopped`).
    #[pyo3(signature = (overrides = Vec::new(), like_host = None, placed = false, stop = None))]
    fn run(
        &self, py: Python<'_>, overrides: Vec<String>, like_host: Option<&str>, placed: bool, stop: Option<(String, f64)>,
    ) -> PyResult<String> {
        let overrides = like_host_set(|o| self.0.load(o), overrides, like_host, placed)?;
        let s = self.0.load(&overrides).map_err(scenario_err)?;
        let options = throttlelab_core::SimOptions { stop: stop_of(&s, stop)?, ..Default::default() };
        let out = py.detach(|| throttlelab_core::Sim::new(&s, options).run().0);
        Ok(serde_json::to_string(&out).expect("output serialises"))
    }
}

/// A run's early stop, `(cgroup, max_throttled)`, checked against scenario `s`.
fn stop_of(s: &throttlelab_core::Scenario, stop: Option<(String, f64)>) -> PyResult<Option<throttlelab_core::stop::Stop>> {
    let stop = stop.map(|(cgroup, max_throttled)| throttlelab_core::stop::Stop { cgroup, max_throttled });
    if let Some(stop) = &stop {
        s.check_stop(stop).map_err(scenario_err)?;
    }
    Ok(stop)
}

/// `overrides`, and after them (the kernel ran with the host's, whatever they
/// say) those that set the scenario up like `like_host` (a real run's `host`
/// block as JSON; `placed`: started, with its period timers, where that kernel
/// run was), from the core's one rule, `Host::scenario_overrides`.
fn like_host_set(
    load: impl Fn(&[String]) -> Result<throttlelab_core::Scenario, throttlelab_core::ScenarioError>,
    mut overrides: Vec<String>,
    like_host: Option<&str>,
    placed: bool,
) -> PyResult<Vec<String>> {
    if let Some(host) = like_host {
        let host = read_host(host)?;
        let scenario = if placed { Some(load(&overrides).map_err(scenario_err)?) } else { None };
        overrides.extend(host.scenario_overrides(scenario.as_ref()).map_err(scenario_err)?);
    }
    Ok(overrides)
}

/// A `host` block (JSON).
fn read_host(host: &str) -> PyResult<throttlelab_core::output::Host> {
    serde_json::from_str(host).map_err(|e| ScenarioError::new_err(format!("host: {e}")))
}

/// `machine.background_lengths_us` from measured lengths (compare pools its
/// runs' probes): the core's rule.
#[pyfunction]
fn measured_background_lengths(lengths_us: Vec<f64>) -> Vec<f64> {
    throttlelab_core::scenario::measured_background_lengths(lengths_us)
}

/// The `key=value` overrides that set a scenario up like `host` (a real run's
/// `host` block, or `probe_host`'s, as JSON), unpaired: the core's one rule,
/// `Host::scenario_overrides`.
#[pyfunction]
fn like_host_overrides(host: &str) -> PyResult<Vec<String>> {
    read_host(host)?.scenario_overrides(None).map_err(scenario_err)
}

/// Probe this host as the real backend does before each run, running nothing
/// else: its kernel, and its background activity, work speed and tick
/// lateness on its first `cpus` online CPUs. Returns the `host` block as JSON
/// (root; holds the real backend's lock meanwhile). Releases the GIL.
#[pyfunction]
fn probe_host(py: Python<'_>, cpus: usize) -> PyResult<String> {
    let host = py.detach(|| throttlelab_real::probe_host(cpus)).map_err(|e| real_err(py, e))?;
    Ok(serde_json::to_string(&host).expect("the host serialises"))
}

/// The scenario (TOML text) for an rt-app workload (JSON text), named `name`.
#[pyfunction]
fn rt_app_scenario(json: &str, name: &str) -> PyResult<String> {
    throttlelab_core::rt_app::to_scenario(json, name).map_err(scenario_err)
}

/// A phases file's sections: `(name, phase lines)` each, in file order.
#[pyfunction]
fn read_phases(path: PathBuf) -> PyResult<Vec<(String, Vec<String>)>> {
    let sections = throttlelab_core::phases_file::read(&path, throttlelab_core::scenario::MAX_PHASES).map_err(PyValueError::new_err)?;
    Ok(throttlelab_core::phases_file::to_lines(&sections))
}

/// Write a phases file of `sections` (`(name, phase lines)`, in that order).
#[pyfunction]
fn write_phases(path: PathBuf, sections: Vec<(String, Vec<String>)>) -> PyResult<()> {
    use throttlelab_core::phases_file;
    let sections = phases_file::from_lines(sections).map_err(PyValueError::new_err)?;
    phases_file::write_file(&path, &sections).map_err(PyValueError::new_err)
}

/// `out`: the capture's scenario `text` with `tasks` (`(name, cgroup,
/// start_us)`) for its tasks, each replaying its section of `sections`
/// (`(name, phase lines)`), written beside `out` as its `.phases.gz`.
#[pyfunction]
fn write_replay(text: &str, tasks: Vec<(String, String, u64)>, sections: Vec<(String, Vec<String>)>, out: PathBuf) -> PyResult<()> {
    use throttlelab_core::{phases_file, write::CapturedTask};
    let sections = phases_file::from_lines(sections).map_err(PyValueError::new_err)?;
    let tasks: Vec<CapturedTask> =
        tasks.into_iter().map(|(name, cgroup, start_us)| CapturedTask { name, cgroup, start_us, phases_file: String::new() }).collect();
    phases_file::write_replay(text, &tasks, &sections, &out).map_err(PyValueError::new_err)
}

/// `capture` as if its program ran `threads` of the tasks named in
/// `workers`, written to `out` and its `.phases.gz` (the core's `phases_file::with_threads`).
#[pyfunction]
fn with_threads(capture: PathBuf, workers: Vec<String>, threads: usize, out: PathBuf) -> PyResult<()> {
    throttlelab_core::phases_file::with_threads(&capture, &workers, threads, &out).map_err(PyValueError::new_err)
}

/// A scenario's TOML text, by the core's one writer (`write::ScenarioToml`):
/// the comment line `comment`, then each key of `tables` in order, put by
/// its shape (a dict: a table `[key]`; a non-empty list of dicts: `[[key]]`;
/// else a top-level key; dicts and lists inside a table stay inline), with
/// `notes` (table name -> a comment line) above their tables.
#[pyfunction]
#[pyo3(signature = (comment, tables, notes = None))]
fn scenario_toml(comment: &str, tables: &Bound<'_, PyDict>, notes: Option<&Bound<'_, PyDict>>) -> PyResult<String> {
    use throttlelab_core::write::ScenarioToml;
    let mut s = ScenarioToml::new(comment);
    for (k, v) in tables.iter() {
        let k: String = k.extract()?;
        let v = toml_value(&v, &k)?;
        s.put(&k, v);
    }
    for (name, comment) in notes.into_iter().flatten() {
        s.note(&name.extract::<String>()?, &comment.extract::<String>()?).map_err(PyValueError::new_err)?;
    }
    Ok(s.finish())
}

/// A Python value (bool, int, float, str, list, tuple or dict with str
/// keys) as a TOML value; `key` names it in the error.
fn toml_value(v: &Bound<'_, PyAny>, key: &str) -> PyResult<throttlelab_core::write::Value> {
    use pyo3::types::{PyBool, PyFloat, PyInt, PyList, PyString, PyTuple};
    use throttlelab_core::write::{Array, InlineTable, Value};
    if let Ok(b) = v.downcast::<PyBool>() {
        return Ok(b.is_true().into());
    }
    if v.is_instance_of::<PyInt>() {
        let n: i64 = v.extract().map_err(|_| PyValueError::new_err(format!("{key}: {v} is out of TOML's integer range")))?;
        return Ok(n.into());
    }
    if let Ok(f) = v.downcast::<PyFloat>() {
        return Ok(f.value().into());
    }
    if v.is_instance_of::<PyString>() {
        return Ok(v.extract::<String>()?.into());
    }
    if let Ok(d) = v.downcast::<PyDict>() {
        let mut t = InlineTable::new();
        for (k, x) in d.iter() {
            let k: String = k.extract().map_err(|_| PyValueError::new_err(format!("{key}: a key {k} that is not a str")))?;
            let x = toml_value(&x, &format!("{key}.{k}"))?;
            t.insert(&k, x);
        }
        return Ok(Value::InlineTable(t));
    }
    if v.is_instance_of::<PyList>() || v.is_instance_of::<PyTuple>() {
        let items = v.try_iter()?.map(|x| toml_value(&x?, key)).collect::<PyResult<Array>>()?;
        return Ok(Value::Array(items));
    }
    Err(PyValueError::new_err(format!("{key}: TOML has no value for a {}", v.get_type().name()?)))
}

/// How `--set key=raw` reads `raw`, as JSON: a TOML value, or text (for a
/// text key such as `kernel.profile`, or a bare word such as `max`).
#[pyfunction]
fn override_value(key: &str, raw: &str) -> String {
    serde_json::to_string(&throttlelab_core::parse_value(key, raw)).expect("a TOML value serialises")
}

/// Records cross to Python in chunks of `trace::CHUNK_RECORDS`; this many wait
/// at most, so that the simulation pauses while Python catches up.
const CHUNKS_QUEUED: usize = 2;

/// Simulate like `run` up to `to_ns` (or the run's end) on a thread of its own,
/// tracing `[from_ns, to_ns]`; iterate over the trace in chunks, then ask for
/// the output. Scenario errors are raised here, before anything runs. With
/// `like_host` and `placed`, set up like a kernel run as `Document.run` is
/// (`throttlelab diff` pairs its traces so).
#[pyfunction]
#[pyo3(signature = (scenario, overrides = Vec::new(), from_ns = 0, to_ns = u64::MAX, like_host = None, placed = false))]
fn trace(scenario: &str, overrides: Vec<String>, from_ns: u64, to_ns: u64, like_host: Option<&str>, placed: bool) -> PyResult<TraceRun> {
    let overrides = like_host_set(|o| throttlelab_core::load(scenario, o), overrides, like_host, placed)?;
    let s = throttlelab_core::load(scenario, &overrides).map_err(scenario_err)?;
    let (tx, chunks) = mpsc::sync_channel(CHUNKS_QUEUED);
    let sink: Sink = Box::new(move |trace, now_ns| {
        // A closed channel means Python stopped listening: nothing left to tell.
        let _ = tx.send((now_ns, serde_json::to_string(trace).expect("trace serialises")));
    });
    let window = Window { from_ns, to_ns };
    let run = thread::spawn(move || {
        let (out, _) = throttlelab_core::simulate_traced_with(&s, TraceOptions { window, sink: Some(sink) });
        serde_json::to_string(&out).expect("output serialises")
    });
    Ok(TraceRun { chunks: Mutex::new(chunks), run: Some(run) })
}

/// A traced simulation in progress. Iterating yields `(now_ns, chunk)`: the
/// simulated time reached, and JSON `{"cpus", "groups", "threads", "records"}`
/// with the records since the previous chunk (possibly none). Waits without
/// the GIL.
#[pyclass]
struct TraceRun {
    chunks: Mutex<Receiver<(u64, String)>>,
    run: Option<JoinHandle<String>>,
}

#[pymethods]
impl TraceRun {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__(&mut self, py: Python<'_>) -> Option<(u64, String)> {
        let chunks = &self.chunks;
        py.detach(|| chunks.lock().expect("not poisoned").recv().ok())
    }

    /// The output document as JSON, once the run is over; chunks not read are dropped.
    fn output(&mut self, py: Python<'_>) -> PyResult<String> {
        let run = self.run.take().ok_or_else(|| PyValueError::new_err("the output was already taken"))?;
        let chunks = &self.chunks;
        py.detach(|| {
            let chunks = chunks.lock().expect("not poisoned");
            while chunks.recv().is_ok() {} // the run waits for room to send them
            run.join()
        })
        .map_err(|_| PyRuntimeError::new_err("the simulation thread panicked"))
    }
}

/// Run a scenario (TOML text) with `key=value` overrides on the host kernel, in
/// real cgroups; `worker` is the path of the worker executable
/// (`throttlelab-worker`). Returns the output document as JSON. Releases the
/// GIL while running.
#[pyfunction]
fn real(py: Python<'_>, scenario: &str, overrides: Vec<String>, worker: PathBuf) -> PyResult<String> {
    let s = throttlelab_core::load(scenario, &overrides).map_err(scenario_err)?;
    let out = py.detach(|| throttlelab_real::run(&s, &worker)).map_err(|e| real_err(py, e))?;
    Ok(serde_json::to_string(&out).expect("output serialises"))
}

/// A real run's or capture's error: `Interrupted` (with its `signal`) or `HarnessError`.
fn real_err(py: Python<'_>, e: throttlelab_real::Error) -> PyErr {
    match e {
        throttlelab_real::Error::Interrupted(sig) => {
            let err = Interrupted::new_err(e.to_string());
            err.value(py).setattr("signal", sig).map_or_else(|e| e, |()| err)
        }
        throttlelab_real::Error::Harness(m) => HarnessError::new_err(m),
    }
}

/// Capture a cgroup's threads (`cgroup`, a directory) or processes' (`pids`,
/// with their descendants' if `children`) for `duration_s` (None: until a
/// signal) from the kernel's scheduler events, in ring buffers of
/// `buffer_kb` a CPU (None: the default); writes the scenario to `out` and
/// its phases beside it. Returns the `[capture]` table as JSON, with
/// `signal`, the number of the signal that ended it early (or null).
/// `strict`: fail if the kernel lost events. Releases the GIL while capturing.
#[pyfunction]
#[pyo3(signature = (out, duration_s = None, cgroup = None, pids = Vec::new(), children = false, buffer_kb = None, strict = false))]
#[allow(clippy::too_many_arguments)]
fn capture(py: Python<'_>, out: PathBuf, duration_s: Option<f64>, cgroup: Option<PathBuf>, pids: Vec<u32>, children: bool,
           buffer_kb: Option<u64>, strict: bool) -> PyResult<String> {
    use throttlelab_real::capture::{Options, Target};
    let target = cgroup.map_or(Target::Pids(pids), Target::Cgroup);
    let duration = duration_s
        .map(|s| std::time::Duration::try_from_secs_f64(s).ok().filter(|d| !d.is_zero()))
        .map(|d| d.ok_or_else(|| ScenarioError::new_err(format!("--duration: must be a time > 0, got {}", duration_s.unwrap_or(0.0)))))
        .transpose()?;
    let options = Options { duration, buffer_kb, children, strict };
    let captured = py.detach(|| throttlelab_real::capture::capture(&target, &options, &out)).map_err(|e| real_err(py, e))?;
    let mut json = serde_json::to_value(&captured.spec).expect("the capture serialises");
    json["signal"] = captured.signal.into();
    if let Some(kept) = &captured.kept_elsewhere {
        json["kept_elsewhere"] = serde_json::json!({ "scenario": kept.scenario, "cause": kept.cause });
    }
    Ok(json.to_string())
}

/// `capture --pod-uid UID [--container ID|NAME] | --container-id ID`: the
/// container's cgroup as the kubelet lays it out (`throttlelab_real::kubelet`),
/// in the host's cgroups, `proc` standing for /proc. Returns (pod UID,
/// container id, runtime, directory, path below the cpu hierarchy's root);
/// a refusal is a `HarnessError` of one line.
#[pyfunction]
#[pyo3(signature = (pod_uid = None, container = None, container_id = None, proc = PathBuf::from("/proc")))]
fn kubelet_find(py: Python<'_>, pod_uid: Option<&str>, container: Option<&str>, container_id: Option<&str>, proc: PathBuf)
                -> PyResult<(String, String, String, PathBuf, PathBuf)> {
    use throttlelab_real::kubelet::{find, Query};
    let query = Query::new(pod_uid, container, container_id).map_err(|e| real_err(py, e))?;
    let (c, rel) = py.detach(|| find(&query, &proc)).map_err(|e| real_err(py, e))?;
    Ok((c.pod_uid, c.container_id, c.runtime, c.dir, rel))
}

/// (pod UID, container id or None) of a cgroup path of the kubelet's layout
/// (cAdvisor's `id` label), or None for any other path.
#[pyfunction]
fn kubelet_parse(path: &str) -> Option<(String, Option<String>)> {
    throttlelab_real::kubelet::parse(path)
}

/// The real backend's run lock (`throttlelab_real::RunLock`), held by an
/// acceptance or live run for as long as it measures the host: one run
/// measuring the host at a time. Taking it refuses in one line
/// (`HarnessError`) naming the pid that holds it.
#[pyclass(module = "throttlelab._native")]
struct RunLock(Option<throttlelab_real::RunLock>);

#[pymethods]
impl RunLock {
    /// Take the lock at `path` (the real backend's, `LOCK_PATH`, by default).
    #[new]
    #[pyo3(signature = (path = PathBuf::from(throttlelab_real::LOCK_PATH)))]
    fn new(py: Python<'_>, path: PathBuf) -> PyResult<Self> {
        throttlelab_real::RunLock::acquire(&path).map(|l| RunLock(Some(l))).map_err(|e| real_err(py, e))
    }

    /// Let it go (a second release does nothing).
    fn release(&mut self) {
        self.0 = None;
    }
}

/// Refuse, in one line, what `real` would refuse before it starts (not root,
/// more CPUs than the host, no cpu controller), touching nothing.
#[pyfunction]
#[pyo3(signature = (scenario, overrides = Vec::new()))]
fn real_preflight(scenario: &str, overrides: Vec<String>) -> PyResult<()> {
    let s = throttlelab_core::load(scenario, &overrides).map_err(scenario_err)?;
    throttlelab_real::preflight(&s).map_err(|e| HarnessError::new_err(e.to_string()))
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
    m.add_class::<TraceRun>()?;
    m.add_class::<Document>()?;
    m.add_function(wrap_pyfunction!(override_value, m)?)?;
    m.add_function(wrap_pyfunction!(rt_app_scenario, m)?)?;
    m.add_function(wrap_pyfunction!(scenario_toml, m)?)?;
    m.add_function(wrap_pyfunction!(read_phases, m)?)?;
    m.add_function(wrap_pyfunction!(write_replay, m)?)?;
    m.add_function(wrap_pyfunction!(write_phases, m)?)?;
    m.add_function(wrap_pyfunction!(with_threads, m)?)?;
    m.add_function(wrap_pyfunction!(real, m)?)?;
    m.add_function(wrap_pyfunction!(real_preflight, m)?)?;
    m.add_class::<RunLock>()?;
    m.add("LOCK_PATH", throttlelab_real::LOCK_PATH)?;
    m.add("TICK_LATE_NS", throttlelab_core::output::TickLateness::LATE_NS)?;
    m.add_function(wrap_pyfunction!(capture, m)?)?;
    m.add_function(wrap_pyfunction!(kubelet_find, m)?)?;
    m.add_function(wrap_pyfunction!(kubelet_parse, m)?)?;
    m.add_function(wrap_pyfunction!(probe_host, m)?)?;
    m.add_function(wrap_pyfunction!(like_host_overrides, m)?)?;
    m.add_function(wrap_pyfunction!(measured_background_lengths, m)?)?;
    m.add_function(wrap_pyfunction!(rebase_paths, m)?)?;
    m.add_function(wrap_pyfunction!(profiles, m)?)?;
    m.add_function(wrap_pyfunction!(features, m)?)?;
    m.add_function(wrap_pyfunction!(profile_for_release, m)?)?;
    m.add_function(wrap_pyfunction!(profile_has_burst, m)?)?;
    Ok(())
}
