#!/usr/bin/env bash
# Issue 5, session 21 call 2: which sin/cos polynomials each forward pass takes (NALASR_SERIES7: 1 the degree 6 / 7
# series of before, 2 the degree 5 sine only, 3 the degree 4 cosine only, 0 both shorter), twice in alternating
# order at 518K; _fwd_map under register caps 88-128 (offline: its next-tile loads then wait 179-221 instructions
# after issue instead of 118).
# (NALASR_SERIES7 was a temporary switch of the tree it ran on; the landed _sincos_angle takes each pass's pick,
# see benchmarks/results/h200/session21/README.md.)
. benchmarks/device_lib.sh s21b
for round in 1 2; do
  for v in 1 2 3 0; do
    NALASR_SERIES7=$v timeout 60 python3 benchmarks/kernel_diag_gpu.py --json $OUT/diag_s${v}_r$round.json \
      --sizes 518400 --ppsm 8 --parts attention,profile >> $LOG 2>&1
    say "diag series7=$v round $round rc=$?"
  done
done
sweep mapreg --pass fwd_map --configs 64x2x2,64x2x2x88,64x2x2x96,64x2x2x128 --ppsm 48
grep -E "rc=" $LOG | tail -9
pass_times $OUT/diag_*.json
grep -E "^ *518400 new" $LOG | head -8
grep -E "^fwd_map" $LOG | head -8
merge_json "diag_*.json" diag_all.json
