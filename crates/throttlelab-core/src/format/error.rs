//! The one error users see for bad input: a key, a message, and the line in
//! the file when it is known.

use std::fmt;
use std::fmt::Write;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScenarioError {
    /// Dotted key (`cgroup.app.quota_us`), or empty for syntax errors.
    pub key: String,
    pub message: String,
    pub line: Option<usize>,
}

impl ScenarioError {
    pub fn new(key: impl Into<String>, message: impl Into<String>) -> Self {
        ScenarioError { key: key.into(), message: message.into(), line: None }
    }

    pub fn at_line(mut self, line: Option<usize>) -> Self {
        self.line = self.line.or(line);
        self
    }
}

/// One line, whatever the input held: keys and messages may quote it, and
/// their control characters are written escaped.
impl fmt::Display for ScenarioError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if !self.key.is_empty() {
            write_escaped(f, &self.key)?;
            f.write_str(": ")?;
        }
        write_escaped(f, &self.message)?;
        if let Some(line) = self.line {
            write!(f, " (line {line})")?;
        }
        Ok(())
    }
}

impl std::error::Error for ScenarioError {}

fn write_escaped(f: &mut fmt::Formatter<'_>, s: &str) -> fmt::Result {
    for c in s.chars() {
        if c.is_control() {
            write!(f, "{}", c.escape_default())?;
        } else {
            f.write_char(c)?;
        }
    }
    Ok(())
}

/// A user-supplied string as a message quotes it: escaped, cut after 64 characters.
pub fn shown(s: &str) -> String {
    const MAX_CHARS: usize = 64;
    match s.char_indices().nth(MAX_CHARS) {
        Some((cut, _)) => format!("{:?}...", &s[..cut]),
        None => format!("{s:?}"),
    }
}

/// 1-based line of a byte offset.
pub fn line_of_offset(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())].bytes().filter(|&b| b == b'\n').count() + 1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_escaped() {
        let e = ScenarioError::new("task.a\nb.cpus", "bad \x1b[31m\r").at_line(Some(3));
        assert_eq!(e.to_string(), "task.a\\nb.cpus: bad \\u{1b}[31m\\r (line 3)");
        assert_eq!(shown("a\tb"), "\"a\\tb\"");
        assert_eq!(shown(&"x".repeat(100)), format!("{:?}...", "x".repeat(64)));
    }
}
