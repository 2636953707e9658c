"""Real runs on another kernel: ``throttlelab real SCENARIO --kernel RELEASE|PATH``.

The kernel boots under QEMU with an initramfs that holds busybox, the real
backend's two executables (``throttlelab-real``, the controller, and
``throttlelab-worker``; no Python inside), their shared libraries, the scenario
and the kernel's config. The guest's init mounts proc, sysfs, devtmpfs and the
cgroup hierarchy (v2, or v1's ``cpu`` on request), runs the controller on the
scenario once per run (a comparison's runs share one boot) and powers off. The
output documents come back on the second serial port, a line each (the console,
the first, is kept for errors), with ``host.vm`` saying how the kernel ran.
With a :class:`Capture`, the guest also captures one of the run's cgroups while
it runs (``throttlelab-real capture``, cgroup v2) and the capture's two files
come back on the same port.

A release (``6.1``, ``6.12``) is Debian's newest ``linux-image-<release>...-amd64``
package, fetched with ``apt-get download`` once and kept under
``$XDG_CACHE_HOME/throttlelab/kernels``; a path is a kernel image of the
user's own (a bzImage), with its ``.config`` beside it if there is one.

Needs, from Debian: ``qemu-system-x86``, ``busybox-static`` and ``cpio``.
"""

from __future__ import annotations

import base64
import gzip
import json
import os
import re
import shlex
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

from throttlelab import _native
from throttlelab.worker import CONTROLLER, WORKER

ACCELS = ("auto", "kvm", "tcg")
CGROUP_VERSIONS = ("v2", "v1")

#: Debian's kernel images: linux-image-6.1.0-50-amd64, linux-image-6.12.100+deb12-amd64
#: (not the meta-packages, -cloud, -rt, -dbg or -unsigned).
_DEBIAN_IMAGE = re.compile(r"^linux-image-(\d+\.\d+)([.-][\d.]+(?:-\d+)?(?:\+deb\d+)?)-amd64$")
#: The guest's markers on its console.
_UP, _EXIT = "throttlelab-guest: up ", "throttlelab-guest: exit "
#: Memory for the guest: the initramfs and the scenario's threads.
_MEMORY_MB = 512
#: A guest that has not said it is up by then is not booting (KVM that cannot run it).
_BOOT_TIMEOUT_S = 120.0
#: What a guest's runs may take once it is up, beyond their settles and
#: durations, before it is taken for hung (a run waiting on a task the guest's
#: kernel lost): the run script's setup, each run's start and output, under TCG
#: on a busy host. A 1 s run ends 2-3 s after the guest is up here.
_RUN_SLACK_S = 60.0
#: The guest's workers get this long to create and park their threads before
#: the start (the host's 50 ms is too short under TCG on a busy host).
_START_DELAY_MS = 500
#: How often the console is read while the guest runs.
_POLL_S = 0.05
#: A file the guest sends on the result port: this, its name, a space, its bytes in base64, on one line.
_FILE = "throttlelab-guest: file "
#: A script's files are kept under this prefix beside the boot's own (console, result).
_SENT = "sent-"
#: A capture in the guest starts this long after the first thread is in its
#: cgroup: the workers create and park their threads within the start delay
#: (``_START_DELAY_MS``), and all of them start working at its end.
_CAPTURE_LEAD_S = 1.0
#: What a run must last beyond the lead and the capture: tracefs's setup
#: (the instance, its buffers) and the capture's last reads, under TCG.
_CAPTURE_SLACK_S = 1.0

