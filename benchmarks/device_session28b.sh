#!/usr/bin/env bash
# Issue 5, session 28 call 2: L2 prefetches of the tiles after the first while a pass waits on the one before
# (nala._prefetch_rows; NALASR_PREFETCH_FWD_MAP for both maps, NALASR_PREFETCH_BWD_KEY): 518K parity with both at 8;
# the pair map at 0-32 tiles at 518K and 0-16 at 1M (dense); whole-attention A/B, each its own process.
. benchmarks/device_lib.sh s28b
(export NALASR_PREFETCH_FWD_MAP=8 NALASR_PREFETCH_BWD_KEY=8; check_518k 100)
grep -E "518400|passed|FAIL" $LOG | tail -6
sweep pf --pass fwd_map_pair --layout dense --configs 32x1x3 --ppsm 16 --env NALASR_PREFETCH_FWD_MAP=0,2,4,8,16,32
sweep pf1m --pass fwd_map_pair --layout dense --tokens 1036800 --configs 32x1x3 --ppsm 16 --env NALASR_PREFETCH_FWD_MAP=0,4,8,16
merge_json "sweep_*.json" sweeps.json
grep -E "best first|^  [0-9]" $LOG | tail -14
for r in 1 2; do
  for s in 0 8; do LAYOUT=dense diag_env r${r}p$s NALASR_PREFETCH_FWD_MAP=$s NALASR_PREFETCH_BWD_KEY=$s; done
done
LAYOUT=dense diag_env k16 NALASR_PREFETCH_FWD_MAP=0 NALASR_PREFETCH_BWD_KEY=16
LAYOUT=qkvg diag_env q0 NALASR_PREFETCH_FWD_MAP=0 NALASR_PREFETCH_BWD_KEY=0
LAYOUT=qkvg diag_env q8 NALASR_PREFETCH_FWD_MAP=8 NALASR_PREFETCH_BWD_KEY=8
pass_times $OUT/diag_*.json | tee -a $LOG
merge_json "diag_*.json" diag.json
ls $OUT
