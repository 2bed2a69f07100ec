#!/usr/bin/env bash
# Issue 5, session 21 call 3: the code as landed (cosine of degree 4 in every 16-bit pass, the degree 5 sine in
# _fwd_map and _bwd_key, _fwd_map's den from its products): 518K parity, the autotuned forward / backward on the
# benchmark's qkvg views at 518K and 1M (kernel_diag_gpu.py), the attention table (with the training step), the
# GPU kernel tests; and the register reduce's loop unrolled by two (NALASR_RR_UNROLL=2: no end-of-tile copies of the
# next tile's registers; offline its loads wait 160-868 instructions after issue), A/B twice.
# (NALASR_RR_UNROLL was a temporary switch; it left before landing, the loop's SASS unchanged at 1.)
. benchmarks/device_lib.sh s21c
check_518k 90
timeout 60 python3 benchmarks/kernel_diag_gpu.py --json $OUT/diag.json --sizes 518400,1036800 --ppsm 8 \
  --parts attention,profile >> $LOG 2>&1; say "diag rc=$?"
timeout 130 python3 benchmarks/attention.py --out $OUT --heads 4x16 --budget-s 90 >> $LOG 2>&1; say "table rc=$?"
kernel_tests 200 tests/test_kernels.py
for round in 1 2; do
  for u in 1 2; do
    NALASR_RR_UNROLL=$u timeout 60 python3 benchmarks/kernel_diag_gpu.py --json $OUT/diag_u${u}_r$round.json \
      --sizes 518400 --ppsm 8 --parts attention,profile > $OUT/diag_u.tmp 2>&1
    grep -E "^ *518400 new|_fwd_reduce_rr" $OUT/diag_u.tmp | sed "s/^/unroll $u: /" | tee -a $LOG
  done
done
rm -f $OUT/diag_u.tmp
merge_json "diag_u*.json" diag_unroll.json
grep -E "rc=|passed|failed|all passed" $LOG | tail -8
sed -n '/^summary:/,/^== /p' $LOG
grep -E "^ *(518400|1036800) new|_fwd_reduce_rr|_fwd_map|_bwd_query|_bwd_key" $LOG | head -12
grep -iE "train" $LOG | head -6
