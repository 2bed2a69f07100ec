#!/usr/bin/env bash
# Issue 5, session 18 call 5: more instructions in flight per warp for the reduce (64 tokens on one warp: longer
# tiles, its stalls are short-scoreboard / wait / MIO, call 4's ncu) and the map capped at 64 registers (more
# programs resident), both against the landed picks.
. benchmarks/device_lib.sh s18e
sweep r_ilp --pass fwd_reduce --configs 32x1x2,64x1x2,64x1x1,64x2x2,32x1x2x80 --ppsm 8,16
sweep m_cap --pass fwd_map --configs 64x2x2,64x2x2x64,64x2x1x64,128x4x2x64,64x2x2x56 --ppsm 48,96
grep -A10 "best first" $LOG
