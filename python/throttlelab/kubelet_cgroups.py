"""Where the kubelet puts a pod's containers in the cgroup tree: the pod's
cgroup by its UID, its containers' cgroups by their ids, under the cpu
hierarchy of a cgroup root (v2: the root itself; v1: its ``cpu`` directory).

The kubelet's layout (pkg/kubelet/cm: ``CgroupName.ToCgroupfs``/``ToSystemd``,
``GetPodContainerName``, qos_container_manager_linux.go):

- the pods' root ``kubepods`` (its ``--cgroup-root`` may put it lower, as
  kind's ``/kubelet/kubepods``), a QoS level below it for Burstable
  (``burstable``) and BestEffort (``besteffort``) pods, none for Guaranteed
  ones, then ``pod<UID>``;
- the cgroupfs driver spells that path as is:
  ``/kubepods/burstable/pod<UID>``;
- the systemd driver makes each step a slice named after all the steps above,
  ``-`` in a step escaped as ``_``:
  ``/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<UID with _>.slice``.

Below the pod's cgroup the runtime makes one per container: the container's
id as is (containerd, Docker with cgroupfs), ``crio-<id>`` (CRI-O with
cgroupfs), or a scope ``cri-containerd-<id>.scope``, ``crio-<id>.scope``,
``docker-<id>.scope`` (systemd). CRI-O's ``crio-conmon-<id>`` is its monitor,
not the container. The pod's sandbox (the ``pause`` process) has a container
cgroup of its own; the cgroups hold no container names.

Pure functions over a directory (and ``/proc`` for process names), so that
they are tested on a temporary tree.
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Optional

from throttlelab.cgroups import CgroupError, cpu_hierarchy


class KubeletCgroupError(CgroupError):
    """A pod or container that cannot be found as asked: one line, exit 2."""


#: A pod UID: an RFC 4122 UUID, or a static pod's 32 hex digits (the kubelet's
#: hash of its manifest).
_UID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|[0-9a-f]{32}"
_UID_RE = re.compile(rf"^(?:{_UID})$")
#: The same in the systemd driver's slice names, ``-`` escaped as ``_``.
_UID_ESCAPED = r"[0-9a-f]{8}_[0-9a-f]{4}_[0-9a-f]{4}_[0-9a-f]{4}_[0-9a-f]{12}|[0-9a-f]{32}"
#: The runtimes' container cgroup names (see the module's doc).
_CONTAINER_RE = re.compile(r"^(?:(cri-containerd|crio|docker)-)?([0-9a-f]{64})(?:\.scope)?$")
_QOS = ("burstable", "besteffort")
#: The sandbox's process name (registry.k8s.io/pause runs /pause).
SANDBOX_COMM = "pause"


@dataclass(frozen=True)
class ContainerCgroup:
    pod_uid: str
    container_id: str
    #: ``cri-containerd``, ``crio``, ``docker`` or ``""`` (the id alone).
    runtime: str
    #: Its directory in the cpu hierarchy.
    dir: Path


def pod_uid(text: str) -> str:
    """A pod UID as the user gave it (any case, or with the systemd driver's
    ``_`` for ``-``), in the kubelet's spelling; refused when it is not one."""
    uid = text.strip().lower().replace("_", "-")
    if not _UID_RE.match(uid):
        raise KubeletCgroupError(
            f"--pod-uid {text!r} is not a pod UID (8-4-4-4-12 hex digits, as `kubectl get pod NAME -o jsonpath={{.metadata.uid}}` prints)"
        )
    return uid


def container_id(text: str, option: str = "--container-id") -> str:
    """A container id or a prefix of one (at least 12 hex digits, Docker's
    short id), lower case; refused otherwise."""
    cid = text.strip().lower()
    for prefix in ("containerd://", "cri-o://", "docker://"):  # as a pod's status.containerStatuses[].containerID reads
        cid = cid.removeprefix(prefix)
    if not re.fullmatch(r"[0-9a-f]{12,64}", cid):
        raise KubeletCgroupError(f"{option} {text!r} is not a container id (12 to 64 hex digits, as `crictl ps` prints)")
    return cid


def parse(path: str) -> Optional[tuple[str, Optional[str]]]:
    """(pod UID, container id or None) of a cgroup path of the kubelet's layout
    (as cAdvisor's ``id`` label gives it), or None for any other path."""
    parts = [p for p in path.split("/") if p]
    below = next((i for i, p in enumerate(parts) if _is_pods_root(p)), None)
    if below is None:
        return None
    for i, part in enumerate(parts[below + 1 :], below + 1):
        uid = _pod_in(part)
        if uid is None:
            continue
        if i + 1 < len(parts) and (m := _CONTAINER_RE.match(parts[i + 1])):
            return uid, m.group(2)
        return uid, None
    return None


