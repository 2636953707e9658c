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
//!
//! Here it is read, written, and scaled to another thread count: capture
//! writes it, the loader reads it, and the acceptance driver (through the
//! bindings) reads, deals and scales it.

use crate::format::error::shown;
use crate::format::write::{captured_tasks, with_captured_tasks, CapturedTask};
use crate::vocab::phase::Phase;
use crate::format::scenario::{MAX_PHASES, MAX_TIME_NS};
use crate::format::usage_csv::open_regular;
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
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

/// A phase's line in the file (`None`: a phase no file holds, as rt-app's
/// timers); a wake names `wake_targets[k]`.
pub fn line(p: &Phase, wake_targets: &[String]) -> Option<String> {
    Some(match p {
        Phase::Run(ns) => format!("run_us {}", ns / 1_000),
        Phase::Sleep(ns) => format!("sleep_us {}", ns / 1_000),
        Phase::CatchUp(ns) => format!("catchup_us {}", ns / 1_000),
        Phase::Schedule(ns) => format!("schedule_us {}", ns / 1_000),
        Phase::SleepUntil(ns) => format!("until_us {}", ns / 1_000),
        Phase::Wait => "wait".to_string(),
        Phase::Wake(k) => format!("wake {}", wake_targets[*k]),
        Phase::Runtime(_) | Phase::Timer(_) | Phase::RtTimer { .. } => return None,
    })
}

/// A phases file written as it goes, a section and then its phases: a
/// capture writes each thread's phases as it reads them back, never all
/// in memory.
pub struct Writer<W: Write> {
    gz: std::io::BufWriter<flate2::write::GzEncoder<W>>,
}

impl<W: Write> Writer<W> {
    pub fn new(out: W) -> Result<Writer<W>, String> {
        let mut w = Writer { gz: std::io::BufWriter::with_capacity(1 << 16, flate2::write::GzEncoder::new(out, flate2::Compression::default())) };
        w.text(format_args!("{HEADER}\n"))?;
        Ok(w)
    }

    fn text(&mut self, text: std::fmt::Arguments) -> Result<(), String> {
        self.gz.write_fmt(text).map_err(|e| e.to_string())
    }

    /// The next section, thread `name`'s.
    pub fn section(&mut self, name: &str) -> Result<(), String> {
        self.text(format_args!("[{name}]\n"))
    }

    /// Its next phase; a wake names `wake_targets[k]`.
    pub fn phase(&mut self, p: &Phase, name: &str, wake_targets: &[String]) -> Result<(), String> {
        let line = line(p, wake_targets).ok_or_else(|| format!("[{name}]: {p:?} has no line in a phases file"))?;
        self.text(format_args!("{line}\n"))
    }

    /// The file ends here.
    pub fn finish(self) -> Result<W, String> {
        self.gz.into_inner().map_err(|e| e.error().to_string())?.finish().map_err(|e| e.to_string())
    }
}

/// Write `sections` (those named in `order`, in that order) gzip-compressed to `out`.
pub fn write(out: impl Write, sections: &Sections, order: &[usize]) -> Result<(), String> {
    let mut w = Writer::new(out)?;
    for &i in order {
        let (name, phases) = &sections.sections[i];
        w.section(name)?;
        for p in phases {
            w.phase(p, name, &sections.wake_targets)?;
        }
    }
    w.finish().map(drop)
}

/// Write every section, in order, to a new file at `path`.
pub fn write_file(path: &Path, sections: &Sections) -> Result<(), String> {
    let file = std::fs::File::create(path).map_err(|e| format!("{}: {e}", path.display()))?;
    write(file, sections, &(0..sections.sections.len()).collect::<Vec<_>>()).map_err(|e| format!("{}: {e}", path.display()))
}

/// Sections from phase lines, `(name, lines)` each, as the file holds them.
pub fn from_lines(sections: Vec<(String, Vec<String>)>) -> Result<Sections, String> {
    let mut text = format!("{HEADER}\n");
    for (name, lines) in &sections {
        text += &format!("[{name}]\n");
        for l in lines {
            if l.contains('\n') {
                return Err(format!("[{name}]: a phase is one line, got {}", shown(l)));
            }
            text += l;
            text.push('\n');
        }
    }
    parse(text.as_bytes(), MAX_PHASES)
}

/// Each section's phase lines, `(name, lines)`, in file order.
pub fn to_lines(sections: &Sections) -> Vec<(String, Vec<String>)> {
    let lines = |phases: &[Phase]| phases.iter().filter_map(|p| line(p, &sections.wake_targets)).collect();
    sections.sections.iter().map(|(name, phases)| (name.clone(), lines(phases))).collect()
}

