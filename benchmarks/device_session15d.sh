#!/usr/bin/env bash
# Issue 5, session 15 call 4 (branch f16dot, a timing experiment): the forward products with fp16 operands instead of
# tf32 (NALASR_F16DOT=1; offline sm_90: _fwd_reduce 538 → 499 instructions a warp and tile, 48 scalar shared loads →
# 6 ldmatrix, 128 → 162 registers; _fwd_map 270 → 272, half the shared stores), without TMA (NALASR_TMA=0).
# Ran at branch f16dot (a switch, no overflow guard). Results: benchmarks/results/h200/session15/call4/; what landed
# from it is nala._fwd_map's F16 product (see _map_f16).
. benchmarks/device_lib.sh s15d
export NALASR_TMA=0
sweep r16 --pass fwd_reduce --configs 32x1x2,16x1x2,32x2x2,64x4x2 --ppsm 16,32 --env NALASR_F16DOT=0,1
sweep m16 --pass fwd_map --configs 64x4x2,128x4x2,64x2x2 --ppsm 24 --env NALASR_F16DOT=0,1
grep -h -A10 "best first" $LOG | grep -v "^--"
