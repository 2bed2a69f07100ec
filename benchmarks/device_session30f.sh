#!/usr/bin/env bash
# Issue 5, session 30, call 6: _bwd_key over head pairs (nala._bwd_key_pair, NALASR_BWD_KEY_PAIR=1: dk and dv stored
# as 64-byte rows of two heads, as the pair map stores o; offline 216 registers at 64 tokens on 4 warps, 2 programs an
# SM) against the one-head _bwd_key: 518K parity with it on; the attention at 518K and 1M dense, off and on at 2 / 4 /
# 8 programs an SM, twice, each its own process. Ran with benchmarks/results/h200/session30/call6/bwd_key_pair.diff
# applied (measured slower, not kept: `git apply` it at 922655b, before nala.py's split, to run this again).
. benchmarks/device_lib.sh s30f
(export NALASR_BWD_KEY_PAIR=1; check_518k 100)
grep -E "518400|passed|FAIL" $LOG | tail -4
for r in 1 2; do
  LAYOUT=dense diag_env r${r}off NALASR_BWD_KEY_PAIR=0
  for p in 2 4 8; do
    LAYOUT=dense diag_env r${r}pair$p NALASR_BWD_KEY_PAIR=1 NALASR_PROGRAMS_PER_SM_BWD_KEY_PAIR=$p
  done
done
PASSES="_bwd_query _bwd_key _bwd_key_pair" pass_times $OUT/diag_*.json | tee -a $LOG
merge_json "diag_*.json" diag.json
ls $OUT
