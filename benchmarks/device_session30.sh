#!/usr/bin/env bash
# Issue 5, session 30, call 1: tile-strided chunks (nala._strided) in the backward passes and the one-head map, which
# had the switch but no GPU measurement: 518K parity with both backward passes strided; the whole attention at 518K
# and 1M (dense) with each of the four backward settings, twice, each its own process; the one-head map (49K-262K)
# contiguous / strided twice; the per-kernel profile at 1M with the defaults (the backward's ratio is worst there).
. benchmarks/device_lib.sh s30
(export NALASR_STRIDED_BWD_QUERY=1 NALASR_STRIDED_BWD_KEY=1; check_518k 100)
grep -E "518400|passed|FAIL" $LOG | tail -4
for r in 1 2; do
  for s in 00 10 01 11; do
    LAYOUT=dense diag_env r${r}b$s NALASR_STRIDED_BWD_QUERY=${s:0:1} NALASR_STRIDED_BWD_KEY=${s:1:1}
  done
done
pass_times $OUT/diag_*.json | tee -a $LOG
merge_json "diag_*.json" diag_bwd.json
for r in 1 2; do
  for s in 0 1; do
    SIZES=49152,131072,262144 PROFILE_N=262144 SHOW=_fwd_map LAYOUT=dense diag_env map_r${r}s$s NALASR_STRIDED_FWD_MAP=$s
  done
done
merge_json "diag_map_*.json" diag_map.json
SIZES=1036800 PROFILE_N=1036800 SHOW="µs ×" LAYOUT=dense diag_env profile_1m
ls $OUT
