//! A thread's scheduling: its policy, real-time priority and nice, read from
//! the calling thread and given to another, so that the capture's helper
//! threads (the spill's writer) run as its trace reader does.

/// The calling thread's scheduling as the kernel reports it. `policy` is
/// `sched_getscheduler`'s answer, which carries `SCHED_RESET_ON_FORK` where
/// it was set (the reader sets it): [`Scheduling::is_realtime`] looks past it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Scheduling {
    pub policy: libc::c_int,
    pub priority: libc::c_int,
    pub nice: libc::c_int,
}

impl Scheduling {
    pub fn of_this_thread() -> Scheduling {
        // SAFETY: this thread's (0) policy, parameters and nice; errno reset to tell a nice of -1 from an error.
        unsafe {
            let mut param = libc::sched_param { sched_priority: 0 };
            libc::sched_getparam(0, &mut param);
            *libc::__errno_location() = 0;
            let nice = libc::getpriority(libc::PRIO_PROCESS, 0);
            let nice = if *libc::__errno_location() != 0 { 0 } else { nice };
            Scheduling { policy: libc::sched_getscheduler(0), priority: param.sched_priority, nice }
        }
    }

    /// SCHED_FIFO or SCHED_RR, with or without `SCHED_RESET_ON_FORK`.
    pub fn is_realtime(&self) -> bool {
        matches!(self.policy & !libc::SCHED_RESET_ON_FORK, libc::SCHED_FIFO | libc::SCHED_RR)
    }

    /// The calling thread scheduled so, as far as it may; where it may not,
    /// it stays as it is. A real-time policy is not inherited by its forks.
    pub fn apply_to_this_thread(self) {
        // SAFETY: this thread only (0).
        unsafe {
            if self.is_realtime() {
                let param = libc::sched_param { sched_priority: self.priority };
                libc::sched_setscheduler(0, self.policy | libc::SCHED_RESET_ON_FORK, &param);
            } else if self.nice < 0 {
                libc::setpriority(libc::PRIO_PROCESS, 0, self.nice);
            }
        }
    }
}

/// The calling thread at SCHED_FIFO (reset on fork) while this lives, then
/// scheduled as it was. The capture's reader holds one while it reads; the
/// controller from the start to its last read of the counters: woken at the
/// start together with its workers, at SCHED_OTHER it waited on 6.1 (CFS)
/// until a throttle freed a CPU, and read its "before" counters after the
/// first period's quota was used (docs/fidelity.md, "6.1 under TCG").
pub struct FifoWhile {
    was: Scheduling,
}

impl FifoWhile {
    /// Err where the policy is refused (no CAP_SYS_NICE, or a cgroup with no
    /// real-time runtime): the thread stays as it was.
    pub fn begin(priority: libc::c_int) -> std::io::Result<FifoWhile> {
        let was = Scheduling::of_this_thread();
        let param = libc::sched_param { sched_priority: priority };
        // SAFETY: this thread only (0); a thread it forks starts at SCHED_OTHER.
        match unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO | libc::SCHED_RESET_ON_FORK, &param) } {
            0 => Ok(FifoWhile { was }),
            _ => Err(std::io::Error::last_os_error()),
        }
    }
}

impl Drop for FifoWhile {
    fn drop(&mut self) {
        // SAFETY: this thread only (0); its policy as read (with its
        // SCHED_RESET_ON_FORK, if it had it; SCHED_OTHER if the read failed)
        // and its priority. Its nice (static priority) is kept across a
        // real-time policy.
        unsafe {
            let param = libc::sched_param { sched_priority: self.was.priority };
            libc::sched_setscheduler(0, self.was.policy.max(0), &param);
        }
    }
}

/// As `[capture]` names a thread's scheduling: `SCHED_FIFO 1` (`SCHED_RR 1`),
/// or `nice -10` for every other policy.
impl std::fmt::Display for Scheduling {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        match self.policy & !libc::SCHED_RESET_ON_FORK {
            libc::SCHED_FIFO => write!(f, "SCHED_FIFO {}", self.priority),
            libc::SCHED_RR => write!(f, "SCHED_RR {}", self.priority),
            _ => write!(f, "nice {}", self.nice),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A thread given the scheduling of one at SCHED_FIFO with
    /// SCHED_RESET_ON_FORK (the capture's reader) runs at SCHED_FIFO too.
    /// Needs CAP_SYS_NICE (the tests run as root, as capture does).
    #[test]
    fn a_readers_fifo_with_reset_on_fork_is_given_on() {
        let reader = std::thread::spawn(|| {
            let param = libc::sched_param { sched_priority: 1 };
            // SAFETY: this test thread only.
            let r = unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO | libc::SCHED_RESET_ON_FORK, &param) };
            assert_eq!(r, 0, "{}", std::io::Error::last_os_error());
            let theirs = Scheduling::of_this_thread();
            assert!(theirs.is_realtime(), "{theirs:?}");
            std::thread::spawn(move || {
                theirs.apply_to_this_thread();
                Scheduling::of_this_thread()
            })
            .join()
            .unwrap()
        });
        let given = reader.join().unwrap();
        assert_eq!(given.policy & !libc::SCHED_RESET_ON_FORK, libc::SCHED_FIFO, "{given:?}");
        assert_eq!(given.priority, 1);
        assert_eq!(given.to_string(), "SCHED_FIFO 1");
    }

    #[test]
    fn a_thread_at_sched_other_is_named_by_its_nice() {
        let other = Scheduling { policy: libc::SCHED_OTHER, priority: 0, nice: -10 };
        assert_eq!(other.to_string(), "nice -10");
        assert_eq!(Scheduling { policy: libc::SCHED_RR | libc::SCHED_RESET_ON_FORK, priority: 2, nice: 0 }.to_string(), "SCHED_RR 2");
    }

    /// A thread at SCHED_OTHER with nice 3 runs at SCHED_FIFO 1 while a
    /// `FifoWhile` lives and at SCHED_OTHER, nice 3, after. Needs
    /// CAP_SYS_NICE (the tests run as root, as the controller does).
    #[test]
    fn fifo_while_gives_the_thread_back_as_it_was() {
        std::thread::spawn(|| {
            // SAFETY: this test thread only.
            assert_eq!(unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, 3) }, 0);
            let held = FifoWhile::begin(1).unwrap();
            let during = Scheduling::of_this_thread();
            assert_eq!((during.policy & !libc::SCHED_RESET_ON_FORK, during.priority), (libc::SCHED_FIFO, 1), "{during:?}");
            drop(held);
            let after = Scheduling::of_this_thread();
            assert_eq!((after.policy, after.priority, after.nice), (libc::SCHED_OTHER, 0, 3), "{after:?}");
        })
        .join()
        .unwrap();
    }
}
