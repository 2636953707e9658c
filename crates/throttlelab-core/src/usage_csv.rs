//! A task's measurement windows from a CSV file (`trace_csv`): rows
//! `start_s,end_s,cpu_rate[,class]`, the columns of the Google cluster trace's
//! `task_usage` table that 004 uses (rate in core-seconds per second). A header
//! row is allowed; blank lines and `#` comments are skipped.

use std::path::Path;

/// The windows of one task and the class label its rows carry, if any.
#[derive(Debug, Clone, PartialEq)]
pub struct UsageTrace {
    pub windows: Vec<[f64; 3]>,
    pub class: Option<String>,
}

/// Read a trace file; errors name the file and the line.
pub fn read(path: &Path) -> Result<UsageTrace, String> {
    let file = std::fs::File::open(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .trim(csv::Trim::All)
        .comment(Some(b'#'))
        .from_reader(file);
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
}
