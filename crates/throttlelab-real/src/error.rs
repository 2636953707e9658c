//! The two ways a real run ends early: a one-line refusal or failure, or a signal.

use std::fmt;
use std::path::Path;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// The run cannot start or go on; the message is one line for the user.
    Harness(String),
    /// A signal that ends a run arrived (its number); everything was cleaned up.
    Interrupted(libc::c_int),
}

pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    pub fn harness(message: impl Into<String>) -> Self {
        Error::Harness(message.into())
    }

    /// An I/O failure on `path`, named in the message.
    pub fn io(action: &str, path: &Path, e: std::io::Error) -> Self {
        Error::Harness(format!("cannot {action} {}: {e}", path.display()))
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Harness(m) => f.write_str(m),
            Error::Interrupted(sig) => {
                write!(f, "interrupted by {}; cgroups removed, workers killed", crate::signals::name(*sig))
            }
        }
    }
}

impl std::error::Error for Error {}
