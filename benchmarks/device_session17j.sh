#!/usr/bin/env bash
# Issue 5, session 17 call 10 (main): the final code (ZDOT on) — autotuned times at 518K and 1M, and the attention
# benchmark table (benchmarks/results/attention_float16.{md,json}).
. benchmarks/device_lib.sh s17j
timeout 80 python3 benchmarks/kernel_diag_gpu.py --json $OUT/diag.json --sizes 518400,1036800 --ppsm 8 \
  --parts attention,profile >> $LOG 2>&1; say "diag rc=$?"
timeout 150 python3 benchmarks/attention.py --out $OUT --heads 4x16 --budget-s 100 >> $LOG 2>&1; say "table rc=$?"
grep -E "rc=|new qkvg|^  _fwd_|^  _bwd_|^  _combine|train step" $LOG | tail -14
