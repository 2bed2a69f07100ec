#!/usr/bin/env bash
# Issue 5, session 28 call 5: the attention's steady-state time, calls unrolled into one CUDA graph (attention.py's
# new -unrolled-dense providers, triton.testing.do_bench_cudagraph), beside the single-replay -graph-dense rows, at
# 49K / 518K / 1M, twice (each its own process, each with its own copy bandwidth).
. benchmarks/device_lib.sh s28e
P="triton-fwd-graph-dense triton-fwd+bwd-graph-dense triton-fwd-unrolled-dense triton-fwd+bwd-unrolled-dense"
for r in 1 2; do
  timeout 200 python3 benchmarks/attention.py --out $OUT/r$r --heads 4x16 --tokens 49152 518400 1048576 --providers $P \
    --no-train --budget-s 150 > $OUT/r$r.log 2>&1; say "table r$r rc=$?"
  grep -E "copy bandwidth|^triton" $OUT/r$r.log | tail -13
  grep -A9 "## Derived" $OUT/r$r/attention_float16.md
done
ls -R $OUT
