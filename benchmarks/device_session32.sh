#!/usr/bin/env bash
# Issue 5, prepared at the end of session 31 for the next session's first call: the backward's key pass from registers
# (nala_bwd_key_rr, off unless NALASR_BWD_KEY_RR=1; never on the GPU yet): its GPU tests (the extras, its parity case,
# the rules), 518K parity with it on; the attention with NALASR_BWD_KEY_RR 0 / 1 twice at 518K and 1M (dense), with it
# on at 12 and 8 programs an SM, and once on the model's views.
. benchmarks/device_lib.sh s32
K="extras_cuda or key or rule" kernel_tests 200 tests/test_kernels.py
grep -E "passed|failed|FAIL|Error" $LOG | cut -c1-900 | tail -4
NALASR_BWD_KEY_RR=1 check_518k 90
export SHOW="_bwd_key"
for r in 1 2; do for b in 0 1; do LAYOUT=dense diag_env r${r}k$b NALASR_BWD_KEY_RR=$b; done; done
for p in 12 8; do LAYOUT=dense diag_env p$p NALASR_BWD_KEY_RR=1 NALASR_PROGRAMS_PER_SM_BWD_KEY_RR=$p; done
LAYOUT=qkvg diag_env qkvg_k1 NALASR_BWD_KEY_RR=1
PASSES="_fwd_reduce_rr _fwd_map_rr _bwd_query _bwd_key _bwd_key_rr" pass_times $OUT/diag_*.json | tee -a $LOG
merge_json "diag_*.json" diag_bwd_key_rr.json
ls $OUT
