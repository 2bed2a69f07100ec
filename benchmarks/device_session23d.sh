#!/usr/bin/env bash
# Issue 5, session 23 call 4: the first pass of the forward and of the backward launched with PDL as well
# (NALASR_PDL_FIRST, A/B twice at 518K and 1M); _bwd_query's chunks shorter for the programs dispatched last on each
# SM (NALASR_YOUNG_BWD_QUERY, the younger of each scheduler's two warps) at 518K and 1M; the reduce's again
# (NALASR_YOUNG_FWD_REDUCE 1.0 / 0.85 three times).
. benchmarks/device_lib.sh s23d
for round in 1 2; do
  for f in 0 1; do diag_env p${f}_r$round NALASR_PDL_FIRST=$f; done
done
sweep q518 --pass bwd_query --configs 16x1x2 --ppsm 8 --env NALASR_YOUNG_BWD_QUERY=1.0,0.9,0.8,0.7,1.0,0.9,0.8,0.7
sweep q1m --pass bwd_query --configs 16x1x2 --ppsm 8 --tokens 1036800 --env NALASR_YOUNG_BWD_QUERY=1.0,0.85,0.7,1.0,0.85,0.7
sweep r518 --pass fwd_reduce --configs 32x1x2 --ppsm 16 --env NALASR_YOUNG_FWD_REDUCE=1.0,0.85,1.0,0.85,1.0,0.85
grep -A10 "best first" $LOG
