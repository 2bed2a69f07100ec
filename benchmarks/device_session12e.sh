#!/usr/bin/env bash
# Issue 5, session 12, fifth call (one H200: the two-GPU machine was not lent): NALASR_REDUCE_STACK
# (nala._halves_stacked: _fwd_reduce's two 16-row products as one 64-row product of stacked token halves, a wgmma;
# offline sm_90: 80 → 32 shared loads, 4 → 2 barriers, 371 → 342 instructions per warp and tile, 72 → 96
# registers). In order of need, within the device time left: attention times off/on at 518K; parity at 518K;
# the kernel tests with it on (the default).
# Result: 144.5 against 101.1 µs (and the fp32 N = 1 case's dk error at 0.012 > 0.007), so the variant was not kept
# and this tree has no STACK switch (the comment in _fwd_reduce describes it); the outputs are in
# benchmarks/results/h200/session12/stack/.
. benchmarks/device_lib.sh s12e
diag_ab NALASR_REDUCE_STACK stack 60
check_518k 60
kernel_tests 150 tests/test_kernels.py
grep -E "FAIL|Error|passed|failed|518400|==|µs ×|config" $LOG | tail -40
