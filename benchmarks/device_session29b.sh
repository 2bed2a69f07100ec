#!/usr/bin/env bash
# Issue 5, session 29, call 2: tile-strided chunks (nala._strided: program c takes tiles c, c + n_chunks, …) in the
# register reduce and the pair map, against contiguous chunks: 518K parity with both on; the whole attention at 518K
# and 1M (dense) with each of the four settings, twice, each its own process; the GPU kernel tests of run_extras.
. benchmarks/device_lib.sh s29b
(export NALASR_STRIDED_FWD_REDUCE=1 NALASR_STRIDED_FWD_MAP_PAIR=1; check_518k 100)
grep -E "518400|passed|FAIL" $LOG | tail -6
for r in 1 2; do
  for s in 00 10 01 11; do
    LAYOUT=dense diag_env r${r}s$s NALASR_STRIDED_FWD_REDUCE=${s:0:1} NALASR_STRIDED_FWD_MAP_PAIR=${s:1:1}
  done
done
pass_times $OUT/diag_*.json | tee -a $LOG
merge_json "diag_*.json" diag.json
K="extras_cuda" kernel_tests 150 tests/test_kernels.py
grep -E "passed|failed|FAIL|Error" $LOG | cut -c1-600 | tail -4
ls $OUT
