#!/usr/bin/env bash
# Issue 5, prepared at the end of session 16 (not run yet): the attention benchmark table at 4 heads × 16 with
# _bwd_key at 32 programs an SM (the table in benchmarks/results/attention_float16.md is session 16 call 3's, at 24),
# and the autotuned forward and backward at 518K and 1M once more.
. benchmarks/device_lib.sh s17
timeout 100 python3 benchmarks/kernel_diag_gpu.py --json $OUT/diag.json --sizes 518400,1036800 --ppsm 8 \
  --parts attention,profile >> $LOG 2>&1; say "diag rc=$?"
timeout 170 python3 benchmarks/attention.py --out $OUT --heads 4x16 --budget-s 120 >> $LOG 2>&1; say "table rc=$?"
grep -E "rc=|new qkvg|^  _fwd_|^  _bwd_|^  _combine" $LOG | tail -12
