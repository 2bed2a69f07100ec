#!/usr/bin/env bash
# Issue 5, session 18 call 7: the register reduce landed (nalasr_kernels/nala_rr.py, picked by nala._reduce_rr):
# autotuned forward / backward at 518K and 1M with NALASR_REDUCE_RR off and on (dense, and qkvg on), 518K parity,
# and the GPU kernel tests with it on (the default).
. benchmarks/device_lib.sh s18g
for a in 0 1; do
  NALASR_REDUCE_RR=$a timeout 70 python3 benchmarks/kernel_diag_gpu.py --json $OUT/diag_rr$a.json \
    --sizes 518400,1036800 --ppsm 8 --parts attention,profile --layout dense >> $LOG 2>&1; say "diag rr=$a rc=$?"
done
timeout 70 python3 benchmarks/kernel_diag_gpu.py --json $OUT/diag_rr1_qkvg.json --sizes 518400,1036800 --ppsm 8 \
  --parts attention,profile >> $LOG 2>&1; say "diag qkvg rc=$?"
check_518k 80
kernel_tests 220 tests/test_kernels.py
grep -E "rc=|passed|failed|FAIL|Error" $LOG | tail -8
grep -E "new (dense|qkvg)|^  _fwd_|^  _combine" $LOG | tail -16
