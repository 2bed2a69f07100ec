#!/usr/bin/env bash
# Issue 5, session 23 call 2: the register reduce's tail (call 1: its first program ends at 45 µs, its last at 52.4)
# program by program (reduce_tail_gpu.py, %globaltimer stamps) at 15 and 16 programs an SM; _combine alone at the
# forward's 523 chunks a head and at 132, a few column blocks × chunks a load × warps.
. benchmarks/device_lib.sh s23b
timeout 120 python3 benchmarks/reduce_tail_gpu.py --json $OUT/tail.json --ppsm 15,16 >> $LOG 2>&1; say "tail rc=$?"
sweep combine --pass combine --configs 8x1024x4,8x1024x2,8x512x4,16x512x4,32x256x4,32x256x8,64x128x4 --chunks 523,132
grep -vE "Warn|warn" $LOG | tail -60
