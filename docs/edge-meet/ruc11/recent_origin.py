"""ruc11: where a worker's recent_used_cpu came to differ from its previous
CPU, kernel (a sisutil9 guest trace) or simulator (a listing of its
wake-ups, one a line, `sim_listing.py`):

  python recent_origin.py kernel TRACE.txt.gz RUN.json
  python recent_origin.py sim LISTING.txt

Each wake-up after the first 100 ms is classed as kernel_wakes.py does. For
those whose recent_used_cpu is not the previous CPU, the origin:
- "moved at its last update": the last wake-up that set recent_used_cpu
  (select_idle_sibling past the idle-prev test) moved the task (by
  recent_used_cpu or the scan), so recent_used_cpu is the CPU it left;
- "migrated since": that wake-up left it there, and a balance moved it since;
- "never updated": no wake-up has set it since the start (the fork's value).
"""
import importlib.util
import re
import sys
from collections import Counter
from pathlib import Path

here = Path(__file__).resolve().parent
spec = importlib.util.spec_from_file_location("kernel_wakes", here / "kernel_wakes.py")
kw = importlib.util.module_from_spec(spec)
spec.loader.exec_module(kw)

SIM = re.compile(r"(?:RUC11 )?(\d+) tid (\d+) prev (\d+) \[([\w,]+)\] recent (\d+)->(\d+) -> (\d+)")


def sim_wakes(path: Path):
    out = []
    for line in open(path):
        m = SIM.match(line)
        if not m or int(m[2]) >= 4:  # threads 0-3 are the workers; the rest background
            continue
        st = m[4].split(",")
        out.append({"t": int(m[1]) / 1e6, "pid": int(m[2]), "prev": int(m[3]), "path": "select",
                    "state": {c: (s, -1) for c, s in enumerate(st)}, "recent": int(m[5]),
                    "recent_after": int(m[6]), "target": int(m[7])})
    return out


def origins(ws):
    last_update = {}  # pid -> (prev at that wake, where it went)
    c = Counter()
    for w in ws:
        pid = w["pid"]
        if w["path"] != "select":
            continue
        key = kw.classify(w)
        if w["t"] >= 100 and key in ("prev busy, other idle", "both busy", "prev idle"):
            if w["recent"] == w["prev"]:
                why = "recent = prev"
            elif pid not in last_update:
                why = "recent = other: never updated"
            elif last_update[pid][1] != last_update[pid][0]:
                why = "recent = other: moved at its last update"
            else:
                why = "recent = other: migrated since its last update"
            c[(key, why)] += 1
        # select_idle_sibling set p->recent_used_cpu = prev: seen when it changed;
        # else known from the class when the waking CPU was prev (target == prev,
        # not idle). From another CPU an unchanged value says nothing: not counted.
        changed = w.get("recent_after") == w["prev"] != w["recent"]
        from_prev = w.get("waker", w["prev"]) == w["prev"]
        if changed or (from_prev and key in ("prev busy, other idle", "both busy")):
            last_update[pid] = (w["prev"], w["target"])
    return c


def main() -> None:
    if sys.argv[1] == "kernel":
        import json
        run = json.loads(Path(sys.argv[3]).read_text())
        ws = kw.wakes(Path(sys.argv[2]), run["host"]["uptime_s"], run["duration_s"])
    else:
        ws = sim_wakes(Path(sys.argv[2]))
    for k, v in sorted(origins(ws).items()):
        print(f"  {v:4d}  {' / '.join(k)}")


if __name__ == "__main__":
    main()
