"""A request-latency histogram from Prometheus (``--latency-metric NAME``):
each container's observed p99 over the range, for ``--max-p99-ms``.

The histogram is the application's own (``http_request_duration_seconds``
and the like), scraped with the pod's labels: its ``NAME_bucket`` series are
joined to cAdvisor's containers by ``namespace``, ``pod`` and ``container``,
summed over every other label (handler, method, code, instance) per ``le``.
A bucket's increase over the range is the sum of its increases between
consecutive steps, a reset counted as in prometheus.py; the p99 is
``histogram_quantile(0.99, ...)``'s: linear within the bucket that holds it,
the lower bound of the +Inf bucket where it falls there. The unit is the
metric's base unit, seconds, unless its name ends in ``_milliseconds``.
docs/prometheus.md ("Latency") says what the model predicts from it.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Optional

from throttlelab.prometheus import PrometheusError, Query, _increase, _values, matchers, promql

#: The labels that join an application's series to cAdvisor's container.
JOIN = ("namespace", "pod", "container")
#: The quantile --max-p99-ms bounds.
QUANTILE = 0.99
_NAME = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")


@dataclass(frozen=True)
class Observed:
    """A container's requests over the range and their p99 (ms), with the
    bounds of the bucket it lies in (the histogram cannot say closer)."""

    requests: float
    p99_ms: float
    bucket_low_ms: float
    bucket_high_ms: float  # inf: the +Inf bucket


def check_name(name: str) -> str:
    """``--latency-metric``'s histogram name, as given (not its _bucket series)."""
    if not _NAME.match(name):
        raise PrometheusError(f"--latency-metric {name!r} is not a metric name such as http_request_duration_seconds")
    if name.endswith(("_bucket", "_sum", "_count")):
        raise PrometheusError(f"--latency-metric {name}: name the histogram ({re.sub(r'_(bucket|sum|count)$', '', name)}), not one of its series")
    return name


def _le(labels: dict[str, str], metric: str) -> float:
    text = labels.get("le")
    try:
        le = float(text) if text is not None else math.nan
    except ValueError:
        le = math.nan
    if math.isnan(le):
        raise PrometheusError(f"--latency-metric {metric}: a {metric}_bucket series without a numeric le label ({labels})")
    return le


def quantile(q: float, buckets: list[tuple[float, float]]) -> tuple[float, float, float]:
    """histogram_quantile's ``q`` of cumulative ``buckets`` ((le, count), le
    ascending, the last +Inf): (value, bucket's lower bound, upper bound)."""
    total = buckets[-1][1]
    rank = q * total
    low, below = 0.0, 0.0
    for le, count in buckets:
        if count >= rank:
            if math.isinf(le):
                return low, low, le
            if le <= 0 or count == below:
                return le, low, le
            return low + (le - low) * (rank - below) / (count - below), low, le
        low, below = le, count
    return low, low, math.inf  # not reached: the +Inf bucket holds every request


def observed(query: Query, metric: str, selector: str, steps: list[float]) -> dict[tuple[str, str, str], Observed]:
    """Each container's observed p99 over ``steps`` (see the module's doc), by
    (namespace, pod, container); containers with no request in the range left
    out. ``selector``'s matchers on JOIN's labels select the series (the rest,
    such as cAdvisor's job or id, are not the application's)."""
    check_name(metric)
    joined = ", ".join(f'{k}{op}"{v}"' for k, op, v in matchers(selector) if k in JOIN)
    series = query(promql(f"{metric}_bucket", joined))
    if not series:
        raise PrometheusError(f"--latency-metric {metric}: no {metric}_bucket series match --selector {selector!r}")
    at = [round(t, 3) for t in steps]
    sums: dict[tuple[str, str, str], dict[float, float]] = {}
    for s in series:
        labels = s["metric"]
        le = _le(labels, metric)
        if not all(labels.get(k) for k in JOIN):
            continue  # not a container's (no pod labels): nothing to join it to
        values = _values(s)
        increase = sum(_increase(values[a], values[b])[0] for a, b in zip(at, at[1:]) if a in values and b in values)
        key = tuple(labels[k] for k in JOIN)
        sums.setdefault(key, {}).setdefault(le, 0.0)  # type: ignore[arg-type]
        sums[key][le] += increase  # type: ignore[index]
    scale = 1.0 if metric.endswith("_milliseconds") else 1e3
    out = {}
    for key, by_le in sums.items():
        buckets = sorted(by_le.items())
        name = "/".join(key)
        if not math.isinf(buckets[-1][0]):
            raise PrometheusError(f"--latency-metric {metric}: {name} has no le=\"+Inf\" bucket, so its request count is unknown")
        if any(b[1] < a[1] - 1e-9 for a, b in zip(buckets, buckets[1:])):
            raise PrometheusError(f"--latency-metric {metric}: {name}'s buckets are not cumulative (a larger le counts fewer requests)")
        if buckets[-1][1] <= 0:
            continue
        value, low, high = quantile(QUANTILE, buckets)
        out[key] = Observed(buckets[-1][1], value * scale, low * scale, high * scale)  # type: ignore[arg-type]
    return out
