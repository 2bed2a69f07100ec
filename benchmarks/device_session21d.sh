#!/usr/bin/env bash
# Issue 5, session 21 call 4: the landed tree (call 3's kernels; the unroll switch gone, the same SASS offline):
# 518K parity, then Nsight Compute's per-instruction stall sampling (SourceCounters) of the four streaming passes
# for the next session, exported as CSV (benchmarks/ncu_source.py reads it).
. benchmarks/device_lib.sh s21d
check_518k 90
ncu_attention 200 "_fwd_reduce_rr|_fwd_map|_bwd_query|_bwd_key" ncu_source.txt --section SourceCounters \
  --section WarpStateStats --import-source no -o $OUT/ncu_all
ncu_export ncu_all ncu_source.csv
python3 benchmarks/ncu_source.py $OUT/ncu_source.csv --top 12 | tee -a $LOG
grep -E "rc=|all passed" $LOG | tail -4
