#!/usr/bin/env bash
# Issue 5, session 28 call 6: the attention table with the -unrolled-dense rows (committed as
# benchmarks/results/attention_float16.*).
. benchmarks/device_lib.sh s28f
timeout 280 python3 benchmarks/attention.py --out $OUT --heads 4x16 --budget-s 170 >> $LOG 2>&1; say "table rc=$?"
grep -A12 "## Derived" $OUT/attention_float16.md
grep -A6 "## Training" $OUT/attention_float16.md | tail -3
ls $OUT
