#!/usr/bin/env bash
# Issue 5, session 16 call 5: programs per SM once more at the current kernels — the map (64 tokens on 2 warps, 79
# registers: 12 programs fit an SM) around its 48, the reduce (32 × 1) around its 16, _bwd_key (64 × 4) at 24 and 32.
. benchmarks/device_lib.sh s16e
sweep m_pp --pass fwd_map --configs 64x2x2 --ppsm 36,48,60,72,96
sweep r_pp --pass fwd_reduce --configs 32x1x2 --ppsm 12,16,24
sweep k_pp --pass bwd_key --configs 64x4x2,64x4x1 --ppsm 24,32
grep -A8 "best first" $LOG
