"""ruc11: the same lower bound of the balancer's moves on both sides: wake-ups
after 100 ms whose previous CPU is not where the thread's previous wake-up put
it (a move, or an odd number of moves, in between):

  python between_wakes.py HOLD_DIR SIM_PREFIX [RUNS]
"""
import importlib.util
import json
import sys
from pathlib import Path

here = Path(__file__).resolve().parent
spec = importlib.util.spec_from_file_location("recent_origin", here / "recent_origin.py")
ro = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ro)


def moved_between(ws) -> int:
    last, n = {}, 0
    for w in ws:
        if w.get("prev") is None:
            continue
        if w["t"] >= 100 and w["pid"] in last and last[w["pid"]] != w["prev"]:
            n += 1
        last[w["pid"]] = w["target"]
    return n


def main() -> None:
    hold, prefix = Path(sys.argv[1]), sys.argv[2]
    runs = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    for n in range(1, runs + 1):
        run = json.loads((hold / f"run-{n}.json").read_text())
        k = ro.kw.wakes(hold / f"trace-{n}.txt.gz", run["host"]["uptime_s"], run["duration_s"])
        s = [w for w in ro.sim_wakes(Path(f"{prefix}-{n}.txt")) if w["t"] <= run["duration_s"] * 1e3]
        print(f"run {n}: moved between wake-ups: kernel {moved_between(k)}, simulator {moved_between(s)}")


if __name__ == "__main__":
    main()
