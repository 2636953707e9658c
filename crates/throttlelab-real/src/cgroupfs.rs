//! The cgroups of one run: which hierarchy the host has (v1 or v2), creation
//! under one parent `throttlelab-<pid>`, the settings, `cpu.stat`, and removal
//! of exactly what was created, nothing else; and the parents that runs
//! killed outright (SIGKILL) left behind.

use crate::error::{Error, Result};
use crate::timer_trace::TimerTrace;
use std::fs;
use std::io::{ErrorKind, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};
use throttlelab_core::output::{CgroupStats, Limit};
use throttlelab_core::{Quota, Scenario};

/// Overrides the directory where the hierarchies are mounted (a test aid:
/// a temporary directory stands in for a cgroupfs).
pub const ROOT_ENV: &str = "THROTTLELAB_CGROUP_ROOT";
pub const DEFAULT_ROOT: &str = "/sys/fs/cgroup";

/// v2's "no internal processes" rule forbids processes in a cgroup whose
/// children have controllers enabled; the tasks of such a group run in this
/// leaf child. Scenario cgroup names cannot contain '.', so it never collides.
const V2_LEAF: &str = "tasks.leaf";

/// The parent's `cpu.weight` (the maximum; v1 `cpu.shares` 102400): the
/// simulator's machine runs nothing else, so the scenario's cgroups get the
/// CPUs ahead of the host's other processes (weight 100), about 99% of them.
const PARENT_WEIGHT: u64 = 10_000;

/// How long removal waits for a cgroup whose last task is still exiting.
const RMDIR_PATIENCE: Duration = Duration::from_secs(2);

/// A run's parent is this followed by the controller's pid.
const PARENT_PREFIX: &str = "throttlelab-";

/// The name of the parent of the run whose controller is `pid`.
pub fn parent_name(pid: u32) -> String {
    format!("{PARENT_PREFIX}{pid}")
}

/// The controller's pid in a run's parent name; None for any other name.
fn parent_pid(name: &str) -> Option<u32> {
    let digits = name.strip_prefix(PARENT_PREFIX)?;
    digits.parse().ok().filter(|pid: &u32| pid.to_string() == digits)
}

/// Remove directory `dir`, waiting until `deadline` while the kernel refuses
/// because its last task is still exiting (EBUSY). Gone already is removed.
fn rmdir_patiently(dir: &Path, deadline: Instant) -> Result<()> {
    loop {
        match fs::remove_dir(dir) {
            Ok(()) => return Ok(()),
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(()),
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(10))
            }
            Err(e) => return Err(Error::io("remove cgroup", dir, e)),
        }
    }
}

/// `dir` and every directory below it, parents first.
fn subtree(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut dirs = vec![dir.to_path_buf()];
    let mut i = 0;
    while i < dirs.len() {
        let entries = fs::read_dir(&dirs[i]).map_err(|e| Error::io("list", &dirs[i], e))?;
        for entry in entries {
            let entry = entry.map_err(|e| Error::io("list", &dirs[i], e))?;
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                dirs.push(entry.path());
            }
        }
        i += 1;
    }
    Ok(dirs)
}

/// The parent of an earlier run, left behind: its directory in each
/// hierarchy that has it.
#[derive(Debug)]
pub struct Stale {
    pub name: String,
    dirs: Vec<PathBuf>,
}

impl Stale {
    /// The processes still in it, in any hierarchy, any group below it.
    pub fn procs(&self) -> Result<Vec<u32>> {
        let mut pids = Vec::new();
        for dir in &self.dirs {
            for d in subtree(dir)? {
                let path = d.join("cgroup.procs");
                match fs::read_to_string(&path) {
                    Ok(text) => pids.extend(text.lines().filter_map(|l| l.trim().parse::<u32>().ok())),
                    Err(e) if e.kind() == ErrorKind::NotFound => {}
                    Err(e) => return Err(Error::io("read", &path, e)),
                }
            }
        }
        pids.sort_unstable();
        pids.dedup();
        Ok(pids)
    }

    /// Remove every directory of it, children first.
    pub fn remove(&self) -> Result<()> {
        let deadline = Instant::now() + RMDIR_PATIENCE;
        for dir in &self.dirs {
            for d in subtree(dir)?.iter().rev() {
                rmdir_patiently(d, deadline)?;
            }
        }
        Ok(())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    V1,
    V2,
}

impl Version {
    pub fn as_str(self) -> &'static str {
        match self {
            Version::V1 => "v1",
            Version::V2 => "v2",
        }
    }
}

/// One mounted hierarchy and the controllers the harness uses in it
/// (v1 may co-mount cpu and cpuacct: then one directory has both roles).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Hierarchy {
    root: PathBuf,
    cpu: bool,
    cpuacct: bool,
    cpuset: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    pub version: Version,
    hierarchies: Vec<Hierarchy>,
}

/// Whether a space-separated controller list names `controller`.
fn lists(text: &str, controller: &str) -> bool {
    text.split_whitespace().any(|w| w == controller)
}

