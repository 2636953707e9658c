#!/bin/bash
# Hold 1 (prom4, #35): rt-app's shape on the kernel vs the simulator, then the fleet on local:2, ray:1, ray:2.
set -u
cd /work/wt/prom4 && source /work/venvs/prom/bin/activate
date -u +"start %T"
uptime
timeout 120 throttlelab compare /tmp/prom4/rt-app-timer.toml --runs 4 --json > /tmp/prom4/compare-rt-app-timer.json 2> /tmp/prom4/compare-rt-app-timer.err
echo "compare rc=$?"; date -u +"compare done %T"
timeout 230 python scripts/prometheus_fleet_bench.py --containers 240 --windows 8 --executors local:2,ray:1,ray:2 --fleet /tmp/prom4/fleet240.json -o /tmp/prom4/fleet240-hold.json
echo "bench rc=$?"; date -u +"end %T"
