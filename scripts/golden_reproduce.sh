#!/usr/bin/env bash
# `throttlelab reproduce --all --json` against tests/golden/reproduce-all.json,
# byte for byte (about 3 minutes on 2 cores, so not part of scripts/test.sh; the
# built-ins' golden outputs are, in crates/throttlelab-core/tests/golden.rs).
# With --bless, store the current output instead (a change meant to alter results).
set -euo pipefail
cd "$(dirname "$0")/.."
golden=tests/golden/reproduce-all.json
if [[ "${1:-}" == "--bless" ]]; then
    throttlelab reproduce --all --json > "$golden"
    exit 0
fi
got=$(mktemp)
trap 'rm -f "$got"' EXIT
throttlelab reproduce --all --json > "$got" 2>/dev/null
if cmp -s "$got" "$golden"; then
    echo "reproduce --all: identical to $golden"
else
    echo "reproduce --all: differs from $golden (regenerate with $0 --bless if intended)" >&2
    exit 1
fi
