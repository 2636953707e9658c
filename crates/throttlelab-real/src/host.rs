//! What the host offers: privileges, online CPUs, kernel release and
//! CONFIG_HZ; and what /proc says of a process.

use crate::error::{Error, Result};
use std::io::Read;
use std::path::Path;
use std::time::{Duration, SystemTime};
use throttlelab_core::scenario::parse_cpu_list;
pub use throttlelab_core::output::Host;

/// Creating cgroups and writing their files needs root.
pub fn check_root(euid: u32) -> Result<()> {
    if euid == 0 {
        Ok(())
    } else {
        Err(Error::harness(format!("the real backend needs root (effective uid is {euid})")))
    }
}

/// The machine uses CPUs 0..cpus-1: all of them must be online.
pub fn check_cpus(machine_cpus: usize, online: &[usize]) -> Result<()> {
    match (0..machine_cpus).find(|c| !online.contains(c)) {
        None => Ok(()),
        Some(c) => Err(Error::harness(format!(
            "machine.cpus = {machine_cpus} but CPU {c} is not online on this host ({} online)",
            online.len()
        ))),
    }
}

/// CPUs listed in /sys/devices/system/cpu/online.
pub fn online_cpus() -> Result<Vec<usize>> {
    let path = Path::new("/sys/devices/system/cpu/online");
    let text = std::fs::read_to_string(path).map_err(|e| Error::io("read", path, e))?;
    parse_cpu_list(text.trim()).map_err(|m| Error::harness(format!("{}: {m}", path.display())))
}

pub fn release() -> Result<String> {
    let path = Path::new("/proc/sys/kernel/osrelease");
    let text = std::fs::read_to_string(path).map_err(|e| Error::io("read", path, e))?;
    Ok(text.trim().to_string())
}

/// CONFIG_HZ of the running kernel, from its config file or /proc/config.gz.
pub fn config_hz(release: &str) -> Option<u32> {
    let plain = std::fs::read_to_string(format!("/boot/config-{release}")).ok();
    let text = plain.or_else(|| {
        let file = std::fs::File::open("/proc/config.gz").ok()?;
        let mut text = String::new();
        flate2::read::GzDecoder::new(file).read_to_string(&mut text).ok()?;
        Some(text)
    })?;
    parse_config_hz(&text)
}

fn parse_config_hz(config: &str) -> Option<u32> {
    config.lines().find_map(|l| l.strip_prefix("CONFIG_HZ=")?.trim().parse().ok())
}

/// The fields of a /proc/.../stat line after the command, which is in
/// parentheses and may itself hold spaces and parentheses: the state
/// (field 3 of proc(5)) first.
pub fn stat_fields(stat: &str) -> Vec<&str> {
    stat.rsplit_once(')').map_or(Vec::new(), |(_, rest)| rest.split_whitespace().collect())
}

/// When process `pid` started (wall clock, to the second: /proc/stat's
/// `btime` is whole seconds); None if there is no such process or it has
/// exited (a zombie).
pub fn live_process_start(pid: u32) -> Option<SystemTime> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let boot_s: u64 = std::fs::read_to_string("/proc/stat")
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix("btime ")?.trim().parse().ok())?;
    // SAFETY: sysconf has no preconditions.
    let ticks_per_s = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    start_after_boot(&stat, ticks_per_s).map(|since_boot| SystemTime::UNIX_EPOCH + Duration::from_secs(boot_s) + since_boot)
}

/// A live process's start after boot, from its stat line (`starttime`,
/// field 22, in clock ticks); None for a zombie.
fn start_after_boot(stat: &str, ticks_per_s: u64) -> Option<Duration> {
    let fields = stat_fields(stat);
    if matches!(fields.first(), None | Some(&"Z") | Some(&"X")) {
        return None;
    }
    let ticks: u64 = fields.get(22 - 3)?.parse().ok()?;
    Some(Duration::from_nanos(ticks * 1_000_000_000 / ticks_per_s))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_non_root() {
        assert!(check_root(0).is_ok());
        let e = check_root(1000).unwrap_err().to_string();
        assert!(e.contains("root") && e.contains("1000"), "{e}");
    }

    #[test]
    fn refuses_more_cpus_than_online() {
        assert!(check_cpus(2, &[0, 1]).is_ok());
        let e = check_cpus(4, &[0, 1]).unwrap_err().to_string();
        assert!(e.contains("machine.cpus = 4") && e.contains("CPU 2"), "{e}");
        assert!(check_cpus(2, &[1, 2]).is_err());
    }

    #[test]
    fn a_process_starts_at_its_starttime_unless_it_is_a_zombie() {
        let stat = |state: &str| format!("4242 (a) b) {state} 1 4242 4242 0 -1 4194560 100 0 0 0 5 1 0 0 20 0 1 0 123456 1000 10");
        assert_eq!(start_after_boot(&stat("S"), 100), Some(Duration::from_millis(1_234_560)));
        assert_eq!(start_after_boot(&stat("Z"), 100), None);
        assert_eq!(start_after_boot("garbage", 100), None);
        // This process: started before now, after boot.
        let me = live_process_start(std::process::id()).unwrap();
        assert!(me <= SystemTime::now() + Duration::from_secs(1));
        assert_eq!(live_process_start(u32::MAX), None);
    }

    #[test]
    fn config_hz_line() {
        assert_eq!(parse_config_hz("# CONFIG_HZ_100 is not set\nCONFIG_HZ_250=y\nCONFIG_HZ=250\n"), Some(250));
        assert_eq!(parse_config_hz("CONFIG_HZ_1000=y\n"), None);
    }
}
