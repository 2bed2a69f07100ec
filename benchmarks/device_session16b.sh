#!/usr/bin/env bash
# Issue 5, session 16 call 2 (after device_session16.sh): the stream floors at more configs and the attention
# benchmark table at 4 heads × 16.
. benchmarks/device_lib.sh s16b
# Is the reduce's feature map slow at its one-warp config or in general? Session 15 call 2: loads only 46.7 µs, with
# the feature map 66.5 (32 tokens × 1 warp, tl.load); with the feature map but TMA at 64 × 4 warps, 46.7 again.
# The same configs through tl.load tell whether the warps or the TMA made the difference.
timeout 90 python3 benchmarks/stream_floor_gpu.py --json $OUT/floor.json --tma 64x4x3 \
  --reduce-configs 32x1x2@32,64x4x2@24,128x4x2@24,64x2x2@24,32x2x2@32 --map-configs 64x4x2@48,64x2x2@48 \
  >> $LOG 2>&1; say "floor rc=$?"
timeout 170 python3 benchmarks/attention.py --out $OUT --heads 4x16 --budget-s 120 >> $LOG 2>&1; say "table rc=$?"
grep -A30 "forward passes without" $LOG
grep -E "FAIL|passed|failed|rc=|all passed|new qkvg|^  _fwd_|^  _bwd_|^  _combine" $LOG | tail -30
