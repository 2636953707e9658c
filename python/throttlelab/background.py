"""Which background activity a prediction assumes: other tasks' preemptions per
CPU-second and their length, which decide much of the throttling at a quota's
edge (docs/guide.md, "Background: what a prediction assumes").

``run``, ``explain``, ``advise`` and ``sweep`` assume the scenario's
``[machine]`` (``background_per_s``, ``background_us``: a quiet host's 2 a second
of 20 us unless it says otherwise; a capture's, what its threads met on the
host it was taken on, ``[capture] background_*``) or, with ``--like-host``, this host's: the
real backend's probe, run once before the command's simulations (root), and the
host it reports applied through the core's one rule (``Host::scenario_overrides``,
which ``compare`` applies to its seeds too): the profile of its release, its
CONFIG_HZ, background, work speed, the CPU a wake-up costs and tick lateness. The simulator still draws
its own timer phases (unpaired). The host's overrides go before the user's
``--set``, so that an explicit ``--set`` wins; each command says which it assumed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Optional, Sequence

import click

from throttlelab import _native

#: The scenario keys of the background.
KEYS = ("machine.background_per_s", "machine.background_us", "machine.background_p50_us", "machine.background_lengths_us")

like_host_option = click.option(
    "--like-host",
    is_flag=True,
    help="Probe this host as the real backend does (root) and set every simulation up like it: its "
    "background activity, CONFIG_HZ, release, work speed, CPU per wake-up and tick lateness (--set still wins).",
)


def probe(cpus: int) -> dict[str, Any]:
    """This host's ``host`` block, probed on ``cpus`` CPUs (``_native.probe_host``)."""
    return json.loads(_native.probe_host(cpus))


@dataclass(frozen=True)
class Assumed:
    """The background every simulation of a command assumes."""

    per_s: float
    us: float
    #: Where it came from, for --json: "scenario" ([machine]), "capture" (what a capture measured, in its
    #: [machine]), "host" (the probe), "set" or "grid" (a sweep's).
    source: str
    #: The probe's host block and when it ran (UTC), with --like-host.
    host: Optional[dict[str, Any]] = None
    probed_at: Optional[str] = None
    #: With source "capture": the capture's [capture] table.
    capture: Optional[dict[str, Any]] = None
    #: The preemptions' median length (machine.background_p50_us); None: every one background_us long.
    p50_us: Optional[float] = None
    #: The lengths each preemption is drawn from (machine.background_lengths_us), sorted; empty: none given.
    lengths_us: tuple[float, ...] = ()

    def line(self) -> str:
        """One line for a command's text output (printed as is, after its tables: never wrapped)."""
        if self.source == "grid":
            return "background: per row, from --grid (machine.background_per_s, machine.background_us columns)"
        where = {
            "scenario": "the scenario's [machine]",
            "capture": "measured by the capture",
            "set": "--set" + ("; the rest like this host" if self.host else ""),
            "host": "like this host",
        }[self.source]
        if self.host:
            h = self.host
            also = [f"profile {_native.profile_for_release(h['release'])}"]
            also += [f"HZ={h['hz']}"] if h.get("hz") else []
            also += [f"ticks {h['tick_latency_us']:.0f} us late"] if h.get("tick_latency_us") is not None else []
            also += [f"work speed {min(h['work_speed'], 1.0):.3f}"] if h.get("work_speed") is not None else []
            also += [f"run to run cv {h['work_speed_cv']:.4f}"] if h.get("work_speed_cv") is not None else []
            also += [f"{max(h['wakeup_cost_us'], 0.0):.1f} us a wake-up (run/sleep work speed {h['run_sleep_work_speed']:.3f})"] \
                if h.get("wakeup_cost_us") is not None else []
            where += f", probed {self.probed_at}: {', '.join(also)}"
        if self.capture:
            c = self.capture
            where += (f": {c['background_preemptions']} preemptions of its threads on {c['source']},"
                      f" median {c['background_p50_us']:.0f} us, 90th percentile {c['background_p90_us']:.0f} us"
                      if c.get("background_p50_us") is not None else f": no preemption of its threads on {c['source']}")
        median = f", median {self.p50_us:.0f} us" if self.p50_us is not None else ""
        if self.lengths_us:
            n = len(self.lengths_us)
            median = f", {n} lengths as measured (median {self.lengths_us[n // 2]:.0f} us, longest {self.lengths_us[-1]:.0f} us)"
        return f"background: {self.per_s:.1f}/s x {self.us:.0f} us{median} per CPU ({where})"

    def as_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"per_s": self.per_s, "us": self.us, "source": self.source}
        if self.p50_us is not None:
            doc["p50_us"] = self.p50_us
        if self.lengths_us:
            doc["lengths_us"] = list(self.lengths_us)
        if self.host is not None:
            doc.update(host=self.host, probed_at=self.probed_at)
        if self.capture is not None:
            doc["capture"] = {k: v for k, v in self.capture.items() if k.startswith("background_")}
        return doc

    def columns(self, row: dict[str, Any]) -> dict[str, Any]:
        """A sweep row's background columns: the grid's values where it sets them."""
        return {
            KEYS[0]: row.get(KEYS[0], self.per_s),
            KEYS[1]: row.get(KEYS[1], self.us),
            "background": "grid" if any(k in row for k in KEYS) else self.source,
        }


def _sets(overrides: Sequence[str], keys: Sequence[str]) -> bool:
    return any(o.partition("=")[0].strip() in keys for o in overrides)


def set_up(text: str, overrides: Sequence[str], like_host: bool, grid: Sequence[str] = ()) -> tuple[list[str], Assumed]:
    """The overrides every simulation of a command runs with (with ``like_host``,
    the probed host's first, then ``overrides``), and the background they
    assume; ``grid``: the keys a sweep varies. The scenario is checked before
    the probe, so that bad input fails at once, without root."""
    user = list(overrides)
    resolved = json.loads(_native.validate(text, user))
    host = probed_at = None
    if like_host:
        probed_at = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        try:
            host = probe(resolved["machine"]["cpus"])
        except _native.HarnessError as e:
            raise _native.HarnessError(f"--like-host: {e}") from None
        user = [*_native.like_host_overrides(json.dumps(host)), *user]
        resolved = json.loads(_native.validate(text, user))
    machine = resolved["machine"]
    captured = (resolved.get("capture") or {}).get("background_preemptions") is not None
    source = ("grid" if _sets([f"{k}=" for k in grid], KEYS) else "set" if _sets(overrides, KEYS) else "host" if host
              else "capture" if captured else "scenario")
    capture = resolved["capture"] if source == "capture" else None
    return user, Assumed(machine["background_per_s"], machine["background_us"], source, host, probed_at, capture,
                         machine.get("background_p50_us"), tuple(sorted(machine.get("background_lengths_us", []))))
