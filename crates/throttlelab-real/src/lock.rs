//! One real run at a time on a host. Two at once measure each other: each
//! one's probe counts the other's spinners as background (measured: 114
//! preemptions per CPU-second instead of 21), which `compare` then hands to
//! the simulator, and their workers share the CPUs each believes its own.

use crate::error::{Error, Result};
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, Write};
use std::os::fd::AsRawFd;
use std::path::Path;

/// The lock file; it stays, holding the pid of the last run that took it.
pub const LOCK_PATH: &str = "/run/throttlelab.lock";

/// An exclusive `flock` on the lock file, released when dropped (or when the
/// process dies, however it dies).
#[derive(Debug)]
pub struct RunLock {
    _file: File,
}

impl RunLock {
    /// Take the lock at `path`, or refuse in one line naming the run that holds it.
    pub fn acquire(path: &Path) -> Result<RunLock> {
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(|e| Error::io("open", path, e))?;
        // SAFETY: flock on an fd we own.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
            let e = std::io::Error::last_os_error();
            if e.raw_os_error() != Some(libc::EWOULDBLOCK) {
                return Err(Error::io("lock", path, e));
            }
            // Empty for the moment between the holder's flock and its write.
            let mut holder = String::new();
            let _ = file.read_to_string(&mut holder);
            let holder = match holder.trim() {
                "" => "unknown",
                pid => pid,
            };
            return Err(Error::harness(format!(
                "another real run (pid {holder}) holds {}: runs at once would measure each other; wait for it to end",
                path.display()
            )));
        }
        file.set_len(0)
            .and_then(|_| file.rewind())
            .and_then(|_| write!(file, "{}", std::process::id()))
            .map_err(|e| Error::io("write", path, e))?;
        Ok(RunLock { _file: file })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_run_is_refused_until_the_first_ends() {
        let path = std::env::temp_dir().join(format!("throttlelab-lock-test-{}", std::process::id()));
        let first = RunLock::acquire(&path).unwrap();
        // flock locks belong to open files: a second open conflicts even in one process.
        let e = RunLock::acquire(&path).unwrap_err().to_string();
        assert!(e.contains(&format!("another real run (pid {})", std::process::id())), "{e}");
        assert!(e.contains(&path.display().to_string()), "{e}");
        drop(first);
        drop(RunLock::acquire(&path).unwrap());
        std::fs::remove_file(path).unwrap();
    }
}
