#!/usr/bin/env bash
# Issue 5, session 20 call 2: the forward passes with their register prefetch 1 or 2 tiles ahead (DIST), the reduce
# under register caps 128-160 at one full wave, the map at several chunks (benchmarks/prefetch_gpu.py), dense 518K.
. benchmarks/device_lib.sh s20b
timeout 480 python3 benchmarks/prefetch_gpu.py --json $OUT/dist_dense.json >> $LOG 2>&1; say "dist rc=$?"
sed -n '/^summary:/,$p' $LOG
