//! The kernel's own bandwidth-control events around a real run, for
//! `throttlelab diff` (docs/diff.md). A tracefs instance of our own records,
//! on CLOCK_MONOTONIC (`trace_clock mono`, the clock of the run's start):
//!
//! - tracepoints every kernel has: `sched_switch` (when a group's tasks stop
//!   and run again), `hrtimer_start`, `hrtimer_expire_entry` and
//!   `hrtimer_expire_exit` (the period timer's expiries,
//!   `sched_cfs_period_timer`, the periods each covered, and the slack
//!   timer's, `sched_cfs_slack_timer`), and `sched_stat_runtime` (each
//!   charge `update_curr` makes to a task, the same `delta_exec` that
//!   `account_cfs_rq_runtime` takes from its cfs_rq: the host's only view of
//!   the runtime a group's CPUs use between grants), and `sched_waking`,
//!   `sched_wakeup` and `sched_migrate_task` (where each wake-up was asked
//!   for, where it was placed and when it was queued: how the workers'
//!   start race went, docs/fidelity.md's start14 section);
//! - where the kernel allows kprobes (`kprobe_events` exists: not on the
//!   development host, yes in Debian's 6.12 guest), probes on the bandwidth
//!   functions of `kernel/sched/fair.c` with the values they change, read by
//!   BTF names (`cfs_rq->runtime_remaining`, `cfs_b->runtime`). A static
//!   function the compiler inlined has no symbol: its probe falls back to the
//!   nearest caller that has one (`PROBES`), and the trace's header says which
//!   probes were set.
//!
//! The text of the trace goes to the caller as tracefs prints it; parsing it
//! is Python's (`throttlelab.diff`). The probes are removed and the instance
//! with them when the trace is dropped.

use crate::timer_trace::Instance;
use std::fs;
use std::path::PathBuf;

/// Tracepoints, enabled in the instance (group/name).
pub const TRACEPOINTS: [&str; 8] = [
    "sched/sched_switch",
    "sched/sched_waking",
    "sched/sched_wakeup",
    "sched/sched_migrate_task",
    "sched/sched_stat_runtime",
    "timer/hrtimer_start",
    "timer/hrtimer_expire_entry",
    "timer/hrtimer_expire_exit",
];

/// The kprobe events' group.
pub const GROUP: &str = "throttlelab_bw";

/// One probe: its event name, and the definitions to try in order (the
/// function and its fetch arguments, then a caller where the function was
/// inlined, then the same without BTF fields where the kernel cannot read
/// them). `p` probes the entry, `r` the return (fetching the arguments'
/// fields at return: the values after).
pub struct Probe {
    pub name: &'static str,
    pub kind: char,
    pub tries: &'static [&'static str],
}

/// The probes on `kernel/sched/fair.c`'s bandwidth functions (6.12's names
/// and arguments; `cpu` is the cfs_rq's CPU, `rr` its runtime_remaining in
/// ns, `pool` the group's global runtime in ns).
pub const PROBES: &[Probe] = &[
    Probe {
        name: "assign",
        kind: 'p',
        tries: &[
            "__assign_cfs_rq_runtime cpu=cfs_rq->rq->cpu:s32 rr=cfs_rq->runtime_remaining:s64 pool=cfs_b->runtime:u64 target=target_runtime:u64",
            "assign_cfs_rq_runtime cpu=cfs_rq->rq->cpu:s32 rr=cfs_rq->runtime_remaining:s64 pool=cfs_rq->tg->cfs_bandwidth.runtime:u64",
            // Both inlined (Debian's 6.12): the charge that asks for runtime.
            "__account_cfs_rq_runtime cpu=cfs_rq->rq->cpu:s32 rr=cfs_rq->runtime_remaining:s64 delta=delta_exec:u64 thr=cfs_rq->throttled:s32",
        ],
    },
    Probe {
        name: "assign_ret",
        kind: 'r',
        tries: &[
            "__assign_cfs_rq_runtime cpu=cfs_rq->rq->cpu:s32 rr=cfs_rq->runtime_remaining:s64 pool=cfs_b->runtime:u64 ok=$retval:s32",
            "assign_cfs_rq_runtime cpu=cfs_rq->rq->cpu:s32 rr=cfs_rq->runtime_remaining:s64 pool=cfs_rq->tg->cfs_bandwidth.runtime:u64 ok=$retval:s32",
            "__account_cfs_rq_runtime cpu=cfs_rq->rq->cpu:s32 rr=cfs_rq->runtime_remaining:s64",
        ],
    },
    Probe {
        name: "return",
        kind: 'p',
        tries: &["__return_cfs_rq_runtime cpu=cfs_rq->rq->cpu:s32 rr=cfs_rq->runtime_remaining:s64 pool=cfs_rq->tg->cfs_bandwidth.runtime:u64"],
    },
    Probe {
        name: "throttle_entry",
        kind: 'p',
        tries: &["throttle_cfs_rq cpu=cfs_rq->rq->cpu:s32 rr=cfs_rq->runtime_remaining:s64"],
    },
    Probe {
        name: "throttle",
        kind: 'r',
        tries: &["throttle_cfs_rq cpu=cfs_rq->rq->cpu:s32 rr=cfs_rq->runtime_remaining:s64 ok=$retval:u8", "throttle_cfs_rq ok=$retval:u8"],
    },
    Probe {
        name: "unthrottle",
        kind: 'p',
        tries: &["unthrottle_cfs_rq cpu=cfs_rq->rq->cpu:s32 rr=cfs_rq->runtime_remaining:s64", "unthrottle_cfs_rq"],
    },
    Probe {
        name: "refill",
        kind: 'r',
        tries: &["__refill_cfs_bandwidth_runtime pool=cfs_b->runtime:u64", "__refill_cfs_bandwidth_runtime"],
    },
    Probe {
        name: "distribute",
        kind: 'p',
        tries: &["distribute_cfs_runtime pool=cfs_b->runtime:u64", "distribute_cfs_runtime"],
    },
    Probe {
        name: "distribute_ret",
        kind: 'r',
        tries: &["distribute_cfs_runtime pool=cfs_b->runtime:u64 throttled=$retval:u8", "distribute_cfs_runtime"],
    },
    Probe {
        name: "period",
        kind: 'p',
        tries: &["do_sched_cfs_period_timer overrun=overrun:s32", "sched_cfs_period_timer"],
    },
    Probe { name: "slack", kind: 'p', tries: &["do_sched_cfs_slack_timer", "sched_cfs_slack_timer"] },
    Probe {
        name: "set",
        kind: 'p',
        tries: &["tg_set_cfs_bandwidth period=period:u64 quota=quota:u64", "tg_set_cfs_bandwidth"],
    },
];

