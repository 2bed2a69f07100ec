#!/usr/bin/env bash
# Issue 5, session 23 call 6: the code as landed (the map at 36 programs an SM on 64-token chunk quanta, the register
# reduce's degree-5 sine): 518K parity, the GPU kernel tests, the forward / backward at 518K and 1M against the
# previous head's kernels (benchmarks/_old_kernels: a copy of commit 2e8cf28's nalasr_kernels, loaded beside this
# tree's by kernel_diag_gpu.py --old) twice, the per-kernel times, the timeline.
. benchmarks/device_lib.sh s23f
check_518k 90
kernel_tests 300 tests/test_kernels.py
ab_old 2 benchmarks/_old_kernels/nalasr_kernels
diag_env final NALASR_BWD_F16=1
timeout 60 python3 benchmarks/timeline_gpu.py --json $OUT/timeline.json >> $LOG 2>&1; say "timeline rc=$?"
grep -E "span|→" $LOG | head -16
grep -E "rc=|passed|failed" $LOG | tail -12
