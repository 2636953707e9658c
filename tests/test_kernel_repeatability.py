"""scripts/kernel_repeatability.py: a grid's kernel samples held against each
other, beside the simulator's verdicts, on a hand-worked pair of samples."""

from __future__ import annotations

import json

from helpers import script

script("fidelity_grid")  # kernel_repeatability imports it, as its directory's neighbour
repeat = script("kernel_repeatability")

SAME = [0.10, 0.11, 0.12, 0.13, 0.14]
SHIFTED = [0.50, 0.51, 0.52, 0.53, 0.54]  # every run above every one of SAME's: p = 0.008


def row(threads: int, kernel: list[float], alike: bool) -> dict:
    return dict(workload="spin", threads=threads, period_us=10_000, quota_us=10_000, burst_us=0,
                kernel_ratio=kernel, alike=alike)


def test_a_sample_is_held_against_the_others_and_the_simulator_beside_it(tmp_path):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    # Row 1: the kernel repeats and the simulator agrees. Row 2: the kernel's samples
    # differ and the simulator misses one of them. Row 3: only the simulator misses.
    a.write_text(json.dumps({"host": {}, "rows": [row(1, SAME, True), row(2, SAME, False), row(3, SAME, False)]}))
    b.write_text(json.dumps({"host": {}, "rows": [row(1, SAME, True), row(2, SHIFTED, True), row(3, SAME, True)]}))
    own = repeat.kernel_alike(repeat.load(a), [repeat.load(b)])
    assert [own[k] for k in sorted(own)] == [True, False, True]
    text = repeat.report([a, b])
    assert "| a.json | 3 | 2 (67%) | 1 (33%) | 1 of 2 |" in text
    assert "| b.json | 3 | 2 (67%) | 3 (100%) | 0 of 0 |" in text
    assert "| a.json | b.json | 3 | 2 (67%) |" in text


def test_a_kernel_that_repeats_itself_exactly_is_alike_in_every_draw(tmp_path):
    a = {("spin", n, 10_000, 10_000, 0): row(n, [0.2] * 5, True) for n in (1, 2)}
    assert repeat.stationary([a, a], trials=5) == [2] * 5
    # Two holds that never overlap: pooled, a draw of 5 against 20 is mostly alike.
    b = {k: {**r, "kernel_ratio": SHIFTED} for k, r in a.items()}
    assert 0 < sum(repeat.stationary([a, b], trials=20)) < 2 * 20


def test_a_file_that_is_not_a_grid_is_refused_in_one_line(tmp_path):
    import subprocess
    import sys

    good, bad = tmp_path / "good.json", tmp_path / "bad.json"
    good.write_text(json.dumps({"host": {}, "rows": [row(1, SAME, True)]}))
    bad.write_text('{"rows": [{"workload": "spin"}]}')
    done = subprocess.run([sys.executable, repeat.__file__, str(good), str(bad)], capture_output=True, text=True)
    assert done.returncode == 2 and done.stderr.startswith("kernel_repeatability.py: error: KeyError('threads')"), done.stderr
    done = subprocess.run([sys.executable, repeat.__file__, str(good)], capture_output=True, text=True)
    assert done.returncode == 2 and "needs at least two samples" in done.stderr