impl Layout {
    /// v2 when `<root>/cgroup.controllers` lists cpu; v1 when `<root>/cpu`
    /// holds `cpu.cfs_period_us`. Refuses what the harness would have to change
    /// outside its own cgroups (a controller not enabled at the root).
    pub fn detect(root: &Path) -> Result<Layout> {
        if let Ok(text) = fs::read_to_string(root.join("cgroup.controllers")) {
            if lists(&text, "cpu") {
                let subtree = root.join("cgroup.subtree_control");
                let enabled = fs::read_to_string(&subtree).map_err(|e| Error::io("read", &subtree, e))?;
                if let Some(c) = ["cpu", "cpuset"].into_iter().find(|c| !lists(&enabled, c)) {
                    return Err(Error::harness(format!(
                        "the {c} controller is not enabled in {} (enable it there; the harness only changes its own cgroups)",
                        subtree.display()
                    )));
                }
                let all = Hierarchy { root: root.to_path_buf(), cpu: true, cpuacct: true, cpuset: true };
                return Ok(Layout { version: Version::V2, hierarchies: vec![all] });
            }
        }
        if root.join("cpu/cpu.cfs_period_us").is_file() {
            let mut hierarchies: Vec<Hierarchy> = Vec::new();
            for (name, probe) in [("cpu", "cpu.cfs_period_us"), ("cpuacct", "cpuacct.usage"), ("cpuset", "cpuset.cpus")] {
                let dir = root.join(name);
                if !dir.join(probe).is_file() {
                    return Err(Error::harness(format!("no {name} hierarchy: {} not found", dir.join(probe).display())));
                }
                let dir = fs::canonicalize(&dir).map_err(|e| Error::io("resolve", &dir, e))?;
                let i = match hierarchies.iter().position(|h| h.root == dir) {
                    Some(i) => i,
                    None => {
                        hierarchies.push(Hierarchy { root: dir, cpu: false, cpuacct: false, cpuset: false });
                        hierarchies.len() - 1
                    }
                };
                let h = &mut hierarchies[i];
                match name {
                    "cpu" => h.cpu = true,
                    "cpuacct" => h.cpuacct = true,
                    _ => h.cpuset = true,
                }
            }
            return Ok(Layout { version: Version::V1, hierarchies });
        }
        Err(Error::harness(format!(
            "no cpu controller under {}: neither cgroup v2 with cpu in cgroup.controllers nor a v1 cpu hierarchy (set {ROOT_ENV} to where cgroups are mounted)",
            root.display()
        )))
    }

    /// The parents `throttlelab-<pid>` in the hierarchies' roots whose run
    /// `gone(pid, made)` says is over; `made` is the directory's mtime (the
    /// earliest over the hierarchies), set as it was made and as each child
    /// was made in it. Other names are never looked at again.
    pub fn stale(&self, gone: impl Fn(u32, SystemTime) -> bool) -> Result<Vec<Stale>> {
        let mut found: Vec<(u32, SystemTime, Stale)> = Vec::new();
        for h in &self.hierarchies {
            let entries = fs::read_dir(&h.root).map_err(|e| Error::io("list", &h.root, e))?;
            for entry in entries.flatten() {
                let Some(pid) = entry.file_name().to_str().and_then(parent_pid) else { continue };
                // A directory that vanished meanwhile was someone's to remove.
                let Ok(made) = entry.metadata().and_then(|m| m.modified()) else { continue };
                match found.iter_mut().find(|(p, _, _)| *p == pid) {
                    Some((_, earliest, stale)) => {
                        *earliest = made.min(*earliest);
                        stale.dirs.push(entry.path());
                    }
                    None => found.push((pid, made, Stale { name: parent_name(pid), dirs: vec![entry.path()] })),
                }
            }
        }
        found.sort_by_key(|(pid, _, _)| *pid);
        Ok(found.into_iter().filter(|(pid, made, _)| gone(*pid, *made)).map(|(_, _, s)| s).collect())
    }

    /// The cpu controller's hierarchy (v1: resolved, `cpu` is often a link to `cpu,cpuacct`).
    pub fn cpu_root(&self) -> &Path {
        &self.find(|h| h.cpu).root
    }

    fn find(&self, pick: impl Fn(&Hierarchy) -> bool) -> &Hierarchy {
        self.hierarchies.iter().find(|h| pick(h)).expect("detect() found every controller")
    }
}

/// A cgroup found on the host (not one of ours): only read, for a capture.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    pub version: Version,
    /// Its directory in the hierarchy of each controller; a v1 cgroup may
    /// have none in the cpuacct or cpuset hierarchy.
    cpu: PathBuf,
    cpuacct: Option<PathBuf>,
    cpuset: Option<PathBuf>,
}

