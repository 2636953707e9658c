//! A task's measurement windows from a CSV file (`trace_csv`): rows
//! `start_s,end_s,cpu_rate[,class]`, the columns of the Google cluster trace's
//! `task_usage` table that 004 uses (rate in core-seconds per second). A header
//! row is allowed; blank lines and `#` comments are skipped.

use std::fs::{File, Metadata, OpenOptions};
use std::io::Read;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

/// The largest trace file read: it is read whole into memory.
pub const MAX_TRACE_BYTES: u64 = 64 << 20;

/// The windows of one task and the class label its rows carry, if any.
#[derive(Debug, Clone, PartialEq)]
pub struct UsageTrace {
    pub windows: Vec<[f64; 3]>,
    pub class: Option<String>,
}

/// Read a trace file; errors name the file and the line.
pub fn read(path: &Path) -> Result<UsageTrace, String> {
    let file = open_regular(path)?;
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .trim(csv::Trim::All)
        .comment(Some(b'#'))
        .from_reader(file.take(MAX_TRACE_BYTES));
    let mut trace = UsageTrace { windows: Vec::new(), class: None };
    for record in reader.records() {
        let record = record.map_err(|e| format!("{}: {e}", path.display()))?;
        let line = record.position().map_or(0, |p| p.line());
        let at = |m: String| format!("{} line {line}: {m}", path.display());
        if record.get(0) == Some("start_s") {
            continue;
        }
        if !(3..=4).contains(&record.len()) {
            return Err(at(format!("expected start_s,end_s,cpu_rate[,class], got {} fields", record.len())));
        }
        let mut window = [0.0; 3];
        for (i, w) in window.iter_mut().enumerate() {
            *w = record[i].parse().map_err(|_| at(format!("not a number: {:?}", &record[i])))?;
        }
        if let Some(class) = record.get(3).filter(|c| !c.is_empty()) {
            match &trace.class {
                Some(known) if known != class => return Err(at(format!("class {class:?} after {known:?}: one task, one class"))),
                _ => trace.class = Some(class.to_string()),
            }
        }
        trace.windows.push(window);
    }
    if trace.windows.is_empty() {
        return Err(format!("{}: no windows", path.display()));
    }
    Ok(trace)
}

/// Open a regular file of at most [`MAX_TRACE_BYTES`], checked before it is
/// opened: a FIFO would block the open, a device (`/dev/zero`) never end.
/// `O_NONBLOCK` keeps a FIFO put in its place meanwhile from blocking, and
/// the opened file is checked again.
pub(crate) fn open_regular(path: &Path) -> Result<File, String> {
    let cannot = |e: std::io::Error| format!("cannot read {}: {e}", path.display());
    check_regular(path, &std::fs::metadata(path).map_err(cannot)?)?;
    let file = OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(path).map_err(cannot)?;
    check_regular(path, &file.metadata().map_err(cannot)?)?;
    Ok(file)
}

fn check_regular(path: &Path, meta: &Metadata) -> Result<(), String> {
    let t = meta.file_type();
    let kind = match () {
        _ if t.is_file() => None,
        _ if t.is_dir() => Some("a directory"),
        _ if t.is_fifo() => Some("a FIFO"),
        _ if t.is_char_device() => Some("a character device"),
        _ if t.is_block_device() => Some("a block device"),
        _ if t.is_socket() => Some("a socket"),
        _ => Some("not a regular file"),
    };
    if let Some(kind) = kind {
        return Err(format!("{} is {kind}: give a regular file", path.display()));
    }
    if meta.len() > MAX_TRACE_BYTES {
        return Err(format!("{} has {} bytes, more than the {} MiB a trace may have", path.display(), meta.len(), MAX_TRACE_BYTES >> 20));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_text(text: &str) -> Result<UsageTrace, String> {
        let dir = std::env::temp_dir().join(format!("throttlelab-usage-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(format!("{:x}.csv", text.len() * 31 + text.bytes().map(u64::from).sum::<u64>() as usize));
        std::fs::write(&path, text).unwrap();
        let out = read(&path);
        std::fs::remove_file(&path).unwrap();
        out
    }

    #[test]
    fn reads_rows_header_and_class() {
        let t = read_text("start_s,end_s,cpu_rate,class\n# a comment\n0,300,0.5,critical\n\n300, 600, 1.25 ,critical\n").unwrap();
        assert_eq!(t.windows, vec![[0.0, 300.0, 0.5], [300.0, 600.0, 1.25]]);
        assert_eq!(t.class.as_deref(), Some("critical"));
        assert_eq!(read_text("0,1,2\n").unwrap().class, None);
    }

    #[test]
    fn errors_name_the_line() {
        let e = read_text("0,300,0.5\n300,600,lots\n").unwrap_err();
        assert!(e.ends_with("line 2: not a number: \"lots\""), "{e}");
        let e = read_text("0,300\n").unwrap_err();
        assert!(e.contains("line 1: expected start_s,end_s,cpu_rate[,class], got 2 fields"), "{e}");
        let e = read_text("0,1,1,a\n1,2,1,b\n").unwrap_err();
        assert!(e.contains("one task, one class"), "{e}");
        assert!(read_text("start_s,end_s,cpu_rate\n").unwrap_err().ends_with("no windows"));
        assert!(read(Path::new("/nonexistent/x.csv")).unwrap_err().starts_with("cannot read /nonexistent/x.csv"));
    }

    #[test]
    fn only_regular_files_of_bounded_size() {
        assert_eq!(read(Path::new("/dev/zero")).unwrap_err(), "/dev/zero is a character device: give a regular file");
        assert_eq!(read(Path::new("/")).unwrap_err(), "/ is a directory: give a regular file");
        let dir = std::env::temp_dir().join(format!("throttlelab-usage-kinds-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let fifo = dir.join("fifo");
        let c_path = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) }, 0);
        assert!(read(&fifo).unwrap_err().ends_with("is a FIFO: give a regular file"), "no writer: refused, not blocked");
        let big = dir.join("big.csv");
        File::create(&big).unwrap().set_len(MAX_TRACE_BYTES + 1).unwrap();
        assert!(read(&big).unwrap_err().ends_with("has 67108865 bytes, more than the 64 MiB a trace may have"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
