//! SIGINT, SIGTERM, SIGHUP (a closed terminal) and SIGQUIT during a run set
//! a flag and wake the controller, so that it removes its cgroups and kills
//! its workers before it returns, instead of dying with them in place. The wake-up goes through a pipe that
//! the handler writes to, so the controller can block until a worker speaks,
//! a deadline passes or a signal arrives, and never polls: a poll every 10 ms
//! preempted the workers on the measured CPUs and tripled the throttling of
//! a marginal group (docs/fidelity.md, "The harness's own wake-ups").

use crate::error::{Error, Result};
use std::fs::File;
use std::io::{ErrorKind, Read};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicI32, Ordering};
use std::thread::JoinHandle;

/// The last signal caught, 0 if none.
static CAUGHT: AtomicI32 = AtomicI32::new(0);
/// The write end of the live guard's pipe, -1 if none.
static WAKE_FD: AtomicI32 = AtomicI32::new(-1);

extern "C" fn on_signal(sig: libc::c_int) {
    CAUGHT.store(sig, Ordering::SeqCst);
    let fd = WAKE_FD.load(Ordering::SeqCst);
    if fd >= 0 {
        let byte = sig as u8;
        // SAFETY: write is async-signal-safe; the fd is non-blocking, so a
        // full pipe (wake-ups already pending) drops the byte.
        unsafe { libc::write(fd, (&byte as *const u8).cast(), 1) };
    }
}

/// The signals that end a run, with their names.
const SIGNALS: [(libc::c_int, &str); 4] = [
    (libc::SIGINT, "SIGINT"),
    (libc::SIGTERM, "SIGTERM"),
    (libc::SIGHUP, "SIGHUP"),
    (libc::SIGQUIT, "SIGQUIT"),
];

/// The name of a signal that ends a run.
pub fn name(sig: libc::c_int) -> &'static str {
    SIGNALS.iter().find(|(s, _)| *s == sig).map_or("a signal", |(_, name)| name)
}

/// Our handlers while it lives; the previous ones (Python's) come back on drop.
pub struct Guard {
    previous: Vec<(libc::c_int, libc::sigaction)>,
    /// The pipe's write end (the handler's); closing it ends the waker thread.
    write_end: OwnedFd,
    /// The read end, until [`Guard::wake_with`] hands it to its thread.
    read_end: Option<OwnedFd>,
}

/// A pipe whose write end does not block: (read, write).
fn pipe() -> Result<(OwnedFd, OwnedFd)> {
    let mut fds: [RawFd; 2] = [-1; 2];
    // SAFETY: pipe2 writes two fds into the array on success; we own them.
    unsafe {
        if libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) != 0
            || libc::fcntl(fds[1], libc::F_SETFL, libc::O_NONBLOCK) != 0
        {
            return Err(Error::harness(format!("cannot create the signal pipe: {}", std::io::Error::last_os_error())));
        }
        Ok((OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])))
    }
}