impl Layout {
    /// The cgroup at `rel`, a path below the hierarchies' roots (as
    /// /proc/PID/cgroup gives it), or an absolute directory in one of them.
    pub fn found(&self, rel: &Path) -> Result<Found> {
        let original = rel;
        let rel = self
            .hierarchies
            .iter()
            .find_map(|h| rel.strip_prefix(&h.root).ok())
            .unwrap_or_else(|| rel.strip_prefix("/").unwrap_or(rel));
        let at = |pick: fn(&Hierarchy) -> bool| Some(self.find(pick).root.join(rel)).filter(|d| d.is_dir());
        let cpu_root = &self.find(|h| h.cpu).root;
        let cpu = cpu_root.join(rel);
        if !cpu.is_dir() {
            // A v2 path (`/sys/fs/cgroup/app`) on a v1 host: below the
            // hierarchies' mount point, but not in the cpu hierarchy.
            let beside = cpu_root.parent().and_then(|mounts| original.strip_prefix(mounts).ok()).filter(|_| self.version == Version::V1 && !self.hierarchies.iter().any(|h| original.starts_with(&h.root)));
            if let Some(below) = beside.filter(|_| original.is_absolute()) {
                return Err(Error::harness(format!(
                    "no cgroup {}: this host has cgroup v1, whose cpu hierarchy is {} (did you mean {}?)",
                    original.display(),
                    cpu_root.display(),
                    cpu_root.join(below).display()
                )));
            }
            return Err(Error::harness(format!("no cgroup {}: not a directory", cpu.display())));
        }
        Ok(Found { version: self.version, cpu, cpuacct: at(|h| h.cpuacct), cpuset: at(|h| h.cpuset) })
    }
}

impl Found {
    pub fn dir(&self) -> &Path {
        &self.cpu
    }

    /// Its counters now (usage 0 where [`Found::has_usage`] says there is none).
    pub fn stats(&self) -> Result<RawStats> {
        read_stats(self.version, &self.cpu, self.cpuacct.as_deref())
    }

    /// Whether it counts its usage: v1 only in a cpuacct cgroup of the same path.
    pub fn has_usage(&self) -> bool {
        self.version == Version::V2 || self.cpuacct.is_some()
    }

    /// Its `cpu.max` and burst.
    pub fn limit(&self) -> Result<Limit> {
        let number = |file: &str| -> Result<i64> {
            let path = self.cpu.join(file);
            let text = read(&path)?;
            text.trim().parse().map_err(|_| Error::harness(format!("{}: not a number: {text:?}", path.display())))
        };
        // cpu.max.burst and cpu.cfs_burst_us came with 5.14.
        let burst_us = number(if self.version == Version::V2 { "cpu.max.burst" } else { "cpu.cfs_burst_us" }).unwrap_or(0) as u64;
        let (quota, period_us) = match self.version {
            Version::V2 => {
                let path = self.cpu.join("cpu.max");
                let text = read(&path)?;
                let bad = || Error::harness(format!("{}: expected \"QUOTA PERIOD\", got {text:?}", path.display()));
                let (q, p) = text.trim().split_once(' ').ok_or_else(bad)?;
                (if q == "max" { -1 } else { q.parse().map_err(|_| bad())? }, p.parse().map_err(|_| bad())?)
            }
            Version::V1 => (number("cpu.cfs_quota_us")?, number("cpu.cfs_period_us")? as u64),
        };
        let quota_us = if quota < 0 { Quota::Max } else { Quota::Us(quota as u64) };
        Ok(Limit { period_us, quota_us, burst_us })
    }

    /// Its cpu.weight (v1: cpu.shares, 1024 = weight 100).
    pub fn weight(&self) -> Result<u64> {
        let (file, per_100) = if self.version == Version::V2 { ("cpu.weight", 100) } else { ("cpu.shares", 1024) };
        let path = self.cpu.join(file);
        let text = read(&path)?;
        let v: u64 = text.trim().parse().map_err(|_| Error::harness(format!("{}: not a number: {text:?}", path.display())))?;
        Ok((v * 100 / per_100).clamp(1, 10_000))
    }

    /// The CPUs its tasks may use (a CPU list); None without a cpuset cgroup.
    pub fn cpus(&self) -> Result<Option<String>> {
        let file = if self.version == Version::V2 { "cpuset.cpus.effective" } else { "cpuset.effective_cpus" };
        self.cpuset.as_ref().map(|dir| Ok(read(&dir.join(file))?.trim().to_string())).transpose()
    }

    /// The threads in it now.
    pub fn threads(&self) -> Result<Vec<u32>> {
        let path = self.cpu.join(if self.version == Version::V2 { "cgroup.threads" } else { "tasks" });
        Ok(read(&path)?.lines().filter_map(|l| l.trim().parse().ok()).collect())
    }
}

/// The counters of the cgroup at `cpu_dir` (v1: usage from `cpuacct_dir`, if any).
fn read_stats(version: Version, cpu_dir: &Path, cpuacct_dir: Option<&Path>) -> Result<RawStats> {
    let mut stats = parse_cpu_stat(&read(&cpu_dir.join("cpu.stat"))?);
    if let (Version::V1, Some(dir)) = (version, cpuacct_dir) {
        let path = dir.join("cpuacct.usage");
        let text = read(&path)?;
        stats.usage_ns = text.trim().parse().map_err(|_| Error::harness(format!("{}: not a number: {text:?}", path.display())))?;
    }
    Ok(stats)
}

/// The bandwidth a new cgroup starts with.
pub const KERNEL_DEFAULT: Limit = Limit { period_us: 100_000, quota_us: Quota::Max, burst_us: 0 };

