#!/usr/bin/env bash
# Issue 5, session 16 call 3: _bwd_query with NALASR_BWD_DZACC and NALASR_BWD_MPOW on by default (call 2: 206.2 →
# 169.9 µs at 518K) — all GPU kernel tests, 518K parity, the autotuned forward and backward at 518K and 1M, its
# launch configs again at the new register count, then the attention benchmark table at 4 heads × 16.
. benchmarks/device_lib.sh s16c
kernel_tests 300 tests/test_kernels.py
check_518k 120
timeout 120 python3 benchmarks/kernel_diag_gpu.py --json $OUT/diag.json --sizes 518400,1036800 --ppsm 8 \
  --parts attention,profile,registers >> $LOG 2>&1; say "diag rc=$?"
sweep q --pass bwd_query --configs 16x1x2,32x2x2,16x1x3 --ppsm 8
timeout 170 python3 benchmarks/attention.py --out $OUT --heads 4x16 --budget-s 120 >> $LOG 2>&1; say "table rc=$?"
grep -E "FAIL|passed|failed|rc=|all passed|new qkvg|^  _fwd_|^  _bwd_|^  _combine|^bwd_query" $LOG | tail -30