def _is_pods_root(name: str) -> bool:
    return name == "kubepods" or name == "kubepods.slice" or name.endswith("-kubepods.slice")


def _pod_in(name: str) -> Optional[str]:
    """The UID of a pod cgroup's name (either driver), or None."""
    m = re.fullmatch(rf"pod({_UID})", name) or re.fullmatch(rf"(?:.+-)?pod({_UID_ESCAPED})\.slice", name)
    return m.group(1).replace("_", "-") if m else None


def pods_roots(cpu_root: Path) -> list[Path]:
    """The kubelet's pods roots in the hierarchy: ``kubepods`` or
    ``kubepods.slice`` at most three levels down (its --cgroup-root may add
    some), not looking inside them."""
    found, level = [], [cpu_root]
    for _ in range(3):
        below = []
        for d in level:
            for child in _subdirs(d):
                (found if _is_pods_root(child.name) else below).append(child)
        level = below
    return sorted(found)


def _subdirs(d: Path) -> list[Path]:
    try:
        return sorted(c for c in d.iterdir() if c.is_dir())
    except OSError:
        return []


def pod_dirs(pods_root: Path, uid: str) -> list[Path]:
    """Pod ``uid``'s cgroups under one pods root: the kubelet's names for each
    QoS level, in the root's driver (a ``.slice`` root: systemd)."""
    if pods_root.name.endswith(".slice"):
        stem, escaped = pods_root.name.removesuffix(".slice"), uid.replace("-", "_")
        candidates = [pods_root / f"{stem}-pod{escaped}.slice"]
        candidates += [pods_root / f"{stem}-{q}.slice" / f"{stem}-{q}-pod{escaped}.slice" for q in _QOS]
    else:
        candidates = [pods_root / f"pod{uid}", *(pods_root / q / f"pod{uid}" for q in _QOS)]
    return [c for c in candidates if c.is_dir()]


def all_pod_dirs(pods_root: Path) -> Iterator[tuple[str, Path]]:
    """(UID, directory) of every pod under one pods root."""
    for level in [pods_root, *(d for d in _subdirs(pods_root) if d.name in _QOS or d.name.endswith(tuple(f"-{q}.slice" for q in _QOS)))]:
        for d in _subdirs(level):
            if (uid := _pod_in(d.name)) is not None:
                yield uid, d


def containers(pod_dir: Path, uid: str) -> list[ContainerCgroup]:
    """The container cgroups in a pod's cgroup (the sandbox's among them)."""
    out = []
    for d in _subdirs(pod_dir):
        if m := _CONTAINER_RE.match(d.name):
            out.append(ContainerCgroup(uid, m.group(2), m.group(1) or "", d))
    return out


def is_sandbox(c: ContainerCgroup, proc: Path = Path("/proc")) -> bool:
    """Whether every process in it is the pod's ``pause`` (none: not a sandbox)."""
    try:
        pids = (c.dir / "cgroup.procs").read_text().split()
    except OSError:
        return False
    names = set()
    for pid in pids:
        try:
            names.add((proc / pid / "comm").read_text().strip())
        except OSError:  # gone meanwhile
            continue
    return names == {SANDBOX_COMM}


def find_pod_container(cpu_root: Path, uid: str, container: Optional[str] = None, proc: Path = Path("/proc")) -> ContainerCgroup:
    """Pod ``uid``'s container: the one whose id starts with ``container``, or
    with none given the only one that is not the sandbox."""
    found = _pod_containers(cpu_root, uid)
    if container is not None:
        picked = [c for c in found if c.container_id.startswith(container)]
        if len(picked) == 1:
            return picked[0]
        what = "no" if not picked else "more than one"
        raise KubeletCgroupError(f"--pod-uid {uid} --container {container}: {what} container id starts so; its containers: {_ids(found)}")
    apps = [c for c in found if not is_sandbox(c, proc)]
    if len(apps) == 1:
        return apps[0]
    if not apps:
        raise KubeletCgroupError(f"--pod-uid {uid}: no container cgroup in the pod's but its sandbox's (found: {_ids(found)})")
    raise KubeletCgroupError(f"--pod-uid {uid}: {len(apps)} containers, give --container ID (a prefix of one): {_ids(apps)}")