/// `capture` (a captured scenario) as if its program ran `threads` workers,
/// written to `out` and its phases beside it (`.phases.gz`): of the tasks
/// named in `workers`, the first `threads` are kept, then copies are dealt
/// round-robin, each copy's phases rotated by a fraction of its list so that
/// copies do not burst in step; copies keep run and sleep phases only (no
/// wake or wait: a copy has no sibling of its own to wake it). The other
/// tasks (a parent, a generator) stay as captured.
pub fn with_threads(capture: &Path, workers: &[String], threads: usize, out: &Path) -> Result<(), String> {
    let text = std::fs::read_to_string(capture).map_err(|e| format!("{}: {e}", capture.display()))?;
    let tasks = captured_tasks(&text).map_err(|e| format!("{}: {e}", capture.display()))?;
    let first = tasks.first().ok_or_else(|| format!("{}: no [[task]] to replicate", capture.display()))?;
    let mut sections = read(&capture.parent().unwrap_or(Path::new("")).join(&first.phases_file), MAX_PHASES)?;
    let is_worker = |t: &CapturedTask| workers.contains(&t.name);
    let found: Vec<&CapturedTask> = tasks.iter().filter(|t| is_worker(t)).collect();
    if found.is_empty() {
        return Err(format!("{}: no worker task to replicate", capture.display()));
    }
    let mut out_tasks: Vec<CapturedTask> = tasks.iter().filter(|t| !is_worker(t)).cloned().collect();
    out_tasks.extend(found.iter().take(threads).map(|t| (*t).clone()));
    let n = found.len();
    for i in n.min(threads)..threads {
        let base = found[i % n];
        let Some(k) = sections.sections.iter().position(|(name, _)| *name == base.name) else {
            return Err(format!("{}: no section [{}]", first.phases_file, base.name));
        };
        let mut phases: Vec<Phase> = sections.sections[k].1.iter().copied().filter(|p| matches!(p, Phase::Run(_) | Phase::Sleep(_) | Phase::CatchUp(_) | Phase::Schedule(_) | Phase::SleepUntil(_))).collect();
        let shift = phases.len() * (i / n) / (threads / n + 1);
        phases.rotate_left(shift);
        let name = format!("{}-copy{i}", base.name);
        sections.sections.push((name.clone(), phases));
        out_tasks.push(CapturedTask { name, ..base.clone() });
    }
    write_replay(&text, &out_tasks, &sections, out)
}

/// `out`: scenario `text` (a capture's) with `tasks` for its tasks, each
/// replaying its section of `sections`, written beside `out` as its
/// `.phases.gz` (in the tasks' order).
pub fn write_replay(text: &str, tasks: &[CapturedTask], sections: &Sections, out: &Path) -> Result<(), String> {
    let phases_path = out.with_extension("phases.gz");
    let phases_name = phases_path.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default();
    let mut order = Vec::new();
    for t in tasks {
        let k = sections.sections.iter().position(|(name, _)| *name == t.name).ok_or_else(|| format!("task {}: no section of that name", t.name))?;
        order.push(k);
    }
    let tasks: Vec<CapturedTask> = tasks.iter().map(|t| CapturedTask { phases_file: phases_name.clone(), ..t.clone() }).collect();
    let scenario = with_captured_tasks(text, &tasks)?;
    let file = std::fs::File::create(&phases_path).map_err(|e| format!("{}: {e}", phases_path.display()))?;
    write(file, sections, &order).map_err(|e| format!("{}: {e}", phases_path.display()))?;
    std::fs::write(out, scenario).map_err(|e| format!("{}: {e}", out.display()))
}

#[cfg(test)]
mod tests {

    /// Written as it goes, the file is byte for byte one gzip of its whole
    /// text (as it was written before), across the writer's buffer.
    #[test]
    fn a_file_written_as_it_goes_is_one_gzip_of_its_text() {
        let phases: Vec<Phase> = (0..40_000u64).map(|i| match i % 4 {
            0 => Phase::Run(i * 1_000),
            1 => Phase::Sleep(i * 7_000),
            2 => Phase::Wake(0),
            _ => Phase::Wait,
        }).collect();
        let names = vec!["a-1".to_string(), "b-2".to_string()];
        let sections = Sections { sections: vec![(names[0].clone(), phases.clone()), (names[1].clone(), phases)], wake_targets: names };
        let mut text = format!("{HEADER}\n");
        for (name, phases) in &sections.sections {
            text += &format!("[{name}]\n");
            phases.iter().for_each(|p| text += &(line(p, &sections.wake_targets).unwrap() + "\n"));
        }
        assert!(text.len() > 4 << 16, "{}", text.len());
        let mut whole = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        whole.write_all(text.as_bytes()).unwrap();
        let mut streamed = Vec::new();
        write(&mut streamed, &sections, &[0, 1]).unwrap();
        assert_eq!(streamed, whole.finish().unwrap());
    }
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

