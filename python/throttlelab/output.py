"""The output document of ``run`` and ``real`` (schema in DESIGN.md) as the
tables a person reads: cpu.stat per cgroup, then the tasks, then the engine
or the host."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from throttlelab.metrics import CGROUP_METRICS, limit
from throttlelab.terminal import millis, natural, seconds, table

if TYPE_CHECKING:
    from rich.console import RenderableType


def render(doc: dict[str, Any]) -> list[RenderableType]:
    host = doc.get("host")
    # A kernel's run: the kernel it ran on (a VM's guest, not the host), not
    # the simulator profile the scenario names.
    kernel = f"kernel {host['release']}" if host else f"profile {doc['profile']}"
    parts: list[RenderableType] = [
        f"[bold]{doc['scenario']}[/bold]  backend {doc['backend']}  {kernel}"
        f"  seed {doc['seed']}  duration {doc['duration_s']:g} s"
    ]
    if doc["cgroups"]:
        shown = [m for m in CGROUP_METRICS if m.key != "burst_usec"]
        cgroups = table("cgroups", ("cgroup", "limit", *(m.header for m in shown)), left=("cgroup", "limit"))
        for name, cg in doc["cgroups"].items():
            cgroups.add_row(name, limit(**cg["limit"]), *(m.show(cg[m.key]) for m in shown))
        parts.append(cgroups)
    parts.append(_tasks(doc["tasks"]))
    engine = doc.get("engine")
    if engine:
        parts.append(f"engine: {engine['events']} events in {engine['wall_s']:.3f} s wall")
    if host:
        parts += _host(host, bool(doc["cgroups"]))
    return parts


def _tasks(tasks: dict[str, Any]) -> RenderableType:
    # Columns for what some task reports: (header, key, format).
    optional = [
        ("class", "class", str),
        ("delay s", "delay_s", lambda v: "-" if v is None else f"{v:.3f}"),
        ("misses", "deadline_misses", str),
        ("refusals", "admission_refusals", str),
    ]
    optional = [c for c in optional if any(c[1] in t for t in tasks.values())]
    with_latency = any("latency_us" in t for t in tasks.values())
    cols = ["task", "threads", "cpu s", "work s", "finished s", *(c[0] for c in optional)]
    cols += ["p50 ms", "p99 ms"] if with_latency else []
    t_table = table("tasks", cols, left=("task", "class"))
    for name in sorted(tasks, key=natural):
        t = tasks[name]
        row = [name, str(t["threads"]), seconds(t["cpu_usec"]), seconds(t["work_usec"])]
        row.append("-" if t["finished_s"] is None else f"{t['finished_s']:.3f}")
        row += [fmt(t[key]) if key in t else "" for _, key, fmt in optional]
        if with_latency:
            lat = t.get("latency_us") or {}
            row += [millis(lat.get("p50")), millis(lat.get("p99"))]
        t_table.add_row(*row)
    return t_table


def _host(host: dict[str, Any], with_cgroups: bool) -> list[RenderableType]:
    hz = "unknown" if host["hz"] is None else host["hz"]
    lines: list[RenderableType] = [
        f"host: {host['release']}, CONFIG_HZ {hz}, cgroup {host['cgroup']}; other work preempted each CPU "
        f"{host['background_per_s']:.0f} times a second for {host['background_us']:.0f} us"
    ]
    if "vm" in host:
        vm = host["vm"]
        lines.append(f"in a VM: {vm['kernel']} under QEMU with {vm['accel'].upper()}, {vm['cpus']} CPUs")
    offsets = host.get("period_timer_offset_us", {})
    if offsets:
        listed = ", ".join(f"{name} {us:,.1f} us" for name, us in sorted(offsets.items(), key=lambda kv: natural(kv[0])))
        lines.append(f"period timers (expiries at this offset plus whole periods of CLOCK_MONOTONIC): {listed}")
    elif with_cgroups:
        lines.append("period timers: not traced")
    for name, starts in sorted(host.get("thread_starts", {}).items(), key=lambda kv: natural(kv[0])):
        late = sorted(s["late_us"] for s in starts)
        lines.append(f"{name} started on CPUs {' '.join(str(s['cpu']) for s in starts)}, "
                     f"{late[0]:,.0f}-{late[-1]:,.0f} us after their planned starts")
    return lines
