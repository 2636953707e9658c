"""Where the real backend's executables are.

``throttlelab real`` runs one ``throttlelab-worker`` process per cgroup (no Python
inside: crates/throttlelab-real/src/bin); a VM's guest runs ``throttlelab-real``,
the controller without Python, too. The build puts both into this package, beside
``_native`` (crates/throttlelab-py/build.rs), and the wheel ships them from there.
"""

from pathlib import Path

#: The worker executable of this installation.
WORKER = Path(__file__).with_name("throttlelab-worker")
#: The controller executable: `throttlelab real` without Python.
CONTROLLER = Path(__file__).with_name("throttlelab-real")
