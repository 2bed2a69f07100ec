#!/usr/bin/env bash
# Issue 5, session 18 call 2: the forward's passes overlapped across head groups on two streams
# (benchmarks/overlap_gpu.py), dense and head-major inputs.
. benchmarks/device_lib.sh s18b
timeout 300 python3 benchmarks/overlap_gpu.py --json $OUT/overlap.json >> $LOG 2>&1; say "overlap rc=$?"
grep -A 30 "^summary" $LOG; grep -E "rc=|Error|error" $LOG | tail -5
