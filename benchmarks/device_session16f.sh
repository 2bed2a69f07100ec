#!/usr/bin/env bash
# Issue 5, session 16 call 6 (run as one command line on the warm machine): _bwd_key at 32 programs an SM (call 5:
# 126.8 against 128.5 µs at 24) — the autotuned forward and backward at 518K and 1M, and the 518K parity.
. benchmarks/device_lib.sh s16f
timeout 100 python3 benchmarks/kernel_diag_gpu.py --json $OUT/diag.json --sizes 518400,1036800 --ppsm 8 \
  --parts attention,profile >> $LOG 2>&1; say "diag rc=$?"
timeout 60 python3 benchmarks/gpu_kernels_check.py --cases 518400 >> $LOG 2>&1; say "check rc=$?"
grep -E "new qkvg|^  _|rc=|all passed" $LOG
