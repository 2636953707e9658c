#!/bin/bash
# 4 run/sleep threads (10 ms / 18.6 ms) on 2 CPUs: do they meet on the kernel?
cd "$(dirname "$0")" && source "${VENV:-/work/venvs/merge}/bin/activate"
export THROTTLELAB_START_DELAY_MS=500
for n in 1 2 4; do for r in 1 2 3; do
  throttlelab real rs$n.toml --set seed=$r --json > real-$n-$r.json 2>real-$n-$r.err
  echo "real threads=$n run=$r usage_usec=$(python3 -c "import json; print(json.load(open('real-$n-$r.json'))['cgroups']['app']['usage_usec'])")"
done; done
for n in 1 4; do for r in 1 2; do
  rt-app rt$n.json > rt$n-$r.log 2>&1 & pid=$!
  sleep 1.5
  snap() { for f in /proc/$pid/task/*/schedstat; do echo "$f $(cat $f)"; done; }
  snap > rt$n-$r.a; sleep 3; snap > rt$n-$r.b
  wait
  python3 - rt$n-$r.a rt$n-$r.b $n $r <<'PY'
import sys
a={l.split()[0]:list(map(int,l.split()[1:])) for l in open(sys.argv[1])}
b={l.split()[0]:list(map(int,l.split()[1:])) for l in open(sys.argv[2])}
rows=[(b[k][0]-a[k][0], b[k][1]-a[k][1], b[k][2]-a[k][2]) for k in a if k in b and b[k][0]-a[k][0] > 1e8]
cpu=sum(r[0] for r in rows)/1e9; delay=sum(r[1] for r in rows)/1e9; slices=sum(r[2] for r in rows)
print(f"rt-app threads={sys.argv[3]} run={sys.argv[4]} workers={len(rows)} over 3 s: cpu {cpu:.3f} s, run_delay {delay*1e3:.1f} ms, timeslices {slices}, run_delay per cpu-s {delay/cpu*1e3:.1f} ms")
PY
done; done
