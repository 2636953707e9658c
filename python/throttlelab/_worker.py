"""A worker process of ``throttlelab real``: runs one cgroup's threads.

The controller starts it as ``python -m throttlelab._worker`` and speaks the line
protocol documented in crates/throttlelab-real/src/worker.rs over stdin/stdout.
"""

import sys

from throttlelab import _native

if __name__ == "__main__":
    try:
        _native.worker_main()
    except _native.HarnessError as e:
        print(f"throttlelab worker: error: {e}", file=sys.stderr)
        sys.exit(1)
