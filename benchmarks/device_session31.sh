#!/usr/bin/env bash
# Issue 5, session 31, call 1: the tree since nala.py's split (never run on the GPU) with the register reduce's
# products taking φk as A (nala_rr.FEAT_A: 24 mma a tile instead of 32, 116 registers instead of 127): every GPU
# kernel test, the 518K parity check; the reduce with and without FEAT_A at its cap 128 and 16 programs an SM, and
# with FEAT_A at cap 96 and 20 an SM (96 registers, no spills offline), A/B/A in one process (rr_cap_gpu.py); the
# whole attention with NALASR_RR_FEAT_A 0 / 1, twice each, each its own process.
. benchmarks/device_lib.sh s31
kernel_tests 330 tests/test_kernels.py
grep -E "passed|failed|FAIL|Error" $LOG | cut -c1-600 | tail -6
check_518k 90
timeout 150 python3 benchmarks/rr_cap_gpu.py --variants 128x16o,128x16,96x20,128x16o,128x16,96x20 \
  --json $OUT/rr_cap.json >> $LOG 2>&1; say "rr_cap rc=$?"
grep -E "^ *[0-9]+ [0-9x o]+chunks" $LOG | tail -12
for r in 1 2; do for f in 0 1; do LAYOUT=dense diag_env r${r}f$f NALASR_RR_FEAT_A=$f; done; done
pass_times $OUT/diag_*.json | tee -a $LOG
merge_json "diag_*.json" diag_feat_a.json
ls $OUT
