"""Real runs without Python and on other kernels: the `throttlelab-real` controller
executable, and `throttlelab real --kernel`, which boots a kernel under QEMU.
The boot tests need root, QEMU, busybox, cpio and Debian's apt (CI installs them)."""

from __future__ import annotations

import gzip
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

import throttlelab
from helpers import cli
from test_real import needs_real
from throttlelab import _native, vm
from throttlelab.scenarios import load_scenario_text
from throttlelab.worker import CONTROLLER

PACKAGES = [
    "linux-image-6.1.0-47-amd64", "linux-image-6.1.0-50-amd64", "linux-image-6.1.0-50-cloud-amd64",
    "linux-image-6.1.0-50-rt-amd64", "linux-image-6.1.0-50-amd64-dbg", "linux-image-6.1.0-50-amd64-unsigned",
    "linux-image-6.12-amd64", "linux-image-6.12.9+deb12-amd64", "linux-image-6.12.100+deb12-amd64",
    "linux-image-amd64",
]


def test_a_release_is_debians_newest_image_of_it():
    assert vm.newest_package("6.1", PACKAGES) == "linux-image-6.1.0-50-amd64"
    # 100 > 9: numbers, not text.
    assert vm.newest_package("6.12", PACKAGES) == "linux-image-6.12.100+deb12-amd64"


def test_a_release_debian_has_not_says_which_it_has():
    with pytest.raises(vm.VmError, match=r"no kernel image for release '5.4' \(it has: 6.1, 6.12\)"):
        vm.newest_package("5.4", PACKAGES)


def test_a_kernel_path_that_is_not_a_file_is_refused(tmp_path, write_scenario):
    result = cli("real", write_scenario(), "--kernel", str(tmp_path / "bzImage"))
    assert result.exit_code == 2
    assert result.stderr == f"throttlelab: error: no kernel image at {tmp_path / 'bzImage'}\n"


def controller(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(CONTROLLER), *args], capture_output=True, text=True, timeout=60)


def test_the_controller_refuses_bad_input_in_one_line(tmp_path, write_scenario):
    assert CONTROLLER.is_file() and os.access(CONTROLLER, os.X_OK)
    usage = controller()
    assert usage.returncode == 2 and usage.stderr.startswith("throttlelab-real: error: usage: throttlelab-real")
    bad = controller(write_scenario(), "--set", "cgroup.app.period_us=10")
    assert bad.returncode == 2
    assert bad.stderr == "throttlelab-real: error: cgroup.app.period_us: must be in 1000..=1000000 (1 ms..1 s), got 10\n"
    missing = controller(str(tmp_path / "none.toml"))
    assert missing.returncode == 2 and "cannot read" in missing.stderr
    out = str(tmp_path / "c.toml")
    no_target = controller("capture", "--duration", "1", "-o", out)
    assert no_target.returncode == 2
    assert no_target.stderr.startswith("throttlelab-real: error: give --cgroup PATH, --pid PID or --pod-uid UID / --container-id ID (one of them); usage:")
    # A pod's container: the options checked as `throttlelab capture` checks them (throttlelab_real::kubelet).
    for args, said in ((["--pod-uid", "web-1"], "--pod-uid 'web-1' is not a pod UID"), (["--container", "ab" * 8], "--container goes with --pod-uid"),
                       (["--container-id", "xyz"], "--container-id 'xyz' is not a container id"),
                       (["--pod-uid", "1" * 32, "--cgroup", "/x"], "give --cgroup PATH, --pid PID or --pod-uid UID")):
        refused = controller("capture", *args, "--duration", "1", "-o", out)
        assert refused.returncode == 2 and refused.stderr.startswith(f"throttlelab-real: error: {said}"), refused.stderr
    zero = controller("capture", "--pid", "1", "--duration", "0", "-o", out)
    assert zero.stderr == 'throttlelab-real: error: --duration: must be a number of seconds > 0, got "0"\n'
    assert controller("capture", "--pid", "1", "--duration").stderr.startswith("throttlelab-real: error: --duration needs a value")
    assert not Path(out).exists()


