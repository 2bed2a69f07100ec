#!/usr/bin/env bash
# (Run at the commit that added _fwd_reduce_t; main dropped it after this call, branch reduce-t keeps it.)
# Issue 5, session 16 call 7: the transposed forward reduce (_fwd_reduce_t, NALASR_REDUCE_T=1, off by default):
# φkᵀ computed in the accumulator layout of I·kᵀ is the float16 A operand of S += φkᵀ·v in registers, v goes to
# shared memory as loaded (offline sm_90 at 32 × 1: 639 against 538 instructions, 16 against 48 store wavefronts,
# 5 ldmatrix against 48 shared loads per tile). Its configs against _fwd_reduce's pick, the 518K parity with it on,
# then the GPU kernel tests with it on (as many as the call's time allows).
. benchmarks/device_lib.sh s16g
sweep r --pass fwd_reduce --configs 32x1x2 --ppsm 16
export NALASR_REDUCE_T=1
sweep rt --pass fwd_reduce_t --configs 16x1x2,32x1x2,32x2x2,64x2x2,64x4x2 --ppsm 16,32
check_518k 60
grep -E "all passed|FAIL|rc=" $LOG; grep -A12 "best first" $LOG
kernel_tests 200 tests/test_kernels.py
grep -E "passed|failed|rc=" $LOG | tail -5
