#!/usr/bin/env bash
# Issue 5, session 23 call 9: the map summing the register reduce's partials itself (nala._fold: 68 claimed column
# slices a head, then every program waits for all; no _combine kernel between the passes), A/B twice against
# NALASR_FOLD_COMBINE=0 at 518K and 1M; 518K parity and the GPU kernel tests with it on.
. benchmarks/device_lib.sh s23i
for round in 1 2; do
  for f in 0 1; do diag_env f${f}_r$round NALASR_FOLD_COMBINE=$f; done
done
check_518k 90
kernel_tests 200 tests/test_kernels.py
grep -E "rc=|passed|failed|all passed" $LOG | tail -8
