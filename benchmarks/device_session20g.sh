#!/usr/bin/env bash
# Issue 5, session 20 call 7: the code as landed (PDL, the 32-token reduce plan, static strides, the backward's
# 64-token plans, _bwd_key at 8 programs an SM): benchmarks/pdl_gpu.py (dense, 518K and 1M), the autotuned forward /
# backward on the benchmark's qkvg views (kernel_diag_gpu.py), 518K parity, the attention table, the GPU kernel tests.
. benchmarks/device_lib.sh s20g
timeout 150 python3 benchmarks/pdl_gpu.py --json $OUT/pdl_final.json --rounds 1 >> $LOG 2>&1; say "pdl rc=$?"
timeout 60 python3 benchmarks/kernel_diag_gpu.py --json $OUT/diag.json --sizes 518400,1036800 --ppsm 8 \
  --parts attention,profile >> $LOG 2>&1; say "diag rc=$?"
check_518k 90
timeout 130 python3 benchmarks/attention.py --out $OUT --heads 4x16 --budget-s 90 >> $LOG 2>&1; say "table rc=$?"
kernel_tests 200 tests/test_kernels.py
grep -E "rc=|passed|failed|all passed" $LOG | tail -8
sed -n '/^summary:/,/^== /p' $LOG
grep -E "^ *(518400|1036800) new" $LOG | head -4
