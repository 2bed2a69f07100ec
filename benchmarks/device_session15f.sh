#!/usr/bin/env bash
# Issue 5, session 15 call 6: _fwd_map's float16 product with one power-of-two factor for S (nala._f16_state; call
# 5's per-column factors took the gain). Configs with and without at 518K, the forward and backward, 518K parity,
# the kernel tests.
. benchmarks/device_lib.sh s15f
sweep m16 --pass fwd_map --configs 64x4x2,64x2x2 --ppsm 24,48 --env NALASR_MAP_F16=0,1
timeout 60 python3 benchmarks/kernel_diag_gpu.py --json $OUT/diag_qkvg.json --sizes 518400,1036800 --ppsm 8 \
  --layout qkvg --parts attention,profile >> $LOG 2>&1; say "diag rc=$?"
check_518k 90
grep -h -A9 "best first" $LOG | grep -v "^--"
grep -E "new qkvg|^  _fwd_|^  _bwd|^  _combine|rc=|all passed" $LOG | tail -20
kernel_tests 170 tests/test_kernels.py
tail -3 $LOG
