#!/usr/bin/env bash
# Issue 5, session 28 call 7: the register reduce capped at 112 registers (no spills offline), 16 and 18 programs an
# SM, against the landed 128 / 16, in turns, 518K and 1M dense (benchmarks/rr_cap_gpu.py).
. benchmarks/device_lib.sh s28g
timeout 150 python3 benchmarks/rr_cap_gpu.py --variants 128x16,112x16,112x18,128x16,112x18 --json $OUT/rr_cap.json >> $LOG 2>&1
say "rr cap rc=$?"
grep -E "cap|Error|error" $LOG | tail -14
ls $OUT
