//! Builds the real backend's executables (crates/throttlelab-real/src/bin):
//! `throttlelab-worker`, which `throttlelab real` starts once per cgroup, and
//! `throttlelab-real`, the controller without Python that a VM's guest runs.
//! It puts them into the Python package (python/throttlelab/), where maturin
//! ships them beside `_native` as package data.
//!
//! maturin builds this crate's library only, so these are a second cargo
//! build: release always (it measures time), for the same target, from the
//! same lockfile and the crates the outer build has downloaded (`--frozen`),
//! in a target directory of its own under OUT_DIR (the outer build holds the
//! workspace's: sharing it would deadlock).

use std::env;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

const EXECUTABLES: [&str; 2] = ["throttlelab-worker", "throttlelab-real"];

fn main() {
    // At run time: a build script compiled in a checkout since moved keeps its old path in env!.
    let root = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR")).join("../..");
    println!("cargo:rerun-if-changed=build.rs");
    // What the executables are built from (not the crates' tests).
    let inputs = [
        "Cargo.toml",
        "Cargo.lock",
        "crates/throttlelab-core/Cargo.toml",
        "crates/throttlelab-core/src",
        "crates/throttlelab-real/Cargo.toml",
        "crates/throttlelab-real/src",
    ];
    for input in inputs {
        println!("cargo:rerun-if-changed={}", root.join(input).display());
    }
    let target = env::var("TARGET").expect("cargo sets TARGET");
    let target_dir = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR")).join("real");
    let cargo = env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let status = Command::new(&cargo)
        .args(["build", "--release", "--frozen", "-p", "throttlelab-real", "--bins", "--target", &target])
        .arg("--manifest-path")
        .arg(root.join("Cargo.toml"))
        .arg("--target-dir")
        .arg(&target_dir)
        // Our stdout is cargo's instructions: keep the build's messages off it.
        .stdout(std::io::stderr())
        .status()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", Path::new(&cargo).display()));
    assert!(status.success(), "building {EXECUTABLES:?} failed: {status}");
    let package = root.join("python/throttlelab");
    for exe in EXECUTABLES {
        let built = target_dir.join(&target).join("release").join(exe);
        // A new file renamed into place: a run may be executing the old one (ETXTBSY).
        let staged = package.join(format!(".{exe}.tmp"));
        fs::copy(&built, &staged).unwrap_or_else(|e| panic!("cannot copy {}: {e}", built.display()));
        fs::rename(&staged, package.join(exe)).unwrap_or_else(|e| panic!("cannot install {exe}: {e}"));
    }
}
