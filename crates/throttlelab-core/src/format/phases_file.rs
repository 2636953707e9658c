//! Captured threads' phases from a side file (`phases_file`), as `throttlelab
//! capture` writes it: gzip-compressed text, one section per thread, headed
//! `[name]` (the task's name), one phase a line. Kept out of the TOML because
//! a minute of a busy workload is millions of phases.
//!
//! ```text
//! # throttlelab phases v1
//! [web-1234]
//! run_us 1500          CPU burst: work at nominal speed
//! sleep_us 2000        timed sleep: keeps its length
//! catchup_us 2000      timed sleep, less how late the last catchup_us ended
//! schedule_us 2000     as catchup_us, and what no sleep made up carries on
//! until_us 250000      woken from outside the workload: at this time of the run
//! wake web-1235        wakes a sibling thread (without blocking)
//! wait                 sleeps until a sibling wakes it
//! ```

use crate::format::error::shown;
use crate::vocab::phase::Phase;
use crate::format::scenario::{MAX_PHASES, MAX_TIME_NS};
use crate::format::usage_csv::open_regular;
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;

/// The first line of a phases file.
pub const HEADER: &str = "# throttlelab phases v1";

/// A phase as the file gives it: a wake names its target thread.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FilePhase {
    Phase(Phase),
    Wake(String),
}

/// Every section of a phases file, by thread name, in file order. A wake is
/// kept as `Phase::Wake(k)`, `k` an index into `wake_targets` (the name of the
/// thread it wakes) until the loader resolves it to a task: one phase is one
/// [`Phase`] (24 bytes), however the file names threads.
#[derive(Debug, Default)]
pub struct Sections {
    pub sections: Vec<(String, Vec<Phase>)>,
    pub wake_targets: Vec<String>,
}

impl Sections {
    /// Section `i`'s phases with each wake's target by name (for tests and tools).
    pub fn file_phases(&self, i: usize) -> Vec<FilePhase> {
        let phase = |p: &Phase| match p {
            Phase::Wake(k) => FilePhase::Wake(self.wake_targets[*k].clone()),
            p => FilePhase::Phase(*p),
        };
        self.sections[i].1.iter().map(phase).collect()
    }
}

/// The most text a phases file may decompress to (a minute of 64 busy
/// threads is a few tens of MB).
const MAX_TEXT_BYTES: u64 = 1 << 30;

/// Read a gzip-compressed phases file of at most `max_phases` phases (what
/// is left of [`MAX_PHASES`] after the run's other files); an error names the
/// file and the line, and a file with more phases is refused as soon as it
/// passes the limit, before it takes more memory.
pub fn read(path: &Path, max_phases: u64) -> Result<Sections, String> {
    let file = open_regular(path)?;
    let mut text = BufReader::new(flate2::read::GzDecoder::new(file)).take(MAX_TEXT_BYTES);
    let sections = parse(&mut text, max_phases).map_err(|e| format!("{}: {e}", path.display()))?;
    if text.limit() == 0 {
        return Err(format!("{}: decompresses to more than {} MiB", path.display(), MAX_TEXT_BYTES >> 20));
    }
    Ok(sections)
}

/// Parse the (decompressed) text of a phases file of at most `max_phases` phases.
pub fn parse(mut text: impl BufRead, max_phases: u64) -> Result<Sections, String> {
    let mut file = Sections::default();
    let mut seen = HashMap::new();
    let mut targets: HashMap<String, usize> = HashMap::new();
    let mut phases = 0u64;
    let mut buf = Vec::new();
    for n in 1.. {
        buf.clear();
        match text.read_until(b'\n', &mut buf) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) => return Err(format!("line {n}: {e}")),
        }
        let line = std::str::from_utf8(&buf).map_err(|_| format!("line {n}: stream did not contain valid UTF-8"))?;
        let line = line.strip_suffix('\n').map(|l| l.strip_suffix('\r').unwrap_or(l)).unwrap_or(line);
        if n == 1 && line != HEADER {
            return Err(format!("line 1: expected {HEADER:?}, got {} (not a phases file)", shown(line)));
        }
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let at = |m: String| format!("line {n}: {m}");
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            if seen.insert(name.to_string(), n).is_some() {
                return Err(at(format!("thread {name} has a second section")));
            }
            file.sections.push((name.to_string(), Vec::new()));
            continue;
        }
        let Some((name, section)) = file.sections.last_mut() else {
            return Err(at("a phase before the first [thread] section".to_string()));
        };
        phases += 1;
        if phases > max_phases {
            let others = MAX_PHASES - max_phases.min(MAX_PHASES);
            let others = if others > 0 { format!(", with the {others} of the run's other phases files") } else { String::new() };
            return Err(at(format!(
                "section [{name}] passes the {MAX_PHASES} phases a run may hold ({} bytes each{others}); capture a shorter span",
                std::mem::size_of::<Phase>()
            )));
        }
        let phase = match parse_phase(line).map_err(at)? {
            FilePhase::Phase(p) => p,
            FilePhase::Wake(target) => {
                let k = match targets.get(&target) {
                    Some(&k) => k,
                    None => {
                        file.wake_targets.push(target.clone());
                        targets.insert(target, file.wake_targets.len() - 1);
                        file.wake_targets.len() - 1
                    }
                };
                Phase::Wake(k)
            }
        };
        section.push(phase);
    }
    if file.sections.is_empty() {
        return Err("no [thread] section".to_string());
    }
    Ok(file)
}

