"""Throttled periods (% of periods, 40 seeds) of 4 spinners unpinned (the simulator puts 3 on
CPU 0 and 1 on CPU 1) and pinned 2 + 2 (as the kernel runs them), at 30, 40 and 100 ms,
with the third sample's background (33 preemptions per CPU-second of 385 us, median 15 us):
    python docs/edge-meet/spread13/pinned.py"""
import os
import json
import statistics
from throttlelab import _native

HERE = os.path.dirname(os.path.abspath(__file__))
HOST = ["machine.background_per_s=33", "machine.background_us=385", "machine.background_p50_us=15"]
for name in ("spin4-30.toml", "spin4-30-pinned.toml"):
    for period_us in (30000, 40000, 100000):
        text = open(os.path.join(HERE, name)).read()
        text = text.replace("period_us = 30000", f"period_us = {period_us}").replace("quota_us = 60000", f"quota_us = {2 * period_us}")
        ratios = []
        for seed in range(1, 41):
            cg = json.loads(_native.run(text, [f"seed={seed}"] + HOST))["cgroups"]["app"]
            ratios.append(100 * cg["nr_throttled"] / max(1, cg["nr_periods"]))
        print(f"{name:22} {period_us // 1000:3} ms  throttled {statistics.mean(ratios):5.1f} %  (sd {statistics.pstdev(ratios):.1f})")
