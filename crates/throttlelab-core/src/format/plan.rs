//! `Scenario -> Plan` ([`Plan`]): every seeded draw of the set-up taken
//! once, for both backends.

use crate::format::scenario::{ms_to_ns, Policy, Scenario};
use crate::vocab::dl::{DlParams, DlPlan};
use crate::vocab::noise::{self, Stream};
use crate::vocab::phase::TaskPhases;
use crate::vocab::plan::{Plan, ServicePlan, TaskPlan, ThreadPlan, WritePlan};
use std::sync::Arc;

impl Plan {
    /// The plan of a validated scenario. Threads are numbered in scenario
    /// order, tasks' first: thread k's start is drawn from
    /// `Stream::ThreadStart(k)`, a captured task's rotation from
    /// `Stream::CyclePhase(task)`.
    pub fn of(s: &Scenario) -> Plan {
        // Threads start round-robin over the CPUs each may use, across tasks
        // and services, a core's first siblings before its second (as fork
        // balancing, `sched_balance_find_dst_group`, fills idle cores first);
        // a pinned thread where it is pinned.
        let mut next_start = 0;
        let mut start_cpu = |fork_order: &[usize]| {
            next_start += 1;
            fork_order[(next_start - 1) % fork_order.len()]
        };
        let mut first_thread = 0;
        let mut tasks = Vec::with_capacity(s.tasks.len());
        for (index, t) in s.tasks.iter().enumerate() {
            let cgroup = s.group_of(&t.cgroup);
            let allowed = s.allowed_cpus(cgroup, &t.cpus);
            let order = fork_order(&allowed, s.machine.smt);
            let n = TaskPhases::threads(t);
            let threads = (0..n)
                .map(|i| {
                    let pinned = t.pin.then(|| allowed[i % allowed.len()]);
                    ThreadPlan {
                        start_ns: t.start_us * 1_000
                            + noise::uniform(s.seed, Stream::ThreadStart(first_thread + i), 0, t.start_spread_us * 1_000),
                        start_cpu: pinned.unwrap_or_else(|| start_cpu(&order)),
                        cpus: pinned.map_or_else(|| allowed.clone(), |cpu| vec![cpu]),
                        affinity: t.pin || t.cpus.is_some(),
                    }
                })
                .collect();
            first_thread += n;
            let dl = t.dl_params_ns().filter(|_| t.policy == Policy::Deadline).map(|(runtime_ns, deadline_ns, period_ns)| DlPlan {
                params: DlParams { runtime_ns, deadline_ns, period_ns },
                retry_ns: t.retry_ms * 1_000_000,
                on_refused: t.on_refused,
                profile_ns: t.profile_ms.map(|ms| ms * 1_000_000),
            });
            tasks.push(TaskPlan {
                name: t.name.clone(),
                index,
                cgroup,
                phases: Arc::new(TaskPhases::seeded(t, index, n, s.seed)),
                loops: t.effective_loops(),
                timers: t.timer_names().len(),
                threads,
                dl,
            });
        }
        let services = s
            .services
            .iter()
            .enumerate()
            .map(|(index, svc)| {
                let cgroup = s.group_of(&svc.cgroup);
                let allowed = s.allowed_cpus(cgroup, &svc.cpus);
                let order = fork_order(&allowed, s.machine.smt);
                ServicePlan {
                    name: svc.name.clone(),
                    index,
                    cgroup,
                    arrival: svc.arrival,
                    rate_per_s: svc.rate_per_s,
                    cost_ns: svc.cost_us * 1_000,
                    cost_cv: svc.cost_cv.unwrap_or(0.0),
                    workers: (0..svc.workers)
                        .map(|_| ThreadPlan { start_ns: 0, start_cpu: start_cpu(&order), cpus: allowed.clone(), affinity: svc.cpus.is_some() })
                        .collect(),
                }
            })
            .collect();
        let writes = s
            .writes
            .iter()
            .map(|w| WritePlan {
                cgroup: s.cgroup_index(&w.cgroup).expect("validated"),
                first_ns: ms_to_ns(w.at_ms.or(w.start_ms).expect("validated")),
                every_ns: w.start_ms.and(w.every_ms).map(ms_to_ns),
                quota_us: w.quota_us,
                period_us: w.period_us,
                burst_us: w.burst_us,
            })
            .collect();
        Plan { seed: s.seed, duration_ns: s.duration_ns(), sample_ns: s.sample_ms * 1_000_000, tasks, services, writes }
    }
}

