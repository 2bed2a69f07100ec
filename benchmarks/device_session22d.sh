#!/usr/bin/env bash
# Issue 5, session 22 call 4: the code as landed (the register reduce's whole-tile loads as inline PTX; _bwd_query's
# |dir|^(p-1) without selects; the backward's gradient products in float16, NALASR_BWD_F16): 518K parity, the GPU
# kernel tests, the forward / backward at 518K and 1M twice with NALASR_BWD_F16 at 1 and 0 in turn, the attention
# table (benchmarks/results/attention_float16.*, with the training step).
. benchmarks/device_lib.sh s22d
check_518k 90
kernel_tests 220 tests/test_kernels.py
for round in 1 2; do
  for f in 1 0; do
    diag_env f${f}_r$round NALASR_BWD_F16=$f
  done
done
pass_times $OUT/diag_f*.json | tee -a $LOG
merge_json "diag_f*.json" diag.json
timeout 150 python3 benchmarks/attention.py --out $OUT --heads 4x16 --budget-s 100 >> $LOG 2>&1; say "table rc=$?"
grep -E "rc=|passed|failed|all passed" $LOG | tail -12
grep -iE "train" $LOG | head -6
