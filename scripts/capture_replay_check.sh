#!/bin/bash
# Hold a throttled capture to the kernel (issue #39), for one program:
#   1. the program unlimited on the kernel: its CPUs, (user + sys) / wall;
#   2. a capture of it under QUOTA_US/100000 (should throttle 50-95 % of periods);
#   3. the capture's unlimited replay and explain's mean demand, against 1;
#   4. advise --max-throttled 5% on the capture, and the recommended limit and
#      one 20 % below it applied on the kernel (RUNS runs each): the first must
#      meet the target, the second not;
#   5. the simulator's throttled ratio on the capture (seeds 1-3) at the
#      capture's own limit and at those two, beside the kernel's.
# Usage (root): scripts/capture_replay_check.sh stress-ng|sysbench|rt-app QUOTA_US [RUNS] [OUTDIR]
# Prints a markdown block; keeps the capture and every number in OUTDIR.
set -euo pipefail
program=$1 quota_us=$2 runs=${3:-3} out=${4:-capture-replay-$1}
period_us=100000 window_s=${WINDOW_S:-10} warm_s=3
mkdir -p "$out"
out=$(cd "$out" && pwd)
source "$(dirname "$0")/measure_cgroup.sh"
name=replay39-$$
cleanup() { [ -n "${CG_DIRS:-}" ] && cgroup_remove || true; }
trap cleanup EXIT

case $program in
  stress-ng) cmd=(stress-ng --cpu 2 --cpu-load 45 -t 1000) ;;
  sysbench) cmd=(sysbench cpu --threads=2 --rate=200 --cpu-max-prime=40000 --time=1000 run) ;;
  rt-app)
    cat > "$out/rt-app.json" <<'EOF'
{ "global": { "duration": 1000, "calibration": 18, "default_policy": "SCHED_OTHER", "logdir": "/tmp" },
  "tasks": { "thread": { "instance": 2, "loop": -1, "run": 20000, "sleep": 25000 } } }
EOF
    cmd=(rt-app "$out/rt-app.json") ;;
  *) echo "unknown program $program" >&2; exit 2 ;;
esac

# Start the program in the cgroup at QUOTA [PERIOD [BURST]] (-1: unlimited).
start() {
  cgroup_make "$name"
  local cg=${CG_DIRS[0]}
  echo -1 > "$cg/cpu.cfs_quota_us"
  echo "${2:-$period_us}" > "$cg/cpu.cfs_period_us"
  echo "${3:-0}" > "$cg/cpu.cfs_burst_us"
  echo "$1" > "$cg/cpu.cfs_quota_us"
  cgroup_exec "${cmd[@]}" > /dev/null 2>&1 &
  sleep $warm_s
}
stop() { cgroup_remove; CG_DIRS=(); }
stat() { awk -v k="$2" '$1 == k { print $2 }' "$1/cpu.stat"; }
usage_ns() { cat "${CG_DIRS[1]}/cpuacct.usage"; }

# A window at QUOTA [PERIOD [BURST]]: "CPUs nr_throttled nr_periods".
window() {
  start "$@"
  local u0 p0 t0 u1 p1 t1
  u0=$(usage_ns); p0=$(stat "${CG_DIRS[0]}" nr_periods); t0=$(stat "${CG_DIRS[0]}" nr_throttled)
  sleep $window_s
  u1=$(usage_ns); p1=$(stat "${CG_DIRS[0]}" nr_periods); t1=$(stat "${CG_DIRS[0]}" nr_throttled)
  stop
  python3 -c "print(f'{($u1 - $u0) / 1e9 / $window_s:.4f} $((t1 - t0)) $((p1 - p0))')"
}

mean_cpus() { python3 -c "import sys; v=[float(l.split()[0]) for l in sys.stdin]; print(f'{sum(v)/len(v):.4f}')"; }
ratios() { python3 -c "import sys; r=[int(l.split()[1])/int(l.split()[2]) for l in sys.stdin]; print(', '.join(f'{x:.3f}' for x in r), '|', f'{sum(r)/len(r):.3f}')"; }

[ -f /sys/fs/cgroup/cpu/cpu.cfs_quota_us ] && [ -f /sys/fs/cgroup/cpuacct/cpuacct.usage ] ||
  { echo "this script wants cgroup v1's cpu and cpuacct at /sys/fs/cgroup (as on this host)" >&2; exit 2; }

echo "## $program: unlimited on the kernel ($runs x ${window_s} s)" >&2
for i in $(seq "$runs"); do window -1; done | tee "$out/unlimited.txt" >&2
kernel_cpus=$(mean_cpus < "$out/unlimited.txt")