/// `allowed` in the order threads start on them: each core's first sibling,
/// then each core's second, ... (CPU k is on core k / `smt`).
fn fork_order(allowed: &[usize], smt: usize) -> Vec<usize> {
    let mut order = allowed.to_vec();
    order.sort_by_key(|&cpu| (cpu % smt, cpu / smt));
    order
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::load::load;

    const SCENARIO: &str = r#"name = "p"
seed = 7
duration_s = 1
[machine]
cpus = 4
[[cgroup]]
name = "a"
cpus = "2-3"
[[task]]
name = "spread"
threads = 2
start_spread_us = 1000
phases = [{ run_us = 10 }]
[[task]]
name = "none"
threads = 0
phases = [{ run_us = 10 }]
[[task]]
name = "pinned"
cgroup = "a"
threads = 3
pin = true
start_us = 100
start_spread_us = 1000
phases = [{ run_us = 10 }]
[[service]]
name = "svc"
cgroup = "a"
rate_per_s = 10
cost_us = 10
[[write]]
cgroup = "a"
start_ms = 100
every_ms = 50
quota_us = 5000
"#;

    #[test]
    fn threads_are_numbered_across_tasks_for_their_draws() {
        let s = load(SCENARIO, &[]).unwrap();
        let plan = Plan::of(&s);
        assert_eq!(plan.tasks.len(), 3, "a task without threads too");
        let starts: Vec<u64> = plan.tasks.iter().flat_map(|t| t.threads.iter().map(|th| th.start_ns)).collect();
        let drawn = |k: usize, base_ns: u64| base_ns + noise::uniform(7, Stream::ThreadStart(k), 0, 1_000_000);
        assert_eq!(starts, [drawn(0, 0), drawn(1, 0), drawn(2, 100_000), drawn(3, 100_000), drawn(4, 100_000)]);
        // Pinned threads start where they are pinned and leave the round-robin
        // to the others: the service's worker is the third unpinned thread.
        let pinned = &plan.tasks[2].threads;
        assert_eq!(pinned.iter().map(|t| t.start_cpu).collect::<Vec<_>>(), [2, 3, 2]);
        assert_eq!(pinned[1].affinity(), Some(&[3][..]));
        assert_eq!(plan.tasks[0].threads.iter().map(|t| t.start_cpu).collect::<Vec<_>>(), [0, 1]);
        assert_eq!((plan.tasks[0].threads[0].affinity(), plan.tasks[0].threads[0].cpus.len()), (None, 4));
        assert_eq!(plan.services[0].workers[0].start_cpu, 2, "third in the round-robin over 2-3");
        let w = &plan.writes[0];
        assert_eq!((w.cgroup, w.at_ns(0), w.at_ns(2)), (0, Some(100_000_000), Some(200_000_000)));
    }

    #[test]
    fn a_group_s_slice_holds_its_tasks_with_threads_and_its_services() {
        let plan = Plan::of(&load(SCENARIO, &[]).unwrap());
        let root = plan.group(None);
        assert_eq!(root.tasks.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(), ["spread"]);
        assert!(root.services.is_empty() && root.writes.is_empty());
        let a = plan.group(Some(0));
        assert_eq!((a.tasks[0].index, a.services.len(), a.seed), (2, 1, 7));
        // Through JSON, as a worker receives it.
        let back: Plan = serde_json::from_str(&serde_json::to_string(&a).unwrap()).unwrap();
        assert_eq!(back.tasks[0].threads, a.tasks[0].threads);
        assert_eq!(back.tasks[0].phases.get(0), a.tasks[0].phases.get(0));
    }

    #[test]
    fn threads_start_on_idle_cores_before_siblings() {
        // 2 cores of 4 siblings (CPUs 0-3, 4-7): one thread a core, then the
        // cores' second siblings; within a cpuset of one core, its siblings.
        let s = load(&SCENARIO.replace("cpus = 4\n", "cpus = 8\nsmt = 4\n").replace("threads = 2", "threads = 5"), &[]).unwrap();
        let plan = Plan::of(&s);
        assert_eq!(plan.tasks[0].threads.iter().map(|t| t.start_cpu).collect::<Vec<_>>(), [0, 4, 1, 5, 2]);
        assert_eq!(plan.services[0].workers[0].start_cpu, 3, "sixth in the round-robin over 2-3 (core 0)");
    }
}
