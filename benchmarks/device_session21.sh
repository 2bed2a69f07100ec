#!/usr/bin/env bash
# Issue 5, session 21 call 1: the sin/cos of the 16-bit paths as degree 4 / 5 minimax polynomials (NALASR_SERIES7=1:
# the degree 6 / 7 series of before) and _fwd_map's den from the products it multiplies anyway (NALASR_MAP_DENMC=0:
# as before), A/B twice in alternating order at 518K and 1M; 518K parity; _fwd_map on one warp (config sweep);
# Nsight Compute's per-instruction stall sampling of the register reduce and the map (SourceCounters).
# (NALASR_SERIES7 and NALASR_MAP_DENMC were temporary switches of the tree it ran on; they left before landing,
# see benchmarks/results/h200/session21/README.md.)
. benchmarks/device_lib.sh s21
check_518k 90
for round in 1 2; do
  for v in "1 0" "1 1" "0 1"; do
    set -- $v
    NALASR_SERIES7=$1 NALASR_MAP_DENMC=$2 timeout 60 python3 benchmarks/kernel_diag_gpu.py \
      --json $OUT/diag_s$1_d$2_r$round.json --sizes 518400,1036800 --ppsm 8 --parts attention,profile >> $LOG 2>&1
    say "diag series7=$1 denmc=$2 round $round rc=$?"
  done
done
sweep map1w --pass fwd_map --configs 64x2x2,32x1x2,16x1x2 --ppsm 24,48,96
ncu_attention 150 "_fwd_reduce_rr|_fwd_map" ncu_source.txt --section SourceCounters --section WarpStateStats \
  --import-source no -o $OUT/ncu_fwd
ncu_export ncu_fwd ncu_source.csv
grep -E "rc=" $LOG | tail -12
pass_times $OUT/diag_*.json
grep -E "^ *(518400|1036800) new" $LOG | head -12
merge_json "diag_*.json" diag_all.json
ls $OUT