_INIT = """#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
{mount_cgroup}
mkdir -p /boot /tmp /run
[ -f /throttlelab/config ] && cp /throttlelab/config /boot/config-$(uname -r)
echo "{up}$(uname -r)" > /dev/ttyS0
sh /throttlelab/run.sh > /dev/ttyS1 2> /dev/ttyS0
echo "{exit}$?" > /dev/ttyS0
poweroff -f
"""
_MOUNT_CGROUP = {
    # The root's controllers are the host's to enable (the harness only changes its own cgroups).
    "v2": "mount -t cgroup2 cgroup2 /sys/fs/cgroup && echo '+cpu +cpuset' > /sys/fs/cgroup/cgroup.subtree_control",
    # As systemd lays v1 out: cpu and cpuacct co-mounted, each name a link to the pair, cpuset apart.
    "v1": "mount -t tmpfs cgroup /sys/fs/cgroup && cd /sys/fs/cgroup && mkdir cpu,cpuacct cpuset && "
    "mount -t cgroup -o cpu,cpuacct cgroup cpu,cpuacct && ln -s cpu,cpuacct cpu && ln -s cpu,cpuacct cpuacct && "
    "mount -t cgroup -o cpuset cgroup cpuset && cd /",
}


class VmError(Exception):
    """A kernel cannot be found, fetched or booted, or the guest's run failed."""


class GuestCrash(VmError):
    """The guest's kernel panicked, or its runs hung: the emulated machine
    failed, not the run (under TCG it is booted again)."""


#: Boots under TCG that may fail before one runs the scenario through:
#: Debian's 6.12 under multi-threaded TCG dies now and then while it patches
#: its own code (an int3 oops in code another vCPU runs: a stale translation;
#: once in some 20 boots here, at boot or at the first cpu.max write).
_TCG_BOOTS = 3


@dataclass(frozen=True)
class Capture:
    """A capture in the guest beside its one run: the run's cgroup ``cgroup``
    (its path below the run's parent: a top-level cgroup's name, ``app/web``
    for a child; one its workers are in) captured for ``duration_s`` once its
    threads are there, written to ``out`` on the host with its phases beside it
    (``<stem>.phases.gz``), as ``throttlelab capture -o out`` writes them."""

    cgroup: str
    duration_s: float
    out: Path


@dataclass(frozen=True)
class Kernel:
    """A kernel image to boot, the config it was built with (None: unknown),
    and what to call it."""

    image: Path
    config: Optional[Path]
    name: str


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "throttlelab" / "kernels"


def kernel(spec: str, note: Callable[[str], None]) -> Kernel:
    """The kernel ``--kernel`` names: a path to an image, or a release of Debian's."""
    path = Path(spec)
    if path.exists() or os.sep in spec:
        if not path.is_file():
            raise VmError(f"no kernel image at {spec}")
        config = path.with_name(".config")
        return Kernel(path.resolve(), config if config.is_file() else None, str(path))
    return debian_kernel(spec, note)


def debian_kernel(release: str, note: Callable[[str], None]) -> Kernel:
    """Debian's newest image of ``release``, downloaded and unpacked once."""
    package = newest_package(release, _apt_packages(note))
    tree = cache_dir() / package
    if not (tree / "boot").is_dir():
        note(f"fetching {package}")
        with tempfile.TemporaryDirectory() as tmp:
            _check(["apt-get", "download", "-q", "-o", "Acquire::Retries=3", package], f"apt-get download {package}", cwd=tmp)
            (deb,) = Path(tmp).glob("*.deb")
            unpacked = Path(tmp) / "tree"
            unpacked.mkdir()
            # /boot alone (the image and its config): the modules are hundreds of MB the guest does without.
            files = subprocess.run(["dpkg-deb", "--fsys-tarfile", str(deb)], capture_output=True, check=True).stdout
            subprocess.run(["tar", "-x", "--wildcards", "./boot/*"], cwd=unpacked, input=files, check=True)
            tree.parent.mkdir(parents=True, exist_ok=True)
            shutil.rmtree(tree, ignore_errors=True)
            shutil.move(str(unpacked), tree)
    (image,) = (tree / "boot").glob("vmlinuz-*")
    configs = list((tree / "boot").glob("config-*"))
    return Kernel(image, configs[0] if configs else None, package)


