//! Scenario TOML as throttlelab writes it. Every writer of a scenario
//! (`throttlelab capture`, the rt-app import, the acceptance driver's replays
//! through the bindings) builds its tables here, on toml_edit, so that
//! quoting, number forms and layout (a blank line before each table) are
//! decided once. Python's writers (`throttlelab.synth`, the Prometheus
//! models' templates, the fidelity scripts) reach it through the bindings'
//! `scenario_toml`, which hands [`ScenarioToml::put`] one value per key.

use toml_edit::ArrayOfTables;
/// The tables and values a writer fills.
pub use toml_edit::{value, Array, DocumentMut, InlineTable, Item, Table, Value};

/// A scenario's text being built: an opening comment, then its keys and
/// tables in the order they are set.
pub struct ScenarioToml {
    comment: String,
    doc: DocumentMut,
}

impl ScenarioToml {
    /// A scenario whose text opens with the comment line `comment` (without `# `).
    pub fn new(comment: &str) -> ScenarioToml {
        ScenarioToml { comment: format!("# {comment}\n"), doc: DocumentMut::new() }
    }

    /// Set a top-level key (before any table).
    pub fn set(&mut self, key: &str, v: impl Into<Item>) {
        self.doc[key] = v.into();
    }

    /// Table `[name]`, created at its first use.
    pub fn table(&mut self, name: &str) -> &mut Table {
        if !self.doc.contains_key(name) {
            self.doc[name] = Item::Table(Table::new());
        }
        self.doc[name].as_table_mut().expect("a table")
    }

    /// Append `table` to the array of tables `[[array]]` (`cgroup`, `task`).
    pub fn push(&mut self, array: &str, table: Table) {
        push(&mut self.doc, array, table);
    }

    /// Set top-level `key` to `v` by its shape: an inline table becomes
    /// table `[key]`, a non-empty array of inline tables the array of tables
    /// `[[key]]` (`cgroup`, `task`), anything else a top-level key. Values
    /// inside a table stay inline (a task's `phases`, a trace's `windows`).
    pub fn put(&mut self, key: &str, v: Value) {
        match v {
            Value::InlineTable(t) => {
                let table = self.table(key);
                for (k, x) in t.iter() {
                    table[k] = Item::Value(plain(x.clone()));
                }
            }
            Value::Array(a) if !a.is_empty() && a.iter().all(Value::is_inline_table) => {
                for t in a.iter() {
                    let mut table = Table::new();
                    for (k, x) in t.as_inline_table().expect("an inline table").iter() {
                        table[k] = Item::Value(plain(x.clone()));
                    }
                    self.push(key, table);
                }
            }
            v => self.set(key, plain(v)),
        }
    }

    /// Put the comment line `comment` (without `# `) above table `[name]`,
    /// or above the first table of `[[name]]`, after the blank line every
    /// table has.
    pub fn note(&mut self, name: &str, comment: &str) -> Result<(), String> {
        let table = match self.doc.get_mut(name) {
            Some(Item::Table(t)) => Some(t),
            Some(Item::ArrayOfTables(a)) => a.get_mut(0),
            _ => None,
        };
        let table = table.ok_or_else(|| format!("{name}: no table to note"))?;
        table.decor_mut().set_prefix(format!("\n# {comment}\n"));
        Ok(())
    }

    /// The scenario's text.
    pub fn finish(self) -> String {
        self.comment + &self.doc.to_string()
    }
}

fn push(doc: &mut DocumentMut, array: &str, table: Table) {
    if !doc.contains_key(array) {
        doc[array] = Item::ArrayOfTables(ArrayOfTables::new());
    }
    doc[array].as_array_of_tables_mut().expect("an array of tables").push(table);
}

/// `v` with its decor reset, so that it is laid out as if set alone.
fn plain(mut v: Value) -> Value {
    v.decor_mut().clear();
    v
}

/// A length of time in seconds: an integer where it is whole (`60`, not
/// `60.0`), as captures have always written it.
pub fn seconds(s: f64) -> Item {
    if s.fract() == 0.0 && s.abs() < 9.007_199_254_740_992e15 {
        value(s as i64)
    } else {
        value(s)
    }
}

/// A captured thread's `[[task]]`: one thread of cgroup `cgroup` replaying
/// its section `name` of `phases_file` once, from `start_us` (0: the start).
pub fn captured_task(name: &str, cgroup: &str, phases_file: &str, start_us: u64) -> Table {
    let mut t = Table::new();
    t["name"] = value(name);
    t["cgroup"] = value(cgroup);
    t["loop"] = value(1);
    t["phases_file"] = value(phases_file);
    if start_us > 0 {
        t["start_us"] = value(start_us as i64);
    }
    t
}

/// A captured thread's `[[task]]` as a scenario holds it (see [`captured_task`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CapturedTask {
    pub name: String,
    pub cgroup: String,
    pub start_us: u64,
    pub phases_file: String,
}

/// `scenario` (a capture's TOML) with `tasks` for its `[[task]]` tables; the
/// rest of the text is kept as it is.
pub fn with_captured_tasks(scenario: &str, tasks: &[CapturedTask]) -> Result<String, String> {
    let mut doc: DocumentMut = scenario.parse().map_err(|e: toml_edit::TomlError| e.message().trim().to_string())?;
    doc.remove("task");
    for t in tasks {
        push(&mut doc, "task", captured_task(&t.name, &t.cgroup, &t.phases_file, t.start_us));
    }
    Ok(doc.to_string())
}

