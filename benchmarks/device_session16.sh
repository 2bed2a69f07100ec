#!/usr/bin/env bash
# Issue 5, prepared at the end of session 15 (not run yet): what session 15 landed but could not re-time for lack of
# device time — the autotuned forward with the map's defaults (float16 product, 48 programs an SM, the 64-token
# 2-warp config; swept at 59.0 µs, benchmarks/results/h200/session15/call6/sweep_m16.json), all GPU kernel tests on
# the landed S scaling (35 of 44 ran in call 6), 518K parity, the autotuned forward (call 1 of 2; call 2 is
# device_session16b.sh: the stream floors and the attention table).
. benchmarks/device_lib.sh s16
kernel_tests 300 tests/test_kernels.py
check_518k 120
timeout 120 python3 benchmarks/kernel_diag_gpu.py --json $OUT/diag.json --sizes 518400,1036800 --ppsm 8 \
  --parts attention,profile,registers >> $LOG 2>&1; say "diag rc=$?"
grep -E "FAIL|passed|failed|rc=|all passed|new qkvg|^  _fwd_|^  _bwd_|^  _combine" $LOG | tail -30