/// The files that set `new`, in an order the kernel accepts at every step:
/// `tg_set_cfs_bandwidth` refuses burst > quota, so a burst that must shrink
/// below the new quota is written first.
fn bandwidth_writes(version: Version, old: Limit, new: Limit) -> Vec<(&'static str, String)> {
    let burst_first = matches!(new.quota_us, Quota::Us(q) if q < old.burst_us);
    let mut writes = match version {
        Version::V2 => {
            vec![("cpu.max", format!("{} {}", new.quota_us, new.period_us))]
        }
        Version::V1 => {
            let quota = new.quota_us.us().map_or(-1, |q| q as i64);
            vec![("cpu.cfs_period_us", new.period_us.to_string()), ("cpu.cfs_quota_us", quota.to_string())]
        }
    };
    let burst = (if version == Version::V2 { "cpu.max.burst" } else { "cpu.cfs_burst_us" }, new.burst_us.to_string());
    if burst_first {
        writes.insert(0, burst);
    } else {
        writes.push(burst);
    }
    writes
}

/// Counters of one cgroup at one instant, times in ns.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RawStats {
    pub usage_ns: u64,
    pub nr_periods: u64,
    pub nr_throttled: u64,
    pub throttled_ns: u64,
    pub nr_bursts: u64,
    pub burst_ns: u64,
}

impl RawStats {
    /// The output's statistics for the interval from `before` to `self`,
    /// under `limit`.
    pub fn since(&self, before: &RawStats, limit: Limit) -> CgroupStats {
        let nr_periods = self.nr_periods.saturating_sub(before.nr_periods);
        let nr_throttled = self.nr_throttled.saturating_sub(before.nr_throttled);
        CgroupStats {
            limit,
            usage_usec: self.usage_ns.saturating_sub(before.usage_ns) / 1_000,
            nr_periods,
            nr_throttled,
            throttled_usec: self.throttled_ns.saturating_sub(before.throttled_ns) / 1_000,
            nr_bursts: self.nr_bursts.saturating_sub(before.nr_bursts),
            burst_usec: self.burst_ns.saturating_sub(before.burst_ns) / 1_000,
            throttled_ratio: if nr_periods == 0 { 0.0 } else { nr_throttled as f64 / nr_periods as f64 },
        }
    }
}

/// Parse `cpu.stat`: v2 times are in us (`throttled_usec`), v1's in ns
/// (`throttled_time`); v1 has no usage (it comes from cpuacct.usage).
fn parse_cpu_stat(text: &str) -> RawStats {
    let mut s = RawStats::default();
    for line in text.lines() {
        let Some((key, value)) = line.split_once(' ') else { continue };
        let Ok(v) = value.trim().parse::<u64>() else { continue };
        match key {
            "usage_usec" => s.usage_ns = v * 1_000,
            "nr_periods" => s.nr_periods = v,
            "nr_throttled" => s.nr_throttled = v,
            "throttled_usec" => s.throttled_ns = v * 1_000,
            "throttled_time" => s.throttled_ns = v,
            "nr_bursts" => s.nr_bursts = v,
            "burst_usec" => s.burst_ns = v * 1_000,
            "burst_time" => s.burst_ns = v,
            _ => {}
        }
    }
    s
}

fn read(path: &Path) -> Result<String> {
    fs::read_to_string(path).map_err(|e| Error::io("read", path, e))
}

/// A group of the scenario: None is the root group (the parent itself).
pub type GroupId = Option<usize>;

/// The cgroups one run created. Dropping it removes them.
#[derive(Debug)]
pub struct Tree {
    layout: Layout,
    /// Each scenario cgroup's path below the parent (`app/web`).
    groups: Vec<PathBuf>,
    /// Whether the root group / each scenario cgroup runs its tasks in the v2 leaf.
    leaf: Vec<bool>,
    bandwidth: Vec<Limit>,
    parent: PathBuf,
    /// Directories created, parents first, across hierarchies.
    dirs: Vec<PathBuf>,
    /// Files a write created: none in a real cgroupfs, where they all exist.
    files: Vec<PathBuf>,
    /// Each scenario cgroup's period timer expiry as its first bandwidth
    /// write armed it (CLOCK_MONOTONIC, ns), where tracefs showed it.
    pub period_timer_expiry_ns: Vec<Option<u64>>,
}