/// Functions whose presence in /proc/kallsyms the trace's header reports
/// (`# symbols:`): the probed ones and their callers, to tell which the
/// compiler inlined.
pub const SYMBOLS: &[&str] = &[
    "__assign_cfs_rq_runtime",
    "assign_cfs_rq_runtime",
    "__account_cfs_rq_runtime",
    "__return_cfs_rq_runtime",
    "return_cfs_rq_runtime",
    "dequeue_entity",
    "dequeue_entities",
    "throttle_cfs_rq",
    "unthrottle_cfs_rq",
    "check_cfs_rq_runtime",
    "check_enqueue_throttle",
    "__refill_cfs_bandwidth_runtime",
    "distribute_cfs_runtime",
    "do_sched_cfs_period_timer",
    "sched_cfs_period_timer",
    "do_sched_cfs_slack_timer",
    "sched_cfs_slack_timer",
    "start_cfs_bandwidth",
    "start_cfs_slack_bandwidth",
    "tg_set_cfs_bandwidth",
];

/// The first line of the text `BwTrace::read` returns, then `# symbols:`
/// (those of `SYMBOLS` the kernel has, where kprobes were asked for), one
/// `# probe NAME: DEFINITION` line per probe set and one `# no probe NAME:
/// WHY` per probe that could not be.
pub const HEADER: &str = "# throttlelab bandwidth trace";

/// A tracefs instance recording the bandwidth events; the probes it set.
pub struct BwTrace {
    instance: Option<Instance>,
    /// tracefs's root (where `kprobe_events` is).
    root: PathBuf,
    /// `# probe` and `# no probe` lines.
    notes: Vec<String>,
    /// The probes defined in `kprobe_events`, to remove.
    defined: Vec<&'static str>,
}

impl BwTrace {
    /// Start recording in instance `name` with per-CPU buffers of `buffer_kb`;
    /// kprobes where `kprobes` is asked and the kernel has them. Err says in
    /// a few words why nothing can be traced.
    pub fn open(name: &str, buffer_kb: u64, kprobes: bool) -> Result<BwTrace, String> {
        let instance = Instance::open(name)?;
        let root = instance.dir.parent().and_then(|p| p.parent()).expect("an instance below tracefs").to_path_buf();
        let mut trace = BwTrace { instance: Some(instance), root, notes: Vec::new(), defined: Vec::new() };
        let instance = trace.instance.as_ref().expect("open");
        instance.write("buffer_size_kb", &buffer_kb.to_string())?;
        // One clock for every CPU, the run's: its start is CLOCK_MONOTONIC.
        instance.write("trace_clock", "mono")?;
        for event in TRACEPOINTS {
            instance.write(&format!("events/{event}/enable"), "1")?;
        }
        if kprobes {
            trace.set_probes();
        }
        Ok(trace)
    }

