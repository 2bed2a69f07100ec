#!/usr/bin/env bash
# Issue 5, session 15 call 5: _fwd_map's float16 product with S's columns scaled into range (nala._map_f16,
# _f16_columns; call 4 timed the bare switch on branch f16dot). Configs with and without at 518K, the forward and
# backward on both input layouts, 518K parity, the kernel tests (their extras check the switch and the scaling).
. benchmarks/device_lib.sh s15e
sweep m16 --pass fwd_map --configs 64x4x2,128x4x2,64x2x2,128x8x2 --ppsm 24 --env NALASR_MAP_F16=0,1
for lay in qkvg dense; do
  timeout 90 python3 benchmarks/kernel_diag_gpu.py --json $OUT/diag_$lay.json --sizes 518400,1036800 --ppsm 8 \
    --layout $lay --parts attention,profile >> $LOG 2>&1
  say "diag $lay rc=$?"
done
check_518k 120
kernel_tests 240 tests/test_kernels.py
grep -h -A9 "best first" $LOG | grep -v "^--"
grep -E "new (qkvg|dense)|^  _fwd_|^  _bwd|^  _combine|rc=|passed|failed|FAIL|max rel" $LOG | tail -40
