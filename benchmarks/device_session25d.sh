#!/usr/bin/env bash
# Issue 5, session 25 call 4: the landed code (HALF2 and its 28 programs an SM) — the map capped at 64 / 56
# registers (16 / 18 programs an SM) first; 518K parity, the forward / backward at 518K and 1M against the previous
# head's kernels (benchmarks/_old_kernels = a3c20a9) three times, the GPU kernel tests, the attention table
# (benchmarks/results/attention_float16.*, with the training step).
. benchmarks/device_lib.sh s25d
sweep mapreg --pass fwd_map --configs 64x2x2,64x2x2x64,64x2x2x56 --ppsm 28,32,36
check_518k 80
ab_old 3 benchmarks/_old_kernels/nalasr_kernels
kernel_tests 300 tests/test_kernels.py
timeout 200 python3 benchmarks/attention.py --out $OUT --heads 4x16 --budget-s 100 >> $LOG 2>&1; say "table rc=$?"
grep -E "ppsm .* µs  \(graph|rc=|passed|failed" $LOG | tail -24
grep -E "518400|train" $LOG | grep -E "triton-fwd-graph|triton-fwd\+bwd-graph|train" | head -6
