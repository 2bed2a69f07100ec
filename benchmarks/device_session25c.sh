#!/usr/bin/env bash
# Issue 5, session 25 call 3: HALF2's map takes 66 registers (79 before), so 14 of its 2-warp programs fit an SM (12
# before) and the programs per SM that fill whole waves move: the map at 28-56 programs an SM, twice; the output and
# gradients with NALASR_MAP_HALF2 off against on (benchmarks/switch_errors.py, the number behind MAP_HALF2_TOL).
. benchmarks/device_lib.sh s25c
PYTHONPATH=$PYTHONPATH:tests timeout 60 python3 benchmarks/switch_errors.py NALASR_MAP_HALF2 >> $LOG 2>&1; say "switch rc=$?"
sweep map1 --pass fwd_map --configs 64x2x2 --ppsm 28,36,42,48,56
sweep map2 --pass fwd_map --configs 64x2x2 --ppsm 28,36,42,48,56
grep -E "NALASR_MAP_HALF2|ppsm .* µs  \(graph" $LOG
