#!/bin/bash
# Side by side at 91520/200000 burst 91520 (458m): sysbench itself captured on the kernel,
# and the replay of the 35000 capture run on the kernel (throttlelab real).
set -euo pipefail
cd /work/wt/padding
source /work/venvs/advise/bin/activate
source scripts/measure_cgroup.sh
out=/tmp/padding/k458; mkdir -p $out
name=trace39-$$
trap 'cgroup_remove || true' EXIT
cgroup_make $name; cg=${CG_DIRS[0]}
echo -1 > $cg/cpu.cfs_quota_us; echo 200000 > $cg/cpu.cfs_period_us; echo 91520 > $cg/cpu.cfs_burst_us; echo 91520 > $cg/cpu.cfs_quota_us
cgroup_exec sysbench cpu --threads=2 --rate=200 --cpu-max-prime=40000 --time=1000 run > /dev/null 2>&1 &
sleep 3
unshare -m --propagation private throttlelab capture --cgroup $cg --duration 10 -o $out/cap458.toml | tee $out/capture.txt
cgroup_remove; CG_DIRS=()
N=replay39-12445
for s in 1 2; do
  throttlelab real /work/m39b/sysbench-35000/cap.toml --set seed=$s --set cgroup.$N.quota_us=91520 --set cgroup.$N.period_us=200000 --set cgroup.$N.burst_us=91520 --json > $out/real-replay-$s.json
  python3 -c "import json;d=json.load(open('$out/real-replay-$s.json'));g=d['cgroups']['$N'];print('real replay seed $s', g['nr_throttled'], g['nr_periods'], g['usage_usec'])"
done
