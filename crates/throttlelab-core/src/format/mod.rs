//! The scenario format: parsing, validation, `--set` overrides, and the files
//! a scenario refers to (captured phases, trace CSVs, rt-app JSON). It
//! imports the vocabulary only.

pub mod cpulist;
pub mod error;
pub mod like_host;
pub mod load;
pub mod phases;
pub mod phases_file;
pub mod plan;
pub mod program;
pub mod rt_app;
pub mod scenario;
pub mod validate;
pub mod write;
pub mod usage_csv;
