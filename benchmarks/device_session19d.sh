#!/usr/bin/env bash
# Issue 5, session 19 call 4: benchmarks/rows_floor_gpu.py with the map's traffic too (q loaded, o stored: one
# head a program, four heads a program head after head, whole rows).
. benchmarks/device_lib.sh s19d
timeout 200 python3 benchmarks/rows_floor_gpu.py --json $OUT/rows_floor.json --ppsm 16,32,48 >> $LOG 2>&1; say "rows rc=$?"
grep -A 20 "^summary" $LOG; grep -E "rc=|Error" $LOG | tail -4