fn parse_phase(line: &str) -> Result<FilePhase, String> {
    let mut words = line.split_whitespace();
    let (kind, arg) = (words.next().unwrap_or(""), words.next());
    if words.next().is_some() {
        return Err(format!("one phase a line, got {}", shown(line)));
    }
    let us = || -> Result<u64, String> {
        let v: u64 = arg.and_then(|a| a.parse().ok()).ok_or_else(|| format!("{kind}: expected microseconds, got {:?}", arg.unwrap_or("")))?;
        match v.checked_mul(1_000).filter(|ns| *ns <= MAX_TIME_NS) {
            Some(ns) => Ok(ns),
            None => Err(format!("{kind}: at most {} us, got {v}", MAX_TIME_NS / 1_000)),
        }
    };
    Ok(FilePhase::Phase(match (kind, arg) {
        ("run_us", _) => Phase::Run(us()?),
        ("sleep_us", _) => Phase::Sleep(us()?),
        ("catchup_us", _) => Phase::CatchUp(us()?),
        ("schedule_us", _) => Phase::Schedule(us()?),
        ("until_us", _) => Phase::SleepUntil(us()?),
        ("wait", None) => Phase::Wait,
        ("wake", Some(target)) => return Ok(FilePhase::Wake(target.to_string())),
        _ => return Err(format!("unknown phase {} (run_us, sleep_us, catchup_us, schedule_us, until_us, wait, wake)", shown(line))),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_sections_and_phases() {
        let text = format!("{HEADER}\n[a-1]\nrun_us 10\nwake b-2\nsleep_us 5\n\n[b-2]\nwait\nuntil_us 7\nrun_us 3\ncatchup_us 4\nschedule_us 0\n");
        let s = parse(text.as_bytes(), MAX_PHASES).unwrap();
        assert_eq!(s.sections.len(), 2);
        assert_eq!(s.sections[0].0, "a-1");
        let p = |p| FilePhase::Phase(p);
        assert_eq!(s.file_phases(0), vec![p(Phase::Run(10_000)), FilePhase::Wake("b-2".into()), p(Phase::Sleep(5_000))]);
        assert_eq!(s.file_phases(1), vec![p(Phase::Wait), p(Phase::SleepUntil(7_000)), p(Phase::Run(3_000)), p(Phase::CatchUp(4_000)), p(Phase::Schedule(0))]);
    }

    #[test]
    fn errors_name_the_line() {
        let bad = |body: &str| parse(format!("{HEADER}\n{body}").as_bytes(), MAX_PHASES).unwrap_err();
        assert_eq!(parse("hello\n".as_bytes(), MAX_PHASES).unwrap_err(), "line 1: expected \"# throttlelab phases v1\", got \"hello\" (not a phases file)");
        assert_eq!(bad("run_us 5\n"), "line 2: a phase before the first [thread] section");
        assert_eq!(bad("[a]\nrun_us x\n"), "line 3: run_us: expected microseconds, got \"x\"");
        assert_eq!(bad("[a]\njump 3\n"), "line 3: unknown phase \"jump 3\" (run_us, sleep_us, catchup_us, schedule_us, until_us, wait, wake)");
        assert_eq!(bad("[a]\nrun_us 1 2\n"), "line 3: one phase a line, got \"run_us 1 2\"");
        assert_eq!(bad("[a]\n[a]\n"), "line 3: thread a has a second section");
        assert_eq!(bad("[a]\nsleep_us 99999999999999999\n"), "line 3: sleep_us: at most 10000000000000 us, got 99999999999999999");
        assert_eq!(bad(""), "no [thread] section");
    }

    /// A file is refused at the phase that passes the limit (what the run's
    /// other files left of it), naming the section, before it holds more.
    #[test]
    fn more_phases_than_a_run_may_hold_is_refused_at_the_limit() {
        let text = format!("{HEADER}\n[a]\nrun_us 1\n[b]\nrun_us 1\nsleep_us 1\nrun_us 1\n");
        assert_eq!(parse(text.as_bytes(), 4).unwrap().sections[1].1.len(), 3);
        let e = parse(text.as_bytes(), 3).unwrap_err();
        assert_eq!(
            e,
            format!(
                "line 7: section [b] passes the {MAX_PHASES} phases a run may hold ({} bytes each, with the {} of the run's other phases files); capture a shorter span",
                std::mem::size_of::<Phase>(),
                MAX_PHASES - 3
            )
        );
    }
}
