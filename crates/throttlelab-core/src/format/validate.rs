//! Validation of a parsed scenario: every value against its range, the
//! kernel's own limits (`tg_set_cfs_bandwidth`: period 1 ms..1 s, quota >=
//! 1 ms, burst <= quota; `sched_setattr`'s and deadline admission), names,
//! references between tables, and the totals a run may hold.

use crate::format::cpulist::CpuList;
use crate::format::error::{shown, ScenarioError};
use crate::format::phases::TaskPhases;
use crate::format::scenario::{
    OnRefused, PhaseSpec, Policy, Scenario, TaskSpec, MAX_CFS_QUOTA_PERIOD_US, MAX_CFS_RQS, MAX_CFS_RUNTIME_US, MAX_DURATION_S,
    MAX_REQUESTS, MAX_SAMPLES, MAX_SAMPLE_MS, MAX_THREADS, MAX_TIME_NS, MIN_CFS_QUOTA_PERIOD_US,
};
use crate::vocab::dl::{dl_capacity_bw, to_ratio, BW_SHIFT, DL_MIN_RUNTIME_NS};
use crate::vocab::phase::Phase;
use crate::vocab::profile::Profile;
use crate::vocab::types::Quota;
use std::collections::{HashMap, HashSet};
use std::rc::Rc;

const MAX_TIME_MS: f64 = (MAX_TIME_NS / 1_000_000) as f64;
/// The largest spread of the machine's work speed run to run
/// (`machine.work_speed_cv`): a host measured 0.3-1.4 %; a tenth is already a
/// machine no scheduler could be held against.
pub(crate) const MAX_WORK_SPEED_CV: f64 = 0.1;

/// The largest spread of request costs a service may ask for (`cost_cv`): a
/// lognormal with cv 4 has p99/p50 about 9.
const MAX_COST_CV: f64 = 4.0;
/// `machine.background_lengths_us`: a probe's sample, or a capture's quantiles.
pub const MAX_BACKGROUND_LENGTHS: usize = 256;

