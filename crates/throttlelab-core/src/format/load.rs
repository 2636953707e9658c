//! From TOML text and `--set` overrides to a validated [`Scenario`].

use crate::format::error::{line_of_offset, shown, ScenarioError};
use crate::format::phases_file::{self, Sections};
use crate::vocab::phase::Phase;
use crate::format::scenario::{Scenario, MAX_PHASES};
use crate::format::usage_csv;
use std::collections::HashMap;
use serde::Deserialize;
use std::path::Path;
use toml::de::{DeTable, DeValue};
use toml::{Table, Value};

/// Arrays of tables whose elements `--set` addresses by their `name`.
const NAMED_ARRAYS: [&str; 3] = ["cgroup", "task", "service"];

/// Parse, apply overrides (`dotted.key=value`, TOML value syntax), read
/// `trace_csv` files and validate. Relative paths are read from the working
/// directory; [`rebase_paths`] makes a scenario file's own relative to it.
pub fn load(text: &str, overrides: &[String]) -> Result<Scenario, ScenarioError> {
    Document::parse(text)?.load(overrides)
}

/// A scenario file parsed once, to be loaded many times with different
/// overrides (a sweep's grid, an advice's bisection, a comparison's seeds).
#[derive(Debug, Clone)]
pub struct Document {
    text: String,
    /// The text as a table, or why it is not one: TOML's integers stop at
    /// i64::MAX, where the scenario's own deserializer reads any u64 (and
    /// then says which key is out of range).
    table: Result<Table, ScenarioError>,
}

impl Document {
    /// Parse TOML text; a syntax error names its line.
    pub fn parse(text: &str) -> Result<Document, ScenarioError> {
        DeTable::parse(text).map_err(|e| syntax_error(text, &e))?;
        let table = toml::from_str(text).map_err(|e| syntax_error(text, &e));
        Ok(Document { text: text.to_string(), table })
    }

    /// The scenario with `overrides` applied, its `trace_csv` files read, validated.
    /// An error in the file itself names its line; one an override caused does not.
    pub fn load(&self, overrides: &[String]) -> Result<Scenario, ScenarioError> {
        let mut table = match &self.table {
            Ok(table) => table.clone(),
            Err(_) if overrides.is_empty() => return self.load_from_text(),
            Err(e) => return Err(e.clone()),
        };
        let mut seed = None;
        for o in overrides {
            match seed_override(o) {
                Some(s) => seed = Some(s?),
                None => apply_override(&mut table, o)?,
            }
        }
        if seed.is_some() {
            table.remove("seed");
        }
        // From the parsed table; on an error, again from text, whose
        // deserializer names the element.
        let mut scenario = match Scenario::deserialize(Value::Table(table.clone())) {
            Ok(scenario) => scenario,
            Err(_) if overrides.is_empty() => return self.load_from_text(),
            Err(_) => {
                let edited = toml::to_string(&table).expect("a TOML table serialises");
                return Err(ScenarioError { line: None, ..deserialize(&edited).unwrap_err() });
            }
        };
        scenario.seed = seed.unwrap_or(scenario.seed);
        if overrides.is_empty() {
            return self.checked(scenario);
        }
        read_trace_files(&mut scenario)?;
        scenario.validate()?;
        Ok(scenario)
    }

    /// The file alone, deserialized from its text, whose deserializer locates
    /// an error (the file's line, the element's name).
    fn load_from_text(&self) -> Result<Scenario, ScenarioError> {
        self.checked(deserialize(&self.text).map_err(|e| located(&self.text, e))?)
    }

    /// The file alone with its `trace_csv` files read, validated; an error names its line.
    fn checked(&self, mut scenario: Scenario) -> Result<Scenario, ScenarioError> {
        read_trace_files(&mut scenario).map_err(|e| located(&self.text, e))?;
        scenario.validate().map_err(|e| located(&self.text, e))?;
        Ok(scenario)
    }
}

/// Fill the `windows` (and a missing `class`) of tasks that name a
/// `trace_csv`, and the phases of tasks that name a `phases_file`.
fn read_trace_files(scenario: &mut Scenario) -> Result<(), ScenarioError> {
    read_phases_files(scenario)?;
    for t in &mut scenario.tasks {
        let Some(file) = &t.trace_csv else { continue };
        let key = format!("task.{}.trace_csv", t.name);
        if !t.windows.is_empty() {
            return Err(ScenarioError::new(key, "give windows or trace_csv, not both".to_string()));
        }
        let trace = usage_csv::read(Path::new(file)).map_err(|m| ScenarioError::new(key, m))?;
        t.windows = trace.windows;
        t.class = t.class.take().or(trace.class);
    }
    Ok(())
}

