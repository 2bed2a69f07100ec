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
  for vt in 0 1; do
    NALASR_REDUCE_VT=$vt timeout 80 python3 benchmarks/kernel_diag_gpu.py --json $OUT/diag_vt$vt.json \
      --sizes 518400 --ppsm 8 --parts attention,profile,registers >> $LOG 2>&1; say "diag vt=$vt rc=$?"
  done
  NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
  timeout 60 $NCU --profile-from-start off -k regex:"_fwd_reduce" --section SpeedOfLight \
    --section MemoryWorkloadAnalysis_Tables --print-details all \
    python3 benchmarks/ncu_attention.py > $OUT/ncu_reduce_vt.txt 2>&1; say "ncu rc=$?"
) &
wait
cat $OUT/s9b_gpu1.log >> $LOG
grep -E "FAIL|ERROR|passed|failed|518400|==|µs ×" $LOG | tail -40
