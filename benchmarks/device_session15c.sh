#!/usr/bin/env bash
# Issue 5, session 15 call 3: the forward passes with TMA tiles (nala._tma, on by default for 16-bit token-major
# inputs; call 2's floors: loads + feature map of the reduce 66.5 → 46.7 µs, of the map 53.0 → 47.4). Configs of
# both TMA passes at 518K, the forward with and without TMA on both input layouts, 518K parity, the kernel tests.
# Ran at branch layout-exp 0cc3e2d (the TMA passes are not on main: TMA reduce 77.3 µs at best against 70.4,
# TMA map 61.0 against 63.9). Results: benchmarks/results/h200/session15/call3/.
. benchmarks/device_lib.sh s15c
sweep rt --pass fwd_reduce_tma --configs 32x1x3,64x1x3,64x2x3,64x4x3,128x4x3,64x4x4,32x1x4,32x2x3 --ppsm 24,32
sweep mt --pass fwd_map_tma --configs 64x4x3,128x4x3,128x8x3,64x4x4,256x8x3,64x2x3,32x1x3 --ppsm 24,48
for lay in qkvg dense; do
  for t in 1 0; do
    NALASR_TMA=$t timeout 90 python3 benchmarks/kernel_diag_gpu.py --json $OUT/diag_${lay}_tma$t.json --sizes 518400 \
      --ppsm 8 --layout $lay --parts attention,profile >> $LOG 2>&1
    say "diag $lay TMA=$t rc=$?"
  done
done
check_518k 60
kernel_tests 240 tests/test_kernels.py
grep -h -A8 "best first" $LOG | grep -v "^--"
grep -E "new (qkvg|dense)|^  _fwd_|^  _combine|rc=|passed|failed|FAIL" $LOG | tail -40
