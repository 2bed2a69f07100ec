#!/usr/bin/env bash
# Issue 5, session 28 call 8: the register reduce capped at 96 registers (offline: 96 B of spills, 486 against 462
# loop instructions) at 20 programs an SM (5 one-warp programs a scheduler: its 16K registers hold 5 × 96 · 32) and
# 16, against the landed 128 / 16, in turns, 518K and 1M dense.
. benchmarks/device_lib.sh s28h
timeout 150 python3 benchmarks/rr_cap_gpu.py --variants 128x16,96x20,96x16,128x16,96x20 --json $OUT/rr_cap96.json >> $LOG 2>&1
say "rr cap rc=$?"
grep -E "cap|Error|error" $LOG | tail -12
