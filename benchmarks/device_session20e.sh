#!/usr/bin/env bash
# Issue 5, session 20 call 5: the code as landed (PDL, the 32-token reduce plan, static strides, _bwd_query's 64-token
# plan): benchmarks/pdl_gpu.py (before / plan / plan+pdl / +static / +bwd plan; dense, 518K and 1M), the autotuned
# forward / backward on the benchmark's qkvg views (kernel_diag_gpu.py, 518K and 1M), the attention table.
. benchmarks/device_lib.sh s20e
timeout 240 python3 benchmarks/pdl_gpu.py --json $OUT/pdl_all.json >> $LOG 2>&1; say "pdl rc=$?"
timeout 60 python3 benchmarks/kernel_diag_gpu.py --json $OUT/diag.json --sizes 518400,1036800 --ppsm 8 \
  --parts attention,profile >> $LOG 2>&1; say "diag rc=$?"
timeout 130 python3 benchmarks/attention.py --out $OUT --heads 4x16 --budget-s 90 >> $LOG 2>&1; say "table rc=$?"
grep -E "rc=" $LOG | tail -4
sed -n '/^summary:/,/^== /p' $LOG
grep -E "^ *(518400|1036800) new" $LOG | head -4
