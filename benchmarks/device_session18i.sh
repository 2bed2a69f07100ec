#!/usr/bin/env bash
# Issue 5, session 18 call 10: the register reduce as landed (statements in the prototype's order): NALASR_REDUCE_RR
# off / on and the reduce alone (benchmarks/rr_reduce_gpu.py), the autotuned forward / backward at 518K and 1M,
# 518K parity, the GPU kernel tests, then the attention benchmark table (benchmarks/results/attention_float16.*).
. benchmarks/device_lib.sh s18i
timeout 60 python3 benchmarks/rr_reduce_gpu.py --json $OUT/rr.json --ppsm 16 --maxnreg 128 --layouts dense,qkvg \
  >> $LOG 2>&1; say "rr rc=$?"
timeout 45 python3 benchmarks/kernel_diag_gpu.py --json $OUT/diag.json --sizes 518400,1036800 --ppsm 8 \
  --parts attention,profile >> $LOG 2>&1; say "diag rc=$?"
check_518k 60
kernel_tests 190 tests/test_kernels.py
timeout 130 python3 benchmarks/attention.py --out $OUT --heads 4x16 --budget-s 90 >> $LOG 2>&1; say "table rc=$?"
grep -E "rc=|passed|failed|FAIL|all passed" $LOG | tail -8
grep -A 8 "^summary" $LOG; grep -E "new qkvg|^  _fwd_|^  _bwd_|^  _combine|train step" $LOG | tail -12
