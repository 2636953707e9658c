//! SIGINT and SIGTERM during a run set a flag that the controller polls, so
//! that it removes its cgroups and kills its workers before it returns,
//! instead of dying with them in place.

use crate::error::{Error, Result};
use std::sync::atomic::{AtomicI32, Ordering};

/// The last signal caught, 0 if none.
static CAUGHT: AtomicI32 = AtomicI32::new(0);

extern "C" fn on_signal(sig: libc::c_int) {
    CAUGHT.store(sig, Ordering::SeqCst);
}

const SIGNALS: [libc::c_int; 2] = [libc::SIGINT, libc::SIGTERM];

/// Our handlers while it lives; the previous ones (Python's) come back on drop.
pub struct Guard {
    previous: Vec<(libc::c_int, libc::sigaction)>,
}

impl Guard {
    pub fn install() -> Result<Guard> {
        CAUGHT.store(0, Ordering::SeqCst);
        let mut guard = Guard { previous: Vec::new() };
        for sig in SIGNALS {
            // SAFETY: both structs are valid; the handler only stores to an atomic.
            unsafe {
                let mut action: libc::sigaction = std::mem::zeroed();
                action.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
                libc::sigemptyset(&mut action.sa_mask);
                let mut old: libc::sigaction = std::mem::zeroed();
                if libc::sigaction(sig, &action, &mut old) != 0 {
                    return Err(Error::harness(format!("cannot install a handler for signal {sig}: {}", std::io::Error::last_os_error())));
                }
                guard.previous.push((sig, old));
            }
        }
        Ok(guard)
    }

    /// `Err(Interrupted)` once SIGINT or SIGTERM has arrived.
    pub fn check(&self) -> Result<()> {
        match CAUGHT.load(Ordering::SeqCst) {
            0 => Ok(()),
            libc::SIGINT => Err(Error::Interrupted("SIGINT")),
            _ => Err(Error::Interrupted("SIGTERM")),
        }
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        for (sig, old) in &self.previous {
            // SAFETY: `old` is what sigaction returned for this signal.
            unsafe { libc::sigaction(*sig, old, std::ptr::null_mut()) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signal_becomes_interrupted_and_the_old_handler_returns() {
        let guard = Guard::install().unwrap();
        assert!(guard.check().is_ok());
        // SAFETY: raising a signal that the guard handles.
        unsafe { libc::raise(libc::SIGTERM) };
        assert_eq!(guard.check(), Err(Error::Interrupted("SIGTERM")));
        drop(guard);
        let mut now: libc::sigaction = unsafe { std::mem::zeroed() };
        // SAFETY: querying only.
        unsafe { libc::sigaction(libc::SIGTERM, std::ptr::null(), &mut now) };
        assert_eq!(now.sa_sigaction, libc::SIG_DFL);
    }
}
