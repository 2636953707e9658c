//! The one error users see for bad input: a key, a message, and the line in
//! the file when it is known.

use std::fmt;

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

impl fmt::Display for ScenarioError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.key.is_empty() {
            write!(f, "{}", self.message)?;
        } else {
            write!(f, "{}: {}", self.key, self.message)?;
        }
        if let Some(line) = self.line {
            write!(f, " (line {line})")?;
        }
        Ok(())
    }
}

impl std::error::Error for ScenarioError {}

/// 1-based line of a byte offset.
pub fn line_of_offset(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())].bytes().filter(|&b| b == b'\n').count() + 1
}