impl Tree {
    /// Create `name` (e.g. `throttlelab-<pid>`) in every hierarchy and the
    /// scenario's cgroups below it, with their settings; `worker_groups` are
    /// the groups that will hold processes. `timer_trace`, if any, watches
    /// the bandwidth writes arm the period timers. On error, removes what it
    /// created.
    pub fn create(
        layout: Layout,
        name: &str,
        scenario: &Scenario,
        worker_groups: &[GroupId],
        timer_trace: Option<&TimerTrace>,
    ) -> Result<Tree> {
        let mut groups: Vec<PathBuf> = Vec::new();
        for c in &scenario.cgroups {
            let base = match &c.parent {
                Some(p) => groups[scenario.cgroup_index(p).expect("validated")].clone(),
                None => PathBuf::new(),
            };
            groups.push(base.join(&c.name));
        }
        let has_children = |g: GroupId| match g {
            None => !scenario.cgroups.is_empty(),
            Some(i) => scenario.cgroups.iter().any(|c| c.parent.as_deref() == Some(scenario.cgroups[i].name.as_str())),
        };
        let v2 = layout.version == Version::V2;
        let ids: Vec<GroupId> = std::iter::once(None).chain((0..scenario.cgroups.len()).map(Some)).collect();
        let leaf = ids.iter().map(|&g| v2 && has_children(g) && worker_groups.contains(&g)).collect();
        let mut tree = Tree {
            parent: PathBuf::from(name),
            layout,
            groups,
            leaf,
            bandwidth: vec![KERNEL_DEFAULT; scenario.cgroups.len()],
            dirs: Vec::new(),
            files: Vec::new(),
            period_timer_expiry_ns: vec![None; scenario.cgroups.len()],
        };
        let machine_cpus = match scenario.machine.cpus {
            1 => "0".to_string(),
            n => format!("0-{}", n - 1),
        };
        for &g in &ids {
            let cg = g.map(|i| &scenario.cgroups[i]);
            tree.mkdir(g, false)?;
            let cpus = match cg {
                None => Some(machine_cpus.as_str()),
                Some(c) => c.cpus.as_deref(),
            };
            tree.set_cpuset(g, cpus)?;
            match cg {
                None => tree.set_weight(g, PARENT_WEIGHT)?,
                Some(c) => {
                    let i = g.expect("a scenario cgroup");
                    let bw = Limit { period_us: c.period_us, quota_us: c.quota_us, burst_us: c.burst_us };
                    if let Some(t) = timer_trace {
                        t.clear();
                    }
                    tree.set_bandwidth(i, bw)?;
                    tree.period_timer_expiry_ns[i] = timer_trace.and_then(|t| t.last_period_timer_expiry_ns());
                    tree.set_weight(g, c.weight)?;
                }
            }
            if v2 && has_children(g) {
                tree.write_in(g, |h| h.cpu, "cgroup.subtree_control", "+cpu +cpuset")?;
            }
            if tree.leaf[tree.index(g)] {
                tree.mkdir(g, true)?;
            }
        }
        Ok(tree)
    }

    fn index(&self, g: GroupId) -> usize {
        g.map_or(0, |i| i + 1)
    }

    /// The directory of group `g` in hierarchy `h`.
    fn dir(&self, h: &Hierarchy, g: GroupId) -> PathBuf {
        let rel = g.map_or(PathBuf::new(), |i| self.groups[i].clone());
        h.root.join(&self.parent).join(rel)
    }

    /// The directory that receives group `g`'s processes in hierarchy `h`.
    fn procs_dir(&self, h: &Hierarchy, g: GroupId) -> PathBuf {
        let dir = self.dir(h, g);
        if self.leaf[self.index(g)] {
            dir.join(V2_LEAF)
        } else {
            dir
        }
    }

    fn mkdir(&mut self, g: GroupId, leaf: bool) -> Result<()> {
        for h in self.layout.hierarchies.clone() {
            let dir = if leaf { self.procs_dir(&h, g) } else { self.dir(&h, g) };
            fs::create_dir(&dir).map_err(|e| Error::io("create cgroup", &dir, e))?;
            self.dirs.push(dir);
        }
        Ok(())
    }

    fn write(&mut self, path: PathBuf, value: &str) -> Result<()> {
        let existed = path.exists();
        fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .and_then(|mut f| f.write_all(value.as_bytes()))
            .map_err(|e| Error::harness(format!("cannot write {value:?} to {}: {e}", path.display())))?;
        if !existed {
            self.files.push(path);
        }
        Ok(())
    }

    /// Write `file` of group `g` in the hierarchy `pick` selects.
    fn write_in(&mut self, g: GroupId, pick: impl Fn(&Hierarchy) -> bool, file: &str, value: &str) -> Result<()> {
        let path = self.dir(self.layout.find(pick), g).join(file);
        self.write(path, value)
    }

    /// `cpuset.cpus` (None: v2 inherits the parent's; v1 needs it written, so
    /// it copies the parent's), and in v1 `cpuset.mems`, copied from the
    /// parent: a v1 cpuset takes no task before both are set.
    fn set_cpuset(&mut self, g: GroupId, cpus: Option<&str>) -> Result<()> {
        let h = self.layout.find(|h| h.cpuset).clone();
        let dir = self.dir(&h, g);
        let above = dir.parent().expect("below the root").to_path_buf();
        if self.layout.version == Version::V2 {
            return match cpus {
                Some(list) => self.write(dir.join("cpuset.cpus"), list),
                None => Ok(()),
            };
        }
        let cpus = match cpus {
            Some(list) => list.to_string(),
            None => read(&above.join("cpuset.cpus"))?.trim().to_string(),
        };
        self.write(dir.join("cpuset.cpus"), &cpus)?;
        let mems = read(&above.join("cpuset.mems"))?;
        self.write(dir.join("cpuset.mems"), mems.trim())
    }

    /// v2 `cpu.weight`; v1 `cpu.shares` = weight * 1024 / 100.
    fn set_weight(&mut self, g: GroupId, weight: u64) -> Result<()> {
        match self.layout.version {
            Version::V2 => self.write_in(g, |h| h.cpu, "cpu.weight", &weight.to_string()),
            Version::V1 => self.write_in(g, |h| h.cpu, "cpu.shares", &(weight * 1024 / 100).to_string()),
        }
    }

