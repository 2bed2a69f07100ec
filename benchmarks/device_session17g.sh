#!/usr/bin/env bash
# Issue 5, session 17 call 7 (main): the kernels leave θ's clamp (and the backward's gradient mask) out for |α| ≤ 4
# (nala._clamp) and form |k|³ from the norm's x² — offline sm_90: _fwd_reduce 538 → 506 instructions a warp-tile,
# _fwd_map 525 → 491, _bwd_query 698 → 666, _bwd_key 491 → 459. GPU kernel tests (with the α = 20 fp16 case and
# the clamp no-op checks), 518K parity, the autotuned times at 518K and 1M.
. benchmarks/device_lib.sh s17g
timeout 100 python3 benchmarks/kernel_diag_gpu.py --json $OUT/diag.json --sizes 518400,1036800 --ppsm 8 \
  --parts attention,profile >> $LOG 2>&1; say "diag rc=$?"
check_518k 70
kernel_tests 300 tests/test_kernels.py
grep -E "rc=|passed|failed|FAIL|Error" $LOG | tail -12
grep -E "new qkvg|^  _fwd_|^  _bwd_|^  _combine" $LOG | tail -8
