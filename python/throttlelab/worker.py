"""Where the real backend's worker executable is.

``throttlelab real`` runs one ``throttlelab-worker`` process per cgroup (no Python
inside: crates/throttlelab-real/src/bin). The build puts it into this package, beside
``_native`` (crates/throttlelab-py/build.rs), and the wheel ships it from there.
"""

from pathlib import Path

#: The worker executable of this installation.
WORKER = Path(__file__).with_name("throttlelab-worker")
