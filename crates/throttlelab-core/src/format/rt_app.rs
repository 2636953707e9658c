//! rt-app workloads (its JSON: `global`, `tasks`, their `phases` and events)
//! as scenarios: what rt-app's threads ask of the scheduler, in this format.
//!
//! Modelled: `instance`, `delay`, `loop`, `phases`, `cpus`, `policy`
//! (SCHED_OTHER, SCHED_DEADLINE with `dl-runtime`, `dl-period`,
//! `dl-deadline`), `taskgroup` (a cgroup, unlimited until `--set` limits it)
//! and the events `run`, `runtime`, `sleep` and `timer`, matched by prefix as
//! rt-app does (`run0`, `sleep1`). Events that wait on other threads (`lock`,
//! `wait`, `barrier`, ...) and other policies are refused, each in one line.
//! `global` keys that steer rt-app's calibration, logs and traces are read
//! and left: they change nothing a thread asks of the scheduler.

use crate::format::error::ScenarioError;
use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use std::fmt;
use crate::format::write::ScenarioToml;
use toml_edit::{value, Array, ArrayOfTables, InlineTable, Table, Value};

/// Phases a task may expand to (each rt-app phase's events, `loop` times).
const MAX_PHASES: usize = 100_000;

/// JSON as rt-app reads it: objects keep their keys' order, which is the
/// order of a phase's events.
#[derive(Debug, Clone, PartialEq)]
enum Json {
    Null,
    Bool(bool),
    Number(serde_json::Number),
    String(String),
    Array(Vec<Json>),
    Object(Vec<(String, Json)>),
}

impl<'de> Deserialize<'de> for Json {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Json, D::Error> {
        struct JsonVisitor;
        impl<'de> Visitor<'de> for JsonVisitor {
            type Value = Json;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("JSON")
            }
            fn visit_unit<E>(self) -> Result<Json, E> {
                Ok(Json::Null)
            }
            fn visit_bool<E>(self, b: bool) -> Result<Json, E> {
                Ok(Json::Bool(b))
            }
            fn visit_i64<E>(self, n: i64) -> Result<Json, E> {
                Ok(Json::Number(n.into()))
            }
            fn visit_u64<E>(self, n: u64) -> Result<Json, E> {
                Ok(Json::Number(n.into()))
            }
            fn visit_f64<E>(self, n: f64) -> Result<Json, E> {
                Ok(serde_json::Number::from_f64(n).map_or(Json::Null, Json::Number))
            }
            fn visit_str<E>(self, s: &str) -> Result<Json, E> {
                Ok(Json::String(s.to_string()))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Json, A::Error> {
                let mut items = Vec::new();
                while let Some(item) = seq.next_element()? {
                    items.push(item);
                }
                Ok(Json::Array(items))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Json, A::Error> {
                let mut entries = Vec::new();
                while let Some(entry) = map.next_entry()? {
                    entries.push(entry);
                }
                Ok(Json::Object(entries))
            }
        }
        d.deserialize_any(JsonVisitor)
    }
}

impl Json {
    fn kind(&self) -> &'static str {
        match self {
            Json::Null => "null",
            Json::Bool(_) => "a boolean",
            Json::Number(_) => "a number",
            Json::String(_) => "a string",
            Json::Array(_) => "an array",
            Json::Object(_) => "an object",
        }
    }
}

/// A value at `key` (a dotted path in the JSON, for errors).
struct At<'a> {
    key: String,
    value: &'a Json,
}

impl<'a> At<'a> {
    fn err(&self, message: impl Into<String>) -> ScenarioError {
        ScenarioError::new(self.key.clone(), message)
    }

    fn int(&self) -> Result<i64, ScenarioError> {
        match self.value {
            Json::Number(n) => n.as_i64().ok_or_else(|| self.err(format!("must be an integer, got {n}"))),
            other => Err(self.err(format!("must be an integer, got {}", other.kind()))),
        }
    }

