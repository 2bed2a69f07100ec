#!/usr/bin/env bash
# Issue 5, session 15 call 2: two ways to the 128-byte rows the stream floor favours without the all-heads kernels
# (slower, call 1 on branch heads-map). (1) TMA: stream_floor_gpu.py's "tma" variants move per-head tiles with the
# TMA unit (token-major q, k, v, o). (2) Channel-major tensors ((B, H, D, N) in memory, tokens the unit-stride axis,
# as an NCHW map or a transposed projection gives; nala_forward then writes o the same way): floors, the real passes
# autotuned on them, and config sweeps, against the dense token-major layout the model passes today.
# Ran at branch layout-exp 0cc3e2d (its nala_forward wrote o channel-major for channel-major q: the diag_cmajor
# rows; not on main, where o is always token-major). Results: benchmarks/results/h200/session15/call2/.
. benchmarks/device_lib.sh s15b
for lay in qkvg cmajor; do
  timeout 120 python3 benchmarks/stream_floor_gpu.py --layout $lay --json $OUT/floor_$lay.json >> $LOG 2>&1
  say "floor $lay rc=$?"
done
for lay in dense cmajor; do
  timeout 120 python3 benchmarks/kernel_diag_gpu.py --json $OUT/diag_$lay.json --sizes 518400 --ppsm 8 \
    --layout $lay --parts attention,profile >> $LOG 2>&1
  say "diag $lay rc=$?"
done
sweep mapc --pass fwd_map --layout cmajor --configs 32x1x2,64x2x2,64x4x2,128x4x2,128x8x2,256x8x2 --ppsm 8,24
sweep redc --pass fwd_reduce --layout cmajor --configs 32x1x2,64x1x2,64x2x2,128x4x2,256x8x2 --ppsm 8,32
grep -A40 "forward passes without" $LOG
grep -h -A8 "best first" $LOG | grep -v "^--"
grep -E "fwd graph|bwd graph|graph .* ms|_fwd_|_bwd_|rc=" $LOG | tail -30
