"""capture --pod-uid / --container-id on cgroup v2, in Debian's 6.12 under
QEMU (the host's cpu controller is v1: its captures are in test_capture.py).

One boot builds the kubelet's v2 layouts in the guest's real cgroupfs: both
drivers (cgroupfs, systemd), both runtimes' container cgroups (containerd's
bare id or ``cri-containerd-<id>.scope``, CRI-O's ``crio-<id>`` or
``crio-<id>.scope`` with its ``crio-conmon-`` monitor beside), the three QoS
levels (Guaranteed pods in the pods' root, Burstable and BestEffort below
theirs). Every pod has its sandbox (a process named ``pause``) and one
container, whose limit is in ``cpu.max`` (BestEffort: none); each container
runs a spinner (BestEffort's: a worker that sleeps between bursts) while it
is captured, by ``--pod-uid`` and by
``--container-id``. The guest has no Python: the captures are
``throttlelab-real capture``, whose lookup (throttlelab_real::kubelet) is the
one ``throttlelab capture`` calls through its binding."""

from __future__ import annotations

import json
import shlex
import tomllib
import uuid

import pytest

from test_vm import needs_vm
from throttlelab import vm

PERIOD_US = 100_000
CAPTURE_S = 1.0

#: The guest's helpers: `mk PATH` makes each level of a cgroup with the cpu
#: and cpuset controllers enabled above it, as the kubelet enables them (v2
#: needs them in every ancestor's subtree_control; a capture reads cpuset's
#: CPUs), `run NAME PATH` starts /bin/NAME in a cgroup (its pid in
#: $last). A spinner (`spin`), a worker that sleeps 4 ms between bursts
#: (`work`) and a sandbox (`pause`, blocked on a fifo, as comm names it: the
#: script's name) are shell scripts: busybox is all there is.
PRELUDE = r"""
cg=/sys/fs/cgroup
mkfifo /tmp/block
printf '#!/bin/sh\nwhile :; do :; done\n' > /bin/spin
printf '#!/bin/sh\nexec 3<> /tmp/block\nread x <&3\n' > /bin/pause
printf '#!/bin/sh\nexec 3<> /tmp/block\nwhile :; do i=0; while [ $i -lt 300 ]; do i=$((i+1)); done; read -t 0.004 x <&3; done\n' > /bin/work
cp /bin/pause /bin/conmon
chmod +x /bin/spin /bin/pause /bin/conmon /bin/work
mk() {
  p=$cg
  for s in $(echo "$1" | tr / ' '); do
    grep -qw cpuset $p/cgroup.subtree_control || echo '+cpu +cpuset' > $p/cgroup.subtree_control || exit 2
    [ -d $p/$s ] || mkdir $p/$s || exit 2
    p=$p/$s
  done
}
run() { /bin/$1 > /dev/null 2>&1 & last=$!; echo $last > $cg/$2/cgroup.procs || exit 2; }
send() { echo "throttlelab-guest: file $1 $(base64 /tmp/$1 | tr -d '\n')"; }
"""


def _pods() -> list[dict]:
    """A pod for each driver, runtime and QoS level: its directory, its
    container's and sandbox's (and CRI-O's monitor's) below the cpu hierarchy."""
    pods = []
    for driver in ("cgroupfs", "systemd"):
        for runtime in ("containerd", "crio"):
            for qos in ("guaranteed", "burstable", "besteffort"):
                uid, app, sandbox = str(uuid.uuid4()), uuid.uuid4().hex * 2, uuid.uuid4().hex * 2
                esc = uid.replace("-", "_")
                if driver == "cgroupfs":
                    pod = f"kubepods/pod{uid}" if qos == "guaranteed" else f"kubepods/{qos}/pod{uid}"
                    name = "{}" if runtime == "containerd" else "crio-{}"
                else:
                    pod = (f"kubepods.slice/kubepods-pod{esc}.slice" if qos == "guaranteed" else
                           f"kubepods.slice/kubepods-{qos}.slice/kubepods-{qos}-pod{esc}.slice")
                    name = "cri-containerd-{}.scope" if runtime == "containerd" else "crio-{}.scope"
                i = len(pods)
                pods.append({
                    "case": f"{driver} {runtime} {qos}", "uid": uid, "id": app, "pod": pod,
                    "app": f"{pod}/{name.format(app)}", "sandbox": f"{pod}/{name.format(sandbox)}",
                    "conmon": f"{pod}/{name.replace('crio-', 'crio-conmon-').format(app)}" if runtime == "crio" else None,
                    # Distinct limits, so that the capture's read-back names the cgroup too.
                    "quota_us": None if qos == "besteffort" else 10_000 + 2_000 * i,
                })
    return pods


def _captures(i: int, p: dict) -> list[tuple[str, str]]:
    """How pod ``i`` is captured: by its UID (every other one naming its
    container by an id prefix as well), then by its container's id. (A
    capture of 1 s takes 2-6 s of the guest's time under TCG.)"""
    by_uid = f"--pod-uid {p['uid']}" + (f" --container {p['id'][:16]}" if i % 2 else "")
    return [("pod", by_uid), ("id", f"--container-id {p['id'][:12]}")]


