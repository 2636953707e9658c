//! Where the kubelet puts a pod's containers in the cgroup tree: the pod's
//! cgroup by its UID, its containers' cgroups by their ids, under the cpu
//! hierarchy (v2: the root itself; v1: its `cpu` directory). `capture
//! --pod-uid UID [--container ID|NAME] | --container-id ID` of both
//! `throttlelab` and `throttlelab-real` (a node or guest without Python)
//! find the cgroup here.
//!
//! The kubelet's layout (pkg/kubelet/cm: `CgroupName.ToCgroupfs`/`ToSystemd`,
//! `GetPodContainerName`, qos_container_manager_linux.go):
//!
//! - the pods' root `kubepods` (its `--cgroup-root` may put it lower, as
//!   kind's `/kubelet/kubepods`), a QoS level below it for Burstable
//!   (`burstable`) and BestEffort (`besteffort`) pods, none for Guaranteed
//!   ones, then `pod<UID>`;
//! - the cgroupfs driver spells that path as is: `/kubepods/burstable/pod<UID>`;
//! - the systemd driver makes each step a slice named after all the steps
//!   above, `-` in a step escaped as `_`:
//!   `/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<UID with _>.slice`.
//!
//! Below the pod's cgroup the runtime makes one per container: the
//! container's id as is (containerd, Docker with cgroupfs), `crio-<id>`
//! (CRI-O with cgroupfs), or a scope `cri-containerd-<id>.scope`,
//! `crio-<id>.scope`, `docker-<id>.scope` (systemd). CRI-O's
//! `crio-conmon-<id>` is its monitor, not the container. The pod's sandbox
//! (the `pause` process) has a container cgroup of its own; the cgroups hold
//! no container names: a name is asked of the runtime through `crictl`.

use crate::cgroupfs::Layout;
use crate::error::{Error, Result};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The QoS levels that have a cgroup of their own (Guaranteed pods sit in the pods' root).
const QOS: [&str; 2] = ["burstable", "besteffort"];
/// The runtimes' prefixes of a container cgroup's name.
const RUNTIMES: [&str; 3] = ["cri-containerd", "crio", "docker"];
/// The sandbox's process name (registry.k8s.io/pause runs /pause).
pub const SANDBOX_COMM: &str = "pause";
/// How deep below the hierarchy's root a pods' root is looked for (a
/// --cgroup-root may add levels).
const PODS_ROOT_DEPTH: usize = 3;
/// How long `crictl ps` may take to answer.
const CRICTL_TIMEOUT: Duration = Duration::from_secs(30);

/// A container's cgroup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerCgroup {
    pub pod_uid: String,
    pub container_id: String,
    /// `cri-containerd`, `crio`, `docker` or `""` (the id alone).
    pub runtime: String,
    /// Its directory in the cpu hierarchy.
    pub dir: PathBuf,
}

/// What `capture` was asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Query {
    /// A pod's container: the only one besides its sandbox, or the one whose
    /// id starts with `container` (an id prefix), or named so (asked of crictl).
    Pod { uid: String, container: Option<String> },
    /// A container by its id or a prefix of it, in whichever pod.
    Id(String),
}

impl Query {
    /// From capture's options `--pod-uid UID [--container NAME|ID]` or
    /// `--container-id ID`, checked and spelled as the kubelet does.
    pub fn new(pod_uid: Option<&str>, container: Option<&str>, container_id: Option<&str>) -> Result<Query> {
        if container.is_some() && pod_uid.is_none() {
            return Err(Error::harness("--container goes with --pod-uid"));
        }
        match (pod_uid, container_id) {
            (Some(uid), None) => Ok(Query::Pod { uid: pod_uid_of(uid)?, container: container.map(str::to_string) }),
            (None, Some(cid)) => Ok(Query::Id(container_id_of(cid, "--container-id")?)),
            _ => Err(Error::harness("give --pod-uid UID or --container-id ID (not both)")),
        }
    }
}

