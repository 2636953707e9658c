#!/usr/bin/env bash
# Exploration: the property tests with far more cases than CI runs and a new
# random seed each round, in rounds until a time budget is spent.
#
#   scripts/explore.sh [--minutes N] [--cases N] [--seed S]
#
# Each round runs every Rust test binary under crates/throttlelab-core/tests
# that uses proptest (PROPTEST_CASES=--cases per property, PROPTEST_RNG_SEED=S)
# and the Python properties (HYPOTHESIS_PROFILE=explore, --hypothesis-seed=S),
# and prints its seed and how many cases ran; the total comes at the end.
# A failure stops it with the command that replays the round (--seed S runs
# that one round again). proptest keeps each failing case in the test's
# .proptest-regressions file and CI runs those first: commit them.
# Defaults: 30 minutes, 10000 cases. Needs cargo and pip, like scripts/test.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-$(command -v python || command -v python3)}"

minutes=30
cases=10000
seed=""
while [ $# -gt 0 ]; do
    case "$1" in
        --minutes) minutes="$2"; shift 2 ;;
        --cases) cases="$2"; shift 2 ;;
        --seed) seed="$2"; shift 2 ;;
        -h | --help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "explore.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    esac
done

# The test binaries (file stems) that use proptest.
tests=()
for f in crates/throttlelab-core/tests/*.rs; do
    if grep -q 'proptest!' "$f"; then
        tests+=(--test "$(basename "$f" .rs)")
    fi
done
log_dir=target/explore
mkdir -p "$log_dir"

export PIP_ROOT_USER_ACTION=ignore
"$PYTHON" -m pip install -q -c constraints.txt --no-build-isolation .
cargo test -q -p throttlelab-core --release "${tests[@]}" --no-run

start=$(date +%s)
rounds=0 rust_total=0 python_total=0
while :; do
    round_seed="${seed:-$(od -An -N8 -tu8 /dev/urandom | tr -d ' ')}"
    rounds=$((rounds + 1))
    rust_log="$log_dir/rust-$round_seed.log"
    python_log="$log_dir/python-$round_seed.log"
    failed=""
    # PROPTEST_VERBOSE=2 reports every case that passed; --nocapture lets it through.
    if ! PROPTEST_CASES="$cases" PROPTEST_RNG_SEED="$round_seed" PROPTEST_VERBOSE=2 \
        cargo test -q -p throttlelab-core --release "${tests[@]}" -- --nocapture >"$rust_log" 2>&1; then
        failed="rust"
    fi
    rust_cases=$(grep -c 'Test case passed' "$rust_log" || true)
    python_cases=0
    if [ -z "$failed" ]; then
        if ! HYPOTHESIS_PROFILE=explore "$PYTHON" -m pytest -q -p no:cacheprovider tests/test_properties.py \
            --hypothesis-seed="$round_seed" --hypothesis-show-statistics >"$python_log" 2>&1; then
            failed="python"
        fi
        python_cases=$({ grep -oE '[0-9]+ (passing|failing)' "$python_log" || true; } | awk '{n += $1} END {print n + 0}')
    fi
    rust_total=$((rust_total + rust_cases))
    python_total=$((python_total + python_cases))
    elapsed=$(($(date +%s) - start))
    printf 'round %d  seed %s  rust %d cases  python %d cases  (%d:%02d elapsed)\n' \
        "$rounds" "$round_seed" "$rust_cases" "$python_cases" $((elapsed / 60)) $((elapsed % 60))
    if [ -n "$failed" ]; then
        log="$rust_log"
        [ "$failed" = python ] && log="$python_log"
        echo "FAILED ($failed) in round $rounds, seed $round_seed; the end of $log:"
        grep -E 'panicked|minimal failing input|Falsifying|Error|assert' "$log" | tail -n 20 || true
        echo "replay the round:  scripts/explore.sh --seed $round_seed --cases $cases"
        echo "or just the Rust:  PROPTEST_RNG_SEED=$round_seed PROPTEST_CASES=$cases cargo test -p throttlelab-core --release ${tests[*]}"
        echo "or just Python:    HYPOTHESIS_PROFILE=explore $PYTHON -m pytest tests/test_properties.py --hypothesis-seed=$round_seed"
        echo "proptest kept the failing case in the test's .proptest-regressions file: commit it with the fix."
        echo "total: $rounds rounds, $((rust_total + python_total)) cases (rust $rust_total, python $python_total) in $((elapsed / 60)) min"
        exit 1
    fi
    if [ -n "$seed" ] || [ "$elapsed" -ge $((minutes * 60)) ]; then
        break
    fi
done
echo "total: $rounds rounds, $((rust_total + python_total)) cases (rust $rust_total, python $python_total) in $((elapsed / 60)) min, no failure"
