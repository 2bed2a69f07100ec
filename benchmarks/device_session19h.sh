#!/usr/bin/env bash
# Issue 5, session 19 call 8: o written head-major by the landed kernels (benchmarks/sensitivity_gpu.py "ohm"), against
# the landed token-major o ("base"), each in a fresh process (its own autotuning).
. benchmarks/device_lib.sh s19h
timeout 200 python3 benchmarks/sensitivity_gpu.py --variants base,ohm,base,ohm --json $OUT/ohm.json >> $LOG 2>&1
say "ohm rc=$?"
grep -A 12 "^summary" $LOG; grep -E "rc=|Error" $LOG | tail -4