fn is_hex(s: &str) -> bool {
    s.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// Whether `s` is a pod UID: an RFC 4122 UUID (groups of 8-4-4-4-12 hex
/// digits split by `sep`), or a static pod's 32 hex digits (the kubelet's
/// hash of its manifest).
fn is_uid(s: &str, sep: char) -> bool {
    let groups: Vec<&str> = s.split(sep).collect();
    let uuid = groups.iter().map(|g| g.len()).eq([8, 4, 4, 4, 12]) && groups.iter().all(|g| is_hex(g));
    uuid || (s.len() == 32 && is_hex(s))
}

/// A pod UID as the user gave it (any case, or with the systemd driver's
/// `_` for `-`), in the kubelet's spelling; refused when it is not one.
fn pod_uid_of(text: &str) -> Result<String> {
    let uid = text.trim().to_lowercase().replace('_', "-");
    if !is_uid(&uid, '-') {
        return Err(Error::harness(format!(
            "--pod-uid '{text}' is not a pod UID (8-4-4-4-12 hex digits, as `kubectl get pod NAME -o jsonpath={{.metadata.uid}}` prints)"
        )));
    }
    Ok(uid)
}

/// Whether `s` reads as a container id or a prefix of one (at least 12 hex
/// digits, Docker's short id).
fn is_container_id(s: &str) -> bool {
    (12..=64).contains(&s.len()) && is_hex(s)
}

/// A container id or a prefix of one, lower case, without the runtime's
/// scheme a pod's `status.containerStatuses[].containerID` has; refused otherwise.
fn container_id_of(text: &str, option: &str) -> Result<String> {
    let mut cid = text.trim().to_lowercase();
    for scheme in ["containerd://", "cri-o://", "docker://"] {
        if let Some(rest) = cid.strip_prefix(scheme) {
            cid = rest.to_string();
        }
    }
    if !is_container_id(&cid) {
        return Err(Error::harness(format!("{option} '{text}' is not a container id (12 to 64 hex digits, as `crictl ps` prints)")));
    }
    Ok(cid)
}

fn is_pods_root(name: &str) -> bool {
    name == "kubepods" || name == "kubepods.slice" || name.ends_with("-kubepods.slice")
}

/// The UID of a pod cgroup's name (either driver), or None.
fn pod_in(name: &str) -> Option<String> {
    if let Some(uid) = name.strip_prefix("pod").filter(|u| is_uid(u, '-')) {
        return Some(uid.to_string());
    }
    let stem = name.strip_suffix(".slice")?;
    let at = stem.rfind("pod")?;
    let (before, uid) = (&stem[..at], &stem[at + 3..]);
    let named = before.is_empty() || (before.len() > 1 && before.ends_with('-'));
    (named && is_uid(uid, '_')).then(|| uid.replace('_', "-"))
}

/// (runtime, id) of a container cgroup's name, or None.
fn container_in(name: &str) -> Option<(&str, &str)> {
    let name = name.strip_suffix(".scope").unwrap_or(name);
    let (runtime, id) = RUNTIMES
        .iter()
        .find_map(|r| name.strip_prefix(r).and_then(|rest| rest.strip_prefix('-')).map(|id| (*r, id)))
        .unwrap_or(("", name));
    (id.len() == 64 && is_hex(id)).then_some((runtime, id))
}

/// (pod UID, container id or None) of a cgroup path of the kubelet's layout
/// (as cAdvisor's `id` label gives it), or None for any other path.
pub fn parse(path: &str) -> Option<(String, Option<String>)> {
    let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
    let below = parts.iter().position(|p| is_pods_root(p))?;
    let (i, uid) = parts.iter().enumerate().skip(below + 1).find_map(|(i, p)| pod_in(p).map(|u| (i, u)))?;
    let cid = parts.get(i + 1).and_then(|p| container_in(p)).map(|(_, id)| id.to_string());
    Some((uid, cid))
}

fn subdirs(d: &Path) -> Vec<PathBuf> {
    let Ok(entries) = fs::read_dir(d) else { return Vec::new() };
    let mut dirs: Vec<PathBuf> = entries.flatten().map(|e| e.path()).filter(|p| p.is_dir()).collect();
    dirs.sort();
    dirs
}

fn name_of(d: &Path) -> &str {
    d.file_name().and_then(|n| n.to_str()).unwrap_or("")
}

/// The kubelet's pods roots in the hierarchy: `kubepods` or `kubepods.slice`
/// at most `PODS_ROOT_DEPTH` levels down, not looking inside them.
fn pods_roots(cpu_root: &Path) -> Vec<PathBuf> {
    let (mut found, mut level) = (Vec::new(), vec![cpu_root.to_path_buf()]);
    for _ in 0..PODS_ROOT_DEPTH {
        let mut below = Vec::new();
        for d in &level {
            for child in subdirs(d) {
                if is_pods_root(name_of(&child)) { found.push(child) } else { below.push(child) }
            }
        }
        level = below;
    }
    found.sort();
    found
}

/// Pod `uid`'s cgroups under one pods root: the kubelet's names for each
/// QoS level, in the root's driver (a `.slice` root: systemd).
fn pod_dirs(pods_root: &Path, uid: &str) -> Vec<PathBuf> {
    let name = name_of(pods_root);
    let candidates: Vec<PathBuf> = match name.strip_suffix(".slice") {
        Some(stem) => {
            let escaped = uid.replace('-', "_");
            let mut c = vec![pods_root.join(format!("{stem}-pod{escaped}.slice"))];
            c.extend(QOS.iter().map(|q| pods_root.join(format!("{stem}-{q}.slice")).join(format!("{stem}-{q}-pod{escaped}.slice"))));
            c
        }
        None => std::iter::once(pods_root.join(format!("pod{uid}"))).chain(QOS.iter().map(|q| pods_root.join(q).join(format!("pod{uid}")))).collect(),
    };
    candidates.into_iter().filter(|c| c.is_dir()).collect()
}

/// (UID, directory) of every pod under one pods root.
fn all_pod_dirs(pods_root: &Path) -> Vec<(String, PathBuf)> {
    let is_qos = |d: &Path| {
        let n = name_of(d);
        QOS.contains(&n) || QOS.iter().any(|q| n.ends_with(&format!("-{q}.slice")))
    };
    let levels = std::iter::once(pods_root.to_path_buf()).chain(subdirs(pods_root).into_iter().filter(|d| is_qos(d)));
    levels.flat_map(|l| subdirs(&l)).filter_map(|d| pod_in(name_of(&d)).map(|uid| (uid, d))).collect()
}

/// The container cgroups in a pod's cgroup (the sandbox's among them).
fn containers(pod_dir: &Path, uid: &str) -> Vec<ContainerCgroup> {
    subdirs(pod_dir)
        .into_iter()
        .filter_map(|d| {
            let (runtime, id) = container_in(name_of(&d))?;
            Some(ContainerCgroup { pod_uid: uid.to_string(), container_id: id.to_string(), runtime: runtime.to_string(), dir: d.clone() })
        })
        .collect()
}

/// Whether every process in it is the pod's `pause` (none: not a sandbox);
/// `proc` is where /proc is.
fn is_sandbox(c: &ContainerCgroup, proc: &Path) -> bool {
    let Ok(pids) = fs::read_to_string(c.dir.join("cgroup.procs")) else { return false };
    // A process gone meanwhile has no name.
    let names: Vec<String> = pids.split_whitespace().filter_map(|p| fs::read_to_string(proc.join(p).join("comm")).ok()).collect();
    !names.is_empty() && names.iter().all(|n| n.trim() == SANDBOX_COMM)
}

fn ids(found: &[ContainerCgroup]) -> String {
    let short: Vec<&str> = found.iter().map(|c| &c.container_id[..12]).collect();
    if short.is_empty() { "none".to_string() } else { short.join(", ") }
}

/// Every container cgroup of pod `uid`; refused where the pod has none here.
fn pod_containers(cpu_root: &Path, uid: &str) -> Result<Vec<ContainerCgroup>> {
    let dirs: Vec<PathBuf> = pods_roots(cpu_root).iter().flat_map(|r| pod_dirs(r, uid)).collect();
    if dirs.is_empty() {
        return Err(Error::harness(format!(
            "--pod-uid {uid}: no such pod's cgroup under {} (is it on this node? `kubectl get pod -o wide` says where)",
            cpu_root.display()
        )));
    }
    Ok(dirs.iter().flat_map(|d| containers(d, uid)).collect())
}

/// Pod `uid`'s container: the one whose id starts with `prefix`, or with
/// none given the only one that is not the sandbox.
fn pod_container(cpu_root: &Path, uid: &str, prefix: Option<&str>, proc: &Path) -> Result<ContainerCgroup> {
    let found = pod_containers(cpu_root, uid)?;
    if let Some(prefix) = prefix {
        let mut picked: Vec<ContainerCgroup> = found.iter().filter(|c| c.container_id.starts_with(prefix)).cloned().collect();
        if picked.len() == 1 {
            return Ok(picked.remove(0));
        }
        let what = if picked.is_empty() { "no" } else { "more than one" };
        return Err(Error::harness(format!(
            "--pod-uid {uid} --container {prefix}: {what} container id starts so; its containers: {}",
            ids(&found)
        )));
    }
    let mut apps: Vec<ContainerCgroup> = found.iter().filter(|c| !is_sandbox(c, proc)).cloned().collect();
    match apps.len() {
        1 => Ok(apps.remove(0)),
        0 => Err(Error::harness(format!("--pod-uid {uid}: no container cgroup in the pod's but its sandbox's (found: {})", ids(&found)))),
        n => Err(Error::harness(format!("--pod-uid {uid}: {n} containers, give --container ID (a prefix of one): {}", ids(&apps)))),
    }
}

/// The container whose id is or starts with `cid`, in any pod.
fn container_by_id(cpu_root: &Path, cid: &str) -> Result<ContainerCgroup> {
    let mut found: Vec<ContainerCgroup> = pods_roots(cpu_root)
        .iter()
        .flat_map(|r| all_pod_dirs(r))
        .flat_map(|(uid, d)| containers(&d, &uid))
        .filter(|c| c.container_id.starts_with(cid))
        .collect();
    match found.len() {
        1 => Ok(found.remove(0)),
        0 => Err(Error::harness(format!(
            "--container-id {cid}: no container cgroup of that id in a pod under {} (is it on this node?)",
            cpu_root.display()
        ))),
        n => Err(Error::harness(format!("--container-id {cid}: {n} containers' ids start so, give more digits: {}", ids(&found)))),
    }
}

/// The ids of pod `uid`'s containers named `name`, from the CRI (`crictl
/// ps`, by the labels the kubelet puts on every container); refused where
/// crictl is not on PATH or does not answer.
fn crictl_ids(uid: &str, name: &str) -> Result<Vec<String>> {
    let args = ["ps", "-a", "-q", "--label", &format!("io.kubernetes.pod.uid={uid}"), "--label", &format!("io.kubernetes.container.name={name}")];
    let shown = format!("crictl {}", args.join(" "));
    let mut child = match Command::new("crictl").args(args).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn() {
        Ok(child) => child,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(Error::harness(format!(
                "--container {name}: the cgroup tree holds container ids, not names, and crictl (which would ask the \
                 runtime) is not on PATH; give an id prefix (12+ hex digits) instead"
            )))
        }
        Err(e) => return Err(Error::harness(format!("--container {name}: {shown} failed: {e}"))),
    };
    let deadline = Instant::now() + CRICTL_TIMEOUT;
    while child.try_wait().map_err(|e| Error::harness(format!("--container {name}: {shown} failed: {e}")))?.is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return Err(Error::harness(format!("--container {name}: {shown} failed: no answer in {} s", CRICTL_TIMEOUT.as_secs())));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let done = child.wait_with_output().map_err(|e| Error::harness(format!("--container {name}: {shown} failed: {e}")))?;
    if !done.status.success() {
        let stderr = String::from_utf8_lossy(&done.stderr);
        let why = stderr.trim().lines().last().map_or_else(|| format!("exit {}", done.status.code().unwrap_or(-1)), str::to_string);
        return Err(Error::harness(format!("--container {name}: {shown} failed: {why}")));
    }
    Ok(String::from_utf8_lossy(&done.stdout).lines().map(|l| l.trim().to_lowercase()).filter(|l| !l.is_empty()).collect())
}