def newest_package(release: str, packages: Sequence[str]) -> str:
    """The newest of Debian's image packages for ``release`` (``6.1``: linux-image-6.1.0-50-amd64)."""
    ours = [p for p in packages if (m := _DEBIAN_IMAGE.match(p)) and m.group(1) == release]
    if not ours:
        have = sorted({m.group(1) for p in packages if (m := _DEBIAN_IMAGE.match(p))}, key=_numbers)
        raise VmError(f"Debian has no kernel image for release {release!r} (it has: {', '.join(have) or 'none'})")
    return max(ours, key=_numbers)


def _numbers(name: str) -> list[int]:
    return [int(n) for n in re.findall(r"\d+", name)]


def _apt_packages(note: Callable[[str], None]) -> list[str]:
    """The kernel image packages apt knows of, updating its lists once if it knows none."""
    def known() -> list[str]:
        found = _check(["apt-cache", "search", "--names-only", "^linux-image-"], "apt-cache search")
        return [line.split(" ", 1)[0] for line in found.splitlines()]

    packages = known()
    if not any(_DEBIAN_IMAGE.match(p) for p in packages):
        note("updating apt's package lists")
        _check(["apt-get", "update", "-q", "-o", "Acquire::Retries=3"], "apt-get update")
        packages = known()
    return packages


def _check(cmd: list[str], what: str, cwd: Optional[str] = None) -> str:
    if shutil.which(cmd[0]) is None:
        raise VmError(f"{cmd[0]} not found: --kernel RELEASE needs Debian's apt (or give a kernel image's path)")
    done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no message"])[-1]
        raise VmError(f"{what} failed: {last}")
    return done.stdout


def initramfs(out: Path, scenario: str, runs: Sequence[Sequence[str]], resolved: dict[str, Any], cgroup: str,
              config: Optional[Path], settle_s: float, capture: Optional[Capture] = None,
              bw_trace: bool = False) -> None:
    """Write the guest's initramfs (newc cpio) to ``out``: as
    :func:`_initramfs`, with the scenario, the trace CSVs its tasks read at
    their own absolute paths, and a run script that turns on the sched
    features of the scenario's ``kernel.features`` that a patched kernel has
    (kernel/patches), then runs the scenario once per overrides list in
    ``runs``, each after ``settle_s`` of quiet (with ``capture``: its one run,
    captured, see :func:`_captured_run`; with ``bw_trace``: each run's
    bandwidth events too, see :func:`_bw_traced_runs`)."""
    run_sh = (
        _sched_features(resolved["kernel"]["features"])
        + f"export THROTTLELAB_START_DELAY_MS={_START_DELAY_MS} THROTTLELAB_TICK_LATENCY=0\n"
        + (_captured_run(runs[0], settle_s, capture) if capture else _bw_traced_runs(runs, settle_s) if bw_trace else
           "".join(f"sleep {settle_s}; {shlex.join(_controller(overrides))} || exit $?\n" for overrides in runs))
    )
    files = {Path("/throttlelab/scenario.toml"): scenario.encode("utf-8")}
    traces = [Path(t["trace_csv"]) for t in resolved["tasks"] if t.get("trace_csv")]
    _initramfs(out, run_sh, cgroup, config, files, traces)


