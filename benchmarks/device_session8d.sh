#!/usr/bin/env bash
# Session 8, fourth call (issue 5): what the forward's instruction count is worth. The kernels are issue-bound
# (ncu: map 2.9 IPC of 4; reduce 2.0 IPC with L1 at 89%): tanh.approx.f32 (NALASR_FAST_TANH=1 then, NALASR_APPROX_MATH=1 since session 9; one MUFU op
# for ~7 instructions an element) against the exact tanh, attention at 518K and parity there.
. benchmarks/device_lib.sh s8d
for f in 0 1; do
  NALASR_APPROX_MATH=$f timeout 100 python3 benchmarks/gpu_kernels_check.py --cases N518400-H4-D16 >> $LOG 2>&1
  say "check fast_tanh=$f rc=$?"
  NALASR_APPROX_MATH=$f timeout 100 python3 benchmarks/kernel_diag_gpu.py --json $OUT/diag_fast$f.json --sizes 518400 \
    --ppsm 8 --parts attention,profile >> $LOG 2>&1; say "diag fast_tanh=$f rc=$?"
done
grep -E "518400|==|µs ×|passed|FAIL" $LOG | tail -40
