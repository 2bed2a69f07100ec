#!/usr/bin/env bash
# Issue 5, session 22 call 6: the review commit's tree (_bwd_key's r^λ from _key_mag, the asm-load constexprs from
# nala_rr.asm_loads_meta): the GPU kernel tests and the 518K forward / backward.
. benchmarks/device_lib.sh s22f
kernel_tests 220 tests/test_kernels.py
diag_env review NALASR_BWD_F16=1
grep -E "rc=|passed|failed" $LOG | tail -4