    /// A count of microseconds (>= 0).
    fn us(&self) -> Result<u64, ScenarioError> {
        let n = self.int()?;
        u64::try_from(n).map_err(|_| self.err(format!("must be >= 0, got {n}")))
    }

    fn str(&self) -> Result<&'a str, ScenarioError> {
        match self.value {
            Json::String(s) => Ok(s),
            other => Err(self.err(format!("must be a string, got {}", other.kind()))),
        }
    }

    fn entries(&self) -> Result<impl Iterator<Item = (&'a str, At<'a>)> + '_, ScenarioError> {
        let Json::Object(entries) = self.value else {
            return Err(self.err(format!("must be an object, got {}", self.value.kind())));
        };
        let prefix = if self.key.is_empty() { String::new() } else { format!("{}.", self.key) };
        Ok(entries.iter().map(move |(k, v)| (k.as_str(), At { key: format!("{prefix}{k}"), value: v })))
    }
}

/// The scenario (TOML text) for rt-app workload `json`, named `name`.
pub fn to_scenario(json: &str, name: &str) -> Result<String, ScenarioError> {
    let root: Json = serde_json::from_str(json).map_err(|e| {
        ScenarioError::new("", format!("rt-app JSON: {e}")).at_line(Some(e.line()))
    })?;
    let root = At { key: String::new(), value: &root };
    let mut global = None;
    let mut tasks = None;
    for (key, value) in root.entries()? {
        match key {
            "global" => global = Some(value),
            "tasks" => tasks = Some(value),
            // Kept by rt-app for old files; it creates resources as events name them.
            "resources" => {}
            _ => return Err(value.err("unknown rt-app key (expected global, tasks, resources)")),
        }
    }
    let global = match global {
        Some(g) => Global::read(&g)?,
        None => Global::default(),
    };
    let tasks = tasks.ok_or_else(|| ScenarioError::new("tasks", "rt-app JSON needs a tasks object"))?;
    let mut scenario = ScenarioToml::new(&format!("{name}: an rt-app workload (its tasks' taskgroups are unlimited cgroups until --set limits them)"));
    scenario.set("name", value(name));
    let mut cgroups = ArrayOfTables::new();
    let mut task_tables = Vec::new();
    let mut forever = false;
    let mut highest_cpu = None;
    for (task_name, task) in tasks.entries()? {
        let t = Task::read(task_name, &task, &global)?;
        forever |= t.loops < 0 && t.threads > 0;
        highest_cpu = highest_cpu.max(t.cpus.iter().copied().max());
        if let Some(path) = &t.taskgroup {
            add_taskgroup(&mut cgroups, path, &task)?;
        }
        task_tables.push(t.into_table());
    }
    match global.duration_s {
        Some(s) => scenario.set("duration_s", value(s)),
        None if forever => {
            return Err(ScenarioError::new("global.duration", "a task loops forever: give the run's length in seconds"))
        }
        None => {}
    }
    if let Some(cpu) = highest_cpu {
        let mut machine = InlineTable::new();
        machine.insert("cpus", (cpu + 1).into());
        scenario.set("machine", value(machine));
    }
    for c in cgroups {
        scenario.push("cgroup", c);
    }
    for t in task_tables {
        scenario.push("task", t);
    }
    Ok(scenario.finish())
}

/// What `global` says that matters here.
#[derive(Default)]
struct Global {
    duration_s: Option<i64>,
    default_policy: Option<String>,
}

impl Global {
    /// Keys that steer rt-app itself (calibration, memory, logs, traces).
    const RT_APP_ONLY: [&'static str; 11] = [
        "calibration",
        "pi_enabled",
        "lock_pages",
        "logdir",
        "log_basename",
        "log_size",
        "ftrace",
        "gnuplot",
        "io_device",
        "mem_buffer_size",
        "cumulative_slack",
    ];