/// The container `query` asks for, under the cpu hierarchy at `cpu_root`
/// (`proc`: where /proc is, to tell the sandbox by its process).
/// `--container` is an id prefix of one of the pod's containers where it
/// reads as one, else a name that crictl turns into ids.
fn find_in(cpu_root: &Path, query: &Query, proc: &Path) -> Result<ContainerCgroup> {
    match query {
        Query::Id(cid) => container_by_id(cpu_root, cid),
        Query::Pod { uid, container: None } => pod_container(cpu_root, uid, None, proc),
        Query::Pod { uid, container: Some(c) } if is_container_id(&c.to_lowercase()) => {
            pod_container(cpu_root, uid, Some(&c.to_lowercase()), proc)
        }
        Query::Pod { uid, container: Some(name) } => {
            let ids = crictl_ids(uid, name)?;
            let mut named: Vec<ContainerCgroup> =
                pod_containers(cpu_root, uid)?.into_iter().filter(|c| ids.contains(&c.container_id)).collect();
            if named.len() != 1 {
                let listed: Vec<&str> = ids.iter().map(|i| &i[..i.len().min(12)]).collect();
                return Err(Error::harness(format!(
                    "--pod-uid {uid} --container {name}: crictl names {} container(s) ({}), {} of them with a cgroup here",
                    ids.len(),
                    if listed.is_empty() { "none".to_string() } else { listed.join(", ") },
                    named.len()
                )));
            }
            Ok(named.remove(0))
        }
    }
}