@needs_real
def test_the_controller_runs_a_scenario_as_throttlelab_real_does(write_scenario):
    """No Python: the controller loads the scenario, runs it in real cgroups
    with the worker beside it and prints the output document."""
    # Half a CPU against two spinners' two: throttled in every period even on a busy host.
    done = controller(write_scenario(quota_us="5000"), "--set", "duration_s=1")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    app = doc["cgroups"]["app"]
    assert doc["backend"] == "real" and doc["host"]["release"] == os.uname().release
    assert app["nr_throttled"] >= 0.9 * app["nr_periods"] > 0, app


def _missing_vm() -> str | None:
    if os.geteuid() != 0:
        return "the real backend needs root"
    for tool in ("qemu-system-x86_64", "busybox", "cpio", "apt-get"):
        if shutil.which(tool) is None:
            return f"no {tool}"
    return None


needs_vm = pytest.mark.skipif(_missing_vm() is not None, reason=str(_missing_vm()))


@needs_vm
@pytest.mark.parametrize("release, cgroup", [("6.12", "v2"), ("6.1", "v1")])
def test_a_debian_kernel_boots_and_throttles_in_its_own_cgroups(write_scenario, release, cgroup):
    """Debian's kernels in QEMU: the scenario runs in the guest's real hierarchy
    (v2, the one most users have; v1 on request), and two spinners under half a
    CPU of quota are held to it: throttled in most periods and using about the
    quota, where unthrottled they would use 2 CPUs. Under TCG, 6.12 leaves some
    periods unthrottled (1 s runs here: 86-100 of 100 throttled over 20 runs,
    some with the host's other CPU busy; 6.1: 99-100 over 8), and the guest,
    with no steal time under TCG, charges a vCPU's stalls on the host to the
    task it was running, so usage exceeds the quota by up to 4 % (the final
    periods' debt, which throttling has not paid back yet)."""
    path = write_scenario(quota_us="5000")
    result = cli("real", "--json", path, "--set", "duration_s=1", "--kernel", release, "--cgroup", cgroup)
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    host = doc["host"]
    assert host["release"].startswith(release + ".") and host["hz"] == 250 and host["cgroup"] == cgroup
    assert host["vm"]["kernel"].startswith(f"linux-image-{release}.") and host["vm"]["accel"] in ("kvm", "tcg")
    # The probe's run/sleep fit ran in the guest too (what it found is the hold's to say).
    assert host["run_sleep_work_speed"] > 0 and host["wakeup_cost_us"] is not None, host
    app = doc["cgroups"]["app"]
    assert abs(app["nr_periods"] - 100) <= 10, app
    assert app["nr_throttled"] >= 0.75 * app["nr_periods"], app
    # The quota at the cpu.max write and at every refill, and the debt left.
    assert app["usage_usec"] <= (app["nr_periods"] + 1) * 5_000 * 1.05, app


@needs_vm
def test_a_failing_run_in_the_guest_says_why(write_scenario):
    """More CPUs than the VM has: the guest's controller refuses, and its line comes back."""
    k = vm.kernel("6.12", lambda _: None)
    text = Path(write_scenario()).read_text()
    with pytest.raises(vm.VmError, match="in the guest: throttlelab-real: error: machine.cpus = 2 but CPU 1 is not online"):
        vm.run(k, text, [[]], resolved(cpus=1), accel="tcg")


@needs_vm
def test_a_kernel_without_the_patches_says_so():
    """kernel.features slush_fund on Debian's kernel: it has no SLUSH_FUND sched feature."""
    k = vm.kernel("6.12", lambda _: None)
    with pytest.raises(vm.VmError, match="in the guest: throttlelab-real: error: this kernel has no sched feature SLUSH_FUND"):
        vm.run(k, "", [[]], resolved(features=["slush_fund"]), accel="tcg")


def test_a_feature_no_patch_adds_is_refused(tmp_path):
    image = tmp_path / "bzImage"
    image.write_bytes(b"")
    k = vm.kernel(str(image), lambda _: None)
    with pytest.raises(vm.VmError, match=r"no kernel patch for kernel.features hard_limits \(kernel/patches has slush_fund, "
                                         r"noop_update, atomic_pool, interleave_timers\)"):
        vm.run(k, "", [[]], resolved(features=["slush_fund", "hard_limits"]))


