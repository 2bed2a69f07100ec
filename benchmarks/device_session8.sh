#!/usr/bin/env bash
# Session 8, first call (issues 5, 6): the landed tree on the GPU, and the attention backward's tf32x3 fix.
#  - parity at 518K and the kernel test files on the GPU (default precision: tf32x3 in the backward's
#    cancelling products); then the two cancellation cases forced back to tf32, which must fail (the tests
#    can tell the defect from the fix);
#  - attention forward/backward at 518K with the backward in tf32x3 (default) and in tf32 (the old kernel),
#    and a training step with the fused kernels against the reference;
#  - `nalasr bench` at the issue-6 sizes.
. benchmarks/device_lib.sh s8
say "kernel + layernorm parity (518K)"
check_518k 150
say "kernel tests on the GPU"
kernel_tests 200 tests/test_dwconv_kernel.py tests/test_bias_add_kernel.py tests/test_kernels.py
say "cancellation cases with the backward forced to tf32 (expected: fail)"
NALASR_DOT_PRECISION=tf32 timeout 100 python3 -m pytest -q -rf -p no:cacheprovider tests/test_kernels.py \
  -k "cuda and (N1-H1 or v-offset)" > $OUT/forced_tf32.txt 2>&1; say "forced tf32 rc=$? (1 = the tests caught it)"
tail -8 $OUT/forced_tf32.txt >> $LOG
say "attention 518K, backward tf32x3 (default)"
timeout 150 python3 benchmarks/kernel_diag_gpu.py --json $OUT/diag.json --sizes 518400 --ppsm 8 \
  --parts attention,profile,registers,train >> $LOG 2>&1; say "diag rc=$?"
say "attention 518K, everything tf32 (the previous backward)"
NALASR_DOT_PRECISION=tf32 timeout 100 python3 benchmarks/kernel_diag_gpu.py --json $OUT/diag_tf32.json \
  --sizes 518400 --ppsm 8 --parts attention,profile,registers >> $LOG 2>&1; say "diag tf32 rc=$?"
timeout 150 python3 -m nalasr bench --devices cuda --sizes 192x256,270x480,540x960,1080x1920 --scales 4 \
  --precisions fp16 --attention nala --json $OUT/bench.json --markdown $OUT/bench.md >> $LOG 2>&1; say "bench rc=$?"
grep -E "FAIL|ERROR|passed|failed|518400 |==|µs ×|^\| nala|step" $LOG | tail -60
