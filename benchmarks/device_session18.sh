#!/usr/bin/env bash
# Issue 5, session 18 call 1: is the per-head memory pattern what holds the forward back? Heads-grouped prototype
# passes (benchmarks/heads_group_gpu.py), the landed passes on head-major storage, the L2 fetch-granularity hint,
# and the stream floors on dense and head-major inputs.
. benchmarks/device_lib.sh s18
timeout 240 python3 benchmarks/heads_group_gpu.py --json $OUT/hg.json >> $LOG 2>&1; say "hg rc=$?"
for lay in hmajor dense; do
  timeout 60 python3 benchmarks/stream_floor_gpu.py --layout $lay --tma '' --json $OUT/floor_$lay.json >> $LOG 2>&1
  say "floor $lay rc=$?"
done
grep -A 40 "^summary" $LOG; grep -E "^  (map|reduce) |rc=" $LOG
