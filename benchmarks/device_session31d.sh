#!/usr/bin/env bash
# Issue 5, session 31, call 4: the tree as it lands (the reduce's FEAT_A products, the register map from 400K tokens
# of 4 heads): the GPU extras and the register map's parity cases; the 518K parity check; the register map forced at
# 49K and 262K against the default (the one-head map there); the attention table if the device time allows.
. benchmarks/device_lib.sh s31d
K="extras_cuda or rr" kernel_tests 200 tests/test_kernels.py
grep -E "passed|failed|FAIL|Error" $LOG | cut -c1-900 | tail -4
check_518k 80
grep -E "N518400|passed|FAIL" $LOG | tail -6
export SHOW="_fwd_map"
for m in d 1; do
  if [ $m = d ]; then SIZES=49152,262144 PROFILE_N=262144 LAYOUT=qkvg diag_env small_$m
  else SIZES=49152,262144 PROFILE_N=262144 LAYOUT=qkvg diag_env small_$m NALASR_MAP_RR=1; fi
done
merge_json "diag_*.json" diag_small.json
left=$((380 - SECONDS))
say "table with ${left} s left"
[ $left -gt 120 ] && { timeout $left python3 benchmarks/attention.py --out $OUT --heads 4x16 --budget-s $((left - 110)) \
  >> $LOG 2>&1; say "table rc=$?"; }
grep -A22 "## Derived" $OUT/attention_float16.md 2>/dev/null | grep -E "518,400|1,048,576"
grep -A6 "## Training" $OUT/attention_float16.md 2>/dev/null | tail -3
ls $OUT