def test_the_guest_switches_on_the_sched_features_the_patches_add():
    """Each feature vm.SCHED_FEATURES switches on is one a patch in kernel/patches
    adds (off by default), and each such feature is switchable."""
    patches = sorted((Path(__file__).resolve().parent.parent / "kernel" / "patches").glob("*.patch"))
    added = re.findall(r"^\+SCHED_FEAT\((\w+), (\w+)\)$", "".join(p.read_text() for p in patches), re.M)
    assert sorted(added) == sorted((name, "false") for name in vm.SCHED_FEATURES.values())


def test_a_guest_whose_kernel_panics_under_tcg_is_booted_again(tmp_path, monkeypatch):
    """A panic of the emulated machine is not the run's result: booted again, up
    to three times in all, saying so; any other failure is not retried."""
    image = tmp_path / "bzImage"
    image.write_bytes(b"")
    k = vm.kernel(str(image), lambda _: None)
    monkeypatch.setattr(vm, "initramfs", lambda out, *args: out.write_bytes(b""))
    monkeypatch.setattr(vm.shutil, "which", lambda name: "/usr/bin/" + name)
    boots, notes = [], []

    def boot(*args):
        boots.append(args[3])
        if len(boots) < 3:
            raise vm.GuestCrash("Kernel panic - not syncing: Fatal exception in interrupt")
        return ["{}"]

    monkeypatch.setattr(vm, "_boot", boot)
    assert vm.run(k, "", [[]], resolved(), accel="tcg", note=notes.append) == ["{}"]
    assert boots == ["tcg"] * 3 and len(notes) == 2 and "failed under TCG" in notes[0]

    def failing(error: vm.VmError):
        def boot(*args):
            boots.append(args[3])
            raise error
        return boot

    for error, tries in ((vm.GuestCrash("again"), 3), (vm.VmError("in the guest: exit 2"), 1)):
        boots.clear()
        monkeypatch.setattr(vm, "_boot", failing(error))
        with pytest.raises(type(error), match=str(error)):
            vm.run(k, "", [[]], resolved(), accel="tcg")
        assert len(boots) == tries


def test_a_guest_whose_runs_hang_is_stopped_and_booted_again(tmp_path, monkeypatch):
    """A guest up but not done within its runs' durations and some slack is
    stopped (not waited on for ever) and booted again, as a crashed guest is."""
    image, pids = tmp_path / "bzImage", tmp_path / "pids"
    image.write_bytes(b"")
    k = vm.kernel(str(image), lambda _: None)
    monkeypatch.setattr(vm, "initramfs", lambda out, *args: out.write_bytes(b""))
    monkeypatch.setattr(vm.shutil, "which", lambda name: "/usr/bin/" + name)
    monkeypatch.setattr(vm, "_RUN_SLACK_S", 0.2)
    monkeypatch.setattr(vm, "qemu_command", lambda k, initrd, cpus, accel, console, result: [
        "sh", "-c", f'echo "{vm._UP}6.12" > {console}; echo $$ >> {pids}; exec sleep 60'])
    notes = []
    with pytest.raises(vm.GuestCrash, match=r"the guest's runs did not end 0 s after it was up: throttlelab-guest: up 6.12"):
        vm.run(k, "", [[]], {**resolved(), "duration_s": 0.1}, accel="tcg", note=notes.append)
    assert sum("failed under TCG" in n for n in notes) == 2
    started = pids.read_text().split()
    assert len(started) == 3 and not any(Path(f"/proc/{pid}").exists() for pid in started)