impl Scenario {
    /// Check every value against its allowed range; `Ok` means the simulator
    /// and the real backend can both take it as is.
    pub fn validate(&self) -> Result<(), ScenarioError> {
        let err = |key: String, msg: String| Err(ScenarioError::new(key, msg));
        check_scenario_name(&self.name)?;
        if let Some(d) = self.duration_s {
            if !(d > 0.0 && d <= MAX_DURATION_S) {
                return err("duration_s".into(), format!("must be in (0, {MAX_DURATION_S}], got {d}"));
            }
        }
        let m = &self.machine;
        if m.cpus == 0 || m.cpus > 4096 {
            return err("machine.cpus".into(), format!("must be in 1..=4096, got {}", m.cpus));
        }
        if ![100, 250, 300, 1000].contains(&m.hz) {
            return err("machine.hz".into(), format!("must be one of 100, 250, 300, 1000 (CONFIG_HZ), got {}", m.hz));
        }
        if m.smt == 0 || !m.cpus.is_multiple_of(m.smt) {
            return err("machine.smt".into(), format!("must be >= 1 and divide machine.cpus ({}), got {}", m.cpus, m.smt));
        }
        if !m.smt_speed.is_empty() && m.smt_speed.len() != m.smt {
            return err("machine.smt_speed".into(), format!("must list one speed per busy sibling count 1..={}, got {} values", m.smt, m.smt_speed.len()));
        }
        if let Some(bad) = m.smt_speed.iter().find(|s| !(**s > 0.0 && **s <= 1.0)) {
            return err("machine.smt_speed".into(), format!("speeds must be in (0, 1], got {bad}"));
        }
        if !(m.work_speed > 0.0 && m.work_speed <= 1.0) {
            return err("machine.work_speed".into(), format!("must be in (0, 1], got {}", m.work_speed));
        }
        if let Some(cv) = m.work_speed_cv.filter(|cv| !(0.0..=MAX_WORK_SPEED_CV).contains(cv)) {
            return err("machine.work_speed_cv".into(), format!("must be in [0, {MAX_WORK_SPEED_CV}], got {cv}"));
        }
        let tick_us = 1e6 / m.hz as f64;
        let latencies = [
            ("machine.tick_jitter_us", m.tick_jitter_us),
            ("machine.timer_jitter_us", m.timer_jitter_us),
            ("machine.idle_exit_us", m.idle_exit_us),
            ("machine.tick_irq_us", m.tick_irq_us),
            ("machine.wakeup_cost_us", m.wakeup_cost_us),
        ];
        for (key, v) in latencies {
            if !(0.0..tick_us).contains(&v) {
                return err(key.into(), format!("must be in [0, {tick_us:.0}) (one tick), got {v}"));
            }
        }
        self.validate_tick_late(tick_us)?;
        if !(0.0..=10_000.0).contains(&m.background_per_s) {
            return err("machine.background_per_s".into(), format!("must be in [0, 10000], got {}", m.background_per_s));
        }
        // Up to a second: the real backend's probe hands compare what it
        // measured, and on a busy host one preemption by other work averaged
        // over 10 ms (10.9 ms with two compilers on this 2-CPU machine).
        if !(m.background_us >= 0.0 && m.background_us <= 1_000_000.0) {
            return err("machine.background_us".into(), format!("must be in [0, 1000000] (1 s), got {}", m.background_us));
        }
        // A log-normal's median is at most its mean.
        if let Some(p50) = m.background_p50_us.filter(|&v| !(v > 0.0 && v <= m.background_us)) {
            return err("machine.background_p50_us".into(), format!("must be in (0, machine.background_us = {}], got {p50}", m.background_us));
        }
        let lengths = &m.background_lengths_us;
        if !lengths.is_empty() {
            if lengths.len() > MAX_BACKGROUND_LENGTHS {
                return err("machine.background_lengths_us".into(), format!("at most {MAX_BACKGROUND_LENGTHS} lengths (quantiles stand for a longer sample), got {}", lengths.len()));
            }
            if let Some(v) = lengths.iter().find(|&&v| !(v > 0.0 && v <= 1_000_000.0)) {
                return err("machine.background_lengths_us".into(), format!("each length must be in (0, 1000000] us, got {v}"));
            }
        }
        if let Some(c) = &self.capture {
            let lengths = [("capture.background_p50_us", c.background_p50_us), ("capture.background_p90_us", c.background_p90_us), ("capture.background_max_us", c.background_max_us)];
            for (key, v) in lengths {
                if let Some(v) = v.filter(|v| !(v.is_finite() && *v >= 0.0)) {
                    return err(key.into(), format!("must be a length >= 0, got {v}"));
                }
            }
        }
        if let Some(u) = m.uptime_s {
            if !(1.0..=1e7).contains(&u) {
                return err("machine.uptime_s".into(), format!("must be in [1, 1e7], got {u}"));
            }
        }
        if let Some(p) = m.tick_phase_us {
            if !(0.0..tick_us).contains(&p) {
                return err("machine.tick_phase_us".into(), format!("must be in [0, {tick_us:.0}) (one tick), got {p}"));
            }
        }
        let k = &self.kernel;
        if k.slice_us == 0 || k.slice_us > MAX_CFS_QUOTA_PERIOD_US {
            return err("kernel.slice_us".into(), format!("must be in 1..=1000000, got {}", k.slice_us));
        }
        for (key, v) in [("kernel.pool_lock_hold_ns", k.pool_lock_hold_ns), ("kernel.pool_transfer_ns", k.pool_transfer_ns)] {
            if v > 1_000_000 {
                return err(key.into(), format!("must be <= 1000000 (1 ms), got {v}"));
            }
        }
        if self.sample_ms > MAX_SAMPLE_MS {
            return err("sample_ms".into(), format!("must be in 0..={MAX_SAMPLE_MS} (a day), got {}", self.sample_ms));
        }
        let cgroups = self.validate_cgroups()?;
        let names = self.validate_tasks(&cgroups)?;
        self.validate_services(&cgroups, names)?;
        self.validate_writes(&cgroups)?;
        self.validate_totals()?;
        if self.duration_s.is_none() && !self.tasks.iter().any(|t| t.effective_loops() >= 0 && (t.threads > 0 || !t.windows.is_empty())) {
            return err("duration_s".into(), "required when no task is finite (every task loops forever)".into());
        }
        Ok(())
    }

