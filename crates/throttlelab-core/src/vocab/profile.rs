//! Kernel releases whose bandwidth-control semantics differ, and the proposed
//! mechanisms that can be switched on with `kernel.features`.

use serde::{de, Deserialize, Deserializer, Serialize, Serializer};

/// `kernel.profile`: which release's code paths the simulator follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub enum Profile {
    /// Per-CPU runtime expires at the period boundary (512ac999).
    V4_18,
    /// Expiry removed (de53fd7aedb1, 763a9ec06c40).
    V5_4,
    /// `cpu.max.burst` (f4183717b370).
    V5_14,
    /// SIS_UTIL (70fb5ccf2ebb, 5.19) and, from its stable line, the aligned
    /// tick (e9523a0d8189, 13bb06f8dd42) and the
    /// proportional newidle balance (33cf66d88306, taken into 6.1.160): what
    /// Debian's 6.1.0-56 (6.1.192), the VM's 6.1, runs (its
    /// `sched/features` lists SIS_UTIL and NI_RANDOM).
    V6_1,
    /// EEVDF pick; period timer starts at a random offset (41abdba93747).
    V6_6,
    /// A fair deadline server per CPU, counted in SCHED_DEADLINE admission
    /// (5f6bd380c7bd, 6.12).
    V6_12,
    /// Task-based throttling, deferred to the return to user space.
    #[default]
    V6_18,
}

impl Profile {
    pub const ALL: [Profile; 7] = [Profile::V4_18, Profile::V5_4, Profile::V5_14, Profile::V6_1, Profile::V6_6, Profile::V6_12, Profile::V6_18];

    pub fn as_str(self) -> &'static str {
        match self {
            Profile::V4_18 => "4.18",
            Profile::V5_4 => "5.4",
            Profile::V5_14 => "5.14",
            Profile::V6_1 => "6.1",
            Profile::V6_6 => "6.6",
            Profile::V6_12 => "6.12",
            Profile::V6_18 => "6.18",
        }
    }

    pub fn parse(s: &str) -> Option<Profile> {
        Profile::ALL.into_iter().find(|p| p.as_str() == s)
    }

    /// The profile whose semantics kernel `release` has (`6.18.44-fc` → 6.18):
    /// the newest profile not after it; releases before 5.4 get 4.18 (slice
    /// expiry). Stable kernels that took the expiry removal (4.14.154+,
    /// 4.19.84+, 5.3.9+) are not told apart. None when `release` does not
    /// start with a version.
    pub fn for_release(release: &str) -> Option<Profile> {
        let version = major_minor(release)?;
        let newest = Profile::ALL.into_iter().rev().find(|p| major_minor(p.as_str()).is_some_and(|since| since <= version));
        Some(newest.unwrap_or(Profile::V4_18))
    }

    /// Local runtime carries an expiry stamp (`runtime_expires`, `expires_seq`).
    pub fn has_expiry(self) -> bool {
        self < Profile::V5_4
    }

    /// `cpu.max.burst` exists and refills accumulate up to quota + burst.
    pub fn has_burst(self) -> bool {
        self >= Profile::V5_14
    }

    /// `init_cfs_bandwidth` sets a random first expiry in [0, 100 ms).
    pub fn has_random_timer_offset(self) -> bool {
        self >= Profile::V6_6
    }

    /// `throttle_cfs_rq` first retries for 1 ns of runtime, and throttled
    /// runqueues do not ask for runtime (26a8b12747c9 and its companions, 5.7).
    pub fn has_throttle_race_fixes(self) -> bool {
        self >= Profile::V5_14
    }

    /// Throttled time runs only while the throttled runqueue holds tasks: it
    /// starts in `throttle_cfs_rq` when tasks are queued, or when the first task
    /// arrives on a runqueue throttled while empty (3ab150d011da, 6.5; 6.18's
    /// `record_throttle_clock` starts it when that task leaves for the limbo
    /// list, an instant later). Before, every throttle counted until unthrottle.
    pub fn has_throttled_time_with_tasks(self) -> bool {
        self >= Profile::V6_6
    }

    /// SIS_UTIL (70fb5ccf2ebb, 5.19): a waking task scans its LLC for an idle
    /// CPU only as far as the LLC's utilization allows, and not at all above
    /// about 60 % on two CPUs; before, it always scanned a small LLC. From
    /// profile 6.1 on (5.19 and 6.0 map to 5.14 and are not told apart).
    pub fn has_sis_util(self) -> bool {
        self >= Profile::V6_1
    }

    /// Ticks sit on multiples of TICK_NSEC of CLOCK_MONOTONIC ("tick/common:
    /// Align tick period with the HZ tick", e9523a0d8189, 6.4, and its fix
    /// 13bb06f8dd42, 6.5, which aligns in `tick_init_jiffy_update`; both taken
    /// into the stable lines in 2023: the VM's 6.1.192 ticks on multiples of
    /// 4 ms, traced, docs/fidelity.md spin61); before, the grid's phase was
    /// wherever boot left it.
    pub fn has_aligned_tick(self) -> bool {
        self >= Profile::V6_1
    }

    /// Task-based throttling (6.18): throttled tasks leave at their return to
    /// user space, and `tg_set_cfs_bandwidth` leaves every local pool at 1 ns
    /// instead of 0 (956dfda6a708), so a write throttles nobody by itself.
    pub fn has_task_based_throttle(self) -> bool {
        self >= Profile::V6_18
    }

    /// Each CPU has a fair deadline server (6.12) whose bandwidth counts in
    /// SCHED_DEADLINE admission.
    pub fn has_fair_server(self) -> bool {
        self >= Profile::V6_12
    }

    /// Proportional newidle balance (33cf66d88306, v6.19; taken into 6.12.65,
    /// so the VM's 6.12.117 has it, and the host's 6.18.44 pulls as it does,
    /// docs/fidelity.md; and into 6.1.160, so the VM's 6.1.192 has it): a CPU
    /// going idle balances only with the probability that its
    /// domain's newly idle balances have been pulling a task (`NI_RANDOM`,
    /// `sd->newidle_ratio`). Before, it balanced whenever the root domain
    /// was marked overloaded. Profile 6.6 keeps mainline 6.6's balance (its
    /// stable line was not checked).
    pub fn has_proportional_newidle(self) -> bool {
        self == Profile::V6_1 || self >= Profile::V6_12
    }

    /// `DELAY_DEQUEUE` ("sched/fair: Implement delayed dequeue", 152e11f6df29,
    /// 6.12; the VM's 6.12.117 carries its fixes, among them 66951e4860d3,
    /// an empty group entity keeps its weight): a task that sleeps while not
    /// eligible stays queued until a pick dequeues it or a wake-up requeues
    /// it where it is, with no `select_task_rq`.
    pub fn has_delay_dequeue(self) -> bool {
        self >= Profile::V6_12
    }

    /// The fair class picks by EEVDF rather than by smallest vruntime.
    pub fn has_eevdf(self) -> bool {
        self >= Profile::V6_6
    }

    /// `sysctl_sched_base_slice` is 0.70 ms, not 0.75 ms, before its
    /// 1 + ilog2(cpus) scaling ("sched: Reduce the default slice to avoid
    /// tasks getting an extra tick", 2ae891b82695, 6.15; taken into the 6.12
    /// stable line: Debian's 6.12.117 has it).
    pub fn has_base_slice_700us(self) -> bool {
        self >= Profile::V6_12
    }
}

