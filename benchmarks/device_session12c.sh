#!/usr/bin/env bash
# Issue 5, session 12, third call (nvidia-h200-x2): programs per SM. ncu (second call): _fwd_map fits 3 of its
# 8-warp programs an SM (76 registers), so 8 programs per SM ran in 2.57 waves; the map passes now take their own
# chunks (NALASR_MAP_PROGRAMS_PER_SM, default 24), the reduce passes keep NALASR_PROGRAMS_PER_SM (8).
# (The record of session 12's run: since session 13 the variables are per pass, NALASR_PROGRAMS_PER_SM_FWD_MAP etc.)
#  GPU 0: the kernel tests; parity at 518K.
#  GPU 1: attention times at 518K, map programs per SM 8 / 24 / 48 × reduce programs per SM 6 / 7 / 8 / 12.
. benchmarks/device_lib.sh s12c
(
  export CUDA_VISIBLE_DEVICES=0
  kernel_tests 280 tests/test_kernels.py
  check_518k 120
) &
(
  export CUDA_VISIBLE_DEVICES=1 LOG=$OUT/s12c_gpu1.log
  PPSM=6,7,8,12 diag_ab NALASR_MAP_PROGRAMS_PER_SM map 150 24 8 48
) &
wait
cat $OUT/s12c_gpu1.log >> $LOG
grep -E "FAIL|Error|passed|failed|518400|==|µs ×" $LOG | tail -60