    /// `machine.tick_late_*`: a share of ticks and how late they run, given
    /// together, the lateness with the jitter within a tick (a tick runs
    /// before the next one expires).
    fn validate_tick_late(&self, tick_us: f64) -> Result<(), ScenarioError> {
        let m = &self.machine;
        let err = |key: &str, msg: String| Err(ScenarioError::new(key, msg));
        match (m.tick_late_share, m.tick_late_us) {
            (None, None) => {}
            (Some(share), Some(late)) => {
                if !(0.0..1.0).contains(&share) {
                    return err("machine.tick_late_share", format!("must be in [0, 1), got {share}"));
                }
                let most = tick_us - m.tick_jitter_us;
                if !(late > 0.0 && late < most) {
                    return err("machine.tick_late_us", format!("must be in (0, {most:.0}) (a tick less machine.tick_jitter_us), got {late}"));
                }
            }
            (Some(_), None) => return err("machine.tick_late_us", "required with machine.tick_late_share".into()),
            (None, Some(_)) => return err("machine.tick_late_share", "required with machine.tick_late_us".into()),
        }
        if let Some(together) = m.tick_late_together {
            if m.tick_late_share.is_none() {
                return err("machine.tick_late_together", "needs machine.tick_late_share".into());
            }
            if !(0.0..=1.0).contains(&together) {
                return err("machine.tick_late_together", format!("must be in [0, 1], got {together}"));
            }
        }
        Ok(())
    }

    /// A `cpus` value: a CPU list within the machine.
    fn cpu_list(&self, key: &str, list: &str) -> Result<CpuList, ScenarioError> {
        let cpus = CpuList::parse(list).map_err(|m| ScenarioError::new(key, m))?;
        if cpus.last() >= self.machine.cpus {
            let msg = format!("CPU {} does not exist (machine.cpus = {})", cpus.last(), self.machine.cpus);
            return Err(ScenarioError::new(key, msg));
        }
        Ok(cpus)
    }

    /// A task's or service's `cpus`: within the machine, and sharing a CPU
    /// with its cgroup's effective cpus (or no thread of it could run).
    fn check_member_cpus(&self, key: &str, cpus: &Option<String>, group: Option<&CpuList>) -> Result<(), ScenarioError> {
        let Some(list) = cpus else { return Ok(()) };
        let cpus = self.cpu_list(key, list)?;
        match group {
            Some(group) if !cpus.intersects(group) => {
                Err(ScenarioError::new(key, format!("no CPU of {cpus} is in its cgroup's cpus ({group})")))
            }
            _ => Ok(()),
        }
    }

