#!/usr/bin/env bash
# Issue 5, session 21 call 6: _bwd_query's den and dden summed as one row of 2·BD products (NALASR_BWDQ_JOIN=1, as
# _fwd_map's den; offline 658 → 645 instructions a warp-tile) against the sums of before (=0), twice in turn at 518K
# and 1M; then with it on, 518K parity and the GPU kernel tests.
# (NALASR_BWDQ_JOIN was a temporary switch for this A/B; it did not land.)
. benchmarks/device_lib.sh s21f
for round in 1 2; do
  for j in 0 1; do
    NALASR_BWDQ_JOIN=$j timeout 60 python3 benchmarks/kernel_diag_gpu.py --json $OUT/diag_j${j}_r$round.json \
      --sizes 518400,1036800 --ppsm 8 --parts attention,profile >> $LOG 2>&1
    say "diag join=$j round $round rc=$?"
  done
done
pass_times $OUT/diag_*.json | tee -a $LOG
grep -E "^ *(518400|1036800) new" $LOG | head -8
merge_json "diag_*.json" diag_join.json
check_518k 90
kernel_tests 200 tests/test_kernels.py
grep -E "rc=|passed|failed|all passed" $LOG | tail -6
