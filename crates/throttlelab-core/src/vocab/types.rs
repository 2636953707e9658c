//! The simulator's shared vocabulary: identifiers, time and its units. A leaf
//! module, so that the machine models (`smt`, `trace`, `event`) need not
//! reach into the simulator for them.

/// Simulated time since the start of the run, in ns.
pub type Time = u64;
pub type CpuId = usize;
pub type ThreadId = usize;
/// Index of a `sched_entity` (of a task or of a group).
pub type SeId = usize;
/// `cfs_rq` index: `tg * nr_cpus + cpu`; task group 0 is the root.
pub type CfsRqId = usize;

pub const NSEC_PER_USEC: u64 = 1_000;
pub const NSEC_PER_MSEC: u64 = 1_000_000;

/// Seconds (float, from the file) to integer nanoseconds.
pub fn secs_to_ns(s: f64) -> u64 {
    (s * 1e9).round() as u64
}

/// Milliseconds (float, from the file) to integer nanoseconds.
pub fn ms_to_ns(ms: f64) -> u64 {
    (ms * 1e6).round() as u64
}

/// A cgroup's quota as cpu.max holds it: `max`, no limit, or microseconds of
/// CPU time per period. Read from microseconds, -1 (cfs_quota_us's word) or
/// `"max"` (cpu.max's), and from null (the resolved scenario); written as
/// microseconds or null.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Quota {
    #[default]
    Max,
    Us(u64),
}

impl Quota {
    /// Microseconds per period, None when unlimited.
    pub fn us(self) -> Option<u64> {
        match self {
            Quota::Max => None,
            Quota::Us(q) => Some(q),
        }
    }

    /// Nanoseconds per period, None when unlimited (the kernel's RUNTIME_INF).
    pub fn ns(self) -> Option<u64> {
        self.us().map(|q| q * NSEC_PER_USEC)
    }
}

impl std::fmt::Display for Quota {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        match self {
            Quota::Max => f.write_str("max"),
            Quota::Us(q) => write!(f, "{q}"),
        }
    }
}

impl serde::Serialize for Quota {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.us().serialize(s)
    }
}

impl<'de> serde::Deserialize<'de> for Quota {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = Quota;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("microseconds, -1 or \"max\" (no limit)")
            }
            fn visit_i64<E: serde::de::Error>(self, q: i64) -> Result<Quota, E> {
                match q {
                    -1 => Ok(Quota::Max),
                    q if q < 0 => Err(E::custom(format!("must be -1 (unlimited) or >= 1000, got {q}"))),
                    q => Ok(Quota::Us(q as u64)),
                }
            }
            fn visit_u64<E: serde::de::Error>(self, q: u64) -> Result<Quota, E> {
                Ok(Quota::Us(q))
            }
            fn visit_str<E: serde::de::Error>(self, word: &str) -> Result<Quota, E> {
                match word {
                    "max" => Ok(Quota::Max),
                    _ => Err(E::invalid_value(serde::de::Unexpected::Str(word), &self)),
                }
            }
            fn visit_unit<E: serde::de::Error>(self) -> Result<Quota, E> {
                Ok(Quota::Max)
            }
            fn visit_none<E: serde::de::Error>(self) -> Result<Quota, E> {
                Ok(Quota::Max)
            }
        }
        d.deserialize_any(Visitor)
    }
}
