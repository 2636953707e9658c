//! What the host offers: privileges, online CPUs, kernel release and CONFIG_HZ.

use crate::error::{Error, Result};
use std::io::Read;
use std::path::Path;
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
    fn config_hz_line() {
        assert_eq!(parse_config_hz("# CONFIG_HZ_100 is not set\nCONFIG_HZ_250=y\nCONFIG_HZ=250\n"), Some(250));
        assert_eq!(parse_config_hz("CONFIG_HZ_1000=y\n"), None);
    }
}
