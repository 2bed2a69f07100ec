#!/usr/bin/env bash
# Issue 5, session 25 call 1: φq in float16 pairs in the forward map (HALF2, nalasr_kernels.half2: the angle as
# polynomials in xa without tanh, den from two float16 products, 1/den by rcp.approx; offline sm_90 439 → 344 loop
# instructions, 54 → 40 MUFU operations a warp-tile). 518K parity; the forward / backward at 518K and 1M against the
# previous head's kernels (benchmarks/_old_kernels = a3c20a9) three times; the passes' kernel times with
# NALASR_MAP_HALF2 off and on; the GPU kernel tests.
. benchmarks/device_lib.sh s25
check_518k 80
ab_old 3 benchmarks/_old_kernels/nalasr_kernels
diag_env h2off NALASR_MAP_HALF2=0
diag_env h2on NALASR_MAP_HALF2=1
pass_times $OUT/diag_h2off.json $OUT/diag_h2on.json | tee -a $LOG
kernel_tests 300 tests/test_kernels.py
grep -E "rc=|passed|failed" $LOG | tail -8
