#!/usr/bin/env bash
# Issue 5, session 18 call 3, run at commit a88c4cf (the switch left main after it, slower): _fwd_map's den from a
# second float16 product (NALASR_MAP_DENDOT; offline sm_90 505 → 493 instructions a warp-tile, 5 → 3 barriers), off
# against on at 518K and 1M; the map's launch configs with it; the reduce's registers and programs per SM again
# (ZDOT took it from 128 to 96 registers: up to 21 one-warp programs fit an SM, the plan still runs 16); then 518K
# parity and the GPU kernel tests with DENDOT on.
. benchmarks/device_lib.sh s18c
for a in 0 1; do
  NALASR_MAP_DENDOT=$a timeout 70 python3 benchmarks/kernel_diag_gpu.py --json $OUT/diag_dendot$a.json \
    --sizes 518400,1036800 --ppsm 8 --parts attention,profile --layout dense >> $LOG 2>&1; say "diag dendot=$a rc=$?"
done
NALASR_MAP_DENDOT=1 sweep m_dd --pass fwd_map --configs 64x2x2,64x4x2,128x4x2,32x1x2,64x2x1,64x2x2x64 --ppsm 24,48,96
sweep r_occ --pass fwd_reduce --configs 32x1x2,32x1x2x80,32x1x2x72,16x1x2,16x1x2x64,32x1x3,32x1x1 --ppsm 16,20,24
NALASR_MAP_DENDOT=1 check_518k 70
NALASR_MAP_DENDOT=1 kernel_tests 200 tests/test_kernels.py
grep -E "rc=|passed|failed|FAIL|Error" $LOG | tail -8
grep -E "new dense|^  _fwd_|^  _combine" $LOG | tail -12
grep -A10 "best first" $LOG
