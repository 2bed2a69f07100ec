#!/usr/bin/env bash
# Issue 5, session 13, last call (one H200): the final tree. The float32 parity errors with the backward's centring
# on and off (benchmarks/centre_errors.py; the tree now centres float32 too), the kernel tests, the 518K parity,
# the attention at 518K / 1M from CUDA graphs (kernel_diag_gpu), then the attention benchmark with the new
# triton-fwd-graph row → $OUT/attention_float16.{json,md}. (After this call the float32 centring was dropped again,
# see nala._centred, and float32 inputs went back to the previous feature-map formulas, see nala._sincos_angle.)
. benchmarks/device_lib.sh s13d
PYTHONPATH=$PYTHONPATH:tests timeout 90 python3 benchmarks/centre_errors.py >> $LOG 2>&1; say "centre errors rc=$?"
kernel_tests 200 tests/test_kernels.py
check_518k 60
timeout 60 python3 benchmarks/kernel_diag_gpu.py --json $OUT/diag.json --sizes 518400,1048576 --ppsm 8 \
  --parts attention,profile,registers >> $LOG 2>&1; say "diag rc=$?"
timeout 260 python3 benchmarks/attention.py --out $OUT --budget-s 185 >> $LOG 2>&1; say "attention bench rc=$?"
grep -E "centred|FAIL|passed|failed|rc=|all passed|train step|new qkvg|µs ×" $LOG | tail -40
head -14 $OUT/attention_float16.md
