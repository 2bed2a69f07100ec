#!/usr/bin/env bash
# Issue 5, session 12, second call (nvidia-h200-x2): SPLIT now only in _bwd_query (the forward reduce was slower
# with it, 150.5 against 101.0 µs), and _combine with 32-column blocks loading up to 256 chunks at once.
#  GPU 0: the kernel tests; the switch's errors on the GPU (the test's tolerance); ncu of _fwd_map and _combine.
#  GPU 1: parity at 518K; attention times at 518K with SPLIT off/on.
. benchmarks/device_lib.sh s12b
(
  export CUDA_VISIBLE_DEVICES=0
  kernel_tests 280 tests/test_kernels.py
  PYTHONPATH=$PYTHONPATH:tests timeout 60 python3 benchmarks/switch_errors.py NALASR_REDUCE_SPLIT >> $LOG 2>&1
  ncu_attention 120 "_fwd_map|_combine" ncu_map.txt --section SpeedOfLight --section Occupancy --section LaunchStats \
    --section WarpStateStats --section SchedulerStats
) &
(
  export CUDA_VISIBLE_DEVICES=1 LOG=$OUT/s12b_gpu1.log
  check_518k 120
  diag_ab NALASR_REDUCE_SPLIT split 150
) &
wait
cat $OUT/s12b_gpu1.log >> $LOG
grep -E "FAIL|Error|passed|failed|518400|==|µs ×|config|0 vs 1" $LOG | tail -50
