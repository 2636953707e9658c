#!/bin/sh
# Hold 4: no kernel runs (the fresh grid of the differing spinner rows did not fit the
# session: the machine was held back to back), only the build, the tests, the repairs
# and the regrade, under the lock so that they do not disturb the other sessions'
# measurements. From the worktree with the venv active:
#   tl-measure sh docs/edge-diff/spin612/hold4.sh
d=docs/edge-diff/spin612
pip install -q -c constraints.txt --no-build-isolation -e '.[test]' > /tmp/spin612-pip4.log 2>&1 || exit 1
# The two directories of hold 2 paired again, "without" now also without the probe's late ticks.
python $d/repair.py $d/spin2-40 $d/spin2-40-80.toml --show > $d/spin2-40/repair.txt 2>&1
python $d/repair.py $d/spin2-30 docs/edge-diff/spin2-30-60.toml --show > $d/spin2-30/repair.txt 2>&1
# The stored grid regraded with the medians of the 15 traced runs' late ticks carried
# (lateness.txt: share 0.073, 2899 us; together 0.745 over the runs of 2-3 threads).
python scripts/fidelity_grid.py --grid edge --kernel 6.12 --regrade docs/fidelity-edge-6.12.json --seeds 20 --tick-late 0.073,2899,0.745 --out /tmp/spin612-after2.md > $d/regrade-after2.log 2>&1
cargo test -p throttlelab-core -p throttlelab-real --release -q > /tmp/spin612-cargo.log 2>&1
echo "cargo rc $?" >> /tmp/spin612-cargo.log
python -m pytest -q -x tests/test_compare.py tests/test_fidelity_grid.py tests/test_errors.py tests/test_diff.py tests/test_golden.py tests/test_like_host.py > /tmp/spin612-pytest.log 2>&1
echo "pytest rc $?" >> /tmp/spin612-pytest.log
