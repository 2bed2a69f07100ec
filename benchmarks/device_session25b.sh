#!/usr/bin/env bash
# Issue 5, session 25 call 2: with φq in float16 pairs (HALF2) the map's instructions fell by a fifth and its time by
# 0.6 µs (call 1), so its bound is elsewhere: the stores of one head's 32 bytes a row (session 19: the map's traffic
# alone 44.5 µs so, 35 with whole rows). rows_map_gpu.py (all 4 or 2 heads a program, o stored as whole / half rows)
# with HALF2 tiles against float32 ones; the landed map's launch configs with HALF2.
. benchmarks/device_lib.sh s25b
timeout 240 python3 benchmarks/rows_map_gpu.py --json $OUT/rows.json --ppsm 8,16,32 \
  --configs 32x1x4x1,64x2x4x1,32x2x4x1,16x1x4x1,32x1x2x1,64x2x2x1,32x1x4x0 > $OUT/rows.tmp 2>&1
say "rows rc=$?"
sed -n '/summary/,$p' $OUT/rows.tmp | tee -a $LOG
sweep map --pass fwd_map --configs 64x2x2,128x2x2,128x4x2,64x2x3,32x1x2,64x4x2 --ppsm 24,36,48
tail -22 $LOG
