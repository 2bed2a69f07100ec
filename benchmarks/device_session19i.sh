#!/usr/bin/env bash
# Runs at commit 4ca8992 (NALASR_MAP_H2 left main after it).
# Issue 5, session 19 call 9: the map's φ̃q in float16 pairs (NALASR_MAP_H2, nala._phi_h2) off / on in fresh processes
# (benchmarks/sensitivity_gpu.py base with the switch: kernel times and the forward at 518K), 518K parity, the GPU
# kernel tests.
. benchmarks/device_lib.sh s19i
for f in 0 1 0 1; do
  NALASR_MAP_H2=$f timeout 60 python3 benchmarks/sensitivity_gpu.py --variants base --json $OUT/h2_$f.json >> $LOG 2>&1
  say "h2=$f rc=$?"; grep -A 1 "^summary" $LOG | tail -1
done
check_518k 60
kernel_tests 200 tests/test_kernels.py
grep -E "rc=|passed|failed|FAIL|all passed" $LOG | tail -8
