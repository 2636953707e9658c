//! The plan: a scenario resolved into what both backends run, with every
//! seeded draw taken once (`format/plan.rs` builds it). For every thread its
//! program, start, start CPU and affinity, and deadline parameters; the
//! services' arrivals; the `cpu.max` writes. The simulator sets up from it,
//! and a slice of it per cgroup ([`Plan::group`]) is the real backend's
//! worker spec, so that a seed means the same thing in both.

use crate::vocab::dl::DlPlan;
use crate::vocab::noise::Arrival;
use crate::vocab::output::Limit;
use crate::vocab::phase::TaskPhases;
use crate::vocab::types::Quota;
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// What a scenario runs. Times are ns since the run's start.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Plan {
    /// The scenario's seed: the services' arrivals are drawn as they come
    /// (`noise::interarrival_ns`, pure in (seed, service, n)).
    pub seed: u64,
    pub duration_ns: u64,
    /// Sample every task's CPU time this often (`sample_ms`); 0: not at all.
    pub sample_ns: u64,
    /// Every task, in scenario order (a task without threads too).
    pub tasks: Vec<TaskPlan>,
    pub services: Vec<ServicePlan>,
    pub writes: Vec<WritePlan>,
}

/// One task: every thread runs its program from its own start.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TaskPlan {
    pub name: String,
    /// The task's number in the scenario: what a captured `Wake` names.
    pub index: usize,
    /// Its cgroup's number in the scenario; None: the root.
    pub cgroup: Option<usize>,
    /// Its program's phases, a captured thread's rotated as the seed draws
    /// (`TaskPhases::seeded`).
    pub phases: Arc<TaskPhases>,
    /// How many times to go through them (-1: until the run ends).
    pub loops: i64,
    /// rt-app timers its phases name.
    pub timers: usize,
    pub threads: Vec<ThreadPlan>,
    /// SCHED_DEADLINE parameters, for `policy = "deadline"` tasks.
    pub dl: Option<DlPlan>,
}

/// Where and when one thread starts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThreadPlan {
    /// `start_us` plus its seeded draw in `start_spread_us`.
    pub start_ns: u64,
    /// The CPU the real backend's thread moves to before it sleeps until its
    /// start: round-robin over the CPUs each may use, across tasks and
    /// services, as the simulator's wake-up placement spreads them on an
    /// idle machine (the simulator places it by that placement).
    pub start_cpu: usize,
    /// The CPUs it may run on.
    pub cpus: Vec<usize>,
    /// Whether it sets its own affinity to `cpus` (`pin`, a task's or
    /// service's `cpus`); otherwise its cgroup's cpuset alone holds it there.
    pub affinity: bool,
}

impl ThreadPlan {
    /// The affinity the thread sets itself (sched_setaffinity), if any.
    pub fn affinity(&self) -> Option<&[usize]> {
        self.affinity.then_some(self.cpus.as_slice())
    }
}

/// A service: requests arrive, `workers` threads serve them.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ServicePlan {
    pub name: String,
    /// Its number in the scenario: its arrivals' noise stream.
    pub index: usize,
    pub cgroup: Option<usize>,
    pub arrival: Arrival,
    pub rate_per_s: f64,
    pub cost_ns: u64,
    /// Coefficient of variation of request costs (0: each costs `cost_ns`;
    /// noise::request_cost_ns).
    #[serde(default)]
    pub cost_cv: f64,
    pub workers: Vec<ThreadPlan>,
}

/// A `[[write]]` to a cgroup's `cpu.max` / `cpu.max.burst`: once at
/// `first_ns`, or again every `every_ns` after it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WritePlan {
    pub cgroup: usize,
    pub first_ns: u64,
    pub every_ns: Option<u64>,
    /// Absent: unchanged.
    pub quota_us: Option<Quota>,
    pub period_us: Option<u64>,
    pub burst_us: Option<u64>,
}

impl WritePlan {
    /// When occurrence `n` (from 0) is due; None past the first if it does not repeat.
    pub fn at_ns(&self, n: u64) -> Option<u64> {
        match self.every_ns {
            Some(every) => Some(self.first_ns + n * every),
            None => (n == 0).then_some(self.first_ns),
        }
    }

    /// What this write leaves in cpu.max and cpu.max.burst that held `cur`:
    /// an absent value is written unchanged. Both backends apply writes by
    /// this rule.
    pub fn applied_to(&self, cur: Limit) -> Limit {
        Limit {
            quota_us: self.quota_us.unwrap_or(cur.quota_us),
            period_us: self.period_us.unwrap_or(cur.period_us),
            burst_us: self.burst_us.unwrap_or(cur.burst_us),
        }
    }
}

impl Plan {
    /// What cgroup `cgroup` (None: the root) runs: its tasks that have
    /// threads and its services; the writes are the controller's.
    pub fn group(&self, cgroup: Option<usize>) -> Plan {
        Plan {
            tasks: self.tasks.iter().filter(|t| t.cgroup == cgroup && !t.threads.is_empty()).cloned().collect(),
            services: self.services.iter().filter(|s| s.cgroup == cgroup).cloned().collect(),
            writes: Vec::new(),
            ..*self
        }
    }

    /// Whether it runs nothing.
    pub fn is_empty(&self) -> bool {
        self.tasks.iter().all(|t| t.threads.is_empty()) && self.services.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_write_sets_what_it_names_and_max_lifts_the_limit() {
        let cur = Limit { quota_us: Quota::Us(50_000), period_us: 100_000, burst_us: 1_000 };
        let write = |quota_us, period_us, burst_us| WritePlan { cgroup: 0, first_ns: 1_000_000, every_ns: None, quota_us, period_us, burst_us };
        assert_eq!(write(None, None, None).applied_to(cur), cur);
        assert_eq!(write(Some(Quota::Max), None, None).applied_to(cur), Limit { quota_us: Quota::Max, ..cur });
        let all = write(Some(Quota::Us(20_000)), Some(50_000), Some(0)).applied_to(cur);
        assert_eq!(all, Limit { quota_us: Quota::Us(20_000), period_us: 50_000, burst_us: 0 });
    }

    #[test]
    fn a_write_repeats_only_if_it_has_a_period() {
        let once = WritePlan { cgroup: 0, first_ns: 10, every_ns: None, quota_us: None, period_us: None, burst_us: None };
        assert_eq!((once.at_ns(0), once.at_ns(1)), (Some(10), None));
        let every = WritePlan { every_ns: Some(50), ..once };
        assert_eq!((every.at_ns(0), every.at_ns(3)), (Some(10), Some(160)));
    }
}
