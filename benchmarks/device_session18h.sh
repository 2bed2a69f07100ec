#!/usr/bin/env bash
# Issue 5, session 18 call 8, run at commit 5fc4f03 (benchmarks/rr_reduce_gpu.py then held the prototype's own
# kernel): why the landed register reduce took 66.3 µs in call 7 against the prototype's 57.5 in call 6 — the
# prototype's kernel, the landed one (N not specialised) and the landed one with N specialised, each at 16
# programs an SM with and without the 128-register cap, twice in a row; dense inputs.
. benchmarks/device_lib.sh s18h
for rep in 1 2; do
  timeout 120 python3 benchmarks/rr_reduce_gpu.py --json $OUT/rr_ab$rep.json --ppsm 16 --layouts dense >> $LOG 2>&1
  say "rr ab $rep rc=$?"
done
grep -A 12 "^summary" $LOG