def test_kvm_that_cannot_run_the_guest_says_so_in_one_line_and_tcg_runs_it(tmp_path, monkeypatch):
    """QEMU's assertion (KVM in a nested VM that cannot set the host CPU's MSRs)
    is not shown as it is: one line names where it failed, and TCG runs the guest."""
    image = tmp_path / "bzImage"
    image.write_bytes(b"")
    k = vm.kernel(str(image), lambda _: None)
    monkeypatch.setattr(vm, "initramfs", lambda out, *args: out.write_bytes(b""))
    monkeypatch.setattr(vm.shutil, "which", lambda name: "/usr/bin/" + name)
    monkeypatch.setattr(vm.os, "access", lambda path, mode: path == "/dev/kvm")
    assertion = ("qemu-system-x86_64: ../../target/i386/kvm/kvm.c:3312: kvm_buf_set_msrs: Assertion "
                 "`ret == cpu->kvm_msr_buf->nmsrs' failed.")

    def command(k, initrd, cpus, accel, console, result):
        if accel == "kvm":
            return ["sh", "-c", 'echo "$1" >&2; exit 134', "sh", assertion]
        return ["sh", "-c", f'echo "{vm._UP}6.12" > {console}; echo "{vm._EXIT}0" >> {console}; echo "{{\\"host\\": {{}}}}" > {result}']

    monkeypatch.setattr(vm, "qemu_command", command)
    notes = []
    outs = vm.run(k, "", [[]], resolved(), accel="auto", note=notes.append)
    assert json.loads(outs[0])["host"]["vm"]["accel"] == "tcg"
    fallback = [n for n in notes if "KVM" in n and "booting" not in n]
    assert fallback == ["KVM cannot run this guest here (QEMU failed: an assertion failed in kvm_buf_set_msrs); using TCG"]
    assert vm.qemu_said("qemu-system-x86_64: -accel kvm: Could not access KVM kernel module\n") == \
        "qemu-system-x86_64: -accel kvm: Could not access KVM kernel module"
    assert vm.qemu_said("") == "no message"


def test_a_kernels_run_is_headed_by_the_kernel_it_ran_on():
    """A guest's run (or the host's) names its kernel, not the simulator
    profile the scenario names (6.18 by default, for a 6.12 guest)."""
    from throttlelab import output

    doc = json.loads(_native.run(throttlelab.scenario_text("two-spinners"), []))
    assert f"profile {doc['profile']}" in output.render(doc)[0]
    host = {"release": "6.12.48+deb12-amd64", "hz": 250, "cgroup": "v2", "background_per_s": 1.0, "background_us": 5.0,
            "vm": {"kernel": "6.12", "accel": "tcg", "cpus": 2}}
    head = output.render({**doc, "backend": "real", "host": host})[0]
    assert "backend real  kernel 6.12.48+deb12-amd64  seed 1" in head and "profile" not in head


def test_a_real_runs_thread_starts_are_printed_under_its_host():
    from throttlelab import output

    doc = json.loads(_native.run(throttlelab.scenario_text("two-spinners"), []))
    host = {"release": "6.18.44", "hz": 250, "cgroup": "v1", "background_per_s": 1.0, "background_us": 5.0,
            "thread_starts": {"spinner": [{"cpu": 1, "late_us": 1649.4}, {"cpu": 0, "late_us": 39.2}]}}
    text = "\n".join(str(r) for r in output.render({**doc, "backend": "real", "host": host}))
    assert "spinner started on CPUs 1 0, 39-1,649 us after their planned starts" in text


def resolved(cpus: int = 2, features: list[str] = []) -> dict:
    """The parts of a resolved scenario that vm.run reads (a capture: its cgroups and duration_s too)."""
    return {"machine": {"cpus": cpus}, "kernel": {"features": features}, "tasks": [], "cgroups": [], "duration_s": 1.0}


def test_a_kernel_without_what_the_run_needs_is_refused_before_booting(tmp_path):
    """6.12 made v1's cpuset an option of its own (CONFIG_CPUSETS_V1), which Debian leaves out."""
    image, config = tmp_path / "bzImage", tmp_path / ".config"
    image.write_bytes(b"")
    config.write_text("CONFIG_CFS_BANDWIDTH=y\nCONFIG_CPUSETS=y\n# CONFIG_CPUSETS_V1 is not set\n")
    k = vm.kernel(str(image), lambda _: None)
    assert k.config == config
    with pytest.raises(vm.VmError, match=r"has no cgroup v1's cpuset \(CONFIG_CPUSETS_V1 is not set\) \(use --cgroup v2\)"):
        vm.run(k, "", [[]], resolved(), cgroup="v1")
    config.write_text("# CONFIG_CFS_BANDWIDTH is not set\n")
    with pytest.raises(vm.VmError, match=r"has no CFS bandwidth control"):
        vm.run(k, "", [[]], resolved(), cgroup="v2")


