#!/usr/bin/env bash
# Issue 5, session 20 call 4: the register reduce with its token strides as constexprs (nala_rr.STATIC_STRIDES:
# all next-tile loads early, 125 registers) — kernel rows (benchmarks/prefetch_gpu.py) and fwd/bwd graphs against
# before / plan / plan+pdl (benchmarks/pdl_gpu.py) at 518K; 518K parity and the GPU kernel tests with the defaults.
. benchmarks/device_lib.sh s20d
timeout 200 python3 benchmarks/pdl_gpu.py --sizes 518400 --json $OUT/pdl_static.json >> $LOG 2>&1; say "pdl rc=$?"
timeout 120 python3 benchmarks/prefetch_gpu.py --json $OUT/static_rows.json >> $LOG 2>&1; say "rows rc=$?"
check_518k 100
kernel_tests 330 tests/test_kernels.py
grep -E "passed|failed|FAIL|Error" $LOG | tail -6
sed -n '/^summary:/,/^== /p' $LOG
