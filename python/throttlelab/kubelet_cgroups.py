"""Where the kubelet puts a pod's containers in the cgroup tree, for
``capture --pod-uid UID [--container ID|NAME] | --container-id ID`` and for
the capture command a row of ``advise --prometheus`` shows.

The layouts (both drivers, v1 and v2, each runtime's container cgroup names,
the QoS levels) and the lookup are the real backend's
(crates/throttlelab-real/src/kubelet.rs), so that ``throttlelab-real capture``
on a node or in the VM guest, without Python, finds what ``throttlelab
capture`` finds; this module is its binding and what cAdvisor's ``id`` label
gives.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from throttlelab import _native
from throttlelab.cgroups import CgroupError


class KubeletCgroupError(CgroupError):
    """A pod or container that cannot be found as asked: one line, exit 2."""


@dataclass(frozen=True)
class ContainerCgroup:
    pod_uid: str
    container_id: str
    #: ``cri-containerd``, ``crio``, ``docker`` or ``""`` (the id alone).
    runtime: str
    #: Its directory in the cpu hierarchy.
    dir: Path


def parse(path: str) -> Optional[tuple[str, Optional[str]]]:
    """(pod UID, container id or None) of a cgroup path of the kubelet's layout
    (as cAdvisor's ``id`` label gives it), or None for any other path."""
    return _native.kubelet_parse(path)


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


def resolve(uid: Optional[str], container: Optional[str], cid: Optional[str],
            proc: Path = Path("/proc")) -> tuple[ContainerCgroup, str]:
    """``capture``'s --pod-uid [--container NAME|ID] or --container-id ID:
    the container's cgroup in the host's cgroups (THROTTLELAB_CGROUP_ROOT or
    /sys/fs/cgroup), and its path below the cpu hierarchy's root (what
    ``capture --cgroup`` takes). ``--container`` is an id prefix of one of the
    pod's containers where it reads as one, else a name that crictl turns
    into ids. ``proc`` stands for /proc (where the sandbox's ``pause`` is told)."""
    try:
        uid_, cid_, runtime, dir_, rel = _native.kubelet_find(uid, container, cid, proc)
    except _native.HarnessError as e:
        raise KubeletCgroupError(str(e)) from None
    return ContainerCgroup(uid_, cid_, runtime, Path(dir_)), str(rel)
