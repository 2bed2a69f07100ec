#!/usr/bin/env bash
# Session 28 call 4: where the eager forward's host time goes (benchmarks/host_profile_gpu.py: cProfile of eager
# forwards of the default ×4 model, fp16, at 192×256 LR; its GPU time from a graph replay beside it).
. benchmarks/device_lib.sh s28d
timeout 200 python3 benchmarks/host_profile_gpu.py --size 192x256 --calls 20 --top 40 --json $OUT/host_192x256.json > $OUT/host.txt 2>&1
say "host profile rc=$?"
head -c 9000 $OUT/host.txt
ls $OUT
