#!/usr/bin/env bash
# Issue 5, session 27 call 4: the reduce's 128-token smallest chunk with the map's (nala._FWD_REDUCE_MIN_CHUNK,
# _FWD_MAP_MIN_CHUNK): parity at 4K odd; the one-head map's smallest chunk at 131K on the strided views, twice each;
# the attention table.
. benchmarks/device_lib.sh s27d
timeout 60 python3 benchmarks/gpu_kernels_check.py --cases N4097 >> $LOG 2>&1; say "check 4K rc=$?"
grep -E "N4097|passed|FAIL" $LOG
sweep map131k --pass fwd_map --layout qkvg --tokens 131072 --configs 64x2x2 --ppsm 28 --min-chunk 256,128,256,128
grep -E "best first|^  [0-9]" $LOG | tail -5
timeout 200 python3 benchmarks/attention.py --out $OUT --heads 4x16 --budget-s 120 >> $LOG 2>&1; say "table rc=$?"
ls $OUT
