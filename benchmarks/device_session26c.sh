#!/usr/bin/env bash
# Issue 5, session 26 call 3: the register reduce's angle from half2's polynomials (nala_rr.reduce_half2,
# NALASR_REDUCE_HALF2) off / on, twice, on the model's layout (dense) and once on the strided views; the clamp_noop
# check's numbers (benchmarks/clamp_noop_gpu.py: the GPU kernel tests' one failure in call 2); 518K parity.
. benchmarks/device_lib.sh s26c
timeout 120 python3 benchmarks/clamp_noop_gpu.py 2>&1 | tee -a $LOG | grep clamp
for r in 1 2; do
  for h in 0 1; do LAYOUT=dense diag_env dense_rh${h}_r$r NALASR_REDUCE_HALF2=$h; done
done
for h in 0 1; do LAYOUT=qkvg diag_env qkvg_rh$h NALASR_REDUCE_HALF2=$h; done
pass_times $OUT/diag_*.json | tee -a $LOG
merge_json "diag_*.json" diags.json
check_518k 100
grep -E "^(bfloat16|float16|float32)-N(518400|1048576)" $LOG | tail -8
