//! Where the kernel put a group's period timer, and the tracefs instance
//! every trace of ours runs in. Since 6.6 each group's timer
//! starts at a random offset (`init_cfs_bandwidth`), and whether its expiries
//! fall just before or just after a tick decides how a group whose quota is
//! exactly its demand throttles (docs/fidelity.md). The first bandwidth
//! write arms the timer (`start_cfs_bandwidth`, which keeps the offset's
//! phase), and tracefs's `timer:hrtimer_start` event shows its expiry. The
//! trace runs in a tracefs instance of our own, so the host's tracing is
//! left alone. Where tracefs is not mounted (a fresh machine), the run mounts
//! it for as long as the trace lives, and unmounts it after; where it cannot,
//! the offset is not reported.

use std::ffi::CString;
use std::fs;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// Where tracefs is usually mounted, newest first; the first is where a run mounts it.
const TRACEFS: [&str; 2] = ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"];

/// A tracefs instance recording `hrtimer_start`.
#[derive(Debug)]
pub struct TimerTrace {
    instance: Instance,
}

/// A tracefs instance of our own, so that the host's tracing is left alone;
/// removed when dropped, and tracefs unmounted after it if we mounted it.
#[derive(Debug)]
pub struct Instance {
    pub dir: PathBuf,
    /// Dropped after `dir` is removed (fields drop after `drop` runs).
    _mount: Option<Mount>,
}

/// tracefs as this run mounted it: unmounted when dropped.
#[derive(Debug)]
struct Mount(PathBuf);

/// A path as the C string mount(2) and umount(2) take.
fn c_path(path: &Path) -> CString {
    CString::new(path.as_os_str().as_bytes()).expect("no NUL in a tracefs path")
}

/// mount -t tracefs nodev `at`, with the flags systemd mounts it with.
fn mount_tracefs(at: &Path) -> io::Result<()> {
    let flags = libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC;
    // SAFETY: NUL-terminated strings that outlive the call; no data argument.
    let r = unsafe {
        libc::mount(c"nodev".as_ptr(), c_path(at).as_ptr(), c"tracefs".as_ptr(), flags, std::ptr::null())
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// How long an unmount that finds tracefs busy is tried again.
const UNMOUNT_TRIES_MS: u64 = 2_000;

/// umount `at`, again every millisecond while it is busy, for up to
/// `UNMOUNT_TRIES_MS`. Any process that looks a path up in tracefs (a
/// `stat` of `instances/NAME`, as a test or a monitoring agent polls) holds
/// the mount for that moment, and umount(2) then fails with EBUSY: 170 of 300
/// unmounts did while another process stat'ed a path there in a loop.
fn unmount(at: &Path) -> io::Result<()> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_millis(UNMOUNT_TRIES_MS);
    loop {
        // SAFETY: a NUL-terminated path that outlives the call.
        if unsafe { libc::umount(c_path(at).as_ptr()) } == 0 {
            return Ok(());
        }
        let e = io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EBUSY) || std::time::Instant::now() >= deadline {
            return Err(e);
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        if let Err(e) = unmount(&self.0) {
            eprintln!("throttlelab: warning: cannot unmount the tracefs this run mounted at {}: {e}", self.0.display());
        }
    }
}

/// Where tracefs is: `found`, where it is mounted already, else the usual
/// place once `mount` has mounted it there; the bool says whether it did.
/// Err says why there is none.
fn locate(found: Option<&Path>, mount: impl FnOnce(&Path) -> io::Result<()>) -> Result<(PathBuf, bool), String> {
    if let Some(root) = found {
        return Ok((root.to_path_buf(), false));
    }
    let at = Path::new(TRACEFS[0]);
    mount(at).map_err(|e| format!("tracefs not mounted and cannot be mounted: {e}"))?;
    Ok((at.to_path_buf(), true))
}

impl Instance {
    /// Create instance `name`, mounting tracefs first if it is not; Err says
    /// in a few words why not.
    pub fn open(name: &str) -> Result<Instance, String> {
        let found = TRACEFS.iter().map(Path::new).find(|p| p.join("instances").is_dir());
        let (root, mounted) = locate(found, mount_tracefs)?;
        let mount = mounted.then(|| Mount(root.clone()));
        let dir = root.join("instances").join(name);
        fs::create_dir(&dir).map_err(|e| format!("cannot create the tracefs instance {}: {e}", dir.display()))?;
        Ok(Instance { dir, _mount: mount })
    }

    /// Write `value` to the instance's `file`; Err names the file.
    pub fn write(&self, file: &str, value: &str) -> Result<(), String> {
        let path = self.dir.join(file);
        fs::write(&path, value).map_err(|e| format!("cannot write {}: {e}", path.display()))
    }
}

impl TimerTrace {
    /// Create instance `name` recording `hrtimer_start`; Err says in a few
    /// words why the period timers cannot be traced.
    pub fn open(name: &str) -> Result<TimerTrace, String> {
        let trace = TimerTrace { instance: Instance::open(name)? };
        // Only timers this process arms: the writes run here, other groups' do not.
        trace.instance.write("set_event_pid", &std::process::id().to_string())?;
        trace.instance.write("events/timer/hrtimer_start/enable", "1")?;
        Ok(trace)
    }

    /// Forget what was recorded so far.
    pub fn clear(&self) {
        // Best effort: a failed clear leaves older events, and the last one wins.
        let _ = self.instance.write("trace", "");
    }

    /// The expiry (CLOCK_MONOTONIC, ns) of the last period timer armed
    /// since `clear`.
    pub fn last_period_timer_expiry_ns(&self) -> Option<u64> {
        last_period_timer_expiry_ns(&fs::read_to_string(self.instance.dir.join("trace")).ok()?)
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        // Every event off before the instance goes: removing one whose
        // hrtimer events were firing in interrupts panicked Debian's 6.12
        // under QEMU ("Fatal exception in interrupt", docs/vm.md).
        let _ = self.write("events/enable", "0");
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
    fn tracefs_is_mounted_only_where_it_is_not() {
        let mounted = Path::new("/somewhere/tracing");
        let never = |_: &Path| -> io::Result<()> { panic!("mounted over an existing tracefs") };
        assert_eq!(locate(Some(mounted), never), Ok((mounted.to_path_buf(), false)));
        let mount = |at: &Path| {
            assert_eq!(at, Path::new(TRACEFS[0]));
            Ok(())
        };
        assert_eq!(locate(None, mount), Ok((PathBuf::from(TRACEFS[0]), true)));
        let refused = |_: &Path| Err(io::Error::from_raw_os_error(libc::EPERM));
        assert_eq!(
            locate(None, refused),
            Err("tracefs not mounted and cannot be mounted: Operation not permitted (os error 1)".to_string())
        );
    }

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
