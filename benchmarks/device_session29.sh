#!/usr/bin/env bash
# Issue 5, prepared in session 28 for the next session's first call (not run yet): the register reduce by k-steps
# (nalasr_kernels.nala_rr_ks, NALASR_REDUCE_RR_KSTEP=1; offline 96 registers without spills, 411 loop instructions, 20
# programs an SM): 518K parity with it; the GPU kernel tests of both register reduces (test_extras_cuda's
# reduce_rr_kstep_* compare its partials with nala_rr's); the forward in turns against nala_rr, also at its 128 cap
# and 16 an SM (benchmarks/rr_cap_gpu.py); the whole attention A/B twice, each its own process.
. benchmarks/device_lib.sh s29
(export NALASR_REDUCE_RR_KSTEP=1; check_518k 100)
grep -E "518400|passed|FAIL" $LOG | tail -6
timeout 150 python3 benchmarks/rr_cap_gpu.py --variants 128x16,ks96x20,ks128x16,128x16,ks96x20 --json $OUT/ks.json \
  >> $LOG 2>&1; say "ks rc=$?"
grep -E "chunks|Error" $LOG | tail -12
for r in 1 2; do
  for s in 0 1; do LAYOUT=dense diag_env r${r}k$s NALASR_REDUCE_RR_KSTEP=$s; done
done
pass_times $OUT/diag_*.json | tee -a $LOG
merge_json "diag_*.json" diag.json
K="extras_cuda or rr or kstep" kernel_tests 150 tests/test_kernels.py
grep -E "passed|failed|FAIL|Error" $LOG | cut -c1-600 | tail -4
ls $OUT
