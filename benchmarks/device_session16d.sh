#!/usr/bin/env bash
# (Run at 91d7982; the switch was dropped from main after this call and lives on branch eye-map.)
# Issue 5, session 16 call 4: _fwd_map with its q tiles through q·I (NALASR_EYE_FWD_MAP=1, off by default): with the
# float16 product, φ̃q then becomes the A operand in registers instead of through shared memory (offline: 5 → 3
# barriers, 69 → 51 registers at 64 × 4). The map's configs with it off and on, then the GPU kernel tests and the
# 518K parity with it on.
. benchmarks/device_lib.sh s16d
sweep m_eye --pass fwd_map --configs 64x4x2,64x2x2,128x4x2,128x8x2 --ppsm 48 --env NALASR_EYE_FWD_MAP=0,1
export NALASR_EYE_FWD_MAP=1
kernel_tests 260 tests/test_kernels.py
check_518k 100
grep -E "FAIL|passed|failed|rc=|all passed" $LOG | tail -12
grep -A12 "best first" $LOG
