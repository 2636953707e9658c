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
