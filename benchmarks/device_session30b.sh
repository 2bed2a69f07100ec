#!/usr/bin/env bash
# Issue 5, session 30, call 2: with both backward passes tile-strided by default now, their programs per SM again:
# _bwd_query (224 registers, one warp: 9 fit an SM) at 8 / 9 / 16, _bwd_key (4 four-warp programs an SM) at 4 / 8 /
# 12 / 16, the whole attention at 518K and 1M dense, twice, each its own process; the GPU kernel tests of run_extras.
. benchmarks/device_lib.sh s30b
for r in 1 2; do
  for kp in 8 4 12 16; do
    PPSM=8,9,16 DIAG_T=90 SHOW=_bwd_ LAYOUT=dense diag_env r${r}k$kp NALASR_PROGRAMS_PER_SM_BWD_KEY=$kp
  done
done
merge_json "diag_*.json" diag_ppsm.json
K="extras_cuda" kernel_tests 150 tests/test_kernels.py
grep -E "passed|failed|FAIL|Error" $LOG | cut -c1-600 | tail -4
ls $OUT