    fn validate_cgroups(&self) -> Result<CgroupIndex<'_>, ScenarioError> {
        let mut index = CgroupIndex {
            by_name: HashMap::with_capacity(self.cgroups.len()),
            effective_cpus: Vec::with_capacity(self.cgroups.len()),
        };
        for (i, c) in self.cgroups.iter().enumerate() {
            check_name(&format!("cgroup[{i}].name"), &c.name)?;
            let key = |field: &str| format!("cgroup.{}.{}", c.name, field);
            if index.by_name.contains_key(c.name.as_str()) {
                return Err(ScenarioError::new(key("name"), "duplicate cgroup name".to_string()));
            }
            let parent = match &c.parent {
                None => None,
                Some(p) => Some(*index.by_name.get(p.as_str()).ok_or_else(|| {
                    let msg = format!("unknown cgroup {} (a parent must be declared before its children)", shown(p));
                    ScenarioError::new(key("parent"), msg)
                })?),
            };
            index.by_name.insert(&c.name, i);
            check_bandwidth(&key, c.period_us, c.quota_us, c.burst_us, self.kernel.profile)?;
            if let Some(o) = c.period_timer_offset_us {
                if !(0.0..c.period_us as f64).contains(&o) {
                    let msg = format!("must be in [0, {}) (one period), got {o}", c.period_us);
                    return Err(ScenarioError::new(key("period_timer_offset_us"), msg));
                }
            }
            if !(1..=10_000).contains(&c.weight) {
                return Err(ScenarioError::new(key("weight"), format!("must be in 1..=10000 (cpu.weight), got {}", c.weight)));
            }
            let inherited = parent.and_then(|p| index.effective_cpus[p].clone());
            let effective = match &c.cpus {
                None => inherited,
                Some(list) => {
                    let cpus = self.cpu_list(&key("cpus"), list)?;
                    if let Some(parent_cpus) = inherited.filter(|p| !cpus.is_subset(p)) {
                        let msg = format!("{cpus} is not within its parent's cpus ({parent_cpus}), as cpuset requires");
                        return Err(ScenarioError::new(key("cpus"), msg));
                    }
                    Some(Rc::new(cpus))
                }
            };
            index.effective_cpus.push(effective);
        }
        Ok(index)
    }

    /// Returns the task names, which services may not take.
    fn validate_tasks(&self, cgroups: &CgroupIndex) -> Result<HashSet<&str>, ScenarioError> {
        let mut names = HashSet::with_capacity(self.tasks.len());
        for (i, t) in self.tasks.iter().enumerate() {
            check_name(&format!("task[{i}].name"), &t.name)?;
            let key = |field: &str| format!("task.{}.{}", t.name, field);
            if !names.insert(t.name.as_str()) {
                return Err(ScenarioError::new(key("name"), "duplicate task name".to_string()));
            }
            let group_cpus = cgroups.cpus_of(cgroups.get(key("cgroup"), &t.cgroup)?);
            if let Some(class) = &t.class {
                check_name(&key("class"), class)?;
            }
            if !(0..=100_000).contains(&t.threads) {
                return Err(ScenarioError::new(key("threads"), format!("must be in 0..=100000, got {}", t.threads)));
            }
            validate_task_times(t)?;
            if t.loops < -1 || t.loops == 0 {
                return Err(ScenarioError::new(key("loop"), format!("must be -1 (forever) or >= 1, got {}", t.loops)));
            }
            if let Some(captured) = &t.captured {
                if t.threads != 1 {
                    return Err(ScenarioError::new(key("threads"), format!("a captured thread (phases_file) is one thread, got {}", t.threads)));
                }
                if !captured.iter().any(|p| matches!(p, Phase::Run(r) if *r > 0)) {
                    return Err(ScenarioError::new(key("phases_file"), "its section has no run_us > 0".to_string()));
                }
                self.check_member_cpus(&key("cpus"), &t.cpus, group_cpus)?;
                self.validate_deadline(t, group_cpus)?;
                continue;
            }
            if !t.windows.is_empty() {
                if !t.phases.is_empty() {
                    return Err(ScenarioError::new(key("windows"), "give phases or windows, not both".to_string()));
                }
                self.validate_windows(t)?;
                self.check_member_cpus(&key("cpus"), &t.cpus, group_cpus)?;
                self.validate_deadline(t, group_cpus)?;
                continue;
            }
            if t.phases.is_empty() {
                return Err(ScenarioError::new(key("phases"), "must list at least one phase".to_string()));
            }
            let timers = t.timer_names();
            for (j, p) in t.phases.iter().enumerate() {
                let at = |field: &str| format!("task.{}.phases[{j}].{field}", t.name);
                match p.phase(&timers) {
                    None => {
                        return Err(ScenarioError::new(
                            format!("task.{}.phases[{j}]", t.name),
                            "must have exactly one of run_us, runtime_us, sleep_us, timer_us, timer".to_string(),
                        ))
                    }
                    Some(Phase::Timer(0)) => return Err(ScenarioError::new(at("timer_us"), "must be > 0".to_string())),
                    Some(Phase::RtTimer { period: 0, .. }) => {
                        return Err(ScenarioError::new(at("timer.period_us"), "must be > 0".to_string()))
                    }
                    Some(_) => {}
                }
            }
            let works = |p: &PhaseSpec| matches!(p.phase(&timers), Some(Phase::Run(r) | Phase::Runtime(r)) if r > 0);
            if !t.phases.iter().any(works) {
                return Err(ScenarioError::new(key("phases"), "must contain a run_us or runtime_us phase > 0".to_string()));
            }
            self.check_member_cpus(&key("cpus"), &t.cpus, group_cpus)?;
            self.validate_deadline(t, group_cpus)?;
        }
        self.admit_statically()?;
        Ok(names)
    }

    fn validate_windows(&self, t: &TaskSpec) -> Result<(), ScenarioError> {
        let key = |field: &str| format!("task.{}.{}", t.name, field);
        if !(t.clock_scale > 0.0 && t.clock_scale <= 100.0) {
            return Err(ScenarioError::new(key("clock_scale"), format!("must be in (0, 100], got {}", t.clock_scale)));
        }
        let mut last_end = f64::NEG_INFINITY;
        for (i, &[start, end, rate]) in t.windows.iter().enumerate() {
            let bad = |m: String| Err(ScenarioError::new(format!("task.{}.windows[{i}]", t.name), m));
            if !(start.is_finite() && end.is_finite() && start < end) {
                return bad(format!("needs start_s < end_s, got [{start}, {end}]"));
            }
            if start < last_end {
                return bad(format!("starts at {start} s, before the previous window ends ({last_end} s)"));
            }
            if !(0.0..=1024.0).contains(&rate) {
                return bad(format!("cpu_rate must be in [0, 1024] core-seconds per second, got {rate}"));
            }
            last_end = end;
        }
        Ok(())
    }

    /// `sched_setattr`'s checks of SCHED_DEADLINE parameters (`__checkparam_dl`),
    /// and of its affinity: the root domain's every CPU (else EPERM).
    fn validate_deadline(&self, t: &TaskSpec, group_cpus: Option<&CpuList>) -> Result<(), ScenarioError> {
        let key = |field: &str| format!("task.{}.{}", t.name, field);
        if t.policy == Policy::Normal {
            let profile = t.profile_ms.map(|ms| ms * 1_000);
            if let Some(field) = [("runtime_us", t.runtime_us), ("deadline_us", t.deadline_us), ("period_us", t.period_us), ("profile_ms", profile)]
                .iter()
                .find_map(|(f, v)| v.map(|_| *f))
            {
                return Err(ScenarioError::new(key(field), "only for policy = \"deadline\"".to_string()));
            }
            return Ok(());
        }
        let Some((runtime, deadline, period)) = t.dl_params_ns() else {
            return Err(ScenarioError::new(key("runtime_us"), "policy = \"deadline\" needs runtime_us and period_us".to_string()));
        };
        if runtime < DL_MIN_RUNTIME_NS || runtime > deadline || deadline > period {
            return Err(ScenarioError::new(
                key("runtime_us"),
                format!("need 1.024 us <= runtime_us <= deadline_us <= period_us, got {} <= {} <= {}", runtime / 1000, deadline / 1000, period / 1000),
            ));
        }
        if !(100_000..=4_000_000_000).contains(&period) {
            return Err(ScenarioError::new(key("period_us"), format!("must be in 100..=4000000 (sched_deadline_period_{{min,max}}_us), got {}", period / 1000)));
        }
        if t.cpus.is_some() || t.pin {
            return Err(ScenarioError::new(key("cpus"), "a SCHED_DEADLINE task must be allowed on every CPU (root domain)".to_string()));
        }
        if let Some(cpus) = group_cpus.filter(|c| !c.is_all(self.machine.cpus)) {
            let msg = format!("a SCHED_DEADLINE task must be allowed on every CPU (root domain), but its cgroup's cpus are {cpus}");
            return Err(ScenarioError::new(key("cgroup"), msg));
        }
        if t.retry_ms == 0 {
            return Err(ScenarioError::new(key("retry_ms"), "must be >= 1".to_string()));
        }
        if let Some(ms) = t.profile_ms {
            if t.windows.is_empty() {
                return Err(ScenarioError::new(key("profile_ms"), "profiles trace windows: give windows or trace_csv".to_string()));
            }
            if !(1..=4_000).contains(&ms) {
                return Err(ScenarioError::new(key("profile_ms"), format!("must be in 1..=4000 (the stage is a period: sched_deadline_period_max_us), got {ms}")));
            }
        }
        Ok(())
    }

    /// With `on_refused = "error"`, admission control decided before the run:
    /// if all deadline threads together need more than admission allows, some
    /// `sched_setattr` would be refused, and the run fails. (Tasks that retry
    /// are admitted or refused as they start.)
    fn admit_statically(&self) -> Result<(), ScenarioError> {
        let capacity = dl_capacity_bw(self.machine.cpus, self.kernel.profile);
        let deadline = || self.tasks.iter().filter(|t| t.policy == Policy::Deadline);
        let total: u64 = deadline()
            .map(|t| {
                // A thread that profiles starts on a whole core.
                let (runtime, _, period) = t.dl_params_ns().expect("validated");
                let bw = if t.profile_ms.is_some() { 1 << BW_SHIFT } else { to_ratio(period, runtime) };
                TaskPhases::threads(t) as u64 * bw
            })
            .sum();
        if let Some(t) = deadline().find(|t| t.on_refused == OnRefused::Error) {
            if total > capacity {
                return Err(ScenarioError::new(
                    format!("task.{}", t.name),
                    format!(
                        "SCHED_DEADLINE admission refused (EBUSY): the deadline tasks need {:.2} CPUs, more than the {:.2} admission allows",
                        total as f64 / (1u64 << BW_SHIFT) as f64,
                        capacity as f64 / (1u64 << BW_SHIFT) as f64
                    ),
                ));
            }
        }
        Ok(())
    }

    fn validate_services<'a>(&'a self, cgroups: &CgroupIndex, mut names: HashSet<&'a str>) -> Result<(), ScenarioError> {
        for (i, s) in self.services.iter().enumerate() {
            check_name(&format!("service[{i}].name"), &s.name)?;
            let key = |field: &str| format!("service.{}.{}", s.name, field);
            if !names.insert(s.name.as_str()) {
                return Err(ScenarioError::new(key("name"), "duplicate task or service name".to_string()));
            }
            let group_cpus = cgroups.cpus_of(cgroups.get(key("cgroup"), &s.cgroup)?);
            if !(1..=100_000).contains(&s.workers) {
                return Err(ScenarioError::new(key("workers"), format!("must be in 1..=100000, got {}", s.workers)));
            }
            if !(s.rate_per_s > 0.0 && s.rate_per_s <= 1e6) {
                return Err(ScenarioError::new(key("rate_per_s"), format!("must be in (0, 1e6], got {}", s.rate_per_s)));
            }
            check_time(&key("cost_us"), s.cost_us, 1_000, "us")?;
            if s.cost_us == 0 {
                return Err(ScenarioError::new(key("cost_us"), "must be > 0".to_string()));
            }
            if let Some(cv) = s.cost_cv {
                if !(0.0..=MAX_COST_CV).contains(&cv) {
                    return Err(ScenarioError::new(key("cost_cv"), format!("must be in [0, {MAX_COST_CV}], got {cv}")));
                }
            }
            self.check_member_cpus(&key("cpus"), &s.cpus, group_cpus)?;
        }
        Ok(())
    }

    fn validate_writes(&self, cgroups: &CgroupIndex) -> Result<(), ScenarioError> {
        for (i, w) in self.writes.iter().enumerate() {
            let key = |field: &str| format!("write[{i}].{field}");
            let Some(&cg) = cgroups.by_name.get(w.cgroup.as_str()) else {
                return Err(ScenarioError::new(key("cgroup"), format!("unknown cgroup {}", shown(&w.cgroup))));
            };
            match (w.at_ms, w.start_ms, w.every_ms) {
                (Some(at), None, None) if (0.0..=MAX_TIME_MS).contains(&at) => {}
                (None, Some(start), Some(every)) if (0.0..=MAX_TIME_MS).contains(&start) && (1.0..=MAX_TIME_MS).contains(&every) => {}
                _ => {
                    return Err(ScenarioError::new(
                        key("at_ms"),
                        format!("give at_ms, or start_ms with every_ms >= 1, each at most {MAX_TIME_MS} (about 116 days)"),
                    ))
                }
            }
            let c = &self.cgroups[cg];
            let period = w.period_us.unwrap_or(c.period_us);
            let quota = w.quota_us.unwrap_or(c.quota_us);
            let burst = w.burst_us.unwrap_or(c.burst_us);
            check_bandwidth(&key, period, quota, burst, self.kernel.profile)?;
        }
        Ok(())
    }
    /// Bound the products of keys that a run keeps in memory; each error
    /// names the key that contributes most.
    fn validate_totals(&self) -> Result<(), ScenarioError> {
        let too_many = |key: String, what: String, limit: u64, fix: &str| {
            Err(ScenarioError::new(key, format!("{what}, more than the {limit} a run may have; {fix}")))
        };
        let key = |(table, name, field): (&str, &str, &str)| format!("{table}.{name}.{field}");
        let task_threads = self.tasks.iter().map(|t| (("task", t.name.as_str(), "threads"), TaskPhases::threads(t) as u64));
        let workers = self.services.iter().map(|s| (("service", s.name.as_str(), "workers"), s.workers as u64));
        let (threads, biggest) = largest_sum(task_threads.chain(workers));
        if threads > MAX_THREADS {
            let what = format!("the tasks and services have {threads} threads in all");
            return too_many(key(biggest.expect("threads")), what, MAX_THREADS, "use fewer threads");
        }
        let cfs_rqs = (self.cgroups.len() as u64 + 1) * self.machine.cpus as u64;
        if cfs_rqs > MAX_CFS_RQS {
            let what = format!("{} cgroups and the root on {} CPUs need {cfs_rqs} runqueues", self.cgroups.len(), self.machine.cpus);
            return too_many("machine.cpus".into(), what, MAX_CFS_RQS, "use fewer cgroups or CPUs");
        }
        if self.sample_ms > 0 {
            let samples = self.duration_ns() / (self.sample_ms * 1_000_000) * self.tasks.len() as u64;
            if samples > MAX_SAMPLES {
                let what = format!("{} tasks sampled every {} ms for {} s keep {samples} samples", self.tasks.len(), self.sample_ms, self.duration_ns() as f64 / 1e9);
                return too_many("sample_ms".into(), what, MAX_SAMPLES, "raise sample_ms or shorten duration_s");
            }
        }
        let duration_s = self.duration_ns() as f64 / 1e9;
        let expected = self.services.iter().map(|s| (("service", s.name.as_str(), "rate_per_s"), (s.rate_per_s * duration_s) as u64));
        let (requests, biggest) = largest_sum(expected);
        if requests > MAX_REQUESTS {
            let what = format!("the services expect {requests} requests in {duration_s} s, each one's latency kept");
            return too_many(key(biggest.expect("requests")), what, MAX_REQUESTS, "lower rate_per_s or shorten duration_s");
        }
        Ok(())
    }
}