/// The container `query` asks for in the host's cgroups (`THROTTLELAB_CGROUP_ROOT`
/// or /sys/fs/cgroup; `proc`: where /proc is), and its path below the cpu
/// hierarchy's root (what a capture's `--cgroup` takes).
pub fn find(query: &Query, proc: &Path) -> Result<(ContainerCgroup, PathBuf)> {
    let layout = Layout::detect(&crate::cgroup_root())?;
    let cpu_root = layout.cpu_root();
    let found = find_in(cpu_root, query, proc)?;
    let rel = Path::new("/").join(found.dir.strip_prefix(cpu_root).expect("found below the cpu root"));
    Ok((found, rel))
}

#[cfg(test)]
mod tests {
    use super::*;

    const UID: &str = "12345678-90ab-cdef-1234-567890abcdef";

    #[test]
    fn names_of_either_driver_read_back() {
        assert_eq!(pod_in(&format!("pod{UID}")).as_deref(), Some(UID));
        let escaped = UID.replace('-', "_");
        assert_eq!(pod_in(&format!("kubepods-burstable-pod{escaped}.slice")).as_deref(), Some(UID));
        assert_eq!(pod_in(&format!("kubepods-pod{escaped}.slice")).as_deref(), Some(UID));
        assert_eq!(pod_in(&format!("pod{escaped}.slice")).as_deref(), Some(UID));
        assert_eq!(pod_in(&format!("-pod{escaped}.slice")), None);
        assert_eq!(pod_in(&format!("pod{UID}.slice")), None); // the systemd driver escapes its dashes
        let id = "ab".repeat(32);
        assert_eq!(container_in(&format!("cri-containerd-{id}.scope")), Some(("cri-containerd", id.as_str())));
        assert_eq!(container_in(&format!("crio-{id}")), Some(("crio", id.as_str())));
        assert_eq!(container_in(&id), Some(("", id.as_str())));
        assert_eq!(container_in(&format!("crio-conmon-{id}.scope")), None);
        assert_eq!(container_in(&id[1..]), None);
    }

    #[test]
    fn options_are_checked_before_any_lookup() {
        assert_eq!(Query::new(Some(&UID.to_uppercase().replace('-', "_")), None, None).unwrap(), Query::Pod { uid: UID.into(), container: None });
        let id = "cd".repeat(32);
        assert_eq!(Query::new(None, None, Some(&format!("containerd://{id}"))).unwrap(), Query::Id(id));
        assert!(Query::new(None, Some("web"), None).unwrap_err().to_string().contains("--container goes with --pod-uid"));
        assert!(Query::new(Some(UID), None, Some("ab")).unwrap_err().to_string().contains("not both"));
        assert!(Query::new(Some("web-7d9f8"), None, None).unwrap_err().to_string().contains("is not a pod UID"));
    }
}
