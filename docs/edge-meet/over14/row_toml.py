"""over14: an edge-grid row's scenario as scripts/fidelity_grid.py writes it (2 s):
  python row_toml.py WORKLOAD THREADS PERIOD_US QUOTA_US BURST_US > ROW.toml"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "scripts"))
from fidelity_grid import scenario_text  # noqa: E402

w, t, p, q, b = sys.argv[1:6]
print(scenario_text(dict(workload=w, threads=int(t), period_us=int(p), quota_us=int(q), burst_us=int(b)), 2.0), end="")
