#!/usr/bin/env bash
# Issue 5, session 20 call 6: _bwd_key's plan (programs an SM × chunk quantum; 4 one-wave ... 32) for the backward's
# margin under 2.5× the forward (benchmarks/pdl_gpu.py --bwd-key-plans), 518K and 1M dense.
. benchmarks/device_lib.sh s20f
timeout 200 python3 benchmarks/pdl_gpu.py --json $OUT/bwd_key_plans.json --sizes 518400,1048576 \
  --bwd-key-plans 32:256,32:64,4:256,4:64,8:64,16:64,24:64,32:256 >> $LOG 2>&1; say "sweep rc=$?"
grep -E "^  +[0-9]+ bwd_key" $LOG
