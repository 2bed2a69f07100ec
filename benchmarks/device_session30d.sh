#!/usr/bin/env bash
# Issue 5, session 30, call 4: the forward's programs per SM again now that its two passes are tile-strided (both were
# tuned on contiguous chunks: the register reduce at 16, one wave of its 128-register one-warp programs; the pair map
# at 16, session 26): reduce 16 / 32 / 48 × pair map 16 / 32 / 48 at 518K and 1M dense, twice, each its own process;
# the model's layout (q, k, v views of one projection) once with the defaults, the passes called directly.
. benchmarks/device_lib.sh s30d
for r in 1 2; do
  for rp in 16 32 48; do
    for mp in 16 32 48; do
      [ $rp != 16 ] && [ $mp != 16 ] && continue
      LAYOUT=dense diag_env r${r}r${rp}m$mp NALASR_PROGRAMS_PER_SM_FWD_REDUCE=$rp NALASR_PROGRAMS_PER_SM_FWD_MAP_PAIR=$mp
    done
  done
done
pass_times $OUT/diag_*.json | tee -a $LOG
merge_json "diag_*.json" diag_fwd_ppsm.json
LAYOUT=qkvg diag_env qkvg
ls $OUT