/// The sum of the values, and the key of the largest.
fn largest_sum<K>(items: impl Iterator<Item = (K, u64)>) -> (u64, Option<K>) {
    let (mut sum, mut largest) = (0u64, None::<(K, u64)>);
    for (key, v) in items {
        sum = sum.saturating_add(v);
        match &largest {
            Some((_, l)) if *l >= v => {}
            _ => largest = Some((key, v)),
        }
    }
    (sum, largest.map(|(key, _)| key))
}

/// A time key, in units of `ns_per_unit`, at most [`MAX_TIME_NS`].
fn check_time(key: &str, value: u64, ns_per_unit: u64, unit: &str) -> Result<(), ScenarioError> {
    let max = MAX_TIME_NS / ns_per_unit;
    if value > max {
        return Err(ScenarioError::new(key, format!("must be at most {max} {unit} (about 116 days), got {value}")));
    }
    Ok(())
}

/// Every time a task gives, before anything converts one to nanoseconds.
fn validate_task_times(t: &TaskSpec) -> Result<(), ScenarioError> {
    let check = |prefix: &str, fields: &[(&str, Option<u64>)], ns_per_unit: u64, unit: &str| {
        fields.iter().try_for_each(|&(field, v)| match v {
            Some(v) => check_time(&format!("{prefix}.{field}"), v, ns_per_unit, unit),
            None => Ok(()),
        })
    };
    let task = format!("task.{}", t.name);
    let us = [
        ("start_us", Some(t.start_us)),
        ("start_spread_us", Some(t.start_spread_us)),
        ("runtime_us", t.runtime_us),
        ("deadline_us", t.deadline_us),
        ("period_us", t.period_us),
    ];
    check(&task, &us, 1_000, "us")?;
    check(&task, &[("retry_ms", Some(t.retry_ms)), ("profile_ms", t.profile_ms)], 1_000_000, "ms")?;
    for (j, p) in t.phases.iter().enumerate() {
        let times = [("run_us", p.run_us), ("runtime_us", p.runtime_us), ("sleep_us", p.sleep_us), ("timer_us", p.timer_us)];
        check(&format!("{task}.phases[{j}]"), &times, 1_000, "us")?;
        check(&format!("{task}.phases[{j}].timer"), &[("period_us", p.timer.as_ref().map(|t| t.period_us))], 1_000, "us")?;
    }
    let max_s = (MAX_TIME_NS / 1_000_000_000) as f64;
    if let Some((i, w)) = t.windows.iter().enumerate().find(|(_, w)| !(0.0..=max_s).contains(&w[0]) || !(0.0..=max_s).contains(&w[1])) {
        let msg = format!("start_s and end_s must be in [0, {max_s}] (about 116 days), got [{}, {}]", w[0], w[1]);
        return Err(ScenarioError::new(format!("task.{}.windows[{i}]", t.name), msg));
    }
    Ok(())
}

