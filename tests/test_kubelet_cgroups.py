"""capture --pod-uid / --container-id: the kubelet's cgroup layouts
(crates/throttlelab-real/src/kubelet.rs, through throttlelab.kubelet_cgroups)
on temporary trees of every driver, runtime, QoS level and cgroup version,
and the one-line refusals. The captures of pods' containers in real cgroupfs
are in test_capture.py (v1, the host) and test_kubelet_cgroups_vm.py (v2, the
VM guest)."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from helpers import cli
from test_errors import assert_error
from throttlelab.cgroups import cpu_hierarchy
from throttlelab.kubelet_cgroups import KubeletCgroupError, capture_command, parse, resolve

UID = "12345678-90ab-cdef-1234-567890abcdef"
SLICE_UID = UID.replace("-", "_")
APP = "a1" * 32
SIDECAR = "b2" * 32
SANDBOX = "c3" * 32


def _v1(tmp_path: Path, name: str = "cpu") -> tuple[Path, Path]:
    """A v1 cgroup root and its cpu hierarchy: ``cpu`` (cpuacct apart) or, as
    systemd mounts them, ``cpu,cpuacct`` with ``cpu`` and ``cpuacct`` links to it."""
    root = tmp_path / "cgroup"
    cpu, cpuset = root / name, root / "cpuset"
    for d in (cpu, cpuset):
        d.mkdir(parents=True)
    (cpu / "cpu.cfs_period_us").write_text("100000\n")
    (cpuset / "cpuset.cpus").write_text("0-1\n")
    if name == "cpu":
        (root / "cpuacct").mkdir()
        (root / "cpuacct" / "cpuacct.usage").write_text("0\n")
    else:
        (cpu / "cpuacct.usage").write_text("0\n")
        for link in ("cpu", "cpuacct"):
            (root / link).symlink_to(name)
    return root, cpu


def _v2(tmp_path: Path) -> tuple[Path, Path]:
    root = tmp_path / "cgroup"
    root.mkdir()
    (root / "cgroup.controllers").write_text("cpuset cpu io memory pids\n")
    (root / "cgroup.subtree_control").write_text("cpuset cpu\n")
    return root, root


def _group(d: Path, *pids: int) -> Path:
    d.mkdir(parents=True)
    (d / "cgroup.procs").write_text("".join(f"{p}\n" for p in pids))
    return d


def _proc(tmp_path: Path, **comms: str) -> Path:
    """A stand-in /proc: pid -> comm."""
    proc = tmp_path / "proc"
    for pid, comm in comms.items():
        (proc / pid.removeprefix("p")).mkdir(parents=True)
        (proc / pid.removeprefix("p") / "comm").write_text(comm + "\n")
    return proc


#: (pod directory below the cpu hierarchy, container directory name pattern) per layout.
LAYOUTS = {
    "cgroupfs burstable, containerd": (f"kubepods/burstable/pod{UID}", "{}"),
    "cgroupfs guaranteed, containerd": (f"kubepods/pod{UID}", "{}"),
    "cgroupfs besteffort, CRI-O": (f"kubepods/besteffort/pod{UID}", "crio-{}"),
    "systemd burstable, containerd": (f"kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{SLICE_UID}.slice", "cri-containerd-{}.scope"),
    "systemd guaranteed, CRI-O": (f"kubepods.slice/kubepods-pod{SLICE_UID}.slice", "crio-{}.scope"),
    "systemd besteffort, Docker": (f"kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{SLICE_UID}.slice", "docker-{}.scope"),
    "kind's --cgroup-root, systemd": (f"kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-burstable.slice/kubelet-kubepods-burstable-pod{SLICE_UID}.slice", "cri-containerd-{}.scope"),
    "kind's --cgroup-root, cgroupfs": (f"kubelet/kubepods/pod{UID}", "{}"),
}


@pytest.mark.parametrize("version", ["v1", "v1 cpu,cpuacct", "v2"])
@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_every_layout_finds_the_pods_container_but_its_sandbox(tmp_path, monkeypatch, layout, version):
    root, cpu = _v2(tmp_path) if version == "v2" else _v1(tmp_path, "cpu,cpuacct" if "," in version else "cpu")
    monkeypatch.setenv("THROTTLELAB_CGROUP_ROOT", str(root))
    pod, pattern = LAYOUTS[layout]
    _group(cpu / pod / pattern.format(SANDBOX), 100)
    app = _group(cpu / pod / pattern.format(APP), 200, 201)
    if pattern.startswith("crio"):  # CRI-O's monitor beside the container: not one
        _group(cpu / pod / pattern.replace("crio-", "crio-conmon-").format(APP), 300)
    proc = _proc(tmp_path, p100="pause", p200="nginx", p201="nginx", p300="conmon")
    assert cpu_hierarchy(root).resolve() == cpu
    found, rel = resolve(UID, None, None, proc)
    assert (found.dir, found.container_id, found.pod_uid, rel) == (app, APP, UID, "/" + str(app.relative_to(cpu)))
    assert found.runtime == pattern.partition("-{}")[0].partition("{}")[0]
    assert resolve(UID, SANDBOX[:12], None, proc)[0].container_id == SANDBOX
    assert resolve(None, None, APP[:12], proc)[0].dir == app
    # What cAdvisor's id label holds for it reads back.
    assert parse("/" + str(app.relative_to(cpu))) == (UID, APP)
    assert parse("/" + pod) == (UID, None)


def test_resolve_gives_the_path_below_the_hierarchys_root(tmp_path, monkeypatch):
    root, cpu = _v1(tmp_path)
    monkeypatch.setenv("THROTTLELAB_CGROUP_ROOT", str(root))
    _group(cpu / f"kubepods/burstable/pod{UID}" / APP)
    found, rel = resolve(UID.upper(), None, None)
    assert rel == f"/kubepods/burstable/pod{UID}/{APP}" and found.container_id == APP
    # A UID as the systemd driver spells it, a container id as a pod's status gives it.
    assert resolve(SLICE_UID, None, None)[1] == rel
    assert resolve(None, None, f"containerd://{APP}")[1] == rel


def test_a_pod_of_two_containers_wants_container(tmp_path, monkeypatch):
    root, cpu = _v1(tmp_path)
    monkeypatch.setenv("THROTTLELAB_CGROUP_ROOT", str(root))
    pod = cpu / f"kubepods/pod{UID}"
    for cid in (APP, SIDECAR):
        _group(pod / cid)
    with pytest.raises(KubeletCgroupError, match=f"2 containers, give --container ID.*{APP[:12]}, {SIDECAR[:12]}"):
        resolve(UID, None, None)
    assert resolve(UID, SIDECAR[:16], None)[0].container_id == SIDECAR


def test_capture_commands_from_cadvisor_ids():
    assert capture_command(f"/kubepods/burstable/pod{UID}/{APP}") == f"throttlelab capture --container-id {APP} -o {APP[:12]}.toml"
    assert capture_command(f"/kubepods.slice/kubepods-pod{SLICE_UID}.slice/crio-{APP}.scope", short=True) == (
        f"throttlelab capture --container-id {APP[:12]} -o {APP[:12]}.toml")
    assert capture_command(f"/kubepods/burstable/pod{UID}") is None  # the pod's own cgroup: no one container
    assert capture_command("/") is None
    assert capture_command("/a-v1-group") == "throttlelab capture --cgroup /a-v1-group -o a-v1-group.toml"
    assert capture_command("/system.slice/my app.service") == "throttlelab capture --cgroup '/system.slice/my app.service' -o system.slice-my-app.service.toml"
    assert parse(f"/kubepods.slice/kubepods-pod{SLICE_UID}.slice/crio-conmon-{APP}.scope") == (UID, None)
    assert parse(f"/other/pod{UID}/{APP}") is None


def _capture(*args: str):
    return cli("capture", *args, "--duration", "1", "-o", "never-written.toml")


@pytest.fixture
def host(tmp_path, monkeypatch):
    """A v1 root with one pod of two containers and one of one, as the cgroup root."""
    root, cpu = _v1(tmp_path)
    for cid in (APP, SIDECAR):
        _group(cpu / f"kubepods/burstable/pod{UID}" / cid)
    _group(cpu / f"kubepods/pod{UID.replace('1234-5678', '1234-9999')}" / (APP[:-4] + "ffff"))
    monkeypatch.setenv("THROTTLELAB_CGROUP_ROOT", str(root))
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))  # no crictl unless a test puts one there
    return tmp_path


@pytest.mark.parametrize("args, words", [
    (["--pod-uid", "web-7d9f8"], ["--pod-uid 'web-7d9f8' is not a pod UID"]),
    (["--pod-uid", UID.replace("1", "2")], ["no such pod's cgroup", "is it on this node?"]),
    (["--pod-uid", UID], ["2 containers, give --container ID", APP[:12], SIDECAR[:12]]),
    (["--pod-uid", UID, "--container", "c3" * 8], ["--container c3c3", "no container id starts so", APP[:12]]),
    (["--pod-uid", UID, "--container", "nginx"], ["holds container ids, not names", "crictl", "not on PATH"]),
    (["--container", APP[:12]], ["--container goes with --pod-uid"]),
    (["--container-id", "xyz"], ["--container-id 'xyz' is not a container id"]),
    (["--container-id", APP[:11]], ["is not a container id (12 to 64 hex digits"]),
    (["--container-id", "d4" * 32], ["no container cgroup of that id"]),
    (["--container-id", APP[:12]], ["2 containers' ids start so", "give more digits"]),
    (["--pod-uid", UID, "--container-id", APP], ["not both"]),
    (["--pod-uid", UID, "--cgroup", "/x"], ["give --cgroup PATH, --pid PID or --pod-uid UID / --container-id ID (one of them)"]),
])
def test_bad_pods_and_containers_are_one_line_exit_2(host, args, words):
    assert_error(_capture(*args), *words)


def test_no_cpu_hierarchy_is_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("THROTTLELAB_CGROUP_ROOT", str(tmp_path))
    assert_error(_capture("--pod-uid", UID), "no cpu controller under")
    # Unlike a malformed option, which no cgroup tree is asked about.
    assert_error(_capture("--pod-uid", "x"), "--pod-uid 'x' is not a pod UID")


def _crictl(host: Path, script: str) -> Path:
    """A crictl stand-in on PATH: logs its arguments, then runs `script`."""
    bin_ = host / "bin"
    bin_.mkdir()
    crictl = bin_ / "crictl"
    crictl.write_text(f"#!/bin/sh\necho \"$@\" > {host / 'crictl.args'}\n{script}\n")
    crictl.chmod(crictl.stat().st_mode | stat.S_IXUSR)
    return host / "crictl.args"


def test_a_container_name_is_asked_of_crictl(host, monkeypatch):
    """The CRI knows names; the lookup is by the labels the kubelet sets. (A
    stand-in answers: this host has no runtime.)"""
    args = _crictl(host, f"echo {SIDECAR}")
    monkeypatch.setenv("PATH", f"{host / 'bin'}:/usr/bin:/bin")
    assert resolve(UID, "sidecar", None)[0].container_id == SIDECAR
    assert args.read_text().split() == ["ps", "-a", "-q", "--label", f"io.kubernetes.pod.uid={UID}", "--label", "io.kubernetes.container.name=sidecar"]


@pytest.mark.parametrize("script, words", [
    ("echo 'connect: connection refused' >&2; exit 1", ["crictl ps", "failed: connect: connection refused"]),
    ("true", ["crictl names 0 container(s) (none), 0 of them with a cgroup here"]),
    (f"echo {'e5' * 32}", ["crictl names 1 container(s) (e5e5e5e5e5e5), 0 of them"]),
])
def test_crictl_failures_are_one_line(host, monkeypatch, script, words):
    _crictl(host, script)
    monkeypatch.setenv("PATH", f"{host / 'bin'}:/usr/bin:/bin")
    assert_error(_capture("--pod-uid", UID, "--container", "web"), *words)