/// The `[[task]]` tables of a capture's TOML.
pub fn captured_tasks(scenario: &str) -> Result<Vec<CapturedTask>, String> {
    let doc: DocumentMut = scenario.parse().map_err(|e: toml_edit::TomlError| e.message().trim().to_string())?;
    let Some(tasks) = doc.get("task").and_then(Item::as_array_of_tables) else { return Ok(Vec::new()) };
    let text = |t: &Table, k: &str| t.get(k).and_then(Item::as_str).map(str::to_string).ok_or_else(|| format!("task.{k}: expected a string"));
    tasks
        .iter()
        .map(|t| {
            let start_us = match t.get("start_us") {
                None => 0,
                Some(v) => v.as_integer().and_then(|n| u64::try_from(n).ok()).ok_or("task.start_us: expected an integer >= 0")?,
            };
            Ok(CapturedTask { name: text(t, "name")?, cgroup: text(t, "cgroup")?, start_us, phases_file: text(t, "phases_file")? })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The layout every writer gets: the comment, top-level keys, then each
    /// table after a blank line, in the order set.
    #[test]
    fn tables_follow_the_keys_in_order_each_after_a_blank_line() {
        let mut s = ScenarioToml::new("made here");
        s.set("name", value("x"));
        s.set("duration_s", seconds(60.0));
        s.table("machine")["cpus"] = value(2);
        let mut c = Table::new();
        c["name"] = value("g");
        s.push("cgroup", c);
        s.table("capture")["duration_s"] = seconds(60.000186);
        s.push("task", captured_task("w-1", "g", "x.phases.gz", 5));
        s.push("task", captured_task("w-2", "g", "x.phases.gz", 0));
        assert_eq!(
            s.finish(),
            "# made here\nname = \"x\"\nduration_s = 60\n\n[machine]\ncpus = 2\n\n[[cgroup]]\nname = \"g\"\n\n[capture]\nduration_s = 60.000186\n\n\
             [[task]]\nname = \"w-1\"\ncgroup = \"g\"\nloop = 1\nphases_file = \"x.phases.gz\"\nstart_us = 5\n\n\
             [[task]]\nname = \"w-2\"\ncgroup = \"g\"\nloop = 1\nphases_file = \"x.phases.gz\"\n"
        );
    }

    /// Values put by shape: tables, arrays of tables and inline values laid
    /// out as `set`, `table` and `push` lay them out, with notes above tables.
    #[test]
    fn values_are_put_by_their_shape() {
        let inline = |pairs: &[(&str, Value)]| {
            let mut t = InlineTable::new();
            for (k, v) in pairs {
                t.insert(*k, v.clone());
            }
            Value::InlineTable(t)
        };
        let mut s = ScenarioToml::new("made here");
        s.put("name", "x".into());
        s.put("machine", inline(&[("cpus", Value::from(2)), ("load", Value::from(0.5))]));
        let phases: Array = [inline(&[("run_us", Value::from(6000))]), inline(&[("sleep_us", Value::from(4000))])].into_iter().collect();
        let windows: Array = [Value::Array([Value::from(0), Value::from(300), Value::from(0.1862)].into_iter().collect())].into_iter().collect();
        let task = |name: &str| inline(&[("name", name.into()), ("phases", Value::Array(phases.clone())), ("windows", Value::Array(windows.clone()))]);
        s.put("task", Value::Array([task("a"), task("b")].into_iter().collect()));
        s.put("features", Value::Array(Array::new()));
        s.note("machine", "two CPUs").unwrap();
        s.note("task", "the threads").unwrap();
        assert_eq!(s.note("name", "x").unwrap_err(), "name: no table to note");
        assert_eq!(
            s.finish(),
            "# made here\nname = \"x\"\nfeatures = []\n\n# two CPUs\n[machine]\ncpus = 2\nload = 0.5\n\n# the threads\n\
             [[task]]\nname = \"a\"\nphases = [{ run_us = 6000 }, { sleep_us = 4000 }]\nwindows = [[0, 300, 0.1862]]\n\n\
             [[task]]\nname = \"b\"\nphases = [{ run_us = 6000 }, { sleep_us = 4000 }]\nwindows = [[0, 300, 0.1862]]\n"
        );
    }

    /// A capture's tasks replaced: the text before them kept byte for byte
    /// (comments too), the new ones written as capture writes them.
    #[test]
    fn captured_tasks_are_replaced_and_the_rest_kept() {
        let head = "# a capture\nname = \"c\"\n\n[machine]\ncpus = 2 # two\n\n[capture]\nthreads = 2\n";
        let text = format!("{head}\n[[task]]\nname = \"a-1\"\ncgroup = \"g\"\nloop = 1\nphases_file = \"c.phases.gz\"\nstart_us = 7\n");
        let task = |name: &str, start_us, file: &str| CapturedTask { name: name.into(), cgroup: "g".into(), start_us, phases_file: file.into() };
        assert_eq!(captured_tasks(&text).unwrap(), vec![task("a-1", 7, "c.phases.gz")]);
        let tasks = [task("a-1", 7, "r.phases.gz"), task("a-1-copy1", 0, "r.phases.gz")];
        let out = with_captured_tasks(&text, &tasks).unwrap();
        let tail = "\n[[task]]\nname = \"a-1\"\ncgroup = \"g\"\nloop = 1\nphases_file = \"r.phases.gz\"\nstart_us = 7\n\n\
                    [[task]]\nname = \"a-1-copy1\"\ncgroup = \"g\"\nloop = 1\nphases_file = \"r.phases.gz\"\n";
        assert_eq!(out, format!("{head}{tail}"));
        assert!(with_captured_tasks("name = ", &tasks).is_err());
        assert_eq!(captured_tasks("[[task]]\nname = 3\n").unwrap_err(), "task.name: expected a string");
        assert_eq!(captured_tasks("[[task]]\nname = \"a\"\ncgroup = \"g\"\nphases_file = \"f\"\nstart_us = -1\n").unwrap_err(), "task.start_us: expected an integer >= 0");
    }
}