/// Fill `captured` of every task that names a `phases_file` with its
/// section, each file read once; a `wake` names a task of the same file. The
/// files together hold at most [`MAX_PHASES`] phases.
fn read_phases_files(scenario: &mut Scenario) -> Result<(), ScenarioError> {
    let mut files: Vec<(String, Sections)> = Vec::new();
    let mut phases = 0u64;
    let index: HashMap<String, usize> = scenario.tasks.iter().enumerate().map(|(i, t)| (t.name.clone(), i)).collect();
    for t in &scenario.tasks {
        let Some(file) = &t.phases_file else { continue };
        let key = format!("task.{}.phases_file", t.name);
        if !t.phases.is_empty() || !t.windows.is_empty() || t.trace_csv.is_some() {
            return Err(ScenarioError::new(key, "give one of phases, windows, trace_csv and phases_file".to_string()));
        }
        if !files.iter().any(|(f, _)| f == file) {
            let sections = phases_file::read(Path::new(file), MAX_PHASES - phases).map_err(|m| ScenarioError::new(key, m))?;
            phases += sections.sections.iter().map(|(_, p)| p.len() as u64).sum::<u64>();
            files.push((file.clone(), sections));
        }
    }
    for i in 0..scenario.tasks.len() {
        let t = &scenario.tasks[i];
        let Some(file) = &t.phases_file else { continue };
        let key = format!("task.{}.phases_file", t.name);
        let read = &mut files.iter_mut().find(|(f, _)| f == file).expect("read above").1;
        let Some(at) = read.sections.iter().position(|(name, _)| *name == t.name) else {
            return Err(ScenarioError::new(&key, format!("{file} has no section [{}]", t.name)));
        };
        // Each task's section is its own (task names are unique): move it out, resolve its wakes in place.
        let mut phases = std::mem::take(&mut read.sections[at].1);
        for p in &mut phases {
            if let Phase::Wake(k) = p {
                let target = &read.wake_targets[*k];
                *k = match index.get(target) {
                    Some(&j) if scenario.tasks[j].phases_file.as_ref() == Some(file) => j,
                    _ => return Err(ScenarioError::new(&key, format!("wake {}: no task of this file has that name", shown(target)))),
                };
            }
        }
        scenario.tasks[i].captured = Some(phases.into());
    }
    Ok(())
}

/// The text of a scenario file in `base_dir` with its relative `trace_csv`
/// and `phases_file` paths made absolute, so that it loads the same from any directory; the
/// rest of the text (comments, lines) is kept. Unparsable text is returned as
/// is, for [`load`] to report.
pub fn rebase_paths(text: &str, base_dir: &Path) -> String {
    let Ok(mut doc) = text.parse::<toml_edit::DocumentMut>() else { return text.to_string() };
    let Some(tasks) = doc.get_mut("task").and_then(|t| t.as_array_of_tables_mut()) else { return text.to_string() };
    for task in tasks.iter_mut() {
        for field in ["trace_csv", "phases_file"] {
            let Some(item) = task.get_mut(field) else { continue };
            let Some(path) = item.as_str().map(Path::new).filter(|p| p.is_relative()) else { continue };
            let absolute = base_dir.join(path).to_string_lossy().into_owned();
            let decor = item.as_value().expect("a string").decor().clone();
            let mut value = toml_edit::Value::from(absolute);
            *value.decor_mut() = decor;
            *item = toml_edit::Item::Value(value);
        }
    }
    doc.to_string()
}

/// `e` with the line in `text` where its key is written, when it is.
fn located(text: &str, e: ScenarioError) -> ScenarioError {
    let line = line_of_key(text, &e.key);
    e.at_line(line)
}

fn syntax_error(text: &str, e: &toml::de::Error) -> ScenarioError {
    let line = e.span().map(|s| line_of_offset(text, s.start));
    ScenarioError::new("", format!("TOML: {}", e.message().trim())).at_line(line)
}

/// Deserialize with the failing key's path attached.
fn deserialize(text: &str) -> Result<Scenario, ScenarioError> {
    let de = toml::de::Deserializer::parse(text).map_err(|e| syntax_error(text, &e))?;
    serde_path_to_error::deserialize(de).map_err(|e| {
        let key = named_path(text, &e.path().to_string());
        let inner = e.into_inner();
        let line = inner.span().map(|s| line_of_offset(text, s.start));
        ScenarioError::new(key, inner.message().trim().to_string()).at_line(line)
    })
}

