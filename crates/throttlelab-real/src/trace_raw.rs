//! tracefs's binary ring-buffer pages (`per_cpu/cpuN/trace_pipe_raw`) into
//! `sched_trace`'s events, as the text of `trace` would have given them.
//!
//! A page is the ring buffer's sub-buffer: a header (`events/header_page`:
//! the first event's timestamp, then `commit`, the bytes of events, whose
//! top bits say that events were lost before this page), then events. Each
//! event has a 4-byte header (`events/header_event`: 5 bits of type or
//! length, 27 bits of time since the previous event) and the record whose
//! layout `events/<system>/<event>/format` publishes: the common fields
//! (type id, flags, preempt count, pid), then the event's own. Reading the
//! formats rather than assuming them keeps the reader right across kernels
//! (`sched_stat_runtime` lost `vruntime` in 6.8; its comm became a
//! `__data_loc` string).

use crate::sched_trace::{Comm, Context, Event, Kind};
use std::collections::HashMap;
use std::path::Path;

/// `commit`'s flags: events were lost between the previous page read and
/// this one, and their count is stored after the page's data.
const MISSED_EVENTS: u64 = 1 << 31;
const MISSED_STORED: u64 = 1 << 30;
/// What is left of `commit` below its flags: the bytes of events.
const COMMIT_MASK: u64 = (1 << 27) - 1;

/// `type_len` of the event header: padding, a time extension, an absolute
/// time stamp; below them, the record's length in 4-byte words (0: in the
/// word that follows).
const TYPE_PADDING: u32 = 29;
const TYPE_TIME_EXTEND: u32 = 30;
const TYPE_TIME_STAMP: u32 = 31;
/// The bits an absolute time stamp holds; the rest are the page's (`rb_fix_abs_ts`).
const TS_BITS: u32 = 59;

/// `common_flags` (kernel/trace/trace.h `trace_flag_type`).
const FLAG_HARDIRQ: u8 = 0x08;
const FLAG_SOFTIRQ: u8 = 0x10;
const FLAG_NMI: u8 = 0x40;

/// `prev_state` below `TASK_REPORT_MAX` (0x100 since 4.14): a task state;
/// none (0) is runnable, a preemption; `TASK_REPORT_MAX` itself marks one too.
const TASK_STATE_MASK: u64 = 0xff;

/// A field of a record: where it is, how long, and whether it is a
/// `__data_loc` (a u32 of offset and length of the data within the record).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Field {
    offset: usize,
    size: usize,
    data_loc: bool,
}

/// One event's format: its id, its `system/name` and its fields by name.
#[derive(Debug, Clone)]
pub struct Format {
    pub id: u16,
    pub name: String,
    fields: HashMap<String, Field>,
}

/// Parse a `format` file (`system` is its directory's parent: `sched`).
pub fn parse_format(system: &str, text: &str) -> Result<Format, String> {
    let mut name = None;
    let mut id = None;
    let mut fields = HashMap::new();
    for line in text.lines() {
        let line = line.trim();
        if let Some(n) = line.strip_prefix("name: ") {
            name = Some(n.trim().to_string());
        } else if let Some(i) = line.strip_prefix("ID: ") {
            id = Some(i.trim().parse::<u16>().map_err(|_| format!("ID {i:?} is not a number"))?);
        } else if let Some(rest) = line.strip_prefix("field:") {
            // `field:char prev_comm[16];	offset:8;	size:16;	signed:0;`
            let parts: Vec<&str> = rest.split(';').map(str::trim).collect();
            let decl = parts.first().copied().unwrap_or_default();
            let attr = |key: &str| parts.iter().find_map(|p| p.strip_prefix(key)).and_then(|v| v.parse::<usize>().ok());
            let offset = attr("offset:").ok_or_else(|| format!("no offset in {line:?}"))?;
            let size = attr("size:").ok_or_else(|| format!("no size in {line:?}"))?;
            let field_name = decl.split_whitespace().last().unwrap_or_default();
            let field_name = field_name.split('[').next().unwrap_or_default().trim_start_matches('*');
            fields.insert(field_name.to_string(), Field { offset, size, data_loc: decl.contains("__data_loc") });
        }
    }
    let name = name.ok_or("no name:")?;
    Ok(Format { id: id.ok_or("no ID:")?, name: format!("{system}/{name}"), fields })
}

