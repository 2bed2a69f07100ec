#!/usr/bin/env bash
# Session 9, first call (issue 5), on a machine of two GPUs (nvidia-h200-x2): APPROX math for 16-bit inputs
# (tanh.approx.f32 and degree-6/7 sin/cos series, nalasr_kernels.nala._approx_math) made the default.
#  GPU 0: the attention tests on the GPU (the interpreter cases deselected).
#  GPU 1: parity at 518K; attention times at 518K with APPROX forced off and on (NALASR_APPROX_MATH); Nsight
#         Compute with --print-details all on the forward kernels (where _fwd_reduce's L1 traffic goes).
# Carries .carry/data for the training call that follows.
. benchmarks/device_lib.sh s9
python3 -c 'import torch; print("gpus", torch.cuda.device_count())' | tee -a $LOG
( export CUDA_VISIBLE_DEVICES=0; kernel_tests 260 tests/test_kernels.py ) &
(
  export CUDA_VISIBLE_DEVICES=1 LOG=$OUT/s9_gpu1.log
  check_518k 120
  diag_ab NALASR_APPROX_MATH approx 100
  ncu_attention 100 "_fwd_reduce|_fwd_map" ncu_fwd_details.txt --section SpeedOfLight \
    --section MemoryWorkloadAnalysis_Tables --section InstructionStats --print-details all
) &
wait
cat $OUT/s9_gpu1.log >> $LOG
grep -E "FAIL|ERROR|passed|failed|518400|==|µs ×" $LOG | tail -50
