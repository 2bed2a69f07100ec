#!/usr/bin/env bash
# Issue 5, session 20 call 3: PDL between the passes and the register reduce's 32-token chunk plan
# (benchmarks/pdl_gpu.py: before / plan / plan+pdl, fwd + bwd graphs at 518K and 1M), then 518K parity and the
# kernel tests on the GPU with both on (the defaults).
. benchmarks/device_lib.sh s20c
timeout 300 python3 benchmarks/pdl_gpu.py --json $OUT/pdl.json >> $LOG 2>&1; say "pdl rc=$?"
check_518k 100
kernel_tests 150 tests/test_kernels.py
grep -E "passed|failed|FAIL|Error|error" $LOG | tail -8
sed -n '/^summary:/,$p' $LOG
