#!/usr/bin/env bash
# Runs at commit d09b00b (NALASR_DIRECT_ANGLE left main after it).
# Issue 5, session 19 call 10: the forward's cos θ, sin θ straight from α·dir (NALASR_DIRECT_ANGLE, nala._sincos_direct:
# no tanh in _fwd_reduce_rr and _fwd_map) off / on twice in fresh processes (benchmarks/sensitivity_gpu.py base: kernel
# times and the forward at 518K), the GPU kernel tests, 518K parity.
. benchmarks/device_lib.sh s19j
for f in 0 1 0 1; do
  NALASR_DIRECT_ANGLE=$f timeout 60 python3 benchmarks/sensitivity_gpu.py --variants base --json $OUT/direct_$f.json \
    >> $LOG 2>&1
  say "direct=$f rc=$?"; grep -A 1 "^summary" $LOG | tail -1
done
kernel_tests 200 tests/test_kernels.py
check_518k 110
grep -E "rc=|passed|failed|FAIL|all passed" $LOG | tail -8