echo "## $program: capture at $quota_us/$period_us" >&2
start "$quota_us"
unshare -m --propagation private throttlelab capture --cgroup "${CG_DIRS[0]}" --duration $window_s -o "$out/cap.toml" | tee "$out/capture.txt" >&2
stop
replay_cpus=$(throttlelab run "$out/cap.toml" --set "cgroup.$name.quota_us=-1" --json |
  python3 -c "import json,sys; d=json.load(sys.stdin); g=d['cgroups']['$name']; print(f\"{g['usage_usec']/1e6/d['duration_s']:.4f}\")")
demand_ms=$(throttlelab explain "$out/cap.toml" --json | tee "$out/explain.json" |
  python3 -c "import json,sys; d=json.load(sys.stdin); print(f\"{d['demand_per_period']['mean_us']/1e3:.2f}\")")

echo "## $program: advise" >&2
throttlelab advise "$out/cap.toml" --max-throttled 5% --json > "$out/advise.json"
# The recommendation (quota period burst), and 20 % below it (quota and burst).
read -r rec rec_period rec_burst < <(python3 -c "import json; r=json.load(open('$out/advise.json'))['recommendation']; print(r['quota_us'], r['period_us'], r['burst_us'])")
below=$(( rec * 8 / 10 )) below_burst=$(( rec_burst * 8 / 10 ))
echo "## $program: recommended $rec/$rec_period (burst $rec_burst) and 20 % below, $below (burst $below_burst), on the kernel" >&2
for i in $(seq "$runs"); do window "$rec" "$rec_period" "$rec_burst"; done | tee "$out/recommended.txt" >&2
for i in $(seq "$runs"); do window "$below" "$rec_period" "$below_burst"; done | tee "$out/below.txt" >&2

# The simulator's throttled ratio on the capture at QUOTA PERIOD BURST, seeds 1-3:
# "nr_throttled nr_periods" per seed, as window() gives the kernel's.
predicted() {
  for seed in 1 2 3; do
    throttlelab run "$out/cap.toml" --set seed=$seed --set "cgroup.$name.quota_us=$1" \
      --set "cgroup.$name.period_us=$2" --set "cgroup.$name.burst_us=$3" --json |
      python3 -c "import json,sys; g=json.load(sys.stdin)['cgroups']['$name']; print(0, g['nr_throttled'], g['nr_periods'])"
  done
}
predicted "$quota_us" "$period_us" 0 > "$out/predicted-captured.txt"
predicted "$rec" "$rec_period" "$rec_burst" > "$out/predicted-recommended.txt"
predicted "$below" "$rec_period" "$below_burst" > "$out/predicted-below.txt"
captured_ratio=$(python3 -c "import tomllib; c=tomllib.load(open('$out/cap.toml','rb'))['capture']; print(f\"{c['nr_throttled']/c['nr_periods']:.3f}\")")

pct() { python3 -c "print(f'{($1 / $2 - 1) * 100:+.1f} %')"; }
cat <<EOF
### $program, captured at $quota_us/$period_us

$(cat "$out/capture.txt")

| | CPUs | against the kernel |
|---|---|---|
| the program unlimited on the kernel ($runs x ${window_s} s, cpuacct.usage / wall) | $kernel_cpus | |
| the capture's unlimited replay (\`run --set cgroup.$name.quota_us=-1\`) | $replay_cpus | $(pct "$replay_cpus" "$kernel_cpus") |
| \`explain\`: mean demand per ${period_us} us period | $(python3 -c "print(f'{$demand_ms / ($period_us / 1e3):.4f}')") ($demand_ms ms) | $(pct "$demand_ms / ($period_us / 1e3)" "$kernel_cpus") |

| limit | periods throttled on the kernel, each run | mean | target (at most 5 %) | the simulator on the capture, seeds 1-3 | mean |
|---|---|---|---|---|---|
| $quota_us/$period_us (the capture's own) | $captured_ratio (the capture's cpu.stat) | | | $(ratios < "$out/predicted-captured.txt") |
| $rec/$rec_period, burst $rec_burst (\`advise\`'s recommendation) | $(ratios < "$out/recommended.txt") | $(python3 -c "r=[int(l.split()[1])/int(l.split()[2]) for l in open('$out/recommended.txt')]; print('met' if sum(r)/len(r) <= 0.05 else 'missed')") | $(ratios < "$out/predicted-recommended.txt") |
| $below/$rec_period, burst $below_burst (20 % below) | $(ratios < "$out/below.txt") | $(python3 -c "r=[int(l.split()[1])/int(l.split()[2]) for l in open('$out/below.txt')]; print('met' if sum(r)/len(r) <= 0.05 else 'missed')") | $(ratios < "$out/predicted-below.txt") |
EOF