    fn read(global: &At) -> Result<Global, ScenarioError> {
        let mut g = Global::default();
        for (key, value) in global.entries()? {
            match key {
                "duration" => match value.int()? {
                    -1 => {}
                    s if s > 0 => g.duration_s = Some(s),
                    s => return Err(value.err(format!("must be seconds > 0, or -1 (until the tasks end), got {s}"))),
                },
                "default_policy" => g.default_policy = Some(value.str()?.to_string()),
                k if Self::RT_APP_ONLY.contains(&k) => {}
                _ => return Err(value.err("unknown rt-app global key")),
            }
        }
        Ok(g)
    }
}

/// One rt-app task (thread object) as a `[[task]]`.
struct Task {
    name: String,
    threads: i64,
    start_us: u64,
    loops: i64,
    phases: Vec<InlineTable>,
    cpus: Vec<i64>,
    taskgroup: Option<String>,
    /// SCHED_DEADLINE's runtime, period and deadline in us.
    deadline: Option<(u64, u64, u64)>,
}

/// Keys of a thread object that are not events.
const TASK_KEYS: [&str; 14] = [
    "instance", "delay", "loop", "phases", "cpus", "policy", "priority", "dl-runtime", "dl-period", "dl-deadline",
    "taskgroup", "util_min", "util_max", "hold_ns",
];

/// Events that wait on or wake other threads, or do I/O: not modelled.
const OTHER_EVENTS: [&str; 13] =
    ["lock", "unlock", "wait", "signal", "broad", "sync", "suspend", "resume", "mem", "iorun", "yield", "barrier", "fork"];

impl Task {
    fn read(name: &str, task: &At, global: &Global) -> Result<Task, ScenarioError> {
        let mut t = Task {
            name: name.to_string(),
            threads: 1,
            start_us: 0,
            loops: -1,
            phases: Vec::new(),
            cpus: Vec::new(),
            taskgroup: None,
            deadline: None,
        };
        let mut policy = global.default_policy.clone().unwrap_or_else(|| "SCHED_OTHER".into());
        let (mut dl_runtime, mut dl_period, mut dl_deadline) = (None, None, None);
        let mut phases = None;
        let mut own_loop = None;
        let has_phases = task.entries()?.any(|(key, _)| key == "phases");
        for (key, value) in task.entries()? {
            match key {
                "instance" => t.threads = value.int()?.max(0),
                "delay" => t.start_us = value.us()?,
                "loop" => own_loop = Some(loop_count(&value)?),
                "phases" => phases = Some(value),
                "cpus" => t.cpus = cpu_list(&value)?,
                "policy" => policy = value.str()?.to_string(),
                "priority" => no_priority(&value)?,
                "dl-runtime" => dl_runtime = Some(value.us()?),
                "dl-period" => dl_period = Some(value.us()?),
                "dl-deadline" => dl_deadline = Some(value.us()?),
                "taskgroup" => t.taskgroup = Some(value.str()?.to_string()).filter(|g| !g.is_empty()),
                // Utilization clamping steers frequency and placement, not CFS bandwidth.
                "util_min" | "util_max" | "hold_ns" => {}
                _ if has_phases => return Err(value.err("an event beside phases: put it in a phase")),
                _ => {}
            }
        }
        match phases {
            Some(phases) => {
                for (_, phase) in phases.entries()? {
                    let mut events = Vec::new();
                    let mut count = 1;
                    for (key, value) in phase.entries()? {
                        match key {
                            "loop" => count = loop_count(&value)?,
                            "cpus" | "policy" | "priority" | "taskgroup" | "dl-runtime" | "dl-period" | "dl-deadline" => {
                                return Err(value.err("set per task, not per phase (a thread keeps its affinity, policy and group here)"))
                            }
                            "util_min" | "util_max" | "hold_ns" => {}
                            _ => events.push(event(key, &value)?),
                        }
                    }
                    if count < 1 {
                        return Err(phase.err(format!("loop must be >= 1 in a phase, got {count}")));
                    }
                    for _ in 0..count {
                        t.phases.extend(events.iter().cloned());
                        if t.phases.len() > MAX_PHASES {
                            return Err(phase.err(format!("expands to more than {MAX_PHASES} events (its events times its loop)")));
                        }
                    }
                }
                t.loops = own_loop.unwrap_or(-1);
            }
            None => {
                for (key, value) in task.entries()? {
                    if !TASK_KEYS.contains(&key) {
                        t.phases.push(event(key, &value)?);
                    }
                }
                // A task's own `loop` without phases counts its events' rounds.
                t.loops = own_loop.unwrap_or(-1);
            }
        }
        if t.phases.is_empty() {
            return Err(task.err("has no run, runtime, sleep or timer event"));
        }
        match policy.as_str() {
            "SCHED_OTHER" => {}
            "SCHED_DEADLINE" => {
                let runtime = dl_runtime.ok_or_else(|| task.err("SCHED_DEADLINE needs dl-runtime"))?;
                let period = dl_period.unwrap_or(runtime);
                t.deadline = Some((runtime, period, dl_deadline.unwrap_or(period)));
            }
            other => {
                let key = format!("{}.policy", task.key);
                return Err(ScenarioError::new(key, format!("{other} is not modelled (SCHED_OTHER or SCHED_DEADLINE)")));
            }
        }
        Ok(t)
    }

