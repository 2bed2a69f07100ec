#!/usr/bin/env bash
# Issue 5, session 14, fifth call (one H200, the session's last ~6 minutes of device time): the floors under the
# forward passes (benchmarks/stream_floor_gpu.py: the same grids, tiles and loads with no math, then with the
# feature map but no product) — where the 60% target's missing ~35 µs could come from — and Nsight Compute of the
# new _bwd_query (EYE, 16 tokens on one warp) for the next session.
# (The record of that call: its stream_floor "pass" rows timed the first nala_forward with autotuning in it. Two
# short calls after it on the warm machine ran the script as committed — the warm-up first, then also the "rows"
# variant: `timeout 60 python3 benchmarks/stream_floor_gpu.py --json $OUT/stream_floor.json`, logs s14f / s14g in
# benchmarks/results/h200/session14/call5/, stream_floor.json from the last.)
. benchmarks/device_lib.sh s14e
timeout 60 python3 benchmarks/stream_floor_gpu.py --json $OUT/stream_floor.json >> $LOG 2>&1; say "floor rc=$?"
ncu_attention 110 "_bwd_query" ncu_bwd_query.txt --section SpeedOfLight --section WarpStateStats \
  --section Occupancy --section LaunchStats --section SchedulerStats
grep -A8 "forward passes without" $LOG
grep -E "^  _bwd|Duration|Registers Per|Achieved Occupancy|Issued Warp|Stall (Short|Long|Barrier|Wait|MIO|Not Sel|Math)" \
  $OUT/ncu_bwd_query.txt | head -24
