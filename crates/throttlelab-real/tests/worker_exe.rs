//! The `throttlelab-worker` executable on its own, without a controller or
//! cgroups: it speaks the protocol of throttlelab_real::worker on its pipes.

use std::io::Write;
use std::os::fd::FromRawFd;
use std::process::{Command, Output, Stdio};
use throttlelab_real::worker::now_ns;

/// Run the worker with `input` on stdin (closed after it).
fn worker(input: &str) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_throttlelab-worker"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the worker starts");
    child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
    child.wait_with_output().unwrap()
}

fn text(bytes: &[u8]) -> &str {
    std::str::from_utf8(bytes).unwrap()
}

const EMPTY_SPEC: &str = r#"{"loops_per_us":1.0,"plan":{"seed":1,"duration_ns":1000000,"sample_ns":0,"tasks":[],"services":[],"writes":[]}}"#;

#[test]
fn garbage_for_a_spec_is_one_error_line_and_exit_1() {
    let out = worker("hello\n");
    assert_eq!(out.status.code(), Some(1));
    let stdout = text(&out.stdout);
    assert!(stdout.starts_with("error bad worker spec: "), "{stdout:?}");
    assert_eq!(stdout.lines().count(), 1, "{stdout:?}");
    assert_eq!(text(&out.stderr), "");
}

#[test]
fn a_controller_gone_before_go_is_an_error() {
    let out = worker(&format!("{EMPTY_SPEC}\n"));
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(text(&out.stdout), "ready\nerror the controller closed the pipe\n");
}

#[test]
fn an_empty_spec_runs_and_reports_nothing() {
    let out = worker(&format!("{EMPTY_SPEC}\ngo {}\n", now_ns() + 1_000_000));
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "ready\nreport {\"drivers\":[]}\n");
}

#[test]
fn an_error_that_cannot_reach_the_controller_goes_to_stderr() {
    let mut fds = [0; 2];
    // SAFETY: pipe2 fills the two fds it is given. Close-on-exec: a worker the
    // other tests spawn meanwhile must not inherit the read end (it kept the pipe
    // open, the error reached it, and stderr was empty: CI, once).
    assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
    // SAFETY: both fds are new and ours; the read end closes at once.
    let (read, write) = unsafe { (std::fs::File::from_raw_fd(fds[0]), std::fs::File::from_raw_fd(fds[1])) };
    drop(read);
    let mut child = Command::new(env!("CARGO_BIN_EXE_throttlelab-worker"))
        .stdin(Stdio::piped())
        .stdout(write)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(b"hello\n").unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(stderr.starts_with("throttlelab-worker: error: bad worker spec: "), "{stderr:?}");
    assert_eq!(stderr.lines().count(), 1, "{stderr:?}");
}
