"""advise --prometheus live: Debian's Prometheus scraping tools/cadvisor
(scripts/prometheus_lab.sh), a real cgroup v1 here (or v2) of our own with
two bursty processes under 150m, for about a minute of 10 s windows."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers import cli, free_port

ROOT = Path(__file__).resolve().parent.parent
V1 = Path("/sys/fs/cgroup/cpu")
V2 = Path("/sys/fs/cgroup/cgroup.controllers")
#: Two processes, each running bursts of 30 ms of CPU time (not wall time: a loaded host
#: stretches a burst but not its work) between sleeps of about 300 ms (exponential).
#: A burst needs two of the 15 ms quota's periods at least, so the kernel throttles
#: some period of every burst however busy the host is. Their demand, at most
#: 2 x 30 / 330 ms = 182m, sits at the edge of the 150m limit (usage 125-135m here):
#: demand twice the limit (170 ms sleeps) held it at its limit in every window, which
#: advise rightly refuses to size from counters.
WORKLOAD = """
import random, time
rng = random.Random(int(__import__("sys").argv[1]))
while True:
    end = time.thread_time() + 0.03
    while time.thread_time() < end:
        pass
    time.sleep(rng.expovariate(1 / 0.3))
"""
RUN_S = 70
STEP_S = 10


def _missing() -> str:
    if os.geteuid() != 0:
        return "needs root (cgroups and cAdvisor)"
    if not V1.is_dir() and not (V2.exists() and "cpu" in V2.read_text().split()):
        return "no cgroup cpu controller"
    if not shutil.which("prometheus"):
        return "no prometheus binary (bash .ci/run installs Debian's)"
    if not shutil.which("go") and not Path("/usr/local/go/bin/go").exists() and not Path("/tmp/throttlelab-prometheus/cadvisor").exists():
        return "no Go to build tools/cadvisor (bash .ci/run installs it)"
    return ""


pytestmark = pytest.mark.skipif(bool(_missing()), reason=_missing() or "")


def _cgroup_dirs(name: str) -> list[Path]:
    """Our cgroup in every hierarchy cAdvisor reads the counters from: v1's cpu
    (quota, periods), cpuacct (usage) and pids (threads); v2's one."""
    if V1.is_dir():
        return [Path(f"/sys/fs/cgroup/{c}/{name}") for c in ("cpu", "cpuacct", "pids") if Path(f"/sys/fs/cgroup/{c}").is_dir()]
    return [Path(f"/sys/fs/cgroup/{name}")]


def test_advise_prometheus_on_a_real_throttled_cgroup(tmp_path):
    name = f"throttlelab-prom-live-{os.getpid()}"
    prom_port = free_port()
    cadvisor_port = next(p for p in iter(free_port, None) if p != prom_port)
    env = {**os.environ, "LAB_DIR": str(tmp_path / "lab"), "PROM_PORT": str(prom_port), "CADVISOR_PORT": str(cadvisor_port), "SCRAPE": "2s",
           "PATH": os.environ.get("PATH", "") + ":/usr/local/go/bin"}
    if Path("/tmp/throttlelab-prometheus/cadvisor").exists():  # built by .ci/run: no second go build
        (tmp_path / "lab").mkdir()
        shutil.copy("/tmp/throttlelab-prometheus/cadvisor", tmp_path / "lab" / "cadvisor")
    lab = ROOT / "scripts" / "prometheus_lab.sh"
    started = subprocess.run(["bash", str(lab), "start"], env=env, capture_output=True, text=True, timeout=600)
    assert started.returncode == 0, started.stderr
    url = started.stdout.strip().splitlines()[-1]
    dirs, procs = _cgroup_dirs(name), []
    try:
        for d in dirs:
            d.mkdir()
        if V1.is_dir():
            (dirs[0] / "cpu.cfs_quota_us").write_text("15000")  # 150m at the 100 ms period
        else:
            (dirs[0] / "cpu.max").write_text("15000 100000")
        for seed in (1, 2):
            p = subprocess.Popen([sys.executable, "-c", WORKLOAD, str(seed)])
            procs.append(p)
            for d in dirs:
                (d / "cgroup.procs").write_text(str(p.pid))
        time.sleep(RUN_S)
        selector = f'id="/{name}"'
        result = cli("advise", "--prometheus", url, "--selector", selector, "--range", f"{RUN_S - 2 * STEP_S}s",
                     "--step", f"{STEP_S}s", "--max-throttled", "0.1", "--json", "--workers", "2")
        assert result.exit_code == 0, result.stderr
        [row] = json.loads(result.stdout)["containers"]
        print(json.dumps(row))
        assert row["id"] == f"/{name}" and row["limit_m"] == 150
        assert row["windows"] >= 4
        # The kernel throttled it: the counters show it, a model reproduced them,
        # and the advice is a larger limit.
        assert row["throttled_now"] > 0.1 and row["usage_max_m"] > 50
        assert row["status"] == "advice", row
        assert row["recommended_m"] > 150 and row["predicted_throttled"] <= 0.1
    finally:
        for p in procs:
            p.kill()
            p.wait()
        time.sleep(0.2)
        for d in dirs:
            if d.exists():
                d.rmdir()
        subprocess.run(["bash", str(lab), "stop"], env=env, timeout=60)
