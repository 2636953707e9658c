#!/bin/bash
# issue 36 / switch8, one tl-measure hold: main (a159ec5, its installed package copied to
# /tmp/switch8-base/site before any change) against the branch (switch8, /work/venvs/switch8),
# alternately, 3 rounds: the busy built-ins (bench --json --runs 5), `advise request-service
# --max-throttled 5% --json` and `reproduce --all --json`, wall clock; every advise output
# compared with main's first, every reproduce output with tests/golden/reproduce-all.json.
# Run as `tl-measure bash docs/engine-switch8/measure.sh` (the scripts work from /tmp).
exec "$(dirname "$0")/../../scripts/advise_reproduce_ab.sh" switch8 /tmp/switch8-base/site /work/venvs/switch8 3
