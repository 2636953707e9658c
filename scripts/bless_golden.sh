#!/usr/bin/env bash
# Regenerate the stored golden outputs on purpose, for a change meant to alter
# results: tests/golden/*.json from the core (crates/throttlelab-core/tests/golden.rs
# writes them; tests/test_golden.py compares the Python path against the same files).
# With --reproduce, tests/golden/reproduce-all.json too (minutes; needs the package
# installed from this tree). Review `git diff tests/golden` before committing.
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:-}" in
    "" | --reproduce) ;;
    *) echo "usage: $0 [--reproduce]" >&2; exit 2 ;;
esac
THROTTLELAB_BLESS=1 cargo test -p throttlelab-core --release -q --test golden
if [[ "${1:-}" == "--reproduce" ]]; then
    bash scripts/golden_reproduce.sh --bless
fi
git status --short tests/golden