    /// Set scenario cgroup `i`'s bandwidth. The burst file is written only
    /// when the burst is nonzero or the file exists (kernels before 5.14 lack it).
    pub fn set_bandwidth(&mut self, i: usize, new: Limit) -> Result<()> {
        let dir = self.dir(self.layout.find(|h| h.cpu), Some(i));
        for (file, value) in bandwidth_writes(self.layout.version, self.bandwidth[i], new) {
            let path = dir.join(file);
            if file.contains("burst") && new.burst_us == 0 && !path.exists() {
                continue;
            }
            self.write(path, &value)?;
        }
        self.bandwidth[i] = new;
        Ok(())
    }

    pub fn bandwidth(&self, i: usize) -> Limit {
        self.bandwidth[i]
    }

    /// Write every limited cgroup's bandwidth again, unchanged: the kernel
    /// (`tg_set_cfs_bandwidth`) refills the pool and sets each runqueue's
    /// local runtime to 1 ns, the idle-configured state the simulator starts
    /// from. Called once the workers sleep until the start: their own start-up
    /// ran in the cgroups and left runtime on the runqueues of the CPUs it ran on.
    pub fn reset_bandwidth(&mut self) -> Result<()> {
        for i in 0..self.bandwidth.len() {
            if self.bandwidth[i].quota_us != Quota::Max {
                self.set_bandwidth(i, self.bandwidth[i])?;
            }
        }
        Ok(())
    }

    /// Move process `pid` (all its threads) into group `g` in every hierarchy.
    pub fn attach(&mut self, pid: u32, g: GroupId) -> Result<()> {
        for h in self.layout.hierarchies.clone() {
            let path = self.procs_dir(&h, g).join("cgroup.procs");
            self.write(path, &pid.to_string())?;
        }
        Ok(())
    }

    /// Scenario cgroup `i`'s counters now.
    pub fn stats(&self, i: usize) -> Result<RawStats> {
        let cpu_dir = self.dir(self.layout.find(|h| h.cpu), Some(i));
        read_stats(self.layout.version, &cpu_dir, Some(&self.dir(self.layout.find(|h| h.cpuacct), Some(i))))
    }

    /// Remove what was created: files a write created, then directories,
    /// children before parents. A directory whose last task is still exiting
    /// is retried for a while. Returns the first failure; later calls do nothing.
    pub fn remove(&mut self) -> Result<()> {
        let mut first = None;
        for f in self.files.drain(..).rev() {
            if let Err(e) = fs::remove_file(&f) {
                if e.kind() != ErrorKind::NotFound {
                    first.get_or_insert(Error::io("remove", &f, e));
                }
            }
        }
        let deadline = Instant::now() + RMDIR_PATIENCE;
        for d in std::mem::take(&mut self.dirs).into_iter().rev() {
            if let Err(e) = rmdir_patiently(&d, deadline) {
                first.get_or_insert(e);
            }
        }
        first.map_or(Ok(()), Err)
    }
}