    /// What is written reads back the same, and lines go both ways unchanged.
    #[test]
    fn written_sections_read_back() {
        let text = format!("{HEADER}\n[a-1]\nrun_us 10\nwake b-2\nsleep_us 5\n[b-2]\nwait\nuntil_us 7\nrun_us 3\ncatchup_us 4\nschedule_us 0\n");
        let s = parse(text.as_bytes(), MAX_PHASES).unwrap();
        let mut gz = Vec::new();
        write(&mut gz, &s, &[0, 1]).unwrap();
        let mut back = String::new();
        flate2::read::GzDecoder::new(&gz[..]).read_to_string(&mut back).unwrap();
        assert_eq!(back, text);
        let lines = to_lines(&s);
        assert_eq!(lines[0], ("a-1".to_string(), vec!["run_us 10".to_string(), "wake b-2".into(), "sleep_us 5".into()]));
        let again = from_lines(lines.clone()).unwrap();
        assert_eq!(to_lines(&again), lines);
        assert_eq!(from_lines(vec![("a".into(), vec!["run_us 1\n[b]".into()])]).unwrap_err(), "[a]: a phase is one line, got \"run_us 1\\n[b]\"");
        assert_eq!(from_lines(vec![("a".into(), vec!["jump 1".into()])]).unwrap_err(), "line 3: unknown phase \"jump 1\" (run_us, sleep_us, catchup_us, schedule_us, until_us, wait, wake)");
        let timers = Sections { sections: vec![("t".into(), vec![Phase::Timer(5)])], wake_targets: vec![] };
        assert!(write(Vec::new(), &timers, &[0]).unwrap_err().contains("has no line in a phases file"));
    }

    /// Scaled from 2 workers to 5: the two kept, three copies dealt round-
    /// robin, round r rotated by r thirds of their list (5 / 2 + 1 = 3),
    /// wakes and waits left out; the generator stays, first, as captured.
    #[test]
    fn with_threads_deals_rotated_copies() {
        let dir = std::env::temp_dir().join(format!("tl-with-threads-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let text = format!("{HEADER}\n[gen-1]\nrun_us 1\nwake w-2\n[w-2]\nwait\nrun_us 1\nsleep_us 2\nrun_us 3\n[w-3]\nrun_us 4\nsleep_us 5\nrun_us 6\n");
        write_file(&dir.join("c.phases.gz"), &parse(text.as_bytes(), MAX_PHASES).unwrap()).unwrap();
        let task = |name: &str| format!("\n[[task]]\nname = \"{name}\"\ncgroup = \"g\"\nloop = 1\nphases_file = \"c.phases.gz\"\n");
        let head = "name = \"c\"\n\n[capture]\nthreads = 2\n";
        std::fs::write(dir.join("c.toml"), format!("{head}{}{}{}start_us = 9\n", task("gen-1"), task("w-2"), task("w-3"))).unwrap();
        let workers = ["w-2".to_string(), "w-3".to_string()];
        with_threads(&dir.join("c.toml"), &workers, 5, &dir.join("r.toml")).unwrap();
        let out = std::fs::read_to_string(dir.join("r.toml")).unwrap();
        let names: Vec<String> = captured_tasks(&out).unwrap().into_iter().map(|t| format!("{}@{}:{}", t.name, t.start_us, t.phases_file)).collect();
        assert_eq!(names, ["gen-1@0:r.phases.gz", "w-2@0:r.phases.gz", "w-3@9:r.phases.gz", "w-2-copy2@0:r.phases.gz", "w-3-copy3@9:r.phases.gz", "w-2-copy4@0:r.phases.gz"]);
        assert!(out.starts_with(head));
        let s = read(&dir.join("r.phases.gz"), MAX_PHASES).unwrap();
        let l = |i: usize| to_lines(&s)[i].1.join(",");
        assert_eq!((l(3), l(4), l(5)), ("sleep_us 2,run_us 3,run_us 1".into(), "sleep_us 5,run_us 6,run_us 4".into(), "run_us 3,run_us 1,sleep_us 2".into()));
        assert_eq!(with_threads(&dir.join("c.toml"), &[], 5, &dir.join("r.toml")).unwrap_err(), format!("{}: no worker task to replicate", dir.join("c.toml").display()));
        std::fs::remove_dir_all(&dir).unwrap();
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
