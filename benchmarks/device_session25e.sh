#!/usr/bin/env bash
# Issue 5, session 25 call 5: cache hints on the map's traffic (a temporary switch NALASR_MAP_HINT, not kept: both hints
# lost): 1 = q loads evict_first, 2 = o stores .cs (streaming), 3 = both; the passes' times at 518K and 1M, twice.
. benchmarks/device_lib.sh s25e
for round in 1 2; do
  for h in 0 1 2 3; do diag_env hint${h}r$round NALASR_MAP_HINT=$h; done
done
pass_times $OUT/diag_hint*.json | tee -a $LOG
