#!/usr/bin/env bash
# Issue 5, session 23 call 1: where the forward's fixed ~13 µs goes (forward(N) ≈ 13 + 97.5·N/518K µs from the
# 518K and 1M figures): the kernels' start and end inside back-to-back forwards and backwards (timeline_gpu.py);
# the map's programs per SM at its chunk quantum of 256 tokens and of 64 (its tile); the register reduce with the
# degree-5 sine (NALASR_RR_LEAN=1, 402 → 386 loop instructions), with α folded into the rsqrt (=2: 395), both (=3:
# 386), each twice; the forward / backward at 518K and 1M as landed.
. benchmarks/device_lib.sh s23
timeout 90 python3 benchmarks/timeline_gpu.py --json $OUT/timeline.json >> $LOG 2>&1; say "timeline rc=$?"
sweep map --pass fwd_map --configs 64x2x2 --ppsm 12,24,36,48 --quantum 64,256
sweep lean --pass fwd_reduce --configs 32x1x2 --ppsm 16 --env NALASR_RR_LEAN=0,1,2,3,0,1,2,3
diag_env base NALASR_BWD_F16=1
grep -A12 "best first" $LOG
grep -E "span|→" $LOG | head -40
grep -E "rc=" $LOG
