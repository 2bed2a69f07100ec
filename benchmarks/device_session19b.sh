#!/usr/bin/env bash
# Issue 5, session 19 call 2: what each part of the feature maps costs on the H200 (benchmarks/sensitivity_gpu.py:
# each part swapped for a cheap stand-in, the register reduce and the map timed inside the forward at 518K).
. benchmarks/device_lib.sh s19b
timeout 400 python3 benchmarks/sensitivity_gpu.py --json $OUT/sensitivity.json >> $LOG 2>&1; say "sensitivity rc=$?"
grep -A 12 "^summary" $LOG; grep -E "rc=|Error" $LOG | tail -4
