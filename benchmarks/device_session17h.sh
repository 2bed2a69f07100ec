#!/usr/bin/env bash
# Issue 5, session 17 call 8 (main): the attention benchmark table with the clamp left out (call 7) and _bwd_key
# at 32 programs an SM (benchmarks/results/attention_float16.{md,json}; the last one is session 16 call 3's).
. benchmarks/device_lib.sh s17h
timeout 200 python3 benchmarks/attention.py --out $OUT --heads 4x16 --budget-s 120 >> $LOG 2>&1; say "table rc=$?"
grep -E "rc=" $LOG | tail -3
