#!/usr/bin/env bash
# Issue 5, session 19 call 3: the reduce's stream floor by load pattern (benchmarks/rows_floor_gpu.py: one head a
# program with the register reduce's loads, four heads a program with the same loads, whole rows), and the map's
# stream / rows / math floors on the dense layout (benchmarks/stream_floor_gpu.py, no TMA variants).
. benchmarks/device_lib.sh s19c
timeout 200 python3 benchmarks/rows_floor_gpu.py --json $OUT/rows_floor.json --ppsm 8,16,32 >> $LOG 2>&1; say "rows rc=$?"
timeout 200 python3 benchmarks/stream_floor_gpu.py --layout dense --tma '' --json $OUT/stream_floor_dense.json \
  >> $LOG 2>&1; say "stream floor rc=$?"
grep -A 12 "^summary" $LOG; grep -A 8 "^forward passes" $LOG; grep -E "rc=|Error" $LOG | tail -4