def _initramfs(out: Path, run_sh: str, cgroup: str, config: Optional[Path], files: dict[Path, bytes] = {},
               copies: Sequence[Path] = ()) -> None:
    """Write an initramfs (newc cpio) to ``out``: busybox, the two executables
    (in /throttlelab) and their libraries, the kernel's config, ``files``
    (path in the guest: bytes), ``copies`` of host files at their own paths,
    and the init that mounts the ``cgroup`` hierarchy and runs ``run_sh``
    (busybox sh; its stdout goes to the result port)."""
    busybox = shutil.which("busybox")
    if busybox is None or shutil.which("cpio") is None:
        raise VmError("the guest needs busybox and cpio: apt-get install busybox-static cpio")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for d in ("bin", "proc", "sys", "dev", "throttlelab"):
            (root / d).mkdir()
        executables = [Path(busybox), CONTROLLER, WORKER]
        shutil.copy2(busybox, root / "bin" / "busybox")
        for exe in (CONTROLLER, WORKER):
            shutil.copy2(exe, root / "throttlelab" / exe.name)
        for lib in _libraries(executables):
            _copy_at(lib, root)
        for f in copies:
            _copy_at(f, root)
        if config is not None:
            shutil.copy2(config, root / "throttlelab" / "config")
        for path, data in files.items():
            (root / path.relative_to("/")).parent.mkdir(parents=True, exist_ok=True)
            (root / path.relative_to("/")).write_bytes(data)
        (root / "throttlelab" / "run.sh").write_text(run_sh, encoding="utf-8")
        init = root / "init"
        init.write_text(_INIT.format(mount_cgroup=_MOUNT_CGROUP[cgroup], up=_UP, exit=_EXIT), encoding="utf-8")
        init.chmod(0o755)
        names = subprocess.run(["find", ".", "-print0"], cwd=root, capture_output=True, check=True).stdout
        with open(out, "wb") as f:
            subprocess.run(["cpio", "--quiet", "-o", "-0", "-H", "newc", "-R", "0:0"], cwd=root, input=names,
                           stdout=f, check=True)


def script(k: Kernel, run_sh: str, limit_s: float, cpus: int = 2, accel: str = "auto", cgroup: str = "v2",
           files: dict[Path, bytes] = {}, note: Callable[[str], None] = lambda _: None) -> tuple[list[str], dict[str, bytes]]:
    """Boot ``k`` once and run the shell script ``run_sh`` in it (busybox sh,
    ``/throttlelab/throttlelab-real`` on hand, the ``cgroup`` hierarchy
    mounted, ``files`` at their paths), stopped when not done ``limit_s``
    after the guest is up. Returns the lines it printed and the files it sent
    (``_FILE`` lines: name, bytes). A script that exits non-zero fails with the
    last ``throttlelab-real:`` line it wrote to stderr."""
    _check_config(k, cgroup)
    if shutil.which("qemu-system-x86_64") is None:
        raise VmError("qemu-system-x86_64 not found: apt-get install qemu-system-x86")
    kvm = accel == "kvm" or (accel == "auto" and os.access("/dev/kvm", os.R_OK | os.W_OK))
    with tempfile.TemporaryDirectory() as tmp:
        initrd = Path(tmp) / "initrd"
        _initramfs(initrd, run_sh, cgroup, k.config, files)
        lines = _boots(k, initrd, cpus, accel, kvm, None, limit_s, Path(tmp), note)
        sent = {f.name: f.read_bytes() for f in Path(tmp).iterdir() if f.name.startswith(_SENT)}
    return lines, {name[len(_SENT):]: data for name, data in sent.items()}


def _controller(overrides: Sequence[str]) -> list[str]:
    """The guest's command line for one run of the scenario."""
    args = [str(Path("/throttlelab") / CONTROLLER.name), "/throttlelab/scenario.toml"]
    for o in overrides:
        args += ["--set", o]
    return args


def _captured_run(overrides: Sequence[str], settle_s: float, capture: Capture) -> str:
    """The run script's lines for a run captured: the controller in the
    background (its output document kept), the capture of its cgroup
    (``throttlelab-<controller's pid>/<capture.cgroup>``) from
    ``_CAPTURE_LEAD_S`` after a thread is in it, then the output document and
    the capture's two files on the result port. A controller that stops before
    its cgroup has a thread ends the script with its exit code."""
    toml = capture.out.name
    phases = Path(toml).with_suffix(".phases.gz").name
    exe = Path("/throttlelab") / CONTROLLER.name
    return (
        f"sleep {settle_s}; {shlex.join(_controller(overrides))} > /tmp/run.json &\n"
        f"run=$!; g=/sys/fs/cgroup/throttlelab-$run/{shlex.quote(capture.cgroup)}\n"
        "until grep -q . $g/cgroup.threads 2> /dev/null; do kill -0 $run 2> /dev/null || { wait $run; exit $?; }; sleep 0.1; done\n"
        f"sleep {_CAPTURE_LEAD_S}; {exe} capture --cgroup $g --duration {capture.duration_s} -o {shlex.quote('/tmp/' + toml)}"
        " > /dev/null || exit $?\n"
        "wait $run || exit $?\n"
        "cat /tmp/run.json\n"
        f"for f in {shlex.quote(toml)} {shlex.quote(phases)}; do echo \"{_FILE}$f $(base64 /tmp/$f | tr -d '\\n')\"; done\n"
    )