/// How to read one event type into a [`Kind`].
#[derive(Debug, Clone)]
enum Decoder {
    Switch { prev_comm: Field, prev_pid: Field, prev_state: Field, next_comm: Field, next_pid: Field },
    Waking { pid: Field },
    Fork { child_comm: Field, child_pid: Field },
    Exit { pid: Field },
    Runtime { pid: Field, runtime: Field },
    PollEnter,
    PollExit { ret: Field },
}

/// The decoders of the events read, indexed by id (a few thousand at most:
/// a lookup per event, without hashing).
#[derive(Debug, Clone, Default)]
pub struct Formats {
    by_id: Vec<Option<Decoder>>,
}

impl Formats {
    /// Add `format`'s event, if it is one the capture reads; Err if it
    /// lacks a field the capture needs.
    pub fn add(&mut self, format: &Format) -> Result<(), String> {
        let f = |name: &str| format.fields.get(name).copied().ok_or_else(|| format!("{}: no field {name}", format.name));
        let name = format.name.as_str();
        let decoder = match name {
            "sched/sched_switch" => Decoder::Switch {
                prev_comm: f("prev_comm")?,
                prev_pid: f("prev_pid")?,
                prev_state: f("prev_state")?,
                next_comm: f("next_comm")?,
                next_pid: f("next_pid")?,
            },
            "sched/sched_waking" | "sched/sched_wakeup" => Decoder::Waking { pid: f("pid")? },
            "sched/sched_process_fork" => Decoder::Fork { child_comm: f("child_comm")?, child_pid: f("child_pid")? },
            "sched/sched_process_exit" => Decoder::Exit { pid: f("pid")? },
            "sched/sched_stat_runtime" => Decoder::Runtime { pid: f("pid")?, runtime: f("runtime")? },
            _ if name.starts_with("syscalls/sys_enter_epoll_") => Decoder::PollEnter,
            _ if name.starts_with("syscalls/sys_exit_epoll_") => Decoder::PollExit { ret: f("ret")? },
            _ => return Err(format!("{name}: not an event the capture reads")),
        };
        let at = format.id as usize;
        if self.by_id.len() <= at {
            self.by_id.resize(at + 1, None);
        }
        self.by_id[at] = Some(decoder);
        Ok(())
    }

    /// Read the formats of `events` (`sched/sched_switch`, ...) under a
    /// tracefs `events/` directory; those missing are left out.
    pub fn read(events_dir: &Path, events: &[&str]) -> Result<Formats, String> {
        let mut formats = Formats::default();
        for event in events {
            let path = events_dir.join(event).join("format");
            let Ok(text) = std::fs::read_to_string(&path) else { continue };
            let system = event.split('/').next().unwrap_or_default();
            formats.add(&parse_format(system, &text).map_err(|e| format!("{}: {e}", path.display()))?)?;
        }
        Ok(formats)
    }
}

/// What a page said besides its events.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageInfo {
    /// The page's first timestamp (the trace clock's, ns for `mono`).
    pub ts_ns: u64,
    /// Events lost before it: None if none, Some(None) if the kernel did not
    /// say how many.
    pub lost: Option<Option<u64>>,
    /// Events in it.
    pub events: usize,
}

fn le_u64(b: &[u8]) -> u64 {
    let mut a = [0u8; 8];
    a[..b.len().min(8)].copy_from_slice(&b[..b.len().min(8)]);
    u64::from_le_bytes(a)
}

fn le_u32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

impl Field {
    /// The field as an integer (little-endian, sign-extended if it is shorter than 8 bytes and `signed`).
    fn uint(&self, record: &[u8]) -> Option<u64> {
        record.get(self.offset..self.offset + self.size).map(le_u64)
    }

    fn int(&self, record: &[u8]) -> Option<i64> {
        let v = self.uint(record)?;
        let bits = 8 * self.size.min(8) as u32;
        Some(if bits < 64 { ((v << (64 - bits)) as i64) >> (64 - bits) } else { v as i64 })
    }

    /// The field as a NUL-terminated task name (inline, or where its `__data_loc` points).
    fn comm(&self, record: &[u8]) -> Option<Comm> {
        let bytes = if self.data_loc {
            let loc = le_u32(record, self.offset)? as usize;
            record.get(loc & 0xffff..(loc & 0xffff) + (loc >> 16))?
        } else {
            record.get(self.offset..self.offset + self.size)?
        };
        Some(Comm::new(bytes))
    }
}

