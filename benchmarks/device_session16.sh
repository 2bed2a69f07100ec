#!/usr/bin/env bash
# Issue 5, prepared at the end of session 15 (not run yet): what session 15 landed but could not re-time for lack of
# device time — the autotuned forward with the map's defaults (float16 product, 48 programs an SM, the 64-token
# 2-warp config; swept at 59.0 µs, benchmarks/results/h200/session15/call6/sweep_m16.json), all GPU kernel tests on
# the landed S scaling (35 of 44 ran in call 6), 518K parity, the stream floors at more configs, then the attention
# benchmark table at 4 heads × 16.
. benchmarks/device_lib.sh s16
kernel_tests 300 tests/test_kernels.py
check_518k 120
timeout 120 python3 benchmarks/kernel_diag_gpu.py --json $OUT/diag.json --sizes 518400,1036800 --ppsm 8 \
  --parts attention,profile,registers >> $LOG 2>&1; say "diag rc=$?"
# Is the reduce's feature map slow at its one-warp config or in general? Session 15 call 2: loads only 46.7 µs, with
# the feature map 66.5 (32 tokens × 1 warp, tl.load); with the feature map but TMA at 64 × 4 warps, 46.7 again.
# The same configs through tl.load tell whether the warps or the TMA made the difference.
timeout 90 python3 benchmarks/stream_floor_gpu.py --json $OUT/floor.json --tma 64x4x3 \
  --reduce-configs 32x1x2@32,64x4x2@24,128x4x2@24,64x2x2@24,32x2x2@32 --map-configs 64x4x2@48,64x2x2@48 \
  >> $LOG 2>&1; say "floor rc=$?"
timeout 170 python3 benchmarks/attention.py --out $OUT --heads 4x16 --budget-s 120 >> $LOG 2>&1; say "table rc=$?"
grep -A30 "forward passes without" $LOG
grep -E "FAIL|passed|failed|rc=|all passed|new qkvg|^  _fwd_|^  _bwd_|^  _combine" $LOG | tail -30