def _bw_traced_runs(runs: Sequence[Sequence[str]], settle_s: float) -> str:
    """The run script's lines for ``throttlelab diff``: each run by the
    controller with ``--bw-trace`` (tracepoints and kprobes), its output
    document, then its trace gzipped on the result port (``bw-N.txt.gz``)."""
    lines = []
    for i, overrides in enumerate(runs, 1):
        lines.append(f"sleep {settle_s}; {shlex.join(_controller(overrides))} --bw-trace /tmp/bw-{i}.txt || exit $?\n")
        lines.append(f"echo \"{_FILE}bw-{i}.txt.gz $(gzip -c /tmp/bw-{i}.txt | base64 | tr -d '\\n')\"; rm /tmp/bw-{i}.txt\n")
    return "".join(lines)


def _libraries(executables: Sequence[Path]) -> set[Path]:
    """The shared libraries (and the dynamic loader) the executables load, by ldd."""
    libs: set[Path] = set()
    for exe in executables:
        done = subprocess.run(["ldd", str(exe)], capture_output=True, text=True)
        for line in done.stdout.splitlines():  # "libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x...)"
            path = next((w for w in line.split() if w.startswith("/")), None)
            if path:
                libs.add(Path(path))
    return libs


def _copy_at(path: Path, root: Path) -> None:
    dest = root / path.resolve().relative_to("/")
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(path.resolve(), dest)
    if path.is_symlink() or path != path.resolve():  # the name the loader asks for, too
        link = root / path.relative_to("/")
        link.parent.mkdir(parents=True, exist_ok=True)
        if not link.exists():
            link.symlink_to(path.resolve())


def qemu_command(k: Kernel, initrd: Path, cpus: int, accel: str, console: Path, result: Path) -> list[str]:
    """QEMU's command line: no devices but two serial ports (the console, then the result)."""
    cpu = ["-accel", "kvm", "-cpu", "host"] if accel == "kvm" else ["-accel", "tcg,thread=multi", "-cpu", "max"]
    return [
        "qemu-system-x86_64", *cpu, "-smp", str(cpus), "-m", str(_MEMORY_MB), "-nodefaults", "-display", "none",
        "-no-reboot", "-kernel", str(k.image), "-initrd", str(initrd),
        # oops=panic: an oops that kills a task (not only one in an interrupt)
        # ends the guest, which is then booted again, rather than leaving a run hung.
        "-append", "console=ttyS0 quiet oops=panic panic=-1 rdinit=/init",
        "-serial", f"file:{console}", "-serial", f"file:{result}",
    ]


def real(k: Kernel, scenario: str, runs: Sequence[Sequence[str]], accel: str = "auto", cgroup: str = "v2",
         note: Callable[[str], None] = lambda _: None, settle_s: float = 0.0) -> list[str]:
    """``throttlelab real --kernel``: the scenario resolved by the core (with
    the first run's overrides), then :func:`run`."""
    resolved = json.loads(_native.validate(scenario, list(runs[0])))
    return run(k, scenario, runs, resolved, accel, cgroup, note, settle_s)


def runner(k: Kernel, accel: str = "auto", cgroup: str = "v2",
           note: Callable[[str], None] = lambda _: None) -> Callable[[str, Sequence[Sequence[str]], float], list[str]]:
    """Runs on ``k`` as ``compare.kernel_runs`` takes them (a ``KernelRun``):
    all of a call's runs in one boot. ``auto`` decides on the first boot: KVM
    that could not boot the kernel is not tried again."""
    chosen = accel

    def run_on_k(scenario: str, runs: Sequence[Sequence[str]], settle_s: float) -> list[str]:
        nonlocal chosen
        outs = real(k, scenario, runs, chosen, cgroup, note, settle_s)
        chosen = json.loads(outs[0])["host"]["vm"]["accel"]
        return outs

    return run_on_k


