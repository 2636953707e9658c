#!/bin/bash
# issue 36 / queue10: instructions of the engine alone (`simulate`), one build against another,
# on queue9's seven loads (docs/engine-queue9/callgrind.sh): the busy built-ins shortened (2 s,
# 1 s, 0.3 s), request-service (60 s, HZ=250), chiluk-fibtest (88 CPUs, HZ=250),
# hegde-interleave-1cg (8 CPUs, HZ=100) and thiyyakat-hcu-cfs (4 CPUs, HZ=250) cut to its first
# 300 s (`th300`: the whole, 5700 s and 6.4 M events, takes half an hour under callgrind);
# and two loads that are not among them, on either side of the rule's 4000 ticks a second:
# bench-busy-8cpu at HZ=250 (`b8hz250`, 2 s: 2000 ticks/s) and bench-busy-64cpu at HZ=100
# (`b64hz100`, 1 s: 6400 ticks/s); then, once those had placed the crossover lower, the busy
# 8-CPU load at HZ=100 (`b8hz100`, 2 s: 800 ticks/s) and on 2 CPUs at HZ=1000 (`b2`, 2 s, its 16
# threads and service overloading them: 2000 ticks/s), and `bench-64cpu` as it is (64 CPUs at
# HZ=1000 throttled 7/8 of each period: many CPUs, mostly idle). Not in the default list.
#   docs/engine-queue10/callgrind.sh TAG BINARY [LOAD...]   (from the worktree; out in /tmp/queue10)
set -eu
tag=$1 bin=$2; shift 2
out=/tmp/queue10
mkdir -p $out
loads=${*:-b8 b64 b256 request-service chiluk-fibtest hegde-interleave-1cg th300 b8hz250 b64hz100}
s=python/throttlelab/scenarios
for l in $loads; do
  case $l in
    b8) sed "s/^duration_s = .*/duration_s = 2/" $s/bench-busy-8cpu.toml ;;
    b64) sed "s/^duration_s = .*/duration_s = 1/" $s/bench-busy-64cpu.toml ;;
    b256) sed "s/^duration_s = .*/duration_s = 0.3/" $s/bench-busy-256cpu.toml ;;
    b8hz250) sed "s/^duration_s = .*/duration_s = 2/; s/^hz = .*/hz = 250/" $s/bench-busy-8cpu.toml ;;
    b8hz100) sed "s/^duration_s = .*/duration_s = 2/; s/^hz = .*/hz = 100/" $s/bench-busy-8cpu.toml ;;
    b2) sed "s/^duration_s = .*/duration_s = 2/; s/^cpus = .*/cpus = 2/" $s/bench-busy-8cpu.toml ;;
    b64hz100) sed "s/^duration_s = .*/duration_s = 1/; s/^hz = .*/hz = 100/" $s/bench-busy-64cpu.toml ;;
    th300) sed "s/^seed = 1$/seed = 1\nduration_s = 300/" $s/thiyyakat-hcu-cfs.toml ;;
    *) cat $s/$l.toml ;;
  esac > $out/$l.toml
  valgrind --tool=callgrind --callgrind-out-file=$out/cg-$tag-$l.out $bin $out/$l.toml > $out/cg-$tag-$l.txt 2> $out/cg-$tag-$l.err
  echo "$(date -u +%H:%M) $tag $l $(cut -d' ' -f1,2 $out/cg-$tag-$l.txt) instructions $(grep -o 'Collected : [0-9]*' $out/cg-$tag-$l.err | awk '{print $3}')"
done
