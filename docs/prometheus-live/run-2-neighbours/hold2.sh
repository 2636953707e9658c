#!/bin/bash
# Hold 2 (prom4, #35): rt-app alone under advise's new limit (1021m) and KRR's, 3 rounds of 60 s a side.
set -u
cd /tmp && source /work/venvs/prom/bin/activate && export PYTHONPATH=/work/wt/prom4/python
date -u +"start %T"; uptime
timeout 460 python /work/wt/prom4/scripts/prometheus_acceptance.py apply -o /tmp/prom4/run2 --round 1,2,3 --run-s 60 --only rt-app
echo "apply rc=$?"; date -u +"end %T"