/// Rewrite `cgroup[1].quota_us` as `cgroup.<name>.quota_us` where the element has a name.
fn named_path(text: &str, path: &str) -> String {
    let Ok(table) = text.parse::<Table>() else { return path.to_string() };
    for arr in NAMED_ARRAYS {
        let prefix = format!("{arr}[");
        if let Some(rest) = path.strip_prefix(&prefix) {
            if let Some((idx, tail)) = rest.split_once(']') {
                let name = idx
                    .parse::<usize>()
                    .ok()
                    .and_then(|i| table.get(arr)?.as_array()?.get(i)?.get("name")?.as_str().map(str::to_string));
                if let Some(name) = name {
                    return format!("{arr}.{name}{tail}");
                }
            }
        }
    }
    if path == "." { String::new() } else { path.to_string() }
}

/// The line where a dotted key (`cgroup.app.quota_us`, `machine.hz`) is written, if it is.
pub fn line_of_key(text: &str, key: &str) -> Option<usize> {
    let root = DeTable::parse(text).ok()?;
    let parts: Vec<&str> = key.split('.').collect();
    let (table, rest): (&DeTable, &[&str]) = match parts.as_slice() {
        [arr, name, rest @ ..] if NAMED_ARRAYS.contains(arr) => {
            let array = root.get_ref().get(*arr)?.get_ref().as_array()?;
            let elem = array.iter().find(|v| v.get_ref().get("name").and_then(|n| n.get_ref().as_str()) == Some(*name))?;
            (elem.get_ref().as_table()?, rest)
        }
        _ => (root.get_ref(), parts.as_slice()),
    };
    let mut table = table;
    let mut span = None;
    for (i, part) in rest.iter().enumerate() {
        let (k, v) = table.get_key_value(*part)?;
        span = Some(k.span().start);
        if i + 1 < rest.len() {
            match v.get_ref() {
                DeValue::Table(t) => table = t,
                _ => return None,
            }
        }
    }
    span.map(|s| line_of_offset(text, s))
}

/// `--set seed=N`, read here as any u64: TOML integers stop at i64::MAX.
/// `None` when `spec` sets another key.
fn seed_override(spec: &str) -> Option<Result<u64, ScenarioError>> {
    let (key, raw) = spec.split_once('=')?;
    (key.trim() == "seed").then(|| {
        let raw = raw.trim();
        raw.replace('_', "").parse().map_err(|_| {
            ScenarioError::new("seed", format!("must be an integer in 0..={}, got {}", u64::MAX, shown(raw)))
        })
    })
}

/// Apply one `--set dotted.key=value`.
fn apply_override(table: &mut Table, spec: &str) -> Result<(), ScenarioError> {
    let Some((key, raw)) = spec.split_once('=') else {
        return Err(ScenarioError::new("--set", format!("expected dotted.key=value, got {spec:?}")));
    };
    let key = key.trim();
    let value = parse_value(key, raw.trim());
    let parts: Vec<&str> = key.split('.').collect();
    if parts.iter().any(|p| p.is_empty()) {
        return Err(ScenarioError::new("--set", format!("bad key {key:?}")));
    }
    match parts.as_slice() {
        [arr, name, field, rest @ ..] if NAMED_ARRAYS.contains(arr) => {
            let elems = table.get_mut(*arr).and_then(Value::as_array_mut);
            let elem = elems
                .and_then(|a| a.iter_mut().find(|e| e.get("name").and_then(Value::as_str) == Some(*name)))
                .and_then(Value::as_table_mut)
                .ok_or_else(|| ScenarioError::new(format!("--set {key}"), format!("no {arr} named {name:?}")))?;
            set_path(elem, field, rest, value, key)
        }
        [arr, _] | [arr] if NAMED_ARRAYS.contains(arr) => {
            Err(ScenarioError::new(format!("--set {key}"), format!("address a field as {arr}.NAME.key")))
        }
        [first, rest @ ..] => set_path(table, first, rest, value, key),
        [] => unreachable!("split yields at least one part"),
    }
}

fn set_path(table: &mut Table, first: &str, rest: &[&str], value: Value, key: &str) -> Result<(), ScenarioError> {
    match rest.split_first() {
        None => {
            table.insert(first.to_string(), value);
            Ok(())
        }
        Some((next, tail)) => {
            let sub = table.entry(first.to_string()).or_insert_with(|| Value::Table(Table::new()));
            let sub = sub
                .as_table_mut()
                .ok_or_else(|| ScenarioError::new(format!("--set {key}"), format!("{first} is not a table")))?;
            set_path(sub, next, tail, value, key)
        }
    }
}

