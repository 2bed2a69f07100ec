#!/usr/bin/env bash
# Issue 5, session 32, call 2: the tree with both backward passes from registers by default (the query pass capped
# at 168 registers, 12 programs an SM): the 518K parity check; the attention at 518K and 1M with the key pass 0 / 1
# twice and both passes off once (each its own process); the attention table; the float16 GPU parity cases and the
# rules with what device time is left (this session's refused starts took ~90 s of it each).
. benchmarks/device_lib.sh s32b
check_518k 80
grep -E "N518400|passed|FAIL" $LOG | tail -6
export SHOW="_bwd_"
for r in 1 2; do for b in 0 1; do LAYOUT=dense diag_env r${r}k$b NALASR_BWD_KEY_RR=$b; done; done
LAYOUT=dense diag_env old NALASR_BWD_KEY_RR=0 NALASR_BWD_QUERY_RR=0
PASSES="_fwd_reduce_rr _fwd_map_rr _bwd_query _bwd_query_rr _bwd_key _bwd_key_rr" pass_times $OUT/diag_*.json | tee -a $LOG
merge_json "diag_*.json" diag_bwd_rr.json
say "table"
{ timeout 330 python3 benchmarks/attention.py --out $OUT --heads 4x16 --budget-s 170 \
  >> $LOG 2>&1; say "table rc=$?"; }
grep -A22 "## Derived" $OUT/attention_float16.md 2>/dev/null | grep -E "518,400|1,048,576"
left=$((585 - SECONDS))
[ $left -gt 40 ] && K="(parity_cuda and float16) or rule" kernel_tests $left tests/test_kernels.py
grep -E "passed|failed|FAIL|Error" $LOG | cut -c1-900 | tail -4
ls $OUT
