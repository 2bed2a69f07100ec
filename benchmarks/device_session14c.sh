#!/usr/bin/env bash
# Issue 5, session 14, third call (one H200): the backward with EYE on (nala._eye; _bwd_key now for k and v both,
# 16 tokens on one warp in _BWD_CONFIGS). Launch configs around the new register counts (_bwd_query 205 at 16x1:
# 9 warps an SM; capped at 168, 12), then the kernel tests and 518K parity on this tree, and the attention at 518K
# and 1M from CUDA graphs (kernel_diag_gpu) and the training step (attention.py at one size: B 32, LR 64²).
. benchmarks/device_lib.sh s14c
sweep q1 --pass bwd_query --configs 16x1x2,16x1x2x168 --ppsm 8,9,12
sweep q2 --pass bwd_query --configs 16x1x2x128,32x2x2x168,16x1x3 --ppsm 8,16
sweep k --pass bwd_key --configs 64x4x2x168,32x1x2,16x1x2,64x4x1 --ppsm 24,32
kernel_tests 220 tests/test_kernels.py
check_518k 60
timeout 150 python3 benchmarks/kernel_diag_gpu.py --json $OUT/diag.json --sizes 518400,1048576 --ppsm 8 \
  --parts attention,profile,registers >> $LOG 2>&1; say "diag rc=$?"
timeout 150 python3 benchmarks/attention.py --out $OUT --tokens 518400 --heads 4x16 \
  --providers triton-fwd-graph triton-fwd+bwd --budget-s 60 >> $LOG 2>&1; say "attention rc=$?"
grep -h -A14 "best first" $LOG | grep -v "^--" | head -50
grep -E "FAIL|passed|failed|rc=|all passed|train|fwd|bwd" $LOG | grep -v "^bwd_\|^fwd_" | tail -40
