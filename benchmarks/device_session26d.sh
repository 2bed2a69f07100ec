#!/usr/bin/env bash
# Issue 5, session 26 call 4: the code to land (the pair map for dense q): clamp_noop's numbers
# (benchmarks/clamp_noop_gpu.py), the GPU kernel tests, the attention table with its -dense rows
# (benchmarks/results/attention_float16.*), A/B against 9e6ec85 twice on dense, once on the strided views.
. benchmarks/device_lib.sh s26d
timeout 90 python3 benchmarks/clamp_noop_gpu.py >> $LOG 2>&1; say "clamp rc=$?"
grep -E "^clamp|Error" $LOG
kernel_tests 260 tests/test_kernels.py
grep -E "passed|failed|FAIL|False" $LOG | cut -c1-600 | tail -6
timeout 150 python3 benchmarks/attention.py --out $OUT --heads 4x16 --budget-s 90 >> $LOG 2>&1; say "table rc=$?"
grep -E "518400|train" $LOG | grep -E "graph|train" | head -12
LAYOUT=dense ab_old 2 benchmarks/_old_kernels/nalasr_kernels
LAYOUT=qkvg ab_old 1 benchmarks/_old_kernels/nalasr_kernels
merge_json "ab_r*.json" ab.json
ls $OUT