/// The cgroups as validated, for checking what refers to them: their indices
/// by name, and each one's effective cpus (its own `cpus`, else its nearest
/// ancestor's; `None`: every CPU of the machine).
struct CgroupIndex<'a> {
    by_name: HashMap<&'a str, usize>,
    effective_cpus: Vec<Option<Rc<CpuList>>>,
}

impl CgroupIndex<'_> {
    /// The cgroup a task or service names (at `key`): its index, `None` for the root.
    fn get(&self, key: String, cgroup: &Option<String>) -> Result<Option<usize>, ScenarioError> {
        match cgroup {
            None => Ok(None),
            Some(name) => match self.by_name.get(name.as_str()) {
                Some(&i) => Ok(Some(i)),
                None => Err(ScenarioError::new(key, format!("unknown cgroup {}", shown(name)))),
            },
        }
    }

    fn cpus_of(&self, cgroup: Option<usize>) -> Option<&CpuList> {
        cgroup.and_then(|i| self.effective_cpus[i].as_deref())
    }
}

/// Names of cgroups, tasks and services (and `class` labels): `--set` keys
/// address them between dots, and the real backend makes directories of them.
const NAME_MAX_LEN: usize = 64;

fn check_name(key: &str, name: &str) -> Result<(), ScenarioError> {
    let ok = |b: u8| b.is_ascii_alphanumeric() || b == b'_' || b == b'-';
    if name.is_empty() || name.len() > NAME_MAX_LEN || !name.bytes().all(ok) {
        let msg = format!("must be 1 to {NAME_MAX_LEN} ASCII letters, digits, '_' or '-', got {}", shown(name));
        return Err(ScenarioError::new(key, msg));
    }
    Ok(())
}