impl Decoder {
    fn kind(&self, record: &[u8]) -> Option<Kind> {
        let pid = |f: &Field| f.int(record).map(|p| p as u32);
        Some(match self {
            Decoder::Switch { prev_comm, prev_pid, prev_state, next_comm, next_pid } => Kind::Switch {
                prev_pid: pid(prev_pid)?,
                prev_comm: prev_comm.comm(record)?,
                preempted: prev_state.uint(record)? & TASK_STATE_MASK == 0,
                next_pid: pid(next_pid)?,
                next_comm: next_comm.comm(record)?,
            },
            Decoder::Waking { pid: p } => Kind::Waking { pid: pid(p)? },
            Decoder::Fork { child_comm, child_pid } => Kind::Fork { child_pid: pid(child_pid)?, child_comm: child_comm.comm(record)? },
            Decoder::Exit { pid: p } => Kind::Exit { pid: pid(p)? },
            Decoder::Runtime { pid: p, runtime } => Kind::Runtime { pid: pid(p)?, runtime_ns: runtime.uint(record)? },
            Decoder::PollEnter => Kind::PollEnter,
            Decoder::PollExit { ret } => Kind::PollExit { ready: ret.int(record)? > 0 },
        })
    }
}

/// The common fields every record starts with (`common_type`, `common_flags`, `common_pid`).
const COMMON_TYPE: Field = Field { offset: 0, size: 2, data_loc: false };
const COMMON_FLAGS: Field = Field { offset: 2, size: 1, data_loc: false };
const COMMON_PID: Field = Field { offset: 4, size: 4, data_loc: false };

/// Decode one page read from CPU `cpu`'s `trace_pipe_raw` (its header: a
/// u64 timestamp, then `commit` in `commit_size` bytes), appending the
/// events the capture reads to `out` in the page's order. Err if the page
/// does not read.
pub fn decode_page(page: &[u8], commit_size: usize, cpu: u32, formats: &Formats, out: &mut Vec<Event>) -> Result<PageInfo, String> {
    let data_at = 8 + commit_size;
    if page.len() < data_at {
        return Err(format!("a page of {} bytes has no header", page.len()));
    }
    let mut ts = le_u64(&page[..8]);
    let commit = le_u64(&page[8..data_at]);
    let len = (commit & COMMIT_MASK) as usize;
    let data = page.get(data_at..data_at + len).ok_or_else(|| format!("a page's commit {len} is past its end ({} bytes)", page.len()))?;
    let lost = (commit & MISSED_EVENTS != 0).then(|| {
        (commit & MISSED_STORED != 0).then(|| page.get(data_at + len..data_at + len + 8).map(le_u64)).flatten()
    });
    let mut info = PageInfo { ts_ns: ts, lost, events: 0 };
    let mut at = 0;
    while at + 4 <= len {
        let header = le_u32(data, at).expect("4 bytes");
        let (type_len, delta) = (header & 0x1f, (header >> 5) as u64);
        let word = |i: usize| le_u32(data, at + 4 + 4 * i).ok_or("an event header past the page's data");
        match type_len {
            TYPE_PADDING => {
                if delta == 0 {
                    break; // the rest of the page
                }
                at += 4 + word(0)? as usize;
                ts += delta;
            }
            TYPE_TIME_EXTEND => {
                ts += (word(0)? as u64) << 27 | delta;
                at += 8;
            }
            TYPE_TIME_STAMP => {
                let stamp = (word(0)? as u64) << 27 | delta;
                ts = stamp | (ts & !((1u64 << TS_BITS) - 1));
                at += 8;
            }
            _ => {
                ts += delta;
                let (record_at, record_len) = if type_len == 0 {
                    (at + 8, (word(0)? as usize).saturating_sub(4))
                } else {
                    (at + 4, 4 * type_len as usize)
                };
                let record = data.get(record_at..record_at + record_len).ok_or("an event past the page's data")?;
                at = record_at + record_len;
                let id = COMMON_TYPE.uint(record).ok_or("a record with no type")? as u16;
                let Some(Some(decoder)) = formats.by_id.get(id as usize) else { continue };
                let kind = decoder.kind(record).ok_or_else(|| format!("a record of event {id} is too short ({record_len} bytes)"))?;
                let flags = COMMON_FLAGS.uint(record).unwrap_or(0) as u8;
                let context = if flags & (FLAG_HARDIRQ | FLAG_NMI) != 0 {
                    Context::HardIrq
                } else if flags & FLAG_SOFTIRQ != 0 {
                    Context::SoftIrq
                } else {
                    Context::Task
                };
                let pid = COMMON_PID.int(record).unwrap_or(0) as u32;
                out.push(Event { ts_ns: ts, pid, context, cpu, kind });
                info.events += 1;
            }
        }
    }
    Ok(info)
}

