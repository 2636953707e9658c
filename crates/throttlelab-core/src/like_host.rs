//! A scenario set up like a host the real backend measured, so that the
//! simulator's runs can be held against the kernel's (`compare`).

use crate::error::ScenarioError;
use crate::output::Host;
use crate::profile::Profile;
use crate::scenario::Scenario;

impl Scenario {
    /// Take the host's kernel (the profile of its release, its CONFIG_HZ when
    /// known), its measured background activity, the speed it sustains the
    /// real backend's calibrated work at, and its interrupts' lateness. `placed`: also start where
    /// that kernel run started against the tick grid and put each group's
    /// period timer where the kernel had it (a paired run, a diagnostic); else
    /// the simulator draws both itself.
    pub fn set_like(&mut self, host: &Host, placed: bool) -> Result<(), ScenarioError> {
        self.kernel.profile = Profile::for_release(&host.release)
            .ok_or_else(|| ScenarioError::new("host.release", format!("no kernel version in {:?}", host.release)))?;
        if let Some(hz) = host.hz {
            self.machine.hz = hz;
        }
        self.machine.background_per_s = host.background_per_s;
        self.machine.background_us = host.background_us;
        if let Some(speed) = host.work_speed {
            // The calibration is the fastest of several short runs: a longer
            // probe can beat it only by noise.
            self.machine.work_speed = speed.min(1.0);
        }
        if let Some(latency_us) = host.tick_latency_us {
            // Uniform lateness in [0, 2 x median): the median the probe measured.
            self.machine.tick_jitter_us = 2.0 * latency_us;
            self.machine.timer_jitter_us = 2.0 * latency_us;
        }
        if placed {
            self.machine.uptime_s = Some(host.uptime_s);
            for cgroup in &mut self.cgroups {
                if let Some(&offset_us) = host.period_timer_offset_us.get(&cgroup.name) {
                    cgroup.period_timer_offset_us = Some(offset_us);
                }
            }
        }
        self.validate()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load::tests::BASE as SCENARIO;
    use std::collections::BTreeMap;

    fn host() -> Host {
        Host {
            release: "6.1.0-56-amd64".into(),
            hz: Some(1000),
            cgroup: "v2".into(),
            background_per_s: 12.5,
            background_us: 40.0,
            tick_latency_us: Some(45.0),
            work_speed: Some(0.97),
            period_timer_offset_us: BTreeMap::from([("app".into(), 4321.5)]),
            uptime_s: 1234.5,
        }
    }

    #[test]
    fn takes_the_hosts_kernel_background_and_interrupt_lateness() {
        let mut s = crate::load(SCENARIO, &[]).unwrap();
        let defaults = (s.machine.tick_jitter_us, s.machine.timer_jitter_us);
        s.set_like(&Host { tick_latency_us: None, work_speed: None, ..host() }, false).unwrap();
        assert_eq!((s.machine.tick_jitter_us, s.machine.timer_jitter_us), defaults, "not measured: the defaults");
        assert_eq!(s.machine.work_speed, 1.0);
        s.set_like(&host(), false).unwrap();
        assert_eq!((s.kernel.profile, s.machine.hz), (Profile::for_release("6.1").unwrap(), 1000));
        assert_eq!((s.machine.background_per_s, s.machine.background_us), (12.5, 40.0));
        assert_eq!((s.machine.tick_jitter_us, s.machine.timer_jitter_us), (90.0, 90.0));
        assert_eq!(s.machine.work_speed, 0.97);
        s.set_like(&Host { work_speed: Some(1.002), ..host() }, false).unwrap();
        assert_eq!(s.machine.work_speed, 1.0, "faster than the calibration: noise");
        assert_eq!((s.machine.uptime_s, s.cgroups[0].period_timer_offset_us), (None, None), "unplaced: drawn");
        s.set_like(&host(), true).unwrap();
        assert_eq!((s.machine.uptime_s, s.cgroups[0].period_timer_offset_us), (Some(1234.5), Some(4321.5)));
    }

    #[test]
    fn a_host_is_read_back_from_the_real_backends_json() {
        let json = serde_json::to_string(&host()).unwrap();
        assert_eq!(serde_json::from_str::<Host>(&json).unwrap(), host());
    }

    #[test]
    fn a_release_without_a_version_is_refused() {
        let mut s = crate::load(SCENARIO, &[]).unwrap();
        let e = s.set_like(&Host { release: "custom".into(), ..host() }, false).unwrap_err();
        assert_eq!(e.to_string(), "host.release: no kernel version in \"custom\"");
    }
}
