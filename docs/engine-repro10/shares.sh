#!/bin/bash
# issue 36 / repro10: inclusive shares (%) of named functions in callgrind.sh's profiles
# (where the instructions go): shares.sh TAG LOAD... (profiles in $OUT, default /tmp/repro10).
# A function inlined everywhere has no entry of its own and shows as -.
tag=$1; shift
cd "${OUT:-/tmp/repro10}"
for l in "$@"; do f=cg-$tag-$l.out; callgrind_annotate --inclusive=yes $f 2>/dev/null > inc-$tag-$l.txt
tot=$(grep 'PROGRAM TOTALS' inc-$tag-$l.txt | awk '{gsub(",","",$1);print $1}')
printf "%-7s %7.1fM" $l $(echo "$tot/1000000"|bc -l)
for fn in engine::sim::Sim::run_events EventQueue::pop_until EventQueue::push 'Sim>::catch_up_ticks' 'Sim>::enqueue_task' 'Sim>::dequeue_task' 'Sim>::account_cfs_rq_runtime' Program::next TaskPhases::get 'Sim>::newidle_pull' 'Sim>::update_rq_masks' 'Sim>::update_curr' TickGrid::tick_time __memcpy_avx_unaligned_erms; do
  v=$(grep -F "$fn [" inc-$tag-$l.txt | grep -v '^ *[0-9,]* ([ 0-9.]*%)  /rustc' | head -1 | awk '{gsub(",","",$1);print $1}')
  printf " | %s %s" "${fn##*:}" $( [ -n "$v" ] && echo "scale=1;100*$v/$tot"|bc || echo '-'); done; echo; done
