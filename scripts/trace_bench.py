"""Measure ``throttlelab trace`` on a long scenario: wall time, peak RSS and output
size per window, and what the same window would weigh as Perfetto protobuf
(TracePacket/TrackEvent, names interned, via the ``perfetto`` package's
StreamingTraceProtoBuilder) and as gzipped JSON.

    pip install perfetto  # only for the protobuf column
    python scripts/trace_bench.py [--scenario thiyyakat-hcu-cfs]

Numbers on the 2-CPU development machine (shared), thiyyakat-hcu-cfs (4 CPUs,
7884 s simulated, no limit). Before (one JSON string across the binding, the
whole document in memory; no window): 151 s, 6845 MB peak RSS, 334 MB,
3,253,723 events. After:

    case                          wall s  RSS MB  JSON MB    events   gz MB  proto MB
    default (first 60 s)             0.8      26     2.79    32,257    0.35      1.25
    10 s window (3000-3010 s)        3.0      26     0.43     4,856    0.06      0.19
    whole run                       51.0      26   288.00 3,253,723   34.20         -

Protobuf is 2.2x smaller than JSON but 3.5x larger than gzipped JSON, and
needs a dependency: JSON stays the format.
"""

from __future__ import annotations

import argparse
import gzip
import importlib.util
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

#: Label and the extra arguments of each case.
CASES = (
    ("default (first 60 s)", []),
    ("10 s window (3000-3010 s)", ["--from-s", "3000", "--to-s", "3010"]),
    ("whole run", ["--to-s", "100000"]),
)


def measure(scenario: str, args: list[str], out: Path) -> dict[str, float]:
    """Run the command under /usr/bin/time -v: wall s, peak RSS MB, output MB, events."""
    cmd = ["/usr/bin/time", "-v", sys.executable, "-m", "throttlelab", "trace", scenario, *args, "-o", str(out)]
    done = subprocess.run(cmd, capture_output=True, text=True, check=True)
    wall = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): (?:(\d+):)?(\d+):([\d.]+)", done.stderr)
    hours, minutes, secs = (float(g or 0) for g in wall.groups())
    rss_kb = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", done.stderr).group(1))
    events = int(re.search(r": (\d+) events", done.stdout).group(1))
    return {"wall_s": 3600 * hours + 60 * minutes + secs, "rss_mb": rss_kb / 1024, "out_mb": out.stat().st_size / 1e6, "events": events}


def to_protobuf(json_path: Path, out: Path) -> None:
    """The Chrome JSON trace as Perfetto TracePackets: a track per CPU and per
    counter, slices as begin/end pairs, counters and instants; names interned."""
    from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import TracePacket, TrackEvent
    from perfetto.trace_builder.proto_builder import StreamingTraceProtoBuilder

    sequence = 1
    tracks: dict[tuple, int] = {}
    names: dict[str, int] = {}
    with out.open("wb") as f:
        builder = StreamingTraceProtoBuilder(f)

        def packet(ts_ns: int = 0) -> TracePacket:
            p = builder.create_packet()
            p.trusted_packet_sequence_id = sequence
            p.sequence_flags = TracePacket.SEQ_NEEDS_INCREMENTAL_STATE if names else TracePacket.SEQ_INCREMENTAL_STATE_CLEARED
            if ts_ns:
                p.timestamp = ts_ns
            return p

        def track(key: tuple, name: str, parent: int = 0, counter: bool = False) -> int:
            if key not in tracks:
                tracks[key] = len(tracks) + 1
                p = packet()
                p.track_descriptor.uuid = tracks[key]
                p.track_descriptor.name = name
                if parent:
                    p.track_descriptor.parent_uuid = parent
                if counter:
                    p.track_descriptor.counter.SetInParent()
                builder.write_packet(p)
            return tracks[key]

        def event(ts_ns: int, uuid: int, kind: int, name: str = "", value: float | None = None) -> None:
            p = packet(ts_ns)
            p.track_event.type = kind
            p.track_event.track_uuid = uuid
            if name:
                if name not in names:
                    names[name] = len(names) + 1
                    p.interned_data.event_names.add(iid=names[name], name=name)
                p.track_event.name_iid = names[name]
            if value is not None:
                p.track_event.double_counter_value = value
            builder.write_packet(p)

        events = json.loads(json_path.read_text())["traceEvents"]
        processes = {e["pid"]: e["args"]["name"] for e in events if e["name"] == "process_name"}
        for pid, name in processes.items():
            track(("process", pid), name)
        for e in events:
            ns = round(e.get("ts", 0) * 1e3)
            if e["ph"] == "M" and e["name"] == "thread_name":
                track((e["pid"], e["tid"]), e["args"]["name"], tracks[("process", e["pid"])])
            elif e["ph"] == "X":
                uuid = tracks[(e["pid"], e["tid"])]
                event(ns, uuid, TrackEvent.TYPE_SLICE_BEGIN, e["name"])
                event(ns + round(e["dur"] * 1e3), uuid, TrackEvent.TYPE_SLICE_END)
            elif e["ph"] == "C":
                uuid = track(("counter", e["name"]), e["name"], tracks[("process", e["pid"])], counter=True)
                event(ns, uuid, TrackEvent.TYPE_COUNTER, value=e["args"]["ms"])
            elif e["ph"] == "i":
                event(ns, tracks[("process", e["pid"])], TrackEvent.TYPE_INSTANT, e["name"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scenario", default="thiyyakat-hcu-cfs")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        print(f"{'case':28} {'wall s':>7} {'RSS MB':>7} {'JSON MB':>8} {'events':>9} {'gz MB':>7} {'proto MB':>9}")
        for label, extra in CASES:
            out = Path(tmp) / "trace.json"
            m = measure(args.scenario, extra, out)
            gz_mb = len(gzip.compress(out.read_bytes(), 6)) / 1e6
            proto_mb = "-"
            # converting millions of events in pure Python takes minutes
            if m["events"] < 1_000_000 and importlib.util.find_spec("perfetto"):
                to_protobuf(out, Path(tmp) / "trace.pftrace")
                proto_mb = f"{(Path(tmp) / 'trace.pftrace').stat().st_size / 1e6:.2f}"
            print(f"{label:28} {m['wall_s']:7.1f} {m['rss_mb']:7.0f} {m['out_mb']:8.2f} {m['events']:9,d} {gz_mb:7.2f} {proto_mb:>9}")
            os.remove(out)


if __name__ == "__main__":
    main()
