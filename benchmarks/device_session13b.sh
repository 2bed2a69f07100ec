#!/usr/bin/env bash
# Issue 5, session 13, second call (one H200). The tree now: _fwd_reduce in one-warp programs (32 per SM) with z
# from an elementwise accumulator (NALASR_REDUCE_ZACC), the combine narrowing its column blocks when there are
# many chunks, θ's π/4 folded into the sin/cos series, α·dir without dir in _fwd_reduce, and _fwd_map's |dir|^p as
# 2^(p·log2|x| + p·log2 r) (FASTMAG). Timings first (the combine alone, the passes, the attention at 518K), then
# the kernel tests, the 518K parity and the ZACC off/on errors.
. benchmarks/device_lib.sh s13b
sweep c --pass combine --configs 32x256x4,32x1024x4,16x512x4,8x1024x4,8x1024x8,16x1024x8,4x2048x4 --chunks 254,1013,2026
sweep c128 --pass combine --configs 32x256x4,32x16x4,8x16x4 --chunks 16 --bh 128
sweep r --pass fwd_reduce --configs 32x1x2,16x1x2,32x2x2,64x4x2 --ppsm 32 --env NALASR_REDUCE_ZACC=0,1
sweep m --pass fwd_map --configs 128x8x2,64x4x2,64x2x2 --ppsm 24,48
timeout 120 python3 benchmarks/kernel_diag_gpu.py --json $OUT/diag.json --sizes 518400,1048576 --ppsm 8 \
  --parts attention,profile,registers >> $LOG 2>&1; say "diag rc=$?"
kernel_tests 220 tests/test_kernels.py
check_518k 90
PYTHONPATH=$PYTHONPATH:tests timeout 60 python3 benchmarks/switch_errors.py NALASR_REDUCE_ZACC >> $LOG 2>&1; say "switch errors rc=$?"
grep -h -A30 "best first\|^  chunks" $LOG | grep -v "^--" | head -80
grep -E "518400|1048576|µs ×|n_regs|ZACC 0 vs|passed|failed|FAIL|rc=" $LOG | tail -40
