#!/usr/bin/env bash
# Issue 5, session 14, last call (one H200): the final tree. What skipping the θ clamp where it cannot bind saves
# per pass (nala._clamp; NALASR_ANGLE_CLAMP=1 puts it back; offline sm_90: _fwd_reduce 538 → 506, _fwd_map 270 →
# 255, _bwd_query 731 → 707 instructions a warp and tile at 32x2, _bwd_key 495 → 463), at each pass's pick; then the
# kernel tests and 518K parity, the attention at 518K / 1M from CUDA graphs, and the benchmark table with the new
# triton-fwd+bwd-graph row (4×16 only, to fit the call) → $OUT/attention_float16.{json,md}.
# (The record of that call: the clamp skipping made no difference beyond noise and was dropped afterwards, with
# nala._clamp and NALASR_ANGLE_CLAMP; the rest of the tree is the one committed after it.)
. benchmarks/device_lib.sh s14d
C=--env=NALASR_ANGLE_CLAMP=,1
sweep r --pass fwd_reduce --configs 32x1x2 --ppsm 32 $C
sweep m --pass fwd_map --configs 64x4x2 --ppsm 24 $C
sweep q --pass bwd_query --configs 16x1x2 --ppsm 8 $C
sweep k --pass bwd_key --configs 64x4x1 --ppsm 24 $C
kernel_tests 220 tests/test_kernels.py
check_518k 45
timeout 60 python3 benchmarks/kernel_diag_gpu.py --json $OUT/diag.json --sizes 518400,1048576 --ppsm 8 \
  --parts attention,profile,registers >> $LOG 2>&1; say "diag rc=$?"
timeout 200 python3 benchmarks/attention.py --out $OUT --heads 4x16 --budget-s 120 >> $LOG 2>&1; say "attention rc=$?"
grep -h -A4 "best first" $LOG | grep -v "^--"
grep -E "FAIL|passed|failed|rc=|all passed|train step|new qkvg|µs ×" $LOG | tail -30
tail -16 $OUT/attention_float16.md