    fn into_table(self) -> Table {
        let mut t = Table::new();
        t["name"] = value(self.name);
        if let Some(path) = &self.taskgroup {
            t["cgroup"] = value(group_name(path));
        }
        t["threads"] = value(self.threads);
        if !self.cpus.is_empty() {
            let cpus: Vec<String> = self.cpus.iter().map(i64::to_string).collect();
            t["cpus"] = value(cpus.join(","));
        }
        t["loop"] = value(self.loops);
        if self.start_us > 0 {
            t["start_us"] = value(self.start_us as i64);
        }
        if let Some((runtime, period, deadline)) = self.deadline {
            t["policy"] = value("deadline");
            t["runtime_us"] = value(runtime as i64);
            t["period_us"] = value(period as i64);
            t["deadline_us"] = value(deadline as i64);
        }
        // One phase per line.
        let mut phases: Array = self.phases.into_iter().map(Value::InlineTable).collect();
        for phase in phases.iter_mut() {
            phase.decor_mut().set_prefix("\n    ");
        }
        phases.set_trailing(",\n");
        t["phases"] = value(phases);
        t
    }
}

/// The phase for an event key (`run`, `runtime`, `sleep`, `timer`, with any
/// suffix).
fn event(key: &str, at: &At) -> Result<InlineTable, ScenarioError> {
    let mut phase = InlineTable::new();
    // "runtime" before "run": rt-app matches prefixes too, and "runtime" starts with "run".
    if key.starts_with("runtime") {
        phase.insert("runtime_us", us_value(at)?);
    } else if key.starts_with("run") {
        phase.insert("run_us", us_value(at)?);
    } else if key.starts_with("sleep") {
        phase.insert("sleep_us", us_value(at)?);
    } else if key.starts_with("timer") {
        phase.insert("timer", Value::InlineTable(timer(at)?));
    } else if let Some(other) = OTHER_EVENTS.iter().find(|e| key.starts_with(*e)) {
        return Err(at.err(format!("rt-app's {other} event is not modelled (run, runtime, sleep and timer are)")));
    } else {
        return Err(at.err("unknown rt-app key"));
    }
    Ok(phase)
}

fn us_value(at: &At) -> Result<Value, ScenarioError> {
    Ok(Value::from(at.us()? as i64))
}

/// `{ "ref": name, "period": us, "mode": "relative" | "absolute" }`.
fn timer(at: &At) -> Result<InlineTable, ScenarioError> {
    let mut timer = InlineTable::new();
    for (key, v) in at.entries()? {
        match key {
            "ref" => {
                timer.insert("ref", v.str()?.into());
            }
            "period" => {
                timer.insert("period_us", us_value(&v)?);
            }
            "mode" => match v.str()? {
                mode @ ("relative" | "absolute") => {
                    timer.insert("mode", mode.into());
                }
                other => return Err(v.err(format!("must be relative or absolute, got {other:?}"))),
            },
            _ => return Err(v.err("unknown rt-app timer key (expected ref, period, mode)")),
        }
    }
    if !timer.contains_key("period_us") {
        return Err(at.err("a timer needs its period"));
    }
    Ok(timer)
}