def run(k: Kernel, scenario: str, runs: Sequence[Sequence[str]], resolved: dict[str, Any], accel: str = "auto",
        cgroup: str = "v2", note: Callable[[str], None] = lambda _: None, settle_s: float = 0.0,
        capture: Optional[Capture] = None, bw_traces: Optional[list[str]] = None) -> list[str]:
    """Boot ``k`` once with as many CPUs as the scenario has, run the scenario
    (``resolved``: as the core resolved it) in its cgroups once per overrides
    list in ``runs`` (each in fresh cgroups, after ``settle_s`` of quiet), and
    return the output documents as JSON. One boot for several runs: under TCG a
    boot costs twice a 2 s run (docs/vm.md). With ``capture``, the one run's
    cgroup is captured in the guest too, and the capture written on the host.
    With ``bw_traces`` (a list), each run's kernel bandwidth events are
    traced (``throttlelab diff``) and their texts appended to it in order."""
    _check_config(k, cgroup)
    if capture is not None:
        _check_capture(capture, runs, resolved, cgroup)
    unpatched = [f for f in resolved["kernel"]["features"] if f not in SCHED_FEATURES]
    if unpatched:
        raise VmError(f"no kernel patch for kernel.features {', '.join(unpatched)} (kernel/patches has "
                      f"{', '.join(SCHED_FEATURES)}); on a real kernel a feature is a patch")
    cpus = resolved["machine"]["cpus"]
    if shutil.which("qemu-system-x86_64") is None:
        raise VmError("qemu-system-x86_64 not found: apt-get install qemu-system-x86")
    kvm = accel == "kvm" or (accel == "auto" and os.access("/dev/kvm", os.R_OK | os.W_OK))
    with tempfile.TemporaryDirectory() as tmp:
        initrd = Path(tmp) / "initrd"
        initramfs(initrd, scenario, runs, resolved, cgroup, k.config, settle_s, capture, bw_traces is not None)
        # Every run lasts as long as the first: they differ in their seeds.
        limit_s = len(runs) * (settle_s + resolved["duration_s"] + _RUN_SLACK_S)
        outs = _boots(k, initrd, cpus, accel, kvm, len(runs), limit_s, Path(tmp), note)
        if capture is not None:
            capture.out.parent.mkdir(parents=True, exist_ok=True)
            for name in (capture.out.name, capture.out.with_suffix(".phases.gz").name):
                if not (Path(tmp) / name).is_file():
                    raise VmError(f"the guest did not send the capture's {name}")
                shutil.copy(Path(tmp) / name, capture.out.parent / name)
        if bw_traces is not None:
            for i in range(1, len(runs) + 1):
                sent = Path(tmp) / f"bw-{i}.txt.gz"
                if not sent.is_file():
                    raise VmError(f"the guest did not send run {i}'s bandwidth trace")
                bw_traces.append(gzip.decompress(sent.read_bytes()).decode("utf-8", errors="replace"))
        return outs


def _boots(k: Kernel, initrd: Path, cpus: int, accel: str, kvm: bool, runs: Optional[int], limit_s: float, tmp: Path,
           note: Callable[[str], None]) -> list[str]:
    """:func:`_boot` with KVM if ``kvm`` (falling back to TCG unless ``accel``
    is ``kvm``), and under TCG up to ``_TCG_BOOTS`` boots while the guest fails (:class:`GuestCrash`)."""
    if kvm:
        try:
            return _boot(k, initrd, cpus, "kvm", runs, limit_s, tmp, note)
        except VmError as e:
            if accel == "kvm":
                raise
            note(f"KVM cannot run this guest here ({e}); using TCG")
    for _ in range(_TCG_BOOTS - 1):
        try:
            return _boot(k, initrd, cpus, "tcg", runs, limit_s, tmp, note)
        except GuestCrash as e:
            note(f"the guest failed under TCG ({e}); booting it again")
    return _boot(k, initrd, cpus, "tcg", runs, limit_s, tmp, note)


