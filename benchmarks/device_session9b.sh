#!/usr/bin/env bash
# Session 9, fourth call (issue 5; runs on ec22391: the VT path was removed after this measurement): _fwd_reduce with S accumulated transposed (VT, NALASR_REDUCE_VT), which
# takes the in-register transpose of φ out of its tl.dot (session9/ncu_fwd_details.txt: 4.1 M of the 8.3 M
# shared-memory store wavefronts of _fwd_reduce were bank conflicts).
#  GPU 0: the attention tests on the GPU (VT on, the default).  GPU 1: parity at 518K; times at 518K with VT
#  off and on; Nsight Compute's shared-memory table of _fwd_reduce with VT on.
. benchmarks/device_lib.sh s9b
( export CUDA_VISIBLE_DEVICES=0; kernel_tests 240 tests/test_kernels.py ) &
(
  export CUDA_VISIBLE_DEVICES=1 LOG=$OUT/s9b_gpu1.log
  check_518k 100
  diag_ab NALASR_REDUCE_VT vt 80
  ncu_attention 60 "_fwd_reduce" ncu_reduce_vt.txt --section SpeedOfLight --section MemoryWorkloadAnalysis_Tables \
    --print-details all
) &
wait
cat $OUT/s9b_gpu1.log >> $LOG
grep -E "FAIL|ERROR|passed|failed|518400|==|µs ×" $LOG | tail -40
