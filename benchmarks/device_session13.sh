#!/usr/bin/env bash
# Issue 5, session 13, first call (one H200): launch configs per pass at 518K (benchmarks/config_sweep_gpu.py).
# The reduce passes' tl.dot operand (16 rows of φ) is read from shared memory by every warp of a program: fewer
# warps per program (and more programs per SM) read it fewer times. _fwd_reduce also by how z is formed
# (NALASR_REDUCE_Z: 0 ones column, 2 elementwise accumulator). Then the kernel tests with z from the accumulator.
# (The record of that call: the variable became NALASR_REDUCE_ZACC=0|1 afterwards, 1 for the accumulator.)
. benchmarks/device_lib.sh s13
Z=--env=NALASR_REDUCE_Z=0,2
sweep r4 --pass fwd_reduce --configs 128x4x2,64x4x2 --ppsm 8 $Z
sweep r2 --pass fwd_reduce --configs 64x2x2,32x2x2 --ppsm 16 $Z
sweep r1 --pass fwd_reduce --configs 32x1x2,32x1x3,64x1x2 --ppsm 24,32,48 $Z
sweep m --pass fwd_map --configs 128x8x2,64x4x2,64x2x2,32x1x2 --ppsm 24,48,96
sweep q --pass bwd_query --configs 64x4x2,32x2x2,16x1x2,32x1x2 --ppsm 8,16,32
sweep k --pass bwd_key --configs 64x4x2x168,64x4x2,32x2x2,32x1x2 --ppsm 24,48,96
NALASR_REDUCE_Z=2 kernel_tests 200 tests/test_kernels.py
grep -h -A40 "best first" $LOG | grep -v "^--" | head -150
grep -E "passed|failed|FAIL|rc=" $LOG