def _script(pods: list[dict]) -> str:
    """Make every pod's cgroups and start its sandbox (and monitor), then, one
    container at a time, run its workload in it and capture it twice."""
    lines = [PRELUDE]
    for p in pods:
        for d in filter(None, (p["app"], p["sandbox"], p["conmon"])):
            lines.append(f"mk {shlex.quote(d)}")
        if p["quota_us"] is not None:
            # The kubelet limits the pod to its containers' sum: here as if a
            # second, idle container had 100m. With the pod's limit equal to
            # the container's, which of the two cgroups throttles the spinner
            # is a race: in one run here the pod's did, and the container's
            # cpu.stat read 0 of 10 periods throttled.
            for d, quota_us in ((p["pod"], p["quota_us"] + PERIOD_US // 10), (p["app"], p["quota_us"])):
                lines.append(f"echo '{quota_us} {PERIOD_US}' > $cg/{shlex.quote(d)}/cpu.max || exit 2")
        lines.append(f"run pause {shlex.quote(p['sandbox'])}")
        if p["conmon"]:
            lines.append(f"run conmon {shlex.quote(p['conmon'])}")
    exe = "/throttlelab/throttlelab-real capture"
    for i, p in enumerate(pods):
        # BestEffort's container has no limit: a spinner alone on a CPU may not
        # switch out in the whole capture, and a trace sees switches.
        workload = "spin" if p["quota_us"] is not None else "work"
        lines.append(f"run {workload} {shlex.quote(p['app'])}; spin=$last; sleep 0.2")
        for how, args in _captures(i, p):
            out = f"{i}-{how}.toml"
            lines.append(f"{exe} {args} --duration {CAPTURE_S} -o /tmp/{out} || exit $?")
            lines.append(f"send {out}; echo \"# {i} {how} done at $(cut -d' ' -f1 /proc/uptime) s\"")
        lines.append("kill $spin; wait $spin 2> /dev/null; true")
    return "\n".join(lines) + "\n"


@needs_vm
def test_pods_containers_are_captured_by_uid_and_id_in_cgroup_v2():
    pods = _pods()
    k = vm.kernel("6.12", lambda _: None)
    lines, files = vm.script(k, _script(pods), limit_s=300.0, note=print)
    print("\n".join(line for line in lines if line.startswith("#")))
    captures = iter(json.loads(line) for line in lines if not line.startswith("#"))
    for i, p in enumerate(pods):
        for how, args in _captures(i, p):
            cap = next(captures)
            print(p["case"], args, cap)
            # The container's cgroup, not its pod's, its sandbox's or CRI-O's monitor's.
            assert cap["source"] == f"/sys/fs/cgroup/{p['app']}", (p["case"], how, cap)
            assert cap["threads"] == 1, (p["case"], how, cap)
            (cgroup,) = tomllib.loads(files[f"{i}-{how}.toml"].decode())["cgroup"]
            usage_us, periods = cap["usage_usec"], cap["nr_periods"]
            if p["quota_us"] is None:  # BestEffort: no limit, nothing throttled, the worker's bursts captured
                assert "quota_us" not in cgroup and cap["nr_throttled"] == 0, (p["case"], cgroup)
                assert usage_us > 0 and cap["cpu_usec"] > 0, (p["case"], how, cap)
            else:
                assert (cgroup["quota_us"], cgroup["period_us"]) == (p["quota_us"], PERIOD_US), (p["case"], cgroup)
                # Held to the limit: throttled in most periods, no more than the quota in each (and the last's debt).
                assert periods >= 0.8 * CAPTURE_S * 1e6 / PERIOD_US, (p["case"], how, cap)
                assert cap["nr_throttled"] >= 0.5 * periods, (p["case"], how, cap)
                assert 0 < usage_us <= (periods + 1) * p["quota_us"] * 1.05, (p["case"], how, cap)
    assert next(captures, None) is None, lines


def test_every_driver_runtime_and_qos_is_built():
    """What the boot test builds: 2 drivers x 2 runtimes x 3 QoS levels, each
    name as the kubelet and the runtime make it."""
    pods = _pods()
    assert len({p["case"] for p in pods}) == 12
    by = {p["case"]: p for p in pods}
    p = by["systemd crio burstable"]
    esc = p["uid"].replace("-", "_")
    assert p["app"] == f"kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{esc}.slice/crio-{p['id']}.scope"
    assert p["conmon"].endswith(f"/crio-conmon-{p['id']}.scope")
    p = by["cgroupfs containerd guaranteed"]
    assert p["app"] == f"kubepods/pod{p['uid']}/{p['id']}" and p["conmon"] is None
    assert by["cgroupfs crio besteffort"]["quota_us"] is None
    assert sorted(q["quota_us"] for q in pods if q["quota_us"]) == sorted(set(q["quota_us"] for q in pods if q["quota_us"]))
    # Each way of asking meets both drivers, both runtimes and the three QoS levels.
    for how in ("pod", "id"):
        asked = [p["case"].split() for i, p in enumerate(pods) if how in dict(_captures(i, p))]
        assert [len({a[k] for a in asked}) for k in range(3)] == [2, 2, 3], (how, asked)
    assert sum("--container " in dict(_captures(i, p))["pod"] for i, p in enumerate(pods)) == 6
