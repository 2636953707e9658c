//! The simulator: `struct rq` and the event loop (`sim`), the scheduler core,
//! the classes and their bandwidth control, the tick grid, the workloads that
//! drive them and the output of a run. It imports the vocabulary and the
//! format.

pub mod bandwidth;
pub mod cfs_bandwidth;
pub mod collect;
pub mod core;
pub mod deadline;
pub mod event;
pub mod fair;
pub mod hard_limits;
pub mod rq;
pub mod sim;
pub mod sis_util;
pub mod smt;
pub mod stop;
pub mod tick;
pub mod util_sum;
pub mod wheel;
pub mod workload;