/// Fields of `[[cgroup]]`, `[[task]]` and `[[service]]` whose values are text.
const TEXT_FIELDS: [&str; 10] =
    ["name", "parent", "cgroup", "cpus", "class", "policy", "arrival", "on_refused", "trace_csv", "phases_file"];

/// Whether `key` holds text, so that a bare `kernel.profile=5.10` or
/// `cgroup.app.cpus=0` stays the text it reads as, not the number 5.1 or 0.
fn is_text_key(key: &str) -> bool {
    match key.split('.').collect::<Vec<_>>().as_slice() {
        ["name"] | ["kernel", "profile"] => true,
        [arr, _, field] => NAMED_ARRAYS.contains(arr) && TEXT_FIELDS.contains(field),
        _ => false,
    }
}

/// How `--set key=raw` reads `raw`: a TOML value (`5`, `"x"`, `["a"]`,
/// `true`), or text for a text key or where the value is not TOML (a bare
/// string).
pub fn parse_value(key: &str, raw: &str) -> Value {
    if is_text_key(key) && !raw.starts_with(['"', '\'', '[']) {
        return Value::String(raw.to_string());
    }
    format!("v = {raw}")
        .parse::<Table>()
        .ok()
        .and_then(|mut t| t.remove("v"))
        .unwrap_or_else(|| Value::String(raw.to_string()))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::vocab::types::Quota;

    /// A small valid scenario: one limited cgroup, one spinner.
    pub(crate) const BASE: &str = r#"
name = "t"
duration_s = 1

[machine]
cpus = 2

[[cgroup]]
name = "app"
quota_us = 20000
period_us = 10000

[[task]]
name = "spin"
cgroup = "app"
phases = [{ run_us = 1000 }]
"#;

    fn err(text: &str, overrides: &[&str]) -> ScenarioError {
        let o: Vec<String> = overrides.iter().map(|s| s.to_string()).collect();
        load(text, &o).unwrap_err()
    }

    #[test]
    fn loads_and_overrides() {
        let s = load(BASE, &["cgroup.app.quota_us=-1".into(), "kernel.profile=5.4".into(), "seed=7".into()]).unwrap();
        assert_eq!(s.cgroups[0].quota_us, Quota::Max);
        assert_eq!(s.kernel.profile.as_str(), "5.4");
        assert_eq!(s.seed, 7);
    }

    #[test]
    fn a_captures_background_is_read_and_checked() {
        let capture = "\n[capture]\nsource = \"/sys/fs/cgroup/w\"\nrelease = \"6.18.0\"\nduration_s = 1\nthreads = 1\n\
                       nr_periods = 1\nnr_throttled = 0\nthrottled_usec = 0\ncpu_usec = 1\n";
        let measured = format!("{BASE}{capture}background_preemptions = 40\nbackground_p50_us = 150.5\nbackground_p90_us = 400\nbackground_max_us = 2000\n");
        let c = load(&measured, &[]).unwrap().capture.unwrap();
        assert_eq!((c.background_preemptions, c.background_p50_us, c.background_p90_us, c.background_max_us), (Some(40), Some(150.5), Some(400.0), Some(2000.0)));
        assert_eq!(load(&format!("{BASE}{capture}"), &[]).unwrap().capture.unwrap().background_preemptions, None, "a capture from before");
        let e = err(&measured.replace("background_p90_us = 400", "background_p90_us = -3"), &[]);
        assert_eq!((e.key.as_str(), e.message.as_str()), ("capture.background_p90_us", "must be a length >= 0, got -3"));
        let e = err(&measured.replace("background_preemptions = 40", "background_preemptions = \"many\""), &[]);
        assert!(e.to_string().contains("background_preemptions"), "{e}");
    }

    #[test]
    fn quota_max_is_cpu_max_word_for_no_limit() {
        assert_eq!(load(BASE, &["cgroup.app.quota_us=max".into()]).unwrap().cgroups[0].quota_us, Quota::Max);
        assert_eq!(load(&BASE.replace("quota_us = 20000", "quota_us = \"max\""), &[]).unwrap().cgroups[0].quota_us, Quota::Max);
        // Resolved, every way of saying it reads the same: null, as cpu.max's quota is absent.
        for unlimited in ["cgroup.app.quota_us=max", "cgroup.app.quota_us=-1"] {
            let resolved = serde_json::to_value(load(BASE, &[unlimited.into()]).unwrap()).unwrap();
            assert!(resolved["cgroups"][0]["quota_us"].is_null(), "{unlimited}");
        }
        let e = err(BASE, &["cgroup.app.quota_us=min"]);
        assert_eq!(e.key, "cgroup.app.quota_us");
        assert!(e.message.contains("expected microseconds, -1 or \"max\""), "{e}");
    }

    #[test]
    fn text_keys_keep_their_text() {
        // 5.10 is not a profile, and it must not read as 5.1 either.
        let e = err(BASE, &["kernel.profile=5.10"]);
        assert_eq!(e.key, "kernel.profile");
        assert!(e.message.contains("unknown profile \"5.10\""), "{e}");
        assert_eq!(load(BASE, &["kernel.profile=5.14".into()]).unwrap().kernel.profile.as_str(), "5.14");
        let s = load(BASE, &["cgroup.app.cpus=1".into(), "machine.cpus=3".into()]).unwrap();
        assert_eq!((s.cgroups[0].cpus.as_deref(), s.machine.cpus), (Some("1"), 3));
    }

    #[test]
    fn seed_takes_any_u64() {
        assert_eq!(load(BASE, &["seed=18446744073709551615".into()]).unwrap().seed, u64::MAX);
        assert_eq!(load(BASE, &[" seed = 1_000 ".into()]).unwrap().seed, 1000);
        for bad in ["-1", "18446744073709551616", "x", "1.5"] {
            let e = err(BASE, &[format!("seed={bad}").as_str()]);
            assert_eq!(e.key, "seed");
            assert!(e.message.starts_with("must be an integer in 0..=18446744073709551615"), "{e}");
        }
        let bad_in_file = BASE.replace("duration_s = 1", "duration_s = 1\nseed = -1");
        assert_eq!(load(&bad_in_file, &["seed=3".into()]).unwrap().seed, 3, "the override replaces the file's seed");
    }

    #[test]
    fn unknown_key_names_key_and_line() {
        let text = BASE.replace("quota_us = 20000", "quota_us = 20000\nquota = 5");
        let e = err(&text, &[]);
        assert_eq!(e.key, "cgroup.app.quota");
        assert!(e.message.contains("unknown field `quota`"), "{e}");
        assert_eq!(e.line, Some(11));
    }

    #[test]
    fn range_error_has_line() {
        let e = err(&BASE.replace("quota_us = 20000", "quota_us = 500"), &[]);
        assert_eq!(e.key, "cgroup.app.quota_us");
        assert_eq!(e.line, Some(10));
        assert_eq!(e.to_string(), "cgroup.app.quota_us: must be >= 1000 (1 ms), got 500 (line 10)");
    }

    #[test]
    fn bad_overrides() {
        assert_eq!(err(BASE, &["seed"]).key, "--set");
        assert!(err(BASE, &["cgroup.nope.quota_us=1"]).message.contains("no cgroup named"));
        assert_eq!(err(BASE, &["machine.hz=200"]).key, "machine.hz");
    }

    #[test]
    fn trace_csv_is_read_relative_to_the_scenario_file() {
        let dir = std::env::temp_dir().join(format!("throttlelab-load-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("t.csv"), "start_s,end_s,cpu_rate,class\n0,1,0.5,critical\n1,2,0.25,critical\n").unwrap();
        let text = "name = \"t\"\n[[task]]\nname = \"w\"\ntrace_csv = \"t.csv\"\n";
        let rebased = rebase_paths(text, &dir);
        assert_eq!(rebased, text.replace("t.csv", &dir.join("t.csv").to_string_lossy()));
        let s = load(&rebased, &[]).unwrap();
        assert_eq!(s.tasks[0].windows, vec![[0.0, 1.0, 0.5], [1.0, 2.0, 0.25]]);
        assert_eq!(s.tasks[0].class.as_deref(), Some("critical"));
        let e = load(text, &[]).unwrap_err();
        assert_eq!((e.key.as_str(), e.line), ("task.w.trace_csv", Some(4)));
        assert!(e.message.starts_with("cannot read t.csv"), "{e}");
        let both = rebased.replace("trace_csv", "windows = [[0, 1, 1]]\ntrace_csv");
        assert!(load(&both, &[]).unwrap_err().message.contains("not both"));
        assert_eq!(rebase_paths("not = = toml", &dir), "not = = toml");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn syntax_error_has_line() {
        let e = err("name = \"x\"\nduration_s = = 1\n", &[]);
        assert_eq!(e.line, Some(2));
        assert!(e.to_string().starts_with("TOML:"));
    }
}
