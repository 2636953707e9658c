#!/usr/bin/env python3
"""Issue #35's live acceptance (python/throttlelab/acceptance/prometheus_live.py;
docs/prometheus.md, "Live acceptance"): five Debian programs under limits while the
lab's Prometheus scrapes cAdvisor, advise --prometheus and KRR's rule from that,
both applied on the kernel. Each step is one `tl-measure` hold:

    python scripts/prometheus_acceptance.py scrape -o DIR [--minutes 10] [--max-throttled 0.05] [--install]
    python scripts/prometheus_acceptance.py apply -o DIR --round K [--run-s 180]
    python scripts/prometheus_acceptance.py table -o DIR

Run it from a directory outside /work/wt and /work/venvs (`cd /tmp`): tl-measure
stops what runs from there unless its environment says TL_MEASURE=1, and nginx's and
PostgreSQL's processes write their titles over their environment.
"""

import sys
from pathlib import Path

from throttlelab.acceptance.prometheus_live import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:], Path(__file__).resolve().parent / "prometheus_lab.sh"))
