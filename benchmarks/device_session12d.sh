#!/usr/bin/env bash
# Issue 5, session 12, last call (nvidia-h200-x2): the final tree. GPU 0: the attention benchmark (4K → 1M, all
# providers, the training step triton vs reference) → $OUT/attention_float16.{json,md}. GPU 1: the kernel tests.
. benchmarks/device_lib.sh s12d
(
  export CUDA_VISIBLE_DEVICES=1 LOG=$OUT/s12d_gpu1.log
  kernel_tests 280 tests/test_kernels.py
) &
CUDA_VISIBLE_DEVICES=0 timeout 400 python3 benchmarks/attention.py --out $OUT >> $LOG 2>&1; say "attention bench rc=$?"
wait
cat $OUT/s12d_gpu1.log >> $LOG
grep -E "FAIL|Error|passed|failed|rc=" $LOG | tail -20
cat $OUT/attention_float16.md
