#!/bin/sh
# The tl-measure hold of docs/kernel-patches.md (TCG guest, 2 CPUs, the kernel
# scripts/build_kernel.sh prints): the table's new rows, and `diff` on one case
# of each new patch (the cases without it, spin2-10-20 and spin2-50-100, ran
# in a second hold with the same diff command).
#   tl-measure sh docs/kernel-patches/hold.sh K OUT   (from the worktree, the venv active)
set -e
K=$1 OUT=$2 d=docs/kernel-patches
mkdir -p "$OUT"
python scripts/kernel_patches.py --kernel "$K" --keep docs/kernel-patches.json --accel tcg --runs 5 --seeds 20 \
    --duration-s 3 > "$OUT/table.txt" 2>&1
for case in spin2-10-20-atomic spin2-50-100-interleave; do
    throttlelab diff $d/$case.toml --kernel "$K" --accel tcg --runs 2 -o "$OUT/$case" > "$OUT/$case.txt" 2>&1 || true
done
