#!/usr/bin/env bash
# Next kernel call (issue 5), on nvidia-h200-x2: measure NALASR_REDUCE_VEC4 (nala._reduce_vec4: _fwd_reduce's
# k/v tiles in runs of 4 columns so its tl.dot operand stores stop conflicting; offline sm_90 compile with
# Triton 3.9: 64 → 32 store wavefronts per warp and tile, 331 → 371 loop instructions; its autotuner also tries
# 2 warps, which the model puts at 128 store wavefronts + 192 LDS per 64 tokens against 256 + 320 now).
#  GPU 0: the attention tests with the switch on; the offline model on the device's own Triton (same layouts?);
#         the training loader against a fixed batch at graphed speed (carry .carry/data).
#  GPU 1: parity at 518K with it on; attention times at 518K off/on; ncu of _fwd_reduce with it on.
. benchmarks/device_lib.sh s11
(
  export CUDA_VISIBLE_DEVICES=0 NALASR_REDUCE_VEC4=1
  kernel_tests 260 tests/test_kernels.py
  for v in "" --vec4; do python3 benchmarks/compile_sm90.py $v >> $OUT/compile_sm90.txt 2>&1; done
  # issue 4's loader check at the graphed training speed (session 2 measured it eager); carry .carry/data
  unset NALASR_REDUCE_VEC4
  [ -d .carry/data/train ] && timeout 150 python3 benchmarks/train_loader.py --data .carry/data/train --steps 300 \
    --out $OUT/train_loader.json >> $LOG 2>&1; say "train_loader rc=$?"
) &
(
  export CUDA_VISIBLE_DEVICES=1 LOG=$OUT/s11_gpu1.log
  NALASR_REDUCE_VEC4=1 check_518k 120
  # at 16 programs per SM too: with VEC4 the reduce also tries 2 warps, half the warps resident at 8
  PPSM=8,16 diag_ab NALASR_REDUCE_VEC4 vec4 150
  export NALASR_REDUCE_VEC4=1
  ncu_attention 100 "_fwd_reduce" ncu_reduce_vec4.txt --section SpeedOfLight --section MemoryWorkloadAnalysis_Tables \
    --section InstructionStats --print-details all
) &
wait
cat $OUT/s11_gpu1.log >> $LOG
cat $OUT/compile_sm90.txt
grep -E "FAIL|ERROR|passed|failed|518400|==|µs ×" $LOG | tail -40