/// The scenario's `name`: free text for reports, without control characters
/// or markup.
const SCENARIO_NAME_MAX_LEN: usize = 128;
const SCENARIO_NAME_PUNCTUATION: &str = " _-.+:,/()";

fn check_scenario_name(name: &str) -> Result<(), ScenarioError> {
    let ok = |c: char| c.is_ascii_alphanumeric() || SCENARIO_NAME_PUNCTUATION.contains(c);
    if name.trim().is_empty() || name.len() > SCENARIO_NAME_MAX_LEN || !name.chars().all(ok) {
        let msg = format!(
            "must be 1 to {SCENARIO_NAME_MAX_LEN} ASCII letters, digits, spaces or any of {:?}, got {}",
            SCENARIO_NAME_PUNCTUATION.trim_start(),
            shown(name)
        );
        return Err(ScenarioError::new("name", msg));
    }
    Ok(())
}

/// The checks of `tg_set_cfs_bandwidth` (and burst's availability per profile).
fn check_bandwidth(
    key: &dyn Fn(&str) -> String,
    period_us: u64,
    quota_us: Quota,
    burst_us: u64,
    profile: Profile,
) -> Result<(), ScenarioError> {
    if !(MIN_CFS_QUOTA_PERIOD_US..=MAX_CFS_QUOTA_PERIOD_US).contains(&period_us) {
        return Err(ScenarioError::new(key("period_us"), format!("must be in 1000..=1000000 (1 ms..1 s), got {period_us}")));
    }
    match quota_us {
        Quota::Max => {}
        Quota::Us(q) if q < MIN_CFS_QUOTA_PERIOD_US => {
            return Err(ScenarioError::new(key("quota_us"), format!("must be >= 1000 (1 ms), got {q}")))
        }
        Quota::Us(q) if q > MAX_CFS_RUNTIME_US => {
            return Err(ScenarioError::new(key("quota_us"), format!("must be <= {MAX_CFS_RUNTIME_US}, got {q}")))
        }
        Quota::Us(q) => {
            if burst_us > q {
                return Err(ScenarioError::new(key("burst_us"), format!("must be <= quota_us ({q}), got {burst_us}")));
            }
        }
    }
    if burst_us > 0 && !profile.has_burst() {
        return Err(ScenarioError::new(
            key("burst_us"),
            format!("burst needs kernel.profile >= 5.14, got {}", profile.as_str()),
        ));
    }
    Ok(())
}
