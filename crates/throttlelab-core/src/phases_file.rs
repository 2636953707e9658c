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

use crate::error::shown;
use crate::scenario::{Phase, MAX_TIME_NS};
use crate::usage_csv::open_regular;
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

/// Every section of a phases file, by thread name, in file order.
pub type Sections = Vec<(String, Vec<FilePhase>)>;

/// The most text a phases file may decompress to (a minute of 64 busy
/// threads is a few tens of MB).
const MAX_TEXT_BYTES: u64 = 1 << 30;

/// Read a gzip-compressed phases file; an error names the file and the line.
pub fn read(path: &Path) -> Result<Sections, String> {
    let file = open_regular(path)?;
    let mut text = BufReader::new(flate2::read::GzDecoder::new(file)).take(MAX_TEXT_BYTES);
    let sections = parse(&mut text).map_err(|e| format!("{}: {e}", path.display()))?;
    if text.limit() == 0 {
        return Err(format!("{}: decompresses to more than {} MiB", path.display(), MAX_TEXT_BYTES >> 20));
    }
    Ok(sections)
}

/// Parse the (decompressed) text of a phases file.
pub fn parse(text: impl BufRead) -> Result<Sections, String> {
    let mut sections: Sections = Vec::new();
    let mut seen = HashMap::new();
    for (i, line) in text.lines().enumerate() {
        let n = i + 1;
        let line = line.map_err(|e| format!("line {n}: {e}"))?;
        if n == 1 && line != HEADER {
            return Err(format!("line 1: expected {HEADER:?}, got {} (not a phases file)", shown(&line)));
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
            sections.push((name.to_string(), Vec::new()));
            continue;
        }
        let Some((_, phases)) = sections.last_mut() else {
            return Err(at("a phase before the first [thread] section".to_string()));
        };
        phases.push(parse_phase(line).map_err(at)?);
    }
    if sections.is_empty() {
        return Err("no [thread] section".to_string());
    }
    Ok(sections)
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
        let s = parse(text.as_bytes()).unwrap();
        assert_eq!(s.len(), 2);
        assert_eq!(s[0].0, "a-1");
        let p = |p| FilePhase::Phase(p);
        assert_eq!(s[0].1, vec![p(Phase::Run(10_000)), FilePhase::Wake("b-2".into()), p(Phase::Sleep(5_000))]);
        assert_eq!(s[1].1, vec![p(Phase::Wait), p(Phase::SleepUntil(7_000)), p(Phase::Run(3_000)), p(Phase::CatchUp(4_000)), p(Phase::Schedule(0))]);
    }

    #[test]
    fn errors_name_the_line() {
        let bad = |body: &str| parse(format!("{HEADER}\n{body}").as_bytes()).unwrap_err();
        assert_eq!(parse("hello\n".as_bytes()).unwrap_err(), "line 1: expected \"# throttlelab phases v1\", got \"hello\" (not a phases file)");
        assert_eq!(bad("run_us 5\n"), "line 2: a phase before the first [thread] section");
        assert_eq!(bad("[a]\nrun_us x\n"), "line 3: run_us: expected microseconds, got \"x\"");
        assert_eq!(bad("[a]\njump 3\n"), "line 3: unknown phase \"jump 3\" (run_us, sleep_us, catchup_us, schedule_us, until_us, wait, wake)");
        assert_eq!(bad("[a]\nrun_us 1 2\n"), "line 3: one phase a line, got \"run_us 1 2\"");
        assert_eq!(bad("[a]\n[a]\n"), "line 3: thread a has a second section");
        assert_eq!(bad("[a]\nsleep_us 99999999999999999\n"), "line 3: sleep_us: at most 10000000000000 us, got 99999999999999999");
        assert_eq!(bad(""), "no [thread] section");
    }
}
