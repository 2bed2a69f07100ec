#!/usr/bin/env bash
# Issue 5, session 22 call 5: the backward passes' launch configs and plans with their float16 products (registers
# changed: _bwd_query 231 -> 224, _bwd_key 128 -> 122 offline): _bwd_key's tile, warps and stages at 8, 12 and 16
# programs an SM; _bwd_query's stages.
. benchmarks/device_lib.sh s22e
sweep k --pass bwd_key --configs 64x4x2,64x4x1,32x2x2,128x8x2 --ppsm 8,12,16
sweep q --pass bwd_query --configs 16x1x2,16x1x1,16x1x3 --ppsm 8
grep -A12 "best first" $LOG | head -30
