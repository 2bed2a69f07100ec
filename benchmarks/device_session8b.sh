#!/usr/bin/env bash
# Session 8, second call (issue 5): the centred backward (tf32, no RoPE) and tf32x3 with RoPE.
#  - the attention test file on the GPU; then the cancellation cases with every product forced to tf32: the
#    RoPE case must fail (it relies on tf32x3), the centred ones must pass;
#  - parity at 518K (incl. values with a common offset), attention times at 518K and a training step;
#  - Nsight Compute tables (shared memory wavefronts, bank conflicts, L1 requests) of the forward kernels.
. benchmarks/device_lib.sh s8b
say "attention tests on the GPU"
kernel_tests 200 tests/test_kernels.py
NALASR_DOT_PRECISION=tf32 timeout 100 python3 -m pytest -q -rf -p no:cacheprovider tests/test_kernels.py \
  -k "cuda and (N1-H1 or v-offset)" > $OUT/forced_tf32.txt 2>&1; say "forced tf32 rc=$?"
tail -6 $OUT/forced_tf32.txt >> $LOG
say "parity 518K"
check_518k 150
timeout 150 python3 benchmarks/kernel_diag_gpu.py --json $OUT/diag.json --sizes 518400 --ppsm 8 \
  --parts attention,profile,registers,train >> $LOG 2>&1; say "diag rc=$?"
ncu_attention 120 "_fwd_reduce|_fwd_map" ncu_fwd_tables.txt --section SpeedOfLight \
  --section MemoryWorkloadAnalysis_Tables --section ComputeWorkloadAnalysis --section InstructionStats
grep -E "FAIL|ERROR|passed|failed|518400|==|µs ×|step" $LOG | tail -50
