#!/usr/bin/env bash
# Issue 5, session 20 call 1: the forward passes with L2 prefetches PF + 1 tiles ahead and at chunks off the powers
# of two (benchmarks/prefetch_gpu.py), dense inputs at 518K.
. benchmarks/device_lib.sh s20
timeout 480 python3 benchmarks/prefetch_gpu.py --json $OUT/prefetch_dense.json >> $LOG 2>&1; say "prefetch rc=$?"
sed -n '/^summary:/,$p' $LOG
