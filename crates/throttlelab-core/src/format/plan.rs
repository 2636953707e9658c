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
        // and services; a pinned thread where it is pinned.
        let mut next_start = 0;
        let mut start_cpu = |allowed: &[usize]| {
            next_start += 1;
            allowed[(next_start - 1) % allowed.len()]
        };
        let mut first_thread = 0;
        let mut tasks = Vec::with_capacity(s.tasks.len());
        for (index, t) in s.tasks.iter().enumerate() {
            let cgroup = s.group_of(&t.cgroup);
            let allowed = s.allowed_cpus(cgroup, &t.cpus);
            let n = TaskPhases::threads(t);
            let threads = (0..n)
                .map(|i| {
                    let pinned = t.pin.then(|| allowed[i % allowed.len()]);
                    ThreadPlan {
                        start_ns: t.start_us * 1_000
                            + noise::uniform(s.seed, Stream::ThreadStart(first_thread + i), 0, t.start_spread_us * 1_000),
                        start_cpu: pinned.unwrap_or_else(|| start_cpu(&allowed)),
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
                ServicePlan {
                    name: svc.name.clone(),
                    index,
                    cgroup,
                    arrival: svc.arrival,
                    rate_per_s: svc.rate_per_s,
                    cost_ns: svc.cost_us * 1_000,
                    workers: (0..svc.workers)
                        .map(|_| ThreadPlan { start_ns: 0, start_cpu: start_cpu(&allowed), cpus: allowed.clone(), affinity: svc.cpus.is_some() })
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
