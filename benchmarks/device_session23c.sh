#!/usr/bin/env bash
# Issue 5, session 23 call 3: the register reduce's chunks shorter for the programs each SM takes last (call 2: the
# last 4 of an SM's 16, the youngest warp of each scheduler, end 4-6 µs after the others): NALASR_RR_YOUNG (their
# share of a full chunk, nala_rr.split) program by program and in the forward, at 518K and 1M.
. benchmarks/device_lib.sh s23c
timeout 150 python3 benchmarks/reduce_tail_gpu.py --json $OUT/tail.json --young 1.0,0.9,0.85,0.8,0.75 >> $LOG 2>&1
say "tail rc=$?"
sweep young --pass fwd_reduce --configs 32x1x2 --ppsm 16 --env NALASR_RR_YOUNG=1.0,0.9,0.85,0.8,0.75,1.0,0.9,0.85,0.8,0.75
for y in 1.0 0.85; do diag_env y$y NALASR_RR_YOUNG=$y; done
grep -E "tokens, ppsm|end_us|by start rank|duration" $LOG
grep -A12 "best first" $LOG
