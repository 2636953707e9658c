#!/bin/sh
# Hold 3: no kernel runs, only the simulator, under the lock so that it neither
# disturbs nor is disturbed by the other sessions' measurements (the machine was held
# back to back). From the worktree with the venv active:
#   tl-measure sh docs/edge-diff/spin612/hold3.sh
d=docs/edge-diff/spin612
for r in spin1-25:spin1-25-25 spin3-30:spin3-30-60 spin2-40:spin2-40-80; do
  python $d/repair.py $d/${r%%:*} $d/${r##*:}.toml --show > $d/${r%%:*}/repair.txt 2>&1
done
python $d/repair.py $d/spin2-30 docs/edge-diff/spin2-30-60.toml --show > $d/spin2-30/repair.txt 2>&1
python $d/repair.py docs/edge-diff/spin docs/edge-diff/spin2-30-60.toml --show > $d/spin-old-repair.txt 2>&1
python $d/lateness.py docs/edge-diff/spin $d/spin1-25 $d/spin3-30 $d/spin2-30 $d/spin2-40 > $d/lateness.txt 2>&1
# The grid before (today's engine, no late ticks: must be the stored regrade) and after.
python scripts/fidelity_grid.py --grid edge --kernel 6.12 --regrade docs/fidelity-edge-6.12.json --seeds 20 --out /tmp/spin612-before.md > $d/regrade-before.log 2>&1
python scripts/fidelity_grid.py --grid edge --kernel 6.12 --regrade docs/fidelity-edge-6.12.json --seeds 20 --tick-late 0.06,2900,0.85 --out /tmp/spin612-after.md > $d/regrade-after.log 2>&1
