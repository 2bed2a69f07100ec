#!/usr/bin/env bash
# Issue 5, prepared at the end of session 14 on branch heads-map (not run): the all-heads forward map
# (nala._fwd_map_heads, NALASR_MAP_HEADS=1 batched product per head, 2 block-diagonal product) and reduce
# (nala._fwd_reduce_heads, NALASR_REDUCE_HEADS=1; its reduce was 71.7 µs on a 49.6 µs stream floor). Session 14's
# stream_floor_gpu.py measured q's bytes in 36.6 µs with all-heads rows against 49.9 with per-head tiles; the map
# itself took 63.5 µs. Configs of the new kernel at 518K for both product forms, then the kernel tests (their GPU
# switch checks compare NALASR_MAP_HEADS 1 and 2 with 0) and the 518K parity with it on, and the floors again.
# Ran at branch heads-map 3f4d796 (the all-heads kernels are not on main). Results: benchmarks/results/h200/session15/call1/.
. benchmarks/device_lib.sh s15
sweep mh --pass fwd_map_heads --configs 32x4x2,16x4x2,64x8x2,32x8x2,64x4x2 --ppsm 8,24 --env NALASR_MAP_HEADS=1,2
sweep rh --pass fwd_reduce_heads --configs 32x4x2,16x4x2,64x8x2,32x8x2 --ppsm 4,8,16 --env NALASR_REDUCE_HEADS=1
kernel_tests 220 tests/test_kernels.py
NALASR_MAP_HEADS=1 NALASR_REDUCE_HEADS=1 check_518k 45
NALASR_MAP_HEADS=2 check_518k 45
timeout 60 python3 benchmarks/stream_floor_gpu.py --json $OUT/stream_floor.json >> $LOG 2>&1; say "floor rc=$?"
grep -h -A12 "best first" $LOG | grep -v "^--" | head -24
grep -E "FAIL|passed|failed|rc=|all passed" $LOG | tail -12
grep -A9 "forward passes without" $LOG
