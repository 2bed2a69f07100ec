#!/usr/bin/env bash
# Issue 5, session 30, call 5: the tree as it lands (both backward passes tile-strided by default): every GPU kernel
# test of tests/test_kernels.py, then the whole attention at 518K and 1M dense three more times, each its own process.
. benchmarks/device_lib.sh s30e
kernel_tests 330 tests/test_kernels.py
grep -E "passed|failed|FAIL|Error" $LOG | cut -c1-600 | tail -6
for r in 1 2 3; do LAYOUT=dense diag_env r$r; done
merge_json "diag_*.json" diag.json
ls $OUT
