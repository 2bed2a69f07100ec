#!/usr/bin/env bash
# Issue 5, session 28 call 1: the register reduce's ring of shared memory (nala_rr.STAGES, NALASR_REDUCE_RR_STAGES),
# prepared in session 27 and never run: 518K parity with 3 slots; the reduce pass at 0 / 2 / 3 / 4 / 6 slots at 518K
# and 0 / 3 / 4 at 1M (dense); the whole attention A/B off / 3 slots twice, each its own process; the GPU tests of
# the ring's bits last.
. benchmarks/device_lib.sh s28
(export NALASR_REDUCE_RR_STAGES=3; check_518k 100)
grep -E "518400|passed|FAIL" $LOG | tail -6
sweep ring --pass fwd_reduce --layout dense --configs 32x1x2 --ppsm 16 --env NALASR_REDUCE_RR_STAGES=0,2,3,4,6
sweep ring1m --pass fwd_reduce --layout dense --tokens 1036800 --configs 32x1x2 --ppsm 16 --env NALASR_REDUCE_RR_STAGES=0,3,4
merge_json "sweep_*.json" sweeps.json
grep -E "best first|^  [0-9]" $LOG | tail -14
for r in 1 2; do
  for s in 0 3; do LAYOUT=dense diag_env r${r}s$s NALASR_REDUCE_RR_STAGES=$s; done
done
pass_times $OUT/diag_*.json | tee -a $LOG
merge_json "diag_*.json" diag.json
K="extras_cuda or rr" kernel_tests 150 tests/test_kernels.py
grep -E "passed|failed|FAIL|Error" $LOG | cut -c1-600 | tail -4
ls $OUT