impl Drop for Tree {
    fn drop(&mut self) {
        if let Err(e) = self.remove() {
            eprintln!("throttlelab: warning: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SCENARIO: &str = r#"
name = "t"
duration_s = 1
[machine]
cpus = 2
[[cgroup]]
name = "app"
period_us = 10000
quota_us = 20000
burst_us = 5000
weight = 200
[[cgroup]]
name = "web"
parent = "app"
period_us = 50000
cpus = "1"
[[task]]
name = "a"
cgroup = "app"
phases = [{ run_us = 1000 }]
[[task]]
name = "w"
cgroup = "web"
phases = [{ run_us = 1000 }]
"#;

    fn temp_root(tag: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("throttlelab-real-test-{tag}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn put(path: PathBuf, text: &str) {
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, text).unwrap();
    }

    fn get(path: PathBuf) -> String {
        fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    }

    fn fake_v2(tag: &str) -> PathBuf {
        let root = temp_root(tag);
        put(root.join("cgroup.controllers"), "cpuset cpu io memory pids\n");
        put(root.join("cgroup.subtree_control"), "cpuset cpu\n");
        root
    }

    fn fake_v1(tag: &str) -> PathBuf {
        let root = temp_root(tag);
        put(root.join("cpu/cpu.cfs_period_us"), "100000\n");
        put(root.join("cpuacct/cpuacct.usage"), "0\n");
        put(root.join("cpuset/cpuset.cpus"), "0-1\n");
        put(root.join("cpuset/cpuset.mems"), "0\n");
        root
    }

    /// Every file and directory below `root`, relative, sorted.
    fn listing(root: &Path) -> Vec<String> {
        fn walk(root: &Path, dir: &Path, out: &mut Vec<String>) {
            for e in fs::read_dir(dir).unwrap() {
                let p = e.unwrap().path();
                out.push(p.strip_prefix(root).unwrap().display().to_string());
                if p.is_dir() {
                    walk(root, &p, out);
                }
            }
        }
        let mut out = Vec::new();
        walk(root, root, &mut out);
        out.sort();
        out
    }

    fn scenario() -> Scenario {
        throttlelab_core::load(SCENARIO, &[]).unwrap()
    }

    #[test]
    fn v2_setup_writes_the_settings_and_removal_leaves_nothing() {
        let root = fake_v2("v2");
        let before = listing(&root);
        let layout = Layout::detect(&root).unwrap();
        assert_eq!(layout.version, Version::V2);
        let mut tree = Tree::create(layout, "throttlelab-1", &scenario(), &[Some(0), Some(1)], None).unwrap();
        let p = root.join("throttlelab-1");
        assert_eq!(get(p.join("cpuset.cpus")), "0-1");
        assert_eq!(get(p.join("cpu.weight")), "10000");
        assert_eq!(get(p.join("cgroup.subtree_control")), "+cpu +cpuset");
        assert_eq!(get(p.join("app/cpu.max")), "20000 10000");
        assert_eq!(get(p.join("app/cpu.max.burst")), "5000");
        assert_eq!(get(p.join("app/cpu.weight")), "200");
        assert_eq!(get(p.join("app/cgroup.subtree_control")), "+cpu +cpuset");
        assert_eq!(get(p.join("app/web/cpu.max")), "max 50000");
        assert_eq!(get(p.join("app/web/cpuset.cpus")), "1");
        assert!(!p.join("app/web/cpu.max.burst").exists(), "zero burst, no file: not written");
        // app has a child and tasks: they go to the leaf.
        tree.attach(42, Some(0)).unwrap();
        tree.attach(43, Some(1)).unwrap();
        assert_eq!(get(p.join("app/tasks.leaf/cgroup.procs")), "42");
        assert_eq!(get(p.join("app/web/cgroup.procs")), "43");
        // A write that shrinks the quota below the burst writes the burst first.
        tree.set_bandwidth(0, Limit { period_us: 10000, quota_us: Quota::Us(3000), burst_us: 1000 }).unwrap();
        assert_eq!(get(p.join("app/cpu.max")), "3000 10000");
        assert_eq!(get(p.join("app/cpu.max.burst")), "1000");
        put(p.join("app/cpu.stat"), "usage_usec 1500\nnr_periods 10\nnr_throttled 4\nthrottled_usec 700\nnr_bursts 1\nburst_usec 20\n");
        let s = tree.stats(0).unwrap().since(&RawStats::default(), KERNEL_DEFAULT);
        assert_eq!((s.usage_usec, s.nr_periods, s.nr_throttled, s.throttled_usec, s.nr_bursts, s.burst_usec), (1500, 10, 4, 700, 1, 20));
        assert_eq!(s.throttled_ratio, 0.4);
        fs::remove_file(p.join("app/cpu.stat")).unwrap();
        tree.remove().unwrap();
        assert_eq!(listing(&root), before);
        fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn v1_setup_writes_the_settings_and_removal_leaves_nothing() {
        let root = fake_v1("v1");
        let before = listing(&root);
        let layout = Layout::detect(&root).unwrap();
        assert_eq!(layout.version, Version::V1);
        let mut tree = Tree::create(layout, "throttlelab-1", &scenario(), &[None, Some(0)], None).unwrap();
        let cpu = root.join("cpu/throttlelab-1");
        let cpuset = root.join("cpuset/throttlelab-1");
        assert_eq!(get(cpu.join("app/cpu.cfs_period_us")), "10000");
        assert_eq!(get(cpu.join("app/cpu.cfs_quota_us")), "20000");
        assert_eq!(get(cpu.join("app/cpu.cfs_burst_us")), "5000");
        assert_eq!(get(cpu.join("app/cpu.shares")), "2048");
        assert_eq!(get(cpu.join("cpu.shares")), "102400");
        assert_eq!(get(cpu.join("app/web/cpu.cfs_quota_us")), "-1");
        assert_eq!(get(cpuset.join("cpuset.cpus")), "0-1");
        assert_eq!(get(cpuset.join("cpuset.mems")), "0");
        assert_eq!(get(cpuset.join("app/cpuset.cpus")), "0-1");
        assert_eq!(get(cpuset.join("app/web/cpuset.cpus")), "1");
        assert_eq!(get(cpuset.join("app/web/cpuset.mems")), "0");
        assert!(root.join("cpuacct/throttlelab-1/app/web").is_dir());
        tree.attach(42, None).unwrap();
        assert_eq!(get(cpu.join("cgroup.procs")), "42");
        assert_eq!(get(root.join("cpuacct/throttlelab-1/cgroup.procs")), "42");
        put(cpu.join("app/cpu.stat"), "nr_periods 10\nnr_throttled 5\nthrottled_time 7000000\nnr_bursts 0\nburst_time 0\n");
        put(root.join("cpuacct/throttlelab-1/app/cpuacct.usage"), "2000000000\n");
        let s = tree.stats(0).unwrap().since(&RawStats::default(), KERNEL_DEFAULT);
        assert_eq!((s.usage_usec, s.nr_periods, s.nr_throttled, s.throttled_usec), (2_000_000, 10, 5, 7000));
        fs::remove_file(cpu.join("app/cpu.stat")).unwrap();
        fs::remove_file(root.join("cpuacct/throttlelab-1/app/cpuacct.usage")).unwrap();
        drop(tree);
        assert_eq!(listing(&root), before);
        fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn an_existing_cgroup_is_neither_used_nor_removed() {
        let root = fake_v2("exists");
        put(root.join("throttlelab-1/cpu.max"), "theirs");
        let err = Tree::create(Layout::detect(&root).unwrap(), "throttlelab-1", &scenario(), &[], None).unwrap_err();
        assert!(err.to_string().contains("throttlelab-1"), "{err}");
        assert_eq!(get(root.join("throttlelab-1/cpu.max")), "theirs");
        fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn a_failed_setup_removes_what_it_created() {
        let root = fake_v1("fail");
        // Without cpuset.mems at the root, setup fails after creating the parent.
        fs::remove_file(root.join("cpuset/cpuset.mems")).unwrap();
        let before = listing(&root);
        let err = Tree::create(Layout::detect(&root).unwrap(), "throttlelab-1", &scenario(), &[], None).unwrap_err();
        assert!(err.to_string().contains("cpuset.mems"), "{err}");
        assert_eq!(listing(&root), before);
        fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn stale_parents_are_found_and_removed_in_every_hierarchy_and_nothing_else() {
        let root = fake_v1("stale");
        let mkdir = |p: &str| fs::create_dir_all(root.join(p)).unwrap();
        for h in ["cpu", "cpuacct", "cpuset"] {
            mkdir(&format!("{h}/throttlelab-7/app/web"));
        }
        for other in ["cpu/throttlelab-8", "cpu/throttlelab-07", "cpu/throttlelab-x", "cpu/throttlelab-", "cpu/app"] {
            mkdir(other);
        }
        let layout = Layout::detect(&root).unwrap();
        let before = listing(&root);
        let seen = std::cell::RefCell::new(Vec::new());
        let stale = layout
            .stale(|pid, made| {
                assert!(made.elapsed().unwrap() < Duration::from_secs(60));
                seen.borrow_mut().push(pid);
                pid == 7
            })
            .unwrap();
        assert_eq!(seen.into_inner(), [7, 8], "only names a run gives its parent");
        assert_eq!(stale.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(), ["throttlelab-7"]);
        put(root.join("cpuset/throttlelab-7/app/cgroup.procs"), "42\n43\n");
        assert_eq!(stale[0].procs().unwrap(), [42, 43]);
        fs::remove_file(root.join("cpuset/throttlelab-7/app/cgroup.procs")).unwrap();
        stale[0].remove().unwrap();
        let left: Vec<String> = before.into_iter().filter(|p| !p.contains("throttlelab-7")).collect();
        assert_eq!(listing(&root), left);
        fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn a_v2_path_on_a_v1_host_says_where_the_cpu_hierarchy_is() {
        let root = fake_v1("v2path");
        let layout = Layout::detect(&root).unwrap();
        let cpu = fs::canonicalize(root.join("cpu")).unwrap();
        let e = layout.found(&root.join("ux-app")).unwrap_err().to_string();
        assert_eq!(e, format!("no cgroup {}: this host has cgroup v1, whose cpu hierarchy is {} (did you mean {}?)",
                              root.join("ux-app").display(), cpu.display(), cpu.join("ux-app").display()));
        // A missing cgroup inside the hierarchy, or below its root, is just missing.
        for missing in [cpu.join("gone"), PathBuf::from("gone")] {
            let e = layout.found(&missing).unwrap_err().to_string();
            assert_eq!(e, format!("no cgroup {}: not a directory", cpu.join("gone").display()));
        }
        fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn detection_refuses_what_it_would_have_to_change() {
        let root = temp_root("none");
        assert!(Layout::detect(&root).unwrap_err().to_string().contains("no cpu controller"));
        put(root.join("cgroup.controllers"), "cpuset cpu\n");
        put(root.join("cgroup.subtree_control"), "cpuset\n");
        let e = Layout::detect(&root).unwrap_err().to_string();
        assert!(e.contains("cpu controller is not enabled"), "{e}");
        fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn burst_goes_first_only_when_it_must_shrink_below_the_new_quota() {
        let old = Limit { period_us: 10000, quota_us: Quota::Us(20000), burst_us: 10000 };
        let lower = Limit { period_us: 10000, quota_us: Quota::Us(5000), burst_us: 0 };
        let files = |w: Vec<(&'static str, String)>| w.into_iter().map(|(f, _)| f).collect::<Vec<_>>();
        assert_eq!(files(bandwidth_writes(Version::V2, old, lower)), ["cpu.max.burst", "cpu.max"]);
        assert_eq!(files(bandwidth_writes(Version::V1, old, lower)), ["cpu.cfs_burst_us", "cpu.cfs_period_us", "cpu.cfs_quota_us"]);
        assert_eq!(files(bandwidth_writes(Version::V2, lower, old)), ["cpu.max", "cpu.max.burst"]);
        let unlimited = Limit { quota_us: Quota::Max, ..old };
        assert_eq!(bandwidth_writes(Version::V1, old, unlimited)[1], ("cpu.cfs_quota_us", "-1".to_string()));
    }
}