impl Serialize for Profile {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Profile {
    /// Accepts `"5.4"` and, since `--set kernel.profile=5.4` reads as a TOML
    /// float, the number `5.4` as well.
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl de::Visitor<'_> for V {
            type Value = Profile;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                write!(f, "one of {}", names(Profile::ALL.iter().map(|p| p.as_str())))
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Profile, E> {
                Profile::parse(s).ok_or_else(|| E::custom(format!("unknown profile {s:?}, expected {}", names(Profile::ALL.iter().map(|p| p.as_str())))))
            }
            fn visit_f64<E: de::Error>(self, f: f64) -> Result<Profile, E> {
                self.visit_str(&f.to_string())
            }
        }
        d.deserialize_any(V)
    }
}

/// `kernel.features`: proposed mechanisms, off by default, valid with any profile.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Feature {
    SlushFund,
    NoopUpdate,
    AtomicPool,
    InterleaveTimers,
    HardLimits,
}

impl Feature {
    pub const ALL: [Feature; 5] =
        [Feature::SlushFund, Feature::NoopUpdate, Feature::AtomicPool, Feature::InterleaveTimers, Feature::HardLimits];

    pub fn as_str(self) -> &'static str {
        match self {
            Feature::SlushFund => "slush_fund",
            Feature::NoopUpdate => "noop_update",
            Feature::AtomicPool => "atomic_pool",
            Feature::InterleaveTimers => "interleave_timers",
            Feature::HardLimits => "hard_limits",
        }
    }
}

impl Serialize for Feature {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Feature {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Feature::ALL.into_iter().find(|f| f.as_str() == s).ok_or_else(|| {
            de::Error::custom(format!("unknown feature {s:?}, expected {}", names(Feature::ALL.iter().map(|f| f.as_str()))))
        })
    }
}

/// `(major, minor)` of a version that starts `MAJOR.MINOR`.
fn major_minor(version: &str) -> Option<(u32, u32)> {
    let mut parts = version.splitn(3, '.');
    let major = parts.next()?.parse().ok()?;
    let minor: String = parts.next()?.chars().take_while(char::is_ascii_digit).collect();
    Some((major, minor.parse().ok()?))
}

fn names<'a>(it: impl Iterator<Item = &'a str>) -> String {
    it.collect::<Vec<_>>().join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn release_to_profile() {
        for (release, profile) in [
            ("4.18.0-553.el8.x86_64", "4.18"),
            ("3.10.0", "4.18"),
            ("5.3.7", "4.18"),
            ("5.4.0-150-generic", "5.4"),
            ("5.13.19", "5.4"),
            ("5.15.0-91-generic", "5.14"),
            ("6.0.19", "5.14"),
            ("6.1.0-56-amd64", "6.1"),
            ("6.5.0", "6.1"),
            ("6.6.32", "6.6"),
            ("6.11.9", "6.6"),
            ("6.12.48+deb13-amd64", "6.12"),
            ("6.17.1", "6.12"),
            ("6.18.44-fc-v769", "6.18"),
            ("7.1.0", "6.18"),
        ] {
            assert_eq!(Profile::for_release(release).map(Profile::as_str), Some(profile), "{release}");
        }
        for release in ["linux", "6", "6.x", ""] {
            assert_eq!(Profile::for_release(release), None, "{release}");
        }
    }
}