    /// Define and enable every probe the kernel takes (the first of its
    /// definitions it accepts); note each.
    fn set_probes(&mut self) {
        let events = self.root.join("kprobe_events");
        if !events.exists() {
            self.notes.push(format!("# no probes: {} does not exist (no CONFIG_KPROBE_EVENTS)", events.display()));
            return;
        }
        let kallsyms = fs::read_to_string("/proc/kallsyms").unwrap_or_default();
        let found = symbols(&kallsyms);
        self.notes.push(format!("# symbols: {}", found.join(" ")));
        for probe in PROBES {
            let mut why = String::new();
            let set = probe.tries.iter().find(|def| {
                let line = format!("{}:{GROUP}/{} {def}\n", probe.kind, probe.name);
                match append(&events, &line) {
                    Ok(()) => true,
                    Err(e) => {
                        why = format!("{why}{}{def}: {e}", if why.is_empty() { "" } else { "; " });
                        false
                    }
                }
            });
            let Some(def) = set else {
                self.notes.push(format!("# no probe {}: {why}", probe.name));
                continue;
            };
            self.defined.push(probe.name);
            let instance = self.instance.as_ref().expect("open");
            match instance.write(&format!("events/{GROUP}/{}/enable", probe.name), "1") {
                Ok(()) => self.notes.push(format!("# probe {}: {} {def}", probe.name, probe.kind)),
                Err(e) => self.notes.push(format!("# no probe {}: {e}", probe.name)),
            }
        }
    }

    /// Stop recording and return the trace: the header and the notes, then
    /// tracefs's text.
    pub fn read(&self) -> Result<String, String> {
        let instance = self.instance.as_ref().expect("open");
        instance.write("tracing_on", "0")?;
        let path = instance.dir.join("trace");
        let text = fs::read_to_string(&path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        Ok(format!("{HEADER}\n{}\n{text}", self.notes.join("\n")))
    }
}

/// Those of `SYMBOLS` that /proc/kallsyms text lists as functions (`ADDR t
/// NAME`, a module's with ` [module]` after it), in `SYMBOLS`' order.
fn symbols(kallsyms: &str) -> Vec<&'static str> {
    let text: std::collections::BTreeSet<&str> = kallsyms
        .lines()
        .filter_map(|l| {
            let mut fields = l.split_whitespace();
            matches!(fields.nth(1), Some("t" | "T")).then(|| fields.next()).flatten()
        })
        .collect();
    SYMBOLS.iter().copied().filter(|f| text.contains(f)).collect()
}

/// Append `line` to a tracefs control file (`>>`: other definitions stay).
fn append(path: &PathBuf, line: &str) -> std::io::Result<()> {
    use std::io::Write;
    fs::OpenOptions::new().append(true).open(path)?.write_all(line.as_bytes())
}

impl Drop for BwTrace {
    fn drop(&mut self) {
        // The instance's events off first (an enabled probe cannot be
        // removed), the probes next, the instance last: dropping it unmounts
        // the tracefs it mounted (a guest's, a mount namespace's), and with it
        // `kprobe_events`. Removed after, the probes stayed defined, and the
        // next run in the same boot could set none ("File exists").
        if let Some(instance) = &self.instance {
            let _ = instance.write("events/enable", "0");
        }
        let events = self.root.join("kprobe_events");
        for name in &self.defined {
            if let Err(e) = append(&events, &format!("-:{GROUP}/{name}\n")) {
                eprintln!("throttlelab: warning: cannot remove kprobe {GROUP}/{name}: {e}");
            }
        }
        drop(self.instance.take());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn symbols_are_functions_of_exactly_those_names() {
        let kallsyms = "ffffffff81100000 t throttle_cfs_rq\nffffffff81100100 T __refill_cfs_bandwidth_runtime\n\
                        ffffffff81100200 t sched_cfs_period_timer.cold\nffffffff81100300 d distribute_cfs_runtime\n\
                        ffffffff81100400 t throttle_cfs\n";
        // Not a .cold part, not data, not a prefix.
        assert_eq!(symbols(kallsyms), ["throttle_cfs_rq", "__refill_cfs_bandwidth_runtime"]);
    }

    #[test]
    fn every_probe_has_a_definition_and_a_unique_name() {
        let mut names: Vec<&str> = PROBES.iter().map(|p| p.name).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), PROBES.len());
        for p in PROBES {
            assert!(matches!(p.kind, 'p' | 'r'), "{}", p.name);
            assert!(!p.tries.is_empty(), "{}", p.name);
            // tracefs takes a definition on one line, function first.
            assert!(p.tries.iter().all(|d| !d.contains('\n') && !d.starts_with(' ')), "{}", p.name);
        }
    }
}
