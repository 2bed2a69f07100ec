#!/usr/bin/env bash
# Issue 5, session 16 call 2 (after device_session16.sh, whose autotuned forward took 0.133 ms at 518K against the
# backward's 0.340: 2.56×, over the 2.5× line now the forward is faster; 1M 2.61×). _bwd_query's two new switches
# (NALASR_BWD_DZACC: dz in elementwise accumulators; NALASR_BWD_MPOW: m/dir as one power), Nsight Compute's warp
# stalls of _bwd_query as it runs now (16 tokens on one warp), and the stream floors at more reduce configs.
. benchmarks/device_lib.sh s16b
sweep q_dz --pass bwd_query --configs 16x1x2 --ppsm 8 --env NALASR_BWD_DZACC=0,1
NALASR_BWD_MPOW=1 sweep q_dzm --pass bwd_query --configs 16x1x2 --ppsm 8 --env NALASR_BWD_DZACC=0,1
ncu_attention 110 "_bwd_query" ncu_bwd_query.txt --section SpeedOfLight --section WarpStateStats \
  --section Occupancy --section SchedulerStats --metrics regex:smsp__warp_issue_stalled_.*_per_warp_active.pct
# Is the reduce's feature map slow at its one-warp config or in general? Session 15 call 2: loads only 46.7 µs, with
# the feature map 66.5 (32 tokens × 1 warp, tl.load); with the feature map but TMA at 64 × 4 warps, 46.7 again.
# The same configs through tl.load tell whether the warps or the TMA made the difference.
timeout 90 python3 benchmarks/stream_floor_gpu.py --json $OUT/floor.json --tma 64x4x3 \
  --reduce-configs 32x1x2@16,64x4x2@24,128x4x2@24,64x2x2@24,32x2x2@32 --map-configs 64x2x2@48 \
  >> $LOG 2>&1; say "floor rc=$?"
grep -A30 "forward passes without" $LOG
grep -E "^bwd_query|rc=" $LOG
stalls="long|short|math|barrier|wait|mio|lg_|not_sel|dispatch|no_inst|branch|tex|drain|sleep|membar|selected"
grep -E "Duration|Registers Per|Achieved Active|Issued Warp|Eligible Warps|stalled.*($stalls)" \
  $OUT/ncu_bwd_query.txt | grep -v "  0$" | head -40