def _check_capture(capture: Capture, runs: Sequence[Sequence[str]], resolved: dict[str, Any], cgroup: str) -> None:
    """Refuse, before booting, a capture the guest cannot make: it captures
    one of the scenario's cgroups in one run, in cgroup v2 (the host's capture
    covers v1), that lasts beyond the capture's lead, the capture and its setup."""
    if len(runs) != 1 or cgroup != "v2":
        raise VmError("a capture in the guest goes with one run, in cgroup v2")
    if capture.cgroup.rsplit("/", 1)[-1] not in {c["name"] for c in resolved["cgroups"]}:
        raise VmError(f"the scenario has no cgroup {capture.cgroup!r} to capture")
    needed_s = _CAPTURE_LEAD_S + capture.duration_s + _CAPTURE_SLACK_S
    if resolved.get("duration_s") is not None and resolved["duration_s"] < needed_s:
        raise VmError(f"a {capture.duration_s} s capture in the guest needs duration_s >= {needed_s} "
                      f"(the start, the capture, its setup), got {resolved['duration_s']}")


#: What the guest's run needs of the kernel's config, per hierarchy: (option, what it is).
_NEEDS = {
    "v2": [("CONFIG_CFS_BANDWIDTH", "CFS bandwidth control"), ("CONFIG_CPUSETS", "cpusets")],
    "v1": [("CONFIG_CFS_BANDWIDTH", "CFS bandwidth control"), ("CONFIG_CPUSETS_V1", "cgroup v1's cpuset")],
}


def _check_config(k: Kernel, cgroup: str) -> None:
    """Refuse, before booting, a kernel whose config (where known) lacks what the
    run needs: 6.12 made v1's cpuset an option of its own, which Debian leaves out."""
    if k.config is None:
        return
    text = k.config.read_text(encoding="utf-8", errors="replace")
    for option, what in _NEEDS[cgroup]:
        if f"# {option} is not set" in text:
            hint = " (use --cgroup v2)" if cgroup == "v1" else ""
            raise VmError(f"{k.name} has no {what} ({option} is not set){hint}")


#: The simulator's features that kernel/patches add to a kernel, as the sched
#: features that switch them on (/sys/kernel/debug/sched/features).
SCHED_FEATURES = {
    "slush_fund": "SLUSH_FUND",
    "noop_update": "NOOP_BANDWIDTH_UPDATE",
    "atomic_pool": "ATOMIC_POOL",
    "interleave_timers": "INTERLEAVE_TIMERS",
}


def _sched_features(features: Sequence[str]) -> str:
    """The run script's lines that switch on ``features`` in the guest and check
    that each is on, or say in one line that its kernel lacks one
    (scripts/build_kernel.sh builds one that has them)."""
    if not features:
        return ""
    lines = ["mount -t debugfs debugfs /sys/kernel/debug || exit 2"]
    for f in features:
        name = SCHED_FEATURES[f]
        lines.append(
            f"grep -qwE '(NO_)?{name}' /sys/kernel/debug/sched/features || {{ echo 'throttlelab-real: error: this kernel "
            f"has no sched feature {name} for {f} (scripts/build_kernel.sh builds one with kernel/patches)' >&2; exit 2; }}"
        )
        # Listed as NAME once on (NO_NAME while off): the switch took.
        lines.append(
            f"echo {name} > /sys/kernel/debug/sched/features; grep -qw {name} /sys/kernel/debug/sched/features || "
            f"{{ echo 'throttlelab-real: error: the sched feature {name} did not switch on' >&2; exit 2; }}"
        )
    return "\n".join(lines) + "\n"


