"""A synthetic 60 s capture of 64 threads on a 64-CPU machine, for issue 36's
replay target: no such capture is stored (the published ones are from the
2-CPU host). Each of the 64 threads replays one of the 4 threads of
docs/acceptance-captures/stress-ng (a real 60 s capture, 4 threads under
1.2 CPUs), copied 16 times under new names; the quota is scaled likewise
(16 x 1.2 = 19.2 CPUs). Writes capture64.toml and capture64.phases.gz in DIR.

    python docs/engine-speed4/synth_capture64.py DIR
"""

import gzip
import re
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "acceptance-captures"
COPIES = 16


def main() -> None:
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    text = gzip.open(SRC / "stress-ng.phases.gz", "rt").read()
    header, *rest = re.split(r"^(?=\[)", text, flags=re.M)
    sections = [(s.split("]", 1)[0][1:], s.split("\n", 1)[1]) for s in rest]
    names, body = [], [header]
    for copy in range(COPIES):
        for name, phases in sections:
            names.append(f"{name}-{copy}")
            body.append(f"[{names[-1]}]\n{phases}")
    with gzip.open(out / "capture64.phases.gz", "wt") as f:
        f.write("".join(body))
    toml = [
        'name = "capture64-synthetic"', "duration_s = 60.000186", "",
        "[machine]", "cpus = 64", "hz = 250", "",
        "[kernel]", 'profile = "6.18"', "",
        "[[cgroup]]", 'name = "capture"', "period_us = 100000", f"quota_us = {120000 * COPIES}", "",
    ]
    for name in names:
        toml += ["[[task]]", f'name = "{name}"', 'cgroup = "capture"', "loop = 1", 'phases_file = "capture64.phases.gz"', ""]
    (out / "capture64.toml").write_text("\n".join(toml))


if __name__ == "__main__":
    main()
