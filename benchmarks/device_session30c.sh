#!/usr/bin/env bash
# Issue 5, session 30, call 3: the attention table with this tree's defaults (tile-strided reduce, pair map and both
# backward passes), the card's copy bandwidth measured in it (committed as benchmarks/results/attention_float16.*);
# then the whole attention at 518K and 1M dense twice more, each its own process.
. benchmarks/device_lib.sh s30c
timeout 300 python3 benchmarks/attention.py --out $OUT --heads 4x16 --budget-s 170 >> $LOG 2>&1; say "table rc=$?"
grep -A22 "## Derived" $OUT/attention_float16.md | grep -E "518,400|1,048,576"
grep -E "copy bandwidth" $OUT/attention_float16.md | cut -c1-300
grep -A6 "## Training" $OUT/attention_float16.md | tail -3
for r in 1 2; do LAYOUT=dense diag_env r$r; done
merge_json "diag_*.json" diag.json
ls $OUT
