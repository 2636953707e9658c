#!/usr/bin/env bash
# The single test command: rebuild and install the package from this tree, then run
# the Rust core's tests and the Python suite. Needs cargo and pip.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-$(command -v python || command -v python3)}"

export PIP_ROOT_USER_ACTION=ignore
# Build with the pinned maturin (--no-build-isolation), so the build is repeatable.
"$PYTHON" -m pip install -q -c constraints.txt maturin
"$PYTHON" -m pip install -q -c constraints.txt --no-build-isolation ".[test,ray]"
cargo test -p throttlelab-core -p throttlelab-real --release -q
# The event loop's Criterion benchmark, each load run once (--test), so that it cannot rot unseen.
cargo bench -p throttlelab-core --bench event_loop -q -- --test
"$PYTHON" -m pytest -q