def _pod_containers(cpu_root: Path, uid: str) -> list[ContainerCgroup]:
    """Every container cgroup of pod ``uid``; refused where the pod has none here."""
    dirs = [d for r in pods_roots(cpu_root) for d in pod_dirs(r, uid)]
    if not dirs:
        raise KubeletCgroupError(f"--pod-uid {uid}: no such pod's cgroup under {cpu_root} (is it on this node? `kubectl get pod -o wide` says where)")
    return [c for d in dirs for c in containers(d, uid)]


def find_container_id(cpu_root: Path, cid: str) -> ContainerCgroup:
    """The container whose id is or starts with ``cid``, in any pod."""
    found = [c for r in pods_roots(cpu_root) for uid, d in all_pod_dirs(r) for c in containers(d, uid) if c.container_id.startswith(cid)]
    if len(found) == 1:
        return found[0]
    if not found:
        raise KubeletCgroupError(f"--container-id {cid}: no container cgroup of that id in a pod under {cpu_root} (is it on this node?)")
    raise KubeletCgroupError(f"--container-id {cid}: {len(found)} containers' ids start so, give more digits: {_ids(found)}")


def _ids(found: list[ContainerCgroup]) -> str:
    return ", ".join(c.container_id[:12] for c in found) or "none"


def capture_command(cgroup_id: str, short: bool = False) -> Optional[str]:
    """The ``throttlelab capture`` that captures the cgroup cAdvisor names
    ``cgroup_id`` (its ``id`` label, the path below the hierarchy's root), to
    run on its node: a pod's container by its id (``short``: its first 12
    digits), any other cgroup by its path; None for a pod's own cgroup or the
    root."""
    parsed = parse(cgroup_id)
    if parsed is not None:
        cid = parsed[1]
        return None if cid is None else f"throttlelab capture --container-id {cid[:12] if short else cid} -o {cid[:12]}.toml"
    if cgroup_id.strip("/") == "":
        return None
    name = re.sub(r"[^A-Za-z0-9_.-]", "-", cgroup_id.strip("/"))
    return f"throttlelab capture --cgroup {shlex.quote(cgroup_id)} -o {name}.toml"


def crictl_ids(uid: str, name: str) -> list[str]:
    """The ids of pod ``uid``'s containers named ``name``, from the CRI
    (``crictl ps``, by the labels the kubelet puts on every container);
    refused where crictl is not installed or does not answer."""
    crictl = shutil.which("crictl")
    if crictl is None:
        raise KubeletCgroupError(
            f"--container {name}: the cgroup tree holds container ids, not names, and crictl (which would ask the"
            " runtime) is not on PATH; give an id prefix (12+ hex digits) instead"
        )
    argv = [crictl, "ps", "-a", "-q", "--label", f"io.kubernetes.pod.uid={uid}", "--label", f"io.kubernetes.container.name={name}"]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise KubeletCgroupError(f"--container {name}: {' '.join(argv)} failed: {e}") from None
    if done.returncode != 0:
        why = (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
        raise KubeletCgroupError(f"--container {name}: {' '.join(argv)} failed: {why}")
    return [line.strip().lower() for line in done.stdout.splitlines() if line.strip()]


def resolve(cgroup_root: Path, uid: Optional[str], container: Optional[str], cid: Optional[str]) -> tuple[ContainerCgroup, str]:
    """``capture``'s --pod-uid [--container NAME|ID] or --container-id ID:
    the container's cgroup under ``cgroup_root``, and its path below the cpu
    hierarchy's root (what ``capture --cgroup`` takes). ``--container`` is an id
    prefix of one of the pod's containers where it reads as one, else a name
    that crictl turns into ids."""
    if container is not None and uid is None:
        raise KubeletCgroupError("--container goes with --pod-uid")
    if (uid is None) == (cid is None):
        raise KubeletCgroupError("give --pod-uid UID or --container-id ID (not both)")
    cpu_root = cpu_hierarchy(cgroup_root)
    if cid is not None:
        found = find_container_id(cpu_root, container_id(cid))
    else:
        uid = pod_uid(uid)  # type: ignore[arg-type]
        if container is None or re.fullmatch(r"[0-9a-f]{12,64}", container.lower()):
            found = find_pod_container(cpu_root, uid, container and container.lower())
        else:
            ids = crictl_ids(uid, container)
            named = [c for c in _pod_containers(cpu_root, uid) if c.container_id in ids]
            if len(named) != 1:
                raise KubeletCgroupError(
                    f"--pod-uid {uid} --container {container}: crictl names {len(ids)} container(s)"
                    f" ({', '.join(i[:12] for i in ids) or 'none'}), {len(named)} of them with a cgroup here"
                )
            found = named[0]
    return found, "/" + str(found.dir.relative_to(cpu_root))
