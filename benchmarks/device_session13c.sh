#!/usr/bin/env bash
# Issue 5, session 13, third call (one H200). Since the second: ZACC's φk truncated to tf32 (as the tensor cores
# take it) instead of rounded to nearest, and only for tf32 products; a 96-register one-warp config for the
# autotuner. The ZACC off/on errors, the kernel tests, the 518K parity, then the attention benchmark (4K → 1M,
# every provider, the training step) → $OUT/attention_float16.{json,md}.
. benchmarks/device_lib.sh s13c
PYTHONPATH=$PYTHONPATH:tests timeout 60 python3 benchmarks/switch_errors.py NALASR_REDUCE_ZACC >> $LOG 2>&1; say "switch errors rc=$?"
timeout 60 python3 benchmarks/config_sweep_gpu.py --json $OUT/sweep_r.json --pass fwd_reduce --ppsm 32 \
  --configs 32x1x2,32x1x2x96,16x1x2 >> $LOG 2>&1; say "sweep rc=$?"
kernel_tests 200 tests/test_kernels.py
check_518k 60
timeout 270 python3 benchmarks/attention.py --out $OUT --budget-s 195 >> $LOG 2>&1; say "attention bench rc=$?"
grep -E "ZACC 0 vs|best first|  [0-9]+x1x2|FAIL|passed|failed|rc=|all passed|train step" $LOG | tail -30
cat $OUT/attention_float16.md | head -14
