#!/usr/bin/env bash
# Runs at commit 4ca8992 (nala_rr STAGES and rr_reduce_gpu.py --stages left main after it).
# Issue 5, session 19 call 7: the register reduce with its loads pipelined as cp.async (nala_rr STAGES 2-4) against
# its register prefetch (STAGES 0), dense and qkvg inputs, 16 and 24 programs an SM, register cap 128 and none.
. benchmarks/device_lib.sh s19g
timeout 300 python3 benchmarks/rr_reduce_gpu.py --json $OUT/rr_stages.json --layouts dense,qkvg --ppsm 16,24 \
  --maxnreg 128,0 --stages 0,2,3,4 >> $LOG 2>&1; say "rr stages rc=$?"
grep -A 40 "^summary" $LOG; grep -E "rc=|Error" $LOG | tail -4
