//! Where the kernel put a group's period timer. Since 6.6 each group's timer
//! starts at a random offset (`init_cfs_bandwidth`), and whether its expiries
//! fall just before or just after a tick decides how a group whose quota is
//! exactly its demand throttles (docs/fidelity.md). The first bandwidth
//! write arms the timer (`start_cfs_bandwidth`, which keeps the offset's
//! phase), and tracefs's `timer:hrtimer_start` event shows its expiry. The
//! trace runs in a tracefs instance of our own, so the host's tracing is
//! left alone; without tracefs the offset is simply not reported.

use std::fs;
use std::path::{Path, PathBuf};

/// Where tracefs is usually mounted, newest first.
const TRACEFS: [&str; 2] = ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"];

/// A tracefs instance recording `hrtimer_start`; removed when dropped.
#[derive(Debug)]
pub struct TimerTrace {
    dir: PathBuf,
}

impl TimerTrace {
    /// Create instance `name`; None where tracefs or the event is missing.
    pub fn open(name: &str) -> Option<TimerTrace> {
        let root = TRACEFS
            .iter()
            .map(Path::new)
            .find(|p| p.join("instances").is_dir())?;
        let dir = root.join("instances").join(name);
        fs::create_dir(&dir).ok()?;
        let trace = TimerTrace { dir };
        // Only timers this process arms: the writes run here, other groups' do not.
        fs::write(
            trace.dir.join("set_event_pid"),
            std::process::id().to_string(),
        )
        .ok()?;
        fs::write(trace.dir.join("events/timer/hrtimer_start/enable"), "1").ok()?;
        Some(trace)
    }

    /// Forget what was recorded so far.
    pub fn clear(&self) {
        // Best effort: a failed clear leaves older events, and the last one wins.
        let _ = fs::write(self.dir.join("trace"), "");
    }

    /// The expiry (CLOCK_MONOTONIC, ns) of the last period timer armed
    /// since `clear`.
    pub fn last_period_timer_expiry_ns(&self) -> Option<u64> {
        last_period_timer_expiry_ns(&fs::read_to_string(self.dir.join("trace")).ok()?)
    }
}

impl Drop for TimerTrace {
    fn drop(&mut self) {
        let _ = fs::write(self.dir.join("events/timer/hrtimer_start/enable"), "0");
        if let Err(e) = fs::remove_dir(&self.dir) {
            eprintln!(
                "throttlelab: warning: cannot remove tracefs instance {}: {e}",
                self.dir.display()
            );
        }
    }
}

/// The `expires=` of the last `hrtimer_start` of `sched_cfs_period_timer` in
/// a tracefs `trace` text.
fn last_period_timer_expiry_ns(trace: &str) -> Option<u64> {
    trace
        .lines()
        .rev()
        .filter(|l| l.contains("function=sched_cfs_period_timer "))
        .find_map(|l| l.split_once(" expires=")?.1.split(' ').next()?.parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_last_period_timer_expiry() {
        let trace = "\
# tracer: nop
#
     sh-4083    [001] d..2. 17247.880505: hrtimer_start: hrtimer=00000000273a4b9d function=dl_task_timer expires=17248790035078 softexpires=17248790035078 mode=ABS|HARD was_armed=0
     sh-4083    [001] d..2. 17247.880524: hrtimer_start: hrtimer=00000000d2450e19 function=sched_cfs_period_timer expires=17247860013657 softexpires=17247860013657 mode=ABS|PINNED was_armed=0
     sh-4083    [000] d..2. 17247.890524: hrtimer_start: hrtimer=00000000d2450e20 function=sched_cfs_period_timer expires=17247880013001 softexpires=17247880013001 mode=ABS|PINNED was_armed=0
  <idle>-0      [000] d.h1. 17247.890883: hrtimer_start: hrtimer=00000000a779c66c function=tick_nohz_handler expires=17248800000000 softexpires=17248800000000 mode=ABS|PINNED|HARD was_armed=0
";
        assert_eq!(last_period_timer_expiry_ns(trace), Some(17_247_880_013_001));
        assert_eq!(last_period_timer_expiry_ns("# tracer: nop\n"), None);
    }
}