@needs_vm
def test_compare_holds_the_simulator_against_a_vm_kernel(write_scenario):
    """compare --kernel: the kernel runs boot Debian's 6.1 (once for both), and
    the simulator is set up like it (its release's profile, 6.1; its CONFIG_HZ)."""
    path = write_scenario(quota_us="5000")
    result = cli("compare", "--json", path, "--set", "duration_s=1", "--runs", "2", "--kernel", "6.1")
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    assert [run["host"]["release"].startswith("6.1.") for run in doc["kernel_runs"]] == [True, True]
    # Both runs in one boot, each in fresh cgroups after a settle.
    assert [run["host"]["vm"]["run_in_boot"] for run in doc["kernel_runs"]] == [1, 2]
    assert doc["kernel_runs"][1]["host"]["uptime_s"] - doc["kernel_runs"][0]["host"]["uptime_s"] >= 2.0
    assert [run["profile"] for run in doc["sim_runs"]] == ["6.1", "6.1"]
    throttled = doc["cgroups"]["app"]["throttled_ratio"]
    assert throttled["kernel"]["lo"] >= 0.9 and throttled["sim"]["lo"] >= 0.9, throttled


def test_compare_refuses_a_missing_kernel_image(tmp_path, write_scenario):
    result = cli("compare", write_scenario(), "--kernel", str(tmp_path / "bzImage"))
    assert result.exit_code == 2
    assert result.stderr == f"throttlelab: error: no kernel image at {tmp_path / 'bzImage'}\n"


def test_vm_options_need_a_kernel(write_scenario):
    for option in (["--accel", "tcg"], ["--cgroup", "v1"]):
        result = cli("real", write_scenario(), *option)
        assert result.exit_code == 2 and "--accel and --cgroup need --kernel" in result.stderr


#: A known workload for a capture in the guest: a spinner and a thread that
#: works 2 ms and sleeps 4 ms (1.33 CPUs) under 0.3 CPU per 100 ms with a
#: 10 ms burst, on the VM's two CPUs; it outlasts the capture's start, 3 s and
#: its setup (vm._check_capture).
CAPTURED = """name = "captured"
duration_s = 6
[machine]
cpus = 2
hz = 250
[kernel]
profile = "6.12"
[[cgroup]]
name = "app"
period_us = 100000
quota_us = 30000
burst_us = 10000
[[task]]
name = "spinner"
cgroup = "app"
phases = [{ run_us = 1_000_000_000 }]
[[task]]
name = "ticker"
cgroup = "app"
phases = [{ run_us = 2000 }, { sleep_us = 4000 }]
"""


