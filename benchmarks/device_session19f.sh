#!/usr/bin/env bash
# Issue 5, session 19 call 6: two heads a program — the map's traffic with 64-byte row halves a store
# (rows_floor_gpu.py "pairs") and the map prototype computing two heads and storing them together (rows_map_gpu.py).
. benchmarks/device_lib.sh s19f
timeout 200 python3 benchmarks/rows_floor_gpu.py --json $OUT/rows_floor.json --ppsm 16,32 >> $LOG 2>&1; say "rows rc=$?"
timeout 300 python3 benchmarks/rows_map_gpu.py --json $OUT/rows_map.json --configs 16x1x2,32x1x2,32x2x2,64x2x2,64x4x2 \
  --ppsm 16,32,48 >> $LOG 2>&1; say "rows map rc=$?"
grep -A 40 "^summary" $LOG; grep -E "rc=|Error" $LOG | tail -4