impl Guard {
    pub fn install() -> Result<Guard> {
        CAUGHT.store(0, Ordering::SeqCst);
        let (read_end, write_end) = pipe()?;
        let mut guard = Guard { previous: Vec::new(), write_end, read_end: Some(read_end) };
        WAKE_FD.store(guard.write_end.as_raw_fd(), Ordering::SeqCst);
        for (sig, _) in SIGNALS {
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

    /// Call `wake` from a thread of its own each time one of the signals
    /// arrives, and return that thread; it ends when the guard is dropped.
    /// Once per guard: later calls do nothing and return None.
    pub fn wake_with(&mut self, wake: impl Fn() + Send + 'static) -> Option<JoinHandle<()>> {
        let read_end = self.read_end.take()?;
        Some(std::thread::spawn(move || {
            let mut pipe = File::from(read_end);
            let mut byte = [0u8];
            loop {
                match pipe.read(&mut byte) {
                    Ok(1) => wake(),
                    // The signal may be delivered to this thread, mid-read
                    // (the handler has no SA_RESTART); its byte is still there.
                    Err(e) if e.kind() == ErrorKind::Interrupted => {}
                    // EOF: the guard's write end closed.
                    _ => break,
                }
            }
        }))
    }

    /// Whether one of the signals has arrived: cheap enough for a busy loop.
    pub fn interrupted(&self) -> bool {
        CAUGHT.load(Ordering::Relaxed) != 0
    }

    /// `Err(Interrupted)` once one of the signals has arrived.
    pub fn check(&self) -> Result<()> {
        match CAUGHT.load(Ordering::SeqCst) {
            0 => Ok(()),
            sig => Err(Error::Interrupted(sig)),
        }
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        for (sig, old) in &self.previous {
            // SAFETY: `old` is what sigaction returned for this signal.
            unsafe { libc::sigaction(*sig, old, std::ptr::null_mut()) };
        }
        // The write end closes when the fields drop, after this.
        WAKE_FD.store(-1, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    /// The handlers and the flag are the process's: one guard at a time.
    static ONE_GUARD: Mutex<()> = Mutex::new(());

    #[test]
    fn a_signal_becomes_interrupted_and_the_old_handler_returns() {
        let _one = ONE_GUARD.lock().unwrap();
        let guard = Guard::install().unwrap();
        assert!(guard.check().is_ok());
        // SAFETY: raising a signal that the guard handles.
        unsafe { libc::raise(libc::SIGTERM) };
        assert_eq!(guard.check(), Err(Error::Interrupted(libc::SIGTERM)));
        drop(guard);
        let mut now: libc::sigaction = unsafe { std::mem::zeroed() };
        // SAFETY: querying only.
        unsafe { libc::sigaction(libc::SIGTERM, std::ptr::null(), &mut now) };
        assert_eq!(now.sa_sigaction, libc::SIG_DFL);
    }

    #[test]
    fn a_closed_terminal_and_ctrl_backslash_end_a_run_as_sigterm_does() {
        let _one = ONE_GUARD.lock().unwrap();
        for (sig, name) in [(libc::SIGHUP, "SIGHUP"), (libc::SIGQUIT, "SIGQUIT")] {
            let guard = Guard::install().unwrap();
            assert!(!guard.interrupted());
            // SAFETY: raising a signal that the guard handles.
            unsafe { libc::raise(sig) };
            assert!(guard.interrupted());
            let e = guard.check().unwrap_err();
            assert_eq!(e, Error::Interrupted(sig));
            assert!(e.to_string().starts_with(&format!("interrupted by {name};")), "{e}");
        }
    }

    #[test]
    fn a_signal_that_interrupts_the_wakers_read_still_wakes() {
        use std::os::unix::thread::JoinHandleExt;
        let _one = ONE_GUARD.lock().unwrap();
        let mut guard = Guard::install().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let waker = guard.wake_with(move || tx.send(()).unwrap()).unwrap();
        assert!(guard.wake_with(|| ()).is_none());
        // Let it block in read(), then deliver the signal to it: read fails
        // with EINTR, the handler's byte waits in the pipe.
        std::thread::sleep(std::time::Duration::from_millis(50));
        // SAFETY: the waker thread is alive (it holds the sender rx waits on).
        assert_eq!(unsafe { libc::pthread_kill(waker.as_pthread_t(), libc::SIGTERM) }, 0);
        assert_eq!(rx.recv_timeout(std::time::Duration::from_secs(5)), Ok(()));
        assert_eq!(guard.check(), Err(Error::Interrupted(libc::SIGTERM)));
        drop(guard);
        waker.join().unwrap();
    }

    #[test]
    fn a_signal_wakes_the_waker_and_dropping_the_guard_ends_its_thread() {
        let _one = ONE_GUARD.lock().unwrap();
        let mut guard = Guard::install().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        guard.wake_with(move || tx.send(()).unwrap());
        // SAFETY: raising a signal that the guard handles.
        unsafe { libc::raise(libc::SIGINT) };
        assert_eq!(rx.recv_timeout(std::time::Duration::from_secs(5)), Ok(()));
        assert_eq!(guard.check(), Err(Error::Interrupted(libc::SIGINT)));
        drop(guard);
        // The thread, and the sender it holds, are gone.
        assert_eq!(rx.recv_timeout(std::time::Duration::from_secs(5)), Err(std::sync::mpsc::RecvTimeoutError::Disconnected));
    }
}