@needs_vm
def test_a_capture_in_the_guests_cgroup_v2_holds_its_cpu_stat(tmp_path):
    """`throttlelab-real capture` in Debian's 6.12 with a real cgroup v2
    hierarchy (the host's cpu controller is v1): the capture reads v2's files
    (cpu.max, cpu.max.burst, cpu.stat), holds the guest kernel's own usage, and
    its replay in the simulator uses what was captured, as tests/test_capture.py
    checks on the host."""
    k = vm.kernel("6.12", lambda _: None)
    out = tmp_path / "c.toml"
    (doc,) = vm.run(k, CAPTURED, [[]], json.loads(_native.validate(CAPTURED, [])), capture=vm.Capture("app", 3.0, out))
    host = json.loads(doc)["host"]
    assert host["cgroup"] == "v2" and host["release"].startswith("6.12.")
    assert 'phases_file = "c.phases.gz"' in out.read_text()
    captured = json.loads(_native.validate(load_scenario_text(str(out))[0]))
    cap = captured["capture"]
    print("captured", cap, "in", host["vm"])
    assert set(cap) == {"source", "release", "duration_s", "threads", "usage_usec", "nr_periods", "nr_throttled",
                        "throttled_usec", "cpu_usec", "untraced_switches",
                        "lost_events", "trace_events", "trace_buffer_kb", "reader_policy", "reader_max_gap_us", "reader_peak_kb",
                        "reader_max_work_us", "spill_write_max_us", "spill_write_us", "spill_waits", "spill_wait_us", "writer_policy"}
    assert cap["release"] == host["release"] and cap["source"].endswith("/app") and cap["threads"] >= 2
    (app,) = captured["cgroups"]
    assert (app["period_us"], app["quota_us"], app["burst_us"]) == (100_000, 30_000, 10_000), app
    phases = gzip.decompress((tmp_path / "c.phases.gz").read_bytes()).decode()
    kinds = {line.split()[0] for line in phases.splitlines()[1:] if line and not line.startswith("[")}
    assert {"run_us", "sleep_us"} <= kinds, kinds

    sim = throttlelab.run(str(out))["cgroups"]["app"]
    print("replayed", sim)
    # The band. Under TCG the guest's clocks are the host's and a vCPU the host
    # preempts still charges the task it runs (TCG has no steal time), but it
    # does so alike in the trace's timestamps and in cpu.stat: what separates the
    # capture from the usage is the window's ends alone. cpu.stat leaves out each
    # running task's time since its last update (up to a tick, 4 ms at HZ=250,
    # plus however late the tick comes: 41 us at the median under TCG, a host
    # timeslice when the host preempts the vCPU), at either read, on each of the
    # two CPUs: some 15 ms at worst of 900, 3 %. (Measured: 99.8-100.7 % in eight
    # runs on the idle host, 896-906 ms against 895-903 ms.) 6.12 has
    # sched_stat_runtime: no switch is left unmeasured. The replay holds to the
    # demand captured as on the host (5 %: tests/test_capture.py; measured within
    # 0.01 %), and so do its periods, one at each end, and its throttles (1-3 more
    # or fewer: 15 %).
    assert cap["untraced_switches"] == 0
    assert abs(cap["cpu_usec"] - cap["usage_usec"]) <= 0.03 * cap["usage_usec"]
    # A captured thread on timers repeats its phases to the window's end (#39),
    # so the replay no longer does exactly the captured work: it keeps the
    # captured demand (5 %, as on the host) and stays within what the limit
    # grants in the window: the quota it starts with and one refill per period,
    # the burst, and the overrun a tick can charge on each CPU before the
    # debt is repaid (4 ms at HZ=250). Its usage came to 932-945 ms against
    # the guest's 888-900 in five runs: the TCG guest used less than its
    # limit allowed (docs/vm.md: 6.12 under TCG leaves some periods
    # unthrottled), not yet traced with diff.
    granted = (sim["nr_periods"] + 1) * app["quota_us"] + app["burst_us"] + 2 * 4000
    assert 0.95 * cap["cpu_usec"] <= sim["usage_usec"] <= granted, (sim, cap)
    assert abs(sim["nr_periods"] - cap["nr_periods"]) <= 2
    assert abs(sim["nr_throttled"] - cap["nr_throttled"]) <= max(3, 0.15 * cap["nr_periods"])


def test_a_capture_the_guest_cannot_make_is_refused_before_booting(tmp_path):
    image = tmp_path / "bzImage"
    image.write_bytes(b"")
    k = vm.kernel(str(image), lambda _: None)
    capture = vm.Capture("app", 3.0, tmp_path / "c.toml")
    with pytest.raises(vm.VmError, match="a capture in the guest goes with one run, in cgroup v2"):
        vm.run(k, "", [[]], resolved(), cgroup="v1", capture=capture)
    with pytest.raises(vm.VmError, match="the scenario has no cgroup 'app' to capture"):
        vm.run(k, "", [[]], resolved(), capture=capture)
    with_app = {**resolved(), "cgroups": [{"name": "app"}]}
    with pytest.raises(vm.VmError, match=r"a 3.0 s capture in the guest needs duration_s >= 5.0 .* got 2"):
        vm.run(k, "", [[]], {**with_app, "duration_s": 2}, capture=capture)
