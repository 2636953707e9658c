"""scripts/kernel_patches.py (docs/kernel-patches.md): the rows it measures,
each a valid scenario with its variant's features; its tables, one per metric;
and its stored runs, regraded where held and refused where not. The VM runs
themselves are measurements (docs/kernel-patches.md says how they were taken)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pytest

from helpers import script
from throttlelab import _native, vm

kp = script("kernel_patches")


def test_every_row_is_a_scenario_with_its_variants_features():
    for config, variants in kp.ROWS:
        for variant, features in variants:
            resolved = json.loads(_native.validate(kp.scenario_text(2.0, features, config), []))
            assert resolved["kernel"]["features"] == features, (config.label, variant)
            assert all(f in vm.SCHED_FEATURES for f in features), "each feature has a patch"
            limited = [c for c in resolved["cgroups"] if c["quota_us"] is not None]
            assert len(limited) == config.groups
            assert {c["quota_us"] for c in limited} == {round(config.quota_cpus * config.period_us)}
            assert sum(t["threads"] for t in resolved["tasks"]) == config.groups * config.threads
    variants = {v for _, vs in kp.ROWS for v, _ in vs}
    assert {"Baseline", "Slush", "All", "Atomic", "Interleave"} == variants


def test_hegdes_workload_spreads_a_cpu_over_four_groups():
    config = next(c for c, _ in kp.ROWS if c.groups > 1)
    resolved = json.loads(_native.validate(kp.scenario_text(2.0, ["interleave_timers"], config), []))
    assert [c["name"] for c in resolved["cgroups"]] == ["g1", "g2", "g3", "g4"]
    assert sum(c["quota_us"] for c in resolved["cgroups"]) == config.period_us  # a CPU of the VM's two


def test_the_throttled_time_metric_is_per_period_and_averaged_over_the_groups():
    doc = {"cgroups": {"g1": {"throttled_usec": 170_000, "nr_periods": 2},
                       "g2": {"throttled_usec": 90_000, "nr_periods": 1}}}
    assert kp.METRICS["throttled_ms_per_period"][3](doc, ["g1", "g2"]) == pytest.approx((85 + 90) / 2)


def row(config: str, variant: str, metric: str, values: list[float], kept: bool = False) -> dict:
    host = {"release": "6.12.117", "hz": 250, "cgroup": "v2", "vm": {"accel": "tcg"}}
    return {"config": config, "variant": variant, "features": [], "metric": metric, "kernel": values, "sim": values,
            "alike": True, "hosts": [host] * len(values), "duration_s": 3.0, "sim_profile": "6.12", "kept": kept}


def test_the_page_has_a_table_per_metric_and_marks_kept_runs():
    args = argparse.Namespace(regrade=None, keep=Path("docs/kernel-patches.json"), runs=5, seeds=20, duration_s=3.0)
    page = kp.markdown([row("10 ms", "Baseline", "throttled_ratio", [0.5, 0.25], kept=True),
                        row("4 groups", "Interleave", "throttled_ms_per_period", [87.5, 86.5])], args)
    assert "--keep docs/kernel-patches.json" in page and "Rows marked * keep" in page
    assert "Throttled periods in %" in page and "| 10 ms | Baseline | 37.5 (50 25) * | 37.5 (50 25) | alike |" in page
    assert "Throttled time per period" in page and "| 4 groups | Interleave | 87.0 (88 86) | 87.0 (88 86) | alike |" in page


def test_a_regrade_of_a_file_without_the_new_rows_names_them(tmp_path, monkeypatch, capsys):
    stored = tmp_path / "old.json"
    stored.write_text(json.dumps([row("100 ms", "Baseline", "throttled_ratio", [0.1])]))
    monkeypatch.setattr(sys, "argv", ["kernel_patches.py", "--regrade", str(stored), "--out", str(tmp_path / "o.md")])
    with pytest.raises(SystemExit) as e:
        kp.main()
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "holds no kernel runs of 100 ms / Slush" in err and "4 groups x 2 threads, 0.25 CPU each, 100 ms / Interleave" in err
    assert not (tmp_path / "o.md").exists()


def test_the_pages_hand_written_notes_are_kept(tmp_path):
    page = tmp_path / "kernel-patches.md"
    assert kp.notes(page) == ""
    page.write_text(f"old table\n\n{kp.NOTES}\n## What each patch does\n")
    assert kp.notes(page) == f"\n{kp.NOTES}\n## What each patch does\n"
