//! A scenario set up like a host the real backend measured, so that the
//! simulator's runs can be held against the kernel's (`compare`) and a
//! prediction can assume this host's background (`--like-host`).
//!
//! The rule is written once, as `--set` overrides: every path (a
//! comparison's seeds, and `run`, `explain`, `advise` and `sweep` with
//! `--like-host`) loads the scenario with them.

use crate::format::error::ScenarioError;
use crate::vocab::output::Host;
use crate::vocab::profile::Profile;
use crate::format::scenario::{measured_background_p50_us, Scenario, DEFAULT_TICK_JITTER_US};
use crate::format::validate::MAX_WORK_SPEED_CV;
use toml::Value;

impl Host {
    /// The overrides that take the host's kernel (the profile of its release,
    /// its CONFIG_HZ when known), its measured background activity, the speed
    /// it sustains the real backend's calibrated work at, and its interrupts'
    /// lateness. `placed`, the scenario (loaded with the user's overrides):
    /// also start where that kernel run started against the tick grid and put
    /// each of its groups' period timers where the kernel had it (a paired
    /// run, a diagnostic); else the simulator draws both itself.
    pub fn scenario_overrides(&self, placed: Option<&Scenario>) -> Result<Vec<String>, ScenarioError> {
        let profile = Profile::for_release(&self.release)
            .ok_or_else(|| ScenarioError::new("host.release", format!("no kernel version in {:?}", self.release)))?;
        // TOML's own float syntax: read back, the same f64.
        let float = |x: f64| Value::Float(x).to_string();
        let mut set = vec![format!("kernel.profile={}", profile.as_str())];
        if let Some(hz) = self.hz {
            set.push(format!("machine.hz={hz}"));
        }
        set.push(format!("machine.background_per_s={}", float(self.background_per_s)));
        set.push(format!("machine.background_us={}", float(self.background_us)));
        if !self.background_lengths_us.is_empty() {
            let lengths: Vec<String> = self.background_lengths_us.iter().map(|&us| float(us)).collect();
            set.push(format!("machine.background_lengths_us=[{}]", lengths.join(", ")));
        } else if let Some(p50_us) = measured_background_p50_us(self.background_p50_us, self.background_us) {
            set.push(format!("machine.background_p50_us={}", float(p50_us)));
        }
        if let Some(speed) = self.work_speed {
            // The calibration is the fastest of several short runs: a longer
            // probe can beat it only by noise.
            set.push(format!("machine.work_speed={}", float(speed.min(1.0))));
        }
        if let Some(cv) = self.work_speed_cv {
            // Its spread run to run, within what a scenario accepts.
            set.push(format!("machine.work_speed_cv={}", float(cv.min(MAX_WORK_SPEED_CV))));
        }
        if let Some(cost_us) = self.wakeup_cost_us {
            // Within what a scenario takes: a fit below 0 is noise around none.
            let tick_us = self.hz.map_or(1_000.0, |hz| 1e6 / hz as f64);
            set.push(format!("machine.wakeup_cost_us={}", float(cost_us.clamp(0.0, tick_us - 1.0))));
        }
        if let Some(latency_us) = self.tick_latency_us {
            // Uniform lateness in [0, 2 x median): the median the probe measured.
            set.push(format!("machine.tick_jitter_us={}", float(2.0 * latency_us)));
            set.push(format!("machine.timer_jitter_us={}", float(2.0 * latency_us)));
        }
        if let Some(late) = self.tick_late.filter(|l| l.share > 0.0 && l.late_us > 0.0) {
            // Within a tick with the jitter (validate.rs): a tick late past
            // the next one's expiry is one tick the later.
            let tick_us = self.hz.map_or(f64::INFINITY, |hz| 1e6 / hz as f64);
            // Unmeasured (a guest), the scenario keeps its jitter: the default's.
            let jitter_us = self.tick_latency_us.map_or(DEFAULT_TICK_JITTER_US, |latency_us| 2.0 * latency_us);
            let late_us = late.late_us.min(tick_us - jitter_us - 1.0);
            if late_us > 0.0 {
                set.push(format!("machine.tick_late_share={}", float(late.share.min(0.99))));
                set.push(format!("machine.tick_late_us={}", float(late_us)));
                set.push(format!("machine.tick_late_together={}", float(late.together.clamp(0.0, 1.0))));
            }
        }
        if let Some(scenario) = placed {
            set.push(format!("machine.uptime_s={}", float(self.uptime_s)));
            for cgroup in &scenario.cgroups {
                if let Some(&offset_us) = self.period_timer_offset_us.get(&cgroup.name) {
                    set.push(format!("cgroup.{}.period_timer_offset_us={}", cgroup.name, float(offset_us)));
                }
            }
        }
        Ok(set)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vocab::output::TickLateness;
    use crate::format::load::tests::BASE as SCENARIO;
    use std::collections::BTreeMap;

    fn host() -> Host {
        Host {
            release: "6.1.0-56-amd64".into(),
            hz: Some(1000),
            cgroup: "v2".into(),
            background_per_s: 12.5,
            background_us: 40.0,
            background_p50_us: Some(15.0),
            background_lengths_us: vec![],
            tick_latency_us: Some(45.0),
            tick_late: None,
            work_speed: Some(0.97),
            work_speed_cv: Some(0.006),
            wakeup_cost_us: Some(17.5),
            run_sleep_work_speed: Some(0.96),
            // "web": a group of another scenario, left out.
            period_timer_offset_us: BTreeMap::from([("app".into(), 4321.5), ("web".into(), 0.25)]),
            thread_starts: BTreeMap::new(),
            uptime_s: 1234.5,
        }
    }

    fn like(host: &Host, placed: bool) -> Scenario {
        let scenario = crate::load(SCENARIO, &[]).unwrap();
        crate::load(SCENARIO, &host.scenario_overrides(placed.then_some(&scenario)).unwrap()).unwrap()
    }

    #[test]
    fn takes_the_hosts_kernel_background_and_interrupt_lateness() {
        let defaults = crate::load(SCENARIO, &[]).unwrap().machine;
        let s = like(&Host { background_p50_us: None, tick_latency_us: None, work_speed: None, work_speed_cv: None, ..host() }, false);
        assert_eq!(s.machine.background_p50_us, None, "not measured: every preemption at the mean");
        assert_eq!((s.machine.tick_jitter_us, s.machine.timer_jitter_us), (defaults.tick_jitter_us, defaults.timer_jitter_us), "not measured: the defaults");
        assert_eq!((s.machine.work_speed, s.machine.work_speed_cv), (1.0, None), "not measured: every run the same");
        let s = like(&host(), false);
        assert_eq!(s.machine.work_speed_cv, Some(0.006));
        assert_eq!((s.kernel.profile, s.machine.hz), (Profile::for_release("6.1").unwrap(), 1000));
        assert_eq!((s.machine.background_per_s, s.machine.background_us, s.machine.background_p50_us), (12.5, 40.0, Some(15.0)));
        let s = like(&Host { background_lengths_us: vec![5.0, 15.0, 100.0], ..host() }, false);
        assert_eq!((s.machine.background_lengths_us, s.machine.background_p50_us), (vec![5.0, 15.0, 100.0], None), "measured lengths: drawn from");
        let s = like(&Host { background_p50_us: Some(55.0), ..host() }, false);
        assert_eq!(s.machine.background_p50_us, Some(40.0), "a median above the mean: the mean");
        let s = like(&Host { background_us: 0.0, background_p50_us: Some(0.0), ..host() }, false);
        assert_eq!(s.machine.background_p50_us, None, "no preemption's length: none");
        assert_eq!((s.machine.tick_jitter_us, s.machine.timer_jitter_us), (90.0, 90.0));
        assert_eq!(s.machine.work_speed, 0.97);
        let s = like(&Host { work_speed: Some(1.002), ..host() }, false);
        assert_eq!(s.machine.work_speed, 1.0, "faster than the calibration: noise");
        assert_eq!(s.machine.wakeup_cost_us, 17.5);
        let s = like(&Host { wakeup_cost_us: None, ..host() }, false);
        assert_eq!(s.machine.wakeup_cost_us, 0.0, "not measured: none");
        let s = like(&Host { wakeup_cost_us: Some(-3.0), ..host() }, false);
        assert_eq!(s.machine.wakeup_cost_us, 0.0, "a fit below 0: none");
        let s = like(&Host { wakeup_cost_us: Some(5_000.0), ..host() }, false);
        assert_eq!(s.machine.wakeup_cost_us, 999.0, "beyond a tick: within it");
        let s = like(&Host { work_speed_cv: Some(0.3), ..host() }, false);
        assert_eq!(s.machine.work_speed_cv, Some(MAX_WORK_SPEED_CV), "beyond what a scenario takes: its bound");
        assert_eq!((s.machine.uptime_s, s.cgroups[0].period_timer_offset_us), (None, None), "unplaced: drawn");
        let s = like(&host(), true);
        assert_eq!((s.machine.uptime_s, s.cgroups[0].period_timer_offset_us), (Some(1234.5), Some(4321.5)));
    }

    #[test]
    fn late_ticks_found_are_taken_within_a_tick() {
        let s = like(&host(), false);
        assert_eq!((s.machine.tick_late_share, s.machine.tick_late_us, s.machine.tick_late_together), (None, None, None), "none found: none");
        let late = |share, late_us| Some(TickLateness { share, late_us, together: 0.8 });
        let s = like(&Host { tick_late: late(0.1, 340.0), ..host() }, false);
        assert_eq!((s.machine.tick_late_share, s.machine.tick_late_us, s.machine.tick_late_together), (Some(0.1), Some(340.0), Some(0.8)));
        // HZ=1000: a tick of 1000 us, less the jitter of 90 us.
        let s = like(&Host { tick_late: late(0.1, 3400.0), ..host() }, false);
        assert_eq!(s.machine.tick_late_us, Some(909.0), "later than the next tick: within it");
        let s = like(&Host { tick_late: late(0.1, 3400.0), tick_latency_us: None, ..host() }, false);
        assert_eq!(s.machine.tick_late_us, Some(1000.0 - DEFAULT_TICK_JITTER_US - 1.0), "the jitter unmeasured: the default's kept");
        let s = like(&Host { tick_late: late(0.0, 3400.0), ..host() }, false);
        assert_eq!(s.machine.tick_late_share, None, "a share of 0: none");
    }

    #[test]
    fn measured_numbers_arrive_unrounded() {
        // Values with no short decimal form (28.47... a probe's, which JSON
        // read without float_roundtrip moved by one unit in the last place),
        // read back from the host block's JSON, as compare and --like-host do.
        for x in [0.1 + 0.2, 1.0 / 3.0, 28.472483086189534, 123.45678901234567] {
            let json = serde_json::to_string(&Host { background_per_s: x, background_us: x, tick_latency_us: Some(x), ..host() }).unwrap();
            let s = like(&serde_json::from_str(&json).unwrap(), false);
            assert_eq!((s.machine.background_per_s, s.machine.background_us, s.machine.tick_jitter_us), (x, x, 2.0 * x));
        }
    }

    #[test]
    fn a_host_is_read_back_from_the_real_backends_json() {
        let json = serde_json::to_string(&host()).unwrap();
        assert_eq!(serde_json::from_str::<Host>(&json).unwrap(), host());
    }

    #[test]
    fn a_release_without_a_version_is_refused() {
        let e = Host { release: "custom".into(), ..host() }.scenario_overrides(None).unwrap_err();
        assert_eq!(e.to_string(), "host.release: no kernel version in \"custom\"");
    }
}