fn loop_count(value: &At) -> Result<i64, ScenarioError> {
    match value.int()? {
        n if n == -1 || n >= 0 => Ok(n),
        n => Err(value.err(format!("must be -1 (forever) or >= 0, got {n}"))),
    }
}

fn cpu_list(value: &At) -> Result<Vec<i64>, ScenarioError> {
    let Json::Array(items) = value.value else {
        return Err(value.err(format!("must be an array of CPU numbers, got {}", value.value.kind())));
    };
    items
        .iter()
        .enumerate()
        .map(|(i, item)| {
            let at = At { key: format!("{}[{i}]", value.key), value: item };
            at.us().map(|cpu| cpu as i64)
        })
        .collect()
}

/// A SCHED_OTHER thread's priority is its nice value: the threads here are
/// all nice 0.
fn no_priority(value: &At) -> Result<(), ScenarioError> {
    match value.int()? {
        0 => Ok(()),
        n => Err(value.err(format!("nice {n} is not modelled (threads run at nice 0)"))),
    }
}

/// The cgroup named by a taskgroup path: its last component.
fn group_name(path: &str) -> &str {
    path.trim_end_matches('/').rsplit('/').next().unwrap_or(path)
}

/// Add the cgroups of taskgroup `path` (`/a/b`: `a`, then `b` under it),
/// each once, unlimited; refuse two paths that end in the same name.
fn add_taskgroup(cgroups: &mut ArrayOfTables, path: &str, task: &At) -> Result<(), ScenarioError> {
    let mut parent: Option<&str> = None;
    for part in path.split('/').filter(|p| !p.is_empty()) {
        let existing = cgroups.iter().find(|c| c.get("name").and_then(|n| n.as_str()) == Some(part));
        match existing {
            Some(c) if c.get("parent").and_then(|p| p.as_str()) != parent => {
                let msg = format!("taskgroup {path:?}: another taskgroup path also ends in {part:?}; give them different names");
                return Err(ScenarioError::new(format!("{}.taskgroup", task.key), msg));
            }
            Some(_) => {}
            None => {
                let mut c = Table::new();
                c["name"] = value(part);
                if let Some(p) = parent {
                    c["parent"] = value(p);
                }
                cgroups.push(c);
            }
        }
        parent = Some(part);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vocab::types::Quota;

    fn load(json: &str) -> crate::Scenario {
        crate::load(&to_scenario(json, "w").unwrap(), &[]).unwrap()
    }

    fn err(json: &str) -> String {
        to_scenario(json, "w").unwrap_err().to_string()
    }

    #[test]
    fn events_keep_their_order_and_phases_their_loops() {
        let s = load(
            r#"{"global": {"duration": 2, "calibration": "CPU0", "logdir": "./"},
                "tasks": {"t": {"instance": 3, "delay": 500, "cpus": [0, 2], "taskgroup": "/app",
                  "phases": {"p1": {"loop": 2, "sleep0": 100, "run": 200},
                             "p2": {"runtime": 300, "timer": {"ref": "unique", "period": 1000}}}}}}"#,
        );
        assert_eq!((s.duration_s, s.machine.cpus), (Some(2.0), 3));
        let t = &s.tasks[0];
        assert_eq!((t.threads, t.start_us, t.loops, t.cpus.as_deref(), t.cgroup.as_deref()), (3, 500, -1, Some("0,2"), Some("app")));
        let timers = t.timer_names();
        let phases: Vec<_> = t.phases.iter().map(|p| p.phase(&timers).unwrap()).collect();
        use crate::vocab::phase::{Phase::*, TimerMode};
        assert_eq!(
            phases,
            [
                Sleep(100_000),
                Run(200_000),
                Sleep(100_000),
                Run(200_000),
                Runtime(300_000),
                RtTimer { period: 1_000_000, timer: 0, mode: TimerMode::Relative }
            ]
        );
        assert_eq!(s.cgroups[0].name, "app");
        assert_eq!(s.cgroups[0].quota_us, Quota::Max, "unlimited until --set limits it");
    }

    #[test]
    fn a_task_without_phases_loops_over_its_events() {
        let s = load(r#"{"tasks": {"a": {"loop": 5, "run": 10, "sleep": 10}}}"#);
        assert_eq!((s.tasks[0].loops, s.tasks[0].phases.len(), s.duration_s), (5, 2, None));
        assert_eq!(s.tasks[0].cgroup, None, "no taskgroup: the root");
    }

    #[test]
    fn taskgroup_paths_nest() {
        let s = load(r#"{"global": {"duration": 1}, "tasks": {"a": {"taskgroup": "/x/y", "run": 10}, "b": {"taskgroup": "/x", "run": 10}}}"#);
        let groups: Vec<_> = s.cgroups.iter().map(|c| (c.name.as_str(), c.parent.as_deref())).collect();
        assert_eq!(groups, [("x", None), ("y", Some("x"))]);
        assert!(err(r#"{"global": {"duration": 1}, "tasks": {"a": {"taskgroup": "/x/y", "run": 1}, "b": {"taskgroup": "/z/y", "run": 1}}}"#)
            .starts_with("tasks.b.taskgroup: taskgroup \"/z/y\": another taskgroup path also ends in \"y\""));
    }

    #[test]
    fn deadline_tasks_take_their_parameters() {
        let s = load(r#"{"global": {"duration": 1}, "tasks": {"d": {"policy": "SCHED_DEADLINE", "dl-runtime": 2000, "dl-period": 10000, "run": 1000, "timer": {"period": 10000}}}}"#);
        assert_eq!(s.tasks[0].dl_params_ns(), Some((2_000_000, 10_000_000, 10_000_000)));
    }

    #[test]
    fn what_is_not_modelled_is_refused_in_one_line() {
        for (json, message) in [
            (r#"{"tasks": {"a": {"run": 1}}, "extra": 1}"#, "extra: unknown rt-app key (expected global, tasks, resources)"),
            (r#"{"tasks": {"a": {"run": 1, "foo": 2}}}"#, "tasks.a.foo: unknown rt-app key"),
            (r#"{"tasks": {"a": {"run": 1, "lock": "m"}}}"#, "tasks.a.lock: rt-app's lock event is not modelled"),
            (r#"{"tasks": {"a": {"run": 1, "policy": "SCHED_FIFO"}}}"#, "tasks.a.policy: SCHED_FIFO is not modelled"),
            (r#"{"tasks": {"a": {"run": 1, "priority": -5}}}"#, "tasks.a.priority: nice -5 is not modelled"),
            (r#"{"tasks": {"a": {"run": 1}}}"#, "global.duration: a task loops forever"),
            (r#"{"tasks": {"a": {"run": "x"}}}"#, "tasks.a.run: must be an integer, got a string"),
            (r#"{"tasks": {"a": {"timer": {"ref": "t"}}}}"#, "tasks.a.timer: a timer needs its period"),
            (r#"{"tasks": {"a": {"phases": {"p": {"run": 1, "cpus": [0]}}}}}"#, "tasks.a.phases.p.cpus: set per task, not per phase"),
            (r#"{"tasks": {"a": {"loop": 1}}}"#, "tasks.a: has no run, runtime, sleep or timer event"),
            (r#"{"tasks": {"a": {"run": 1, "phases": {"p": {"run": 1}}}}}"#, "tasks.a.run: an event beside phases"),
            ("{\"tasks\": {\n\"a\": }", "rt-app JSON: expected value at line 2"),
        ] {
            let e = err(json);
            assert!(e.starts_with(message), "{e:?} should start with {message:?}");
            assert!(!e.contains('\n'), "{e:?}");
        }
    }
}