/// The size of `commit` in a page's header, from `events/header_page`
/// (`field: local_t commit; offset:8; size:8;`); 8 if it does not say.
pub fn commit_size(header_page: &str) -> usize {
    header_page
        .lines()
        .find(|l| l.contains(" commit;"))
        .and_then(|l| l.split(';').find_map(|p| p.trim().strip_prefix("size:")?.parse().ok()))
        .unwrap_or(8)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::sched_trace::parse_line;

    const SWITCH: &str = "name: sched_switch\nID: 372\nformat:\n\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n\tfield:char prev_comm[16];\toffset:8;\tsize:16;\tsigned:0;\n\tfield:pid_t prev_pid;\toffset:24;\tsize:4;\tsigned:1;\n\tfield:int prev_prio;\toffset:28;\tsize:4;\tsigned:1;\n\tfield:long prev_state;\toffset:32;\tsize:8;\tsigned:1;\n\tfield:char next_comm[16];\toffset:40;\tsize:16;\tsigned:0;\n\tfield:pid_t next_pid;\toffset:56;\tsize:4;\tsigned:1;\n\tfield:int next_prio;\toffset:60;\tsize:4;\tsigned:1;\n\nprint fmt: \"...\"\n";
    const RUNTIME: &str = "name: sched_stat_runtime\nID: 363\nformat:\n\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n\tfield:__data_loc char[] comm;\toffset:8;\tsize:4;\tsigned:0;\n\tfield:pid_t pid;\toffset:12;\tsize:4;\tsigned:1;\n\tfield:u64 runtime;\toffset:16;\tsize:8;\tsigned:0;\n";

    pub(crate) fn formats() -> Formats {
        let mut f = Formats::default();
        f.add(&parse_format("sched", SWITCH).unwrap()).unwrap();
        f.add(&parse_format("sched", RUNTIME).unwrap()).unwrap();
        f
    }

    /// A record's common fields: type, flags, pid.
    fn common(id: u16, flags: u8, pid: i32) -> Vec<u8> {
        let mut r = id.to_le_bytes().to_vec();
        r.extend([flags, 0]);
        r.extend(pid.to_le_bytes());
        r
    }

    pub(crate) fn switch_record(pid: i32, prev: (&str, i32, i64), next: (&str, i32)) -> Vec<u8> {
        let comm = |s: &str| {
            let mut c = s.as_bytes().to_vec();
            c.resize(16, 0);
            c
        };
        let mut r = common(372, 0x01, pid);
        r.extend(comm(prev.0));
        r.extend(prev.1.to_le_bytes());
        r.extend(120i32.to_le_bytes());
        r.extend(prev.2.to_le_bytes());
        r.extend(comm(next.0));
        r.extend(next.1.to_le_bytes());
        r.extend(120i32.to_le_bytes());
        r
    }

    /// A page of (time delta, record) events, each record padded to 4 bytes,
    /// long ones with their length in a word of their own.
    pub(crate) fn page(ts: u64, events: &[(u64, Vec<u8>)], missed: Option<u64>) -> Vec<u8> {
        let mut data = Vec::new();
        for (delta, record) in events {
            let mut record = record.clone();
            record.resize(record.len().div_ceil(4) * 4, 0);
            if *delta >= 1 << 27 {
                data.extend((TYPE_TIME_EXTEND | ((*delta as u32 & ((1 << 27) - 1)) << 5)).to_le_bytes());
                data.extend(((*delta >> 27) as u32).to_le_bytes());
            }
            let delta = (*delta & ((1 << 27) - 1)) as u32;
            if record.len() <= 28 * 4 {
                data.extend(((record.len() / 4) as u32 | delta << 5).to_le_bytes());
            } else {
                data.extend((delta << 5).to_le_bytes());
                data.extend((record.len() as u32 + 4).to_le_bytes());
            }
            data.extend(record);
        }
        let mut commit = data.len() as u64;
        if let Some(n) = missed {
            commit |= MISSED_EVENTS | MISSED_STORED;
            data.extend(n.to_le_bytes());
        }
        let mut p = ts.to_le_bytes().to_vec();
        p.extend(commit.to_le_bytes());
        p.extend(data);
        p.resize(4096, 0);
        p
    }

    #[test]
    fn a_page_reads_as_the_text_does() {
        let mut runtime = common(363, 0x01, 10);
        runtime.extend(((4u32 << 16) | 24).to_le_bytes()); // comm: 4 bytes at 24
        runtime.extend(10i32.to_le_bytes());
        runtime.extend(999_000u64.to_le_bytes());
        runtime.extend(b"a b\0");
        let mut in_irq = switch_record(0, ("swapper/0", 0, 0), ("a b", 10));
        in_irq[2] = 0x09; // in a hard interrupt (flag 0x08), as no switch is: the flags are read
        let events = [
            (0, switch_record(77, ("t", 77, 1), ("swapper/0", 0))),
            (1_000, in_irq),
            (2 << 27, runtime), // a time extension
            (5, switch_record(10, ("a b", 10, 0x100), ("x", 11))), // preempted (TASK_REPORT_MAX)
            (5, switch_record(11, ("x", 11, 1), ("swapper/0", 0))), // S
        ];
        let mut got = Vec::new();
        let info = decode_page(&page(1_000_000_000, &events, Some(42)), 8, 1, &formats(), &mut got).unwrap();
        assert_eq!(info, PageInfo { ts_ns: 1_000_000_000, lost: Some(Some(42)), events: 5 });
        let at = 1_000_001_000 + (2 << 27);
        let text = [
            "  t-77  [001] d..2.  1.000000000: sched_switch: prev_comm=t prev_pid=77 prev_prio=120 prev_state=S ==> next_comm=swapper/0 next_pid=0 next_prio=120".to_string(),
            "  <idle>-0  [001] d.h2.  1.000001000: sched_switch: prev_comm=swapper/0 prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=a b next_pid=10 next_prio=120".to_string(),
            format!("  a b-10  [001] d..2.  {}.{:09}: sched_stat_runtime: comm=a b pid=10 runtime=999000 [ns]", at / 1_000_000_000, at % 1_000_000_000),
            format!("  a b-10  [001] d..2.  {}.{:09}: sched_switch: prev_comm=a b prev_pid=10 prev_prio=120 prev_state=R+ ==> next_comm=x next_pid=11 next_prio=120", (at + 5) / 1_000_000_000, (at + 5) % 1_000_000_000),
            format!("  x-11  [001] d..2.  {}.{:09}: sched_switch: prev_comm=x prev_pid=11 prev_prio=120 prev_state=S ==> next_comm=swapper/0 next_pid=0 next_prio=120", (at + 10) / 1_000_000_000, (at + 10) % 1_000_000_000),
        ];
        let want: Vec<Event> = text.iter().map(|l| parse_line(l).unwrap().unwrap()).collect();
        assert_eq!(got, want);
    }

    #[test]
    fn padding_ends_a_page_and_unknown_events_are_skipped() {
        let mut other = common(999, 0, 3);
        other.extend([0u8; 40]);
        let mut p = page(5, &[(1, other), (1, switch_record(0, ("swapper/0", 0, 0), ("a", 10)))], None);
        // A null padding event after the data ends the page.
        let mut got = Vec::new();
        let info = decode_page(&p, 8, 0, &formats(), &mut got).unwrap();
        assert_eq!((info.lost, info.events, got[0].ts_ns), (None, 1, 7));
        // A commit past the page is refused.
        p[8..16].copy_from_slice(&5000u64.to_le_bytes());
        assert!(decode_page(&p, 8, 0, &formats(), &mut got).unwrap_err().contains("past its end"));
    }

    #[test]
    fn a_format_without_a_needed_field_is_refused() {
        let f = parse_format("sched", &SWITCH.replace("next_pid", "nextpid")).unwrap();
        assert_eq!(Formats::default().add(&f).unwrap_err(), "sched/sched_switch: no field next_pid");
        assert!(parse_format("sched", "name: x\n").unwrap_err().contains("no ID"));
        assert_eq!(commit_size("\tfield: local_t commit;\toffset:8;\tsize:8;\tsigned:1;\n"), 8);
    }
}