def _boot(k: Kernel, initrd: Path, cpus: int, accel: str, runs: Optional[int], limit_s: float, tmp: Path,
          note: Callable[[str], None]) -> list[str]:
    """Boot the guest and return its ``runs`` runs' output documents, each
    with ``host.vm`` (``runs`` None: the lines its script printed, as they
    are); the files it sends (``_FILE``) are written to ``tmp`` (those of a
    script as ``_SENT`` + their names). A guest not up in
    ``_BOOT_TIMEOUT_S``, or not done ``limit_s`` after, is stopped."""
    console, result = tmp / f"console-{accel}", tmp / f"result-{accel}"
    what = "a script" if runs is None else f"{runs} run{'s' if runs > 1 else ''}"
    note(f"booting {k.name} ({accel.upper()}, {cpus} CPUs, {what})")
    start = time.monotonic()
    cmd = qemu_command(k, initrd, cpus, accel, console, result)
    errors = tmp / f"qemu-{accel}.err"
    with open(errors, "w") as err:
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err)
    up_s = None
    try:
        while proc.poll() is None:
            now_s = time.monotonic() - start
            if up_s is None and _UP in _read(console):
                up_s = now_s
            elif up_s is None and now_s > _BOOT_TIMEOUT_S:
                raise VmError(f"the guest did not boot in {_BOOT_TIMEOUT_S:.0f} s{_tail(_read(console))}")
            elif up_s is not None and now_s - up_s > limit_s:
                raise GuestCrash(f"the guest's runs did not end {limit_s:.0f} s after it was up{_tail(_read(console))}")
            time.sleep(_POLL_S)
    finally:
        if proc.poll() is None:  # stopped above, or interrupted
            proc.kill()
            proc.wait()
    log = _read(console)
    if proc.returncode != 0 and _UP not in log:
        raise VmError(f"QEMU failed: {qemu_said(_read(errors))}")
    code = next((line[len(_EXIT):].strip() for line in log.splitlines() if line.startswith(_EXIT)), None)
    if code is None:
        error = GuestCrash if "Kernel panic" in log else VmError
        raise error(f"the guest stopped before the run ended{_tail(log)}")
    if code != "0":
        said = [line for line in log.splitlines() if line.startswith("throttlelab-real: ")]
        raise VmError(f"in the guest: {said[-1] if said else 'exit ' + code}")
    lines = [line for line in _read(result).splitlines() if line.strip()]
    for line in lines:
        if line.startswith(_FILE):
            name, data = line[len(_FILE):].split(" ", 1)
            (tmp / (name if runs is not None else _SENT + name)).write_bytes(base64.b64decode(data))
    if runs is None:
        return [line for line in lines if not line.startswith(_FILE)]
    outs = [json.loads(line) for line in lines if not line.startswith(_FILE)]
    if len(outs) != runs:
        raise VmError(f"the guest wrote {len(outs)} output documents for {runs} runs{_tail(log)}")
    wall_s = time.monotonic() - start
    for i, out in enumerate(outs):
        out["host"]["vm"] = {
            "kernel": k.name, "accel": accel, "cpus": cpus, "boot_s": round(up_s if up_s is not None else 0.0, 3),
            "wall_s": round(wall_s, 3), "runs_in_boot": runs, "run_in_boot": i + 1,
        }
    return [json.dumps(out, separators=(",", ":")) for out in outs]


def qemu_said(stderr: str) -> str:
    """QEMU's last words in one short line: an assertion (KVM that cannot
    set the host CPU's MSRs in a nested VM: ``kvm.c:3312: kvm_buf_set_msrs:
    Assertion `ret == cpu->kvm_msr_buf->nmsrs' failed.``) by the function
    it failed in, anything else as its last line."""
    last = (stderr.strip().splitlines() or ["no message"])[-1]
    failed = re.search(r":\s*(\w+): Assertion .* failed", last)
    return f"an assertion failed in {failed.group(1)}" if failed else last


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace").replace("\r", "")
    except FileNotFoundError:
        return ""


def _tail(log: str, lines: int = 5) -> str:
    last = [line for line in log.splitlines() if line.strip()][-lines:]
    return (": " + " | ".join(last)) if last else ""
