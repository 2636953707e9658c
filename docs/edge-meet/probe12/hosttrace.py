"""The host's bandwidth traces as `throttlelab diff -o DIR` keeps them (DIR/run-N.bw.txt),
read once for probe12's scripts: each event as (time s, CPU, event, fields, comm, pid)."""
import collections
import re

LINE = re.compile(r"^\s*(.+?)-(\d+)\s+\[(\d+)\]\s+\S+\s+([\d.]+): (\w+): (.*)$")


def events(path):
    out = []
    for line in open(path):
        m = LINE.match(line)
        if m:
            out.append((float(m[4]), int(m[3]), m[5], m[6], m[1], int(m[2])))
    return out


def spinners(evs, n=2):
    """The run's spinners: the n pids charged most often (`sched_stat_runtime`)."""
    charged = collections.Counter(int(re.search(r"pid=(\d+)", f)[1]) for _, _, ev, f, _, _ in evs if ev == "sched_stat_runtime")
    return [pid for pid, _ in charged.most_common(n)]
