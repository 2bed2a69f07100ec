#!/usr/bin/env bash
# Issue 5, session 17 call 9 (main): _fwd_reduce's z from a product of its φk operand with ones (NALASR_REDUCE_ZDOT,
# offline sm_90: 506 → 452 instructions a warp-tile, 128 → 96 registers) against the elementwise sum, the
# autotuned times at 518K with each; then 518K parity and the GPU kernel tests with it on (the default).
. benchmarks/device_lib.sh s17i
diag_ab NALASR_REDUCE_ZDOT zdot 70
check_518k 70
kernel_tests 260 tests/test_kernels.py
grep -E "rc=|passed|failed|FAIL|Error" $LOG | tail -8
grep -E "new qkvg|^  _fwd_|^  _combine" $LOG | tail -10
