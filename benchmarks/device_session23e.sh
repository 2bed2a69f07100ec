#!/usr/bin/env bash
# Issue 5, session 23 call 5: the map computing its first tile's features before it waits for the state
# (NALASR_MAP_PEEL: hidden behind the combine, which ends 4.5 µs after the reduce, call 1), alone and with the map at
# 36 programs an SM on 64-token chunk quanta and the reduce's degree-5 sine and folded α (NALASR_RR_LEAN=3), A/B
# twice at 518K and 1M; the timeline of the combination.
. benchmarks/device_lib.sh s23e
ALL="NALASR_MAP_PEEL=1 NALASR_PROGRAMS_PER_SM_FWD_MAP=36 NALASR_FWD_MAP_QUANTUM=64 NALASR_RR_LEAN=3"
for round in 1 2; do
  diag_env base_r$round NALASR_MAP_PEEL=0
  diag_env peel_r$round NALASR_MAP_PEEL=1
  diag_env all_r$round $ALL
done
env $ALL timeout 60 python3 benchmarks/timeline_gpu.py --json $OUT/timeline_all.json --sizes 518400 >> $LOG 2>&1
say "timeline rc=$?"
grep -E "span|→" $LOG | head -8
