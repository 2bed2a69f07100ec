#!/usr/bin/env bash
# Issue 5, session 21 call 4: the landed tree (call 3's kernels; the unroll switch gone, the same SASS offline):
# 518K parity, then Nsight Compute's per-instruction stall sampling (SourceCounters) of the four streaming passes
# for the next session, exported as CSV (benchmarks/ncu_source.py reads it).
. benchmarks/device_lib.sh s21d
check_518k 90
ncu_attention 200 "_fwd_reduce_rr|_fwd_map|_bwd_query|_bwd_key" ncu_source.txt --section SourceCounters \
  --section WarpStateStats --import-source no -o $OUT/ncu_all
ncu=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
[ -f $OUT/ncu_all.ncu-rep ] && timeout 60 $ncu -i $OUT/ncu_all.ncu-rep --page source --csv --print-source sass \
  > $OUT/ncu_source.csv 2>> $LOG; say "ncu export rc=$? $(wc -c < $OUT/ncu_source.csv)"
[ -s $OUT/ncu_source.csv ] && rm -f $OUT/ncu_all.ncu-rep
python3 benchmarks/ncu_source.py $OUT/ncu_source.csv --top 12 | tee -a $LOG
grep -E "rc=|all passed" $LOG | tail -4
