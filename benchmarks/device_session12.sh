#!/usr/bin/env bash
# Issue 5, session 12, on nvidia-h200-x2: the reduce products split into 16-token groups (NALASR_REDUCE_SPLIT,
# nala._reduce_dot: one 3-D tl.dot batch per warp, so no warp loads the others' operands; offline sm_90 compile:
# _fwd_reduce 80 → 32 shared loads and 371 → 309 instructions per warp and tile, _bwd_query 56 → 24 and
# 914 → 879 at its 2-warp pick, 112 → 24 and 1012 → 887 at 64 tokens on 4 warps). VEC4 is now the default.
#  GPU 0: the kernel tests (the new grouped cases, both switches against each other); the offline model on the
#         device's Triton 3.6.
#  GPU 1: parity at 518K; attention times at 518K with SPLIT off/on; ncu of _fwd_reduce and _bwd_query.
. benchmarks/device_lib.sh s12
(
  export CUDA_VISIBLE_DEVICES=0
  kernel_tests 280 tests/test_kernels.py
  for k in "fwd_reduce --split 0" "fwd_reduce" "bwd_query --split 0" "bwd_query" "bwd_query --block-n 64 --warps 4"; do
    python3 benchmarks/compile_sm90.py --kernel $k >> $OUT/compile_sm90.txt 2>&1
  done
) &
(
  export CUDA_VISIBLE_DEVICES=1 LOG=$OUT/s12_gpu1.log
  check_518k 120
  diag_ab NALASR_REDUCE_SPLIT split 150
  ncu_attention 120 "_fwd_reduce|_bwd_query" ncu_split.txt --section SpeedOfLight --section MemoryWorkloadAnalysis_Tables \
    --section Occupancy --section LaunchStats
) &
wait
cat $OUT/s12_gpu1.log >> $LOG
grep -E "sm_90|main loop|conflicts" $OUT/compile_sm90.txt
grep -E "FAIL|ERROR|passed|failed|518400|==|µs ×|config" $LOG | tail -50
