#!/bin/bash
# issue 36 / repro10: instruction counts of reproduce --all's five heaviest experiments,
# one representative run each (callgrind on the engine alone, `simulate` with line tables):
# docs/engine-repro10/callgrind.sh TAG [LOAD...] (run from the worktree; profiles in
# /tmp/repro10/cg-TAG-LOAD.out). Shortened where said:
#   ugedal    ugedal-overhead, 1 ms slice, spinlock (kernel.features=[]), loop 2000 of its 20 000
#   hegde     hegde-interleave-2cg as built in (1 core, 2CG aligned), whole (218 s simulated)
#   hcu       thiyyakat-hcu-cfs, sample_ms=1000, the first 600 s of its 6 600
#   lcu       thiyyakat-lcu-cfs, sample_ms=1000, the first 600 s
#   turner    turner-tbench, k=8 bandwidth (quota 8 CPUs), 1.5 s (the window's run)
#   request   request-service as built in (advise's scenario, 60 s)
#   busy8     bench-busy-8cpu, 2 s; busy64: bench-busy-64cpu, 1 s (speed6's shortened loads)
set -eu
tag=$1; shift
out=${OUT:-/tmp/repro10}
s=python/throttlelab/scenarios
mkdir -p $out
CARGO_PROFILE_RELEASE_DEBUG=line-tables-only cargo build -q --release --example simulate -p throttlelab-core
for load in ${@:-ugedal hegde hcu lcu turner}; do
  case $load in
    ugedal) args=($s/ugedal-overhead.toml kernel.slice_us=1000 'kernel.features=[]' task.sysbench.loop=2000) ;;
    hegde) args=($s/hegde-interleave-2cg.toml) ;;
    hcu) args=($s/thiyyakat-hcu-cfs.toml sample_ms=1000 duration_s=600) ;;
    lcu) args=($s/thiyyakat-lcu-cfs.toml sample_ms=1000 duration_s=600) ;;
    turner) args=($s/turner-tbench.toml cgroup.protag.period_us=100000 cgroup.protag.quota_us=800000 'cgroup.protag.cpus="0-7"' 'cgroup.protag.cpus="0-15"' duration_s=1.5) ;;
    request) args=($s/request-service.toml) ;;
    busy8) args=($s/bench-busy-8cpu.toml duration_s=2) ;;
    busy64) args=($s/bench-busy-64cpu.toml duration_s=1) ;;
  esac
  valgrind --tool=callgrind --callgrind-out-file=$out/cg-$tag-$load.out ${CARGO_TARGET_DIR:-target}/release/examples/simulate "${args[@]}" > $out/cg-$tag-$load.txt 2> $out/cg-$tag-$load.err
  echo "$tag $load: $(cut -d' ' -f1,2 $out/cg-$tag-$load.txt) instructions $(grep -o 'Collected : [0-9]*' $out/cg-$tag-$load.err | awk '{print $3}')"
done
