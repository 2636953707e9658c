#!/bin/bash
# issue 36, this stop's hold (`tl-measure bash docs/engine-stop15/hold.sh`): main before this stop
# (c819346, /tmp/m15-site) against main after it (/tmp/a15-site, or AFTER=), both `pip install
# --target` sites of `git archive` trees: the busy built-ins and advise / reproduce --all against the
# code the issue was filed on (speed12's hold), then the command's start (rich15's hold).
# The sites, if missing (before the hold): as docs/engine-rich15/hold.sh's head says, with
# `git archive main` for /tmp/a15-site.
set -u
here=$(cd "$(dirname "$0")" && pwd)
after=${AFTER:-/tmp/a15-site}
BEFORE=/tmp/m15-site AFTER=$after OUT=/tmp/stop15-hold bash "$here/../engine-speed12/hold.sh"
AFTER=$after bash "$here/../engine-rich15/hold.sh"
