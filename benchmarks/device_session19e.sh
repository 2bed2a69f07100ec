#!/usr/bin/env bash
# Issue 5, session 19 call 5: the map prototype that stores whole rows (benchmarks/rows_map_gpu.py: one program for
# the four heads of its tokens) against the landed _fwd_map, dense and qkvg inputs, per BLOCK_N × warps × programs/SM.
. benchmarks/device_lib.sh s19e
timeout 300 python3 benchmarks/rows_map_gpu.py --json $OUT/rows_map.json --configs 16x1,32x1,32x2,64x2,64x4 \
  --ppsm 8,16,32 >> $LOG 2>&1; say "rows map rc=$?"
grep -A 40 "^summary" $LOG; grep -E "rc=|Error" $LOG | tail -4
