#!/usr/bin/env bash
# Issue 5, session 23 call 7: the landed code against the previous head's kernels (a copy of commit 2e8cf28's
# nalasr_kernels in benchmarks/_old_kernels, not committed) twice more on this call's machine; the stamp and plan
# tests; the attention table (benchmarks/results/attention_float16.*, with the training step).
. benchmarks/device_lib.sh s23g
timeout 60 python3 -m pytest -q -rf -p no:cacheprovider tests/test_kernels.py -k "stamps or plans" >> $LOG 2>&1; say "stamp tests rc=$?"
ab_old 2 benchmarks/_old_kernels/nalasr_kernels
timeout 200 python3 benchmarks/attention.py --out $OUT --heads 4x16 --budget-s 100 >> $LOG 2>&1; say "table rc=$?"
grep -E "rc=|passed|failed" $LOG | tail -8
grep -E "518400|train" $LOG | grep -E "triton-fwd-graph|triton-fwd\+bwd-graph|train" | head -6
