#!/bin/bash
# issue 36's "3x faster than before": `advise request-service --cgroup app --max-throttled 5% --json` and
# `reproduce --all --json`, wall clock, the code as it was when the issue was filed (6bc8a7a^, the
# commit before the issue's first, its package in /tmp/issue36-base/site) against main's
# (the venv's), alternately, 3 rounds, in one hold:
#   tl-measure bash docs/engine-issue36/measure.sh [VENV [MAIN_SITE]]
# MAIN_SITE: main's package installed the same way as the old one (pip --target), so that both
# start alike (an editable install's import hook costs each pool worker time).
# The old package, if missing (a few minutes; before the hold):
#   mkdir -p /tmp/issue36-src && git archive 6bc8a7a^ | tar -x -C /tmp/issue36-src
#   cd /tmp/issue36-src && CARGO_TARGET_DIR=/tmp/issue36-target /work/venvs/main/bin/pip \
#     install --no-deps --target /tmp/issue36-base/site -c constraints.txt --no-build-isolation .
# The outputs differ by design (fidelity work since: placement, SIS_UTIL); reproduce --all's new
# ones are compared with tests/golden/reproduce-all.json. Output in /tmp/issue36-hold.
# Env, for a later stop's A/B (rich15's hold.sh): BEFORE another site for "before" (then
# before's and main's outputs must be equal, and are compared), ROUNDS (default 3),
# COMMANDS (default "advise reproduce"; "start" times `import throttlelab.cli` alone), OUT
# (default /tmp/issue36-hold).
set -u
venv=${1:-/work/venvs/main}
main_site=${2:-}
root=$(cd "$(dirname "$0")/../.." && pwd)
base=${BEFORE:-/tmp/issue36-base/site}
test -f $base/throttlelab/__init__.py || { echo "the old package is missing: $base (see this script's head)"; exit 1; }
out=${OUT:-/tmp/issue36-hold}
commands=${COMMANDS:-advise reproduce}
mkdir -p $out
cd /tmp
py=$venv/bin/python tl=$venv/bin/throttlelab
t() { local s e; s=$(date +%s.%N); "$@"; e=$(date +%s.%N); echo "$e - $s" | bc; }
for round in $(seq ${ROUNDS:-3}); do
  for v in before main; do
    if [ $v = before ]; then export PYTHONPATH=$base; elif [ -n "$main_site" ]; then export PYTHONPATH=$main_site; else unset PYTHONPATH; fi
    echo "== round $round: $v $($py -c 'import throttlelab; print(throttlelab.__file__)')"
    case " $commands " in *" start "*)
      echo "start (import throttlelab.cli) wall_s $(t $py -c 'import throttlelab.cli')";;
    esac
    case " $commands " in *" advise "*)
      echo "advise request-service wall_s $(t sh -c "$tl advise request-service --cgroup app --max-throttled 5% --json > $out/advise-$v-$round.json")";;
    esac
    case " $commands " in *" reproduce "*)
      echo "reproduce --all wall_s $(t sh -c "$tl reproduce --all --json > $out/reproduce-$v-$round.json 2>/dev/null")";;
    esac
  done
done
unset PYTHONPATH
for f in $out/reproduce-main-*.json; do [ -e $f ] || continue; cmp -s "$root/tests/golden/reproduce-all.json" $f || echo "DIFFERS from golden: $f"; done
if [ -n "${BEFORE:-}" ]; then for f in $out/advise-main-*.json $out/reproduce-main-*.json; do [ -e $f ] || continue; cmp -s $f ${f/-main-/-before-} || echo "DIFFERS from before's: $f"; done; fi
for f in $out/*-before-*.json; do cmp -s ${f%-*}-1.json $f || echo "before's outputs vary between rounds: $f"; done
python3 - "$out" <<'PY'
import json, sys, glob
for f in sorted(glob.glob(sys.argv[1] + "/advise-*-1.json")):
    d = json.load(open(f))
    print(f.rsplit("/", 1)[1], "runs:", d.get("runs"), "answer:", {k: d[k] for k in d if k in ("quota_us", "period_us", "millicores", "limit")})
PY
