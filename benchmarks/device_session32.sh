#!/usr/bin/env bash
# Issue 5, session 32's first call: the backward's passes from registers, never on the GPU before. The key pass
# (nala_bwd_key_rr, NALASR_BWD_KEY_RR=1; prepared in session 31) and the query pass (nala_bwd_query_rr,
# NALASR_BWD_QUERY_RR=1; this session): their GPU tests (extras, parity cases, rules) and 518K parity with each on;
# the attention at 518K and 1M (dense) with each 0 / 1 twice, each setting its own process; the key pass at 12 and 8
# programs an SM, the query pass capped at 168 / 152 / 128 registers at 12 / 13 / 16 an SM; both on the model's views.
. benchmarks/device_lib.sh s32
K="extras_cuda or key_rr or query_rr or rule" kernel_tests 200 tests/test_kernels.py
grep -E "passed|failed|FAIL|Error" $LOG | cut -c1-900 | tail -4
NALASR_BWD_KEY_RR=1 check_518k 90
NALASR_BWD_QUERY_RR=1 check_518k 90
export SHOW="_bwd_"
for r in 1 2; do
  for b in 0 1; do LAYOUT=dense diag_env r${r}k$b NALASR_BWD_KEY_RR=$b; done
  LAYOUT=dense diag_env r${r}q1 NALASR_BWD_QUERY_RR=1
  LAYOUT=dense diag_env r${r}kq NALASR_BWD_QUERY_RR=1 NALASR_BWD_KEY_RR=1
done
for p in 12 8; do LAYOUT=dense diag_env p$p NALASR_BWD_KEY_RR=1 NALASR_PROGRAMS_PER_SM_BWD_KEY_RR=$p; done
for c in 168:12 152:13 128:16; do
  LAYOUT=dense diag_env q${c%:*} NALASR_BWD_QUERY_RR=1 NALASR_BWD_QUERY_RR_MAXNREG=${c%:*} NALASR_PROGRAMS_PER_SM_BWD_QUERY_RR=${c#*:}
done
LAYOUT=qkvg diag_env qkvg_kq NALASR_BWD_KEY_RR=1 NALASR_BWD_QUERY_RR=1
PASSES="_fwd_reduce_rr _fwd_map_rr _bwd_query _bwd_query_rr _bwd_key _bwd_key_rr" pass_times $OUT/diag_*.json | tee -a $LOG
merge_json "diag_*.json" diag_bwd_rr.json
ls $OUT
