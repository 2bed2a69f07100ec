#!/usr/bin/env bash
# Issue 5, session 23 call 8: a bound for folding _combine into the passes after it: the forward and backward with
# _combine not launched (NALASR_NO_COMBINE=1, a temporary switch: the map and _bwd_key then read a stale state and
# wait by PDL for the reduce pass itself; the results are wrong, the timing is the point), A/B twice, and the
# timeline without it.
. benchmarks/device_lib.sh s23h
for round in 1 2; do
  for f in 0 1; do diag_env c${f}_r$round NALASR_NO_COMBINE=$f; done
done
NALASR_NO_COMBINE=1 timeout 60 python3 benchmarks/timeline_gpu.py --json $OUT/timeline_nocombine.json >> $LOG 2>&1
say "timeline rc=$?"
grep -E "span|→" $LOG | head -16
