//! The vocabulary, what `sched.h` is to `kernel/sched`: identifiers, time,
//! limits, phases, profiles, seeded draws and the documents both backends
//! write. It imports nothing of the format or the engine.

pub mod dl;
pub mod noise;
pub mod output;
pub mod phase;
pub mod plan;
pub mod profile;
pub mod stop;
pub mod trace;
pub mod types;
