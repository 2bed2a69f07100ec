#!/usr/bin/env bash
# Issue 5, session 24 call 5: the landed code (the map's α·dir magnitude) against the previous head's kernels twice
# more, on this call's machine; the attention table (benchmarks/results/attention_float16.*, with the training step).
. benchmarks/device_lib.sh s24e
ab_old 2 benchmarks/_old_kernels/nalasr_kernels
timeout 200 python3 benchmarks/attention.py --out $OUT --heads 4x16 --budget-s 100 >> $LOG 2>&1; say "table rc=$?"
grep -E "rc=|passed|failed" $LOG | tail -8
grep -E "518400|train" $LOG | grep -E "triton-fwd-graph|triton-fwd\+bwd-graph|train" | head -6
