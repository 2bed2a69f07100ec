#!/usr/bin/env bash
# Device call: CUDA graphs checked and measured (benchmarks/graphs_gpu.py: training gradients and speed,
# inference parity and latency), the training choices for training/device_train.sh written to .carry, then
# the whole-network x4 fp16 latency/memory with graphs (as upscale runs) and without. Carry .carry/data.
. benchmarks/device_lib.sh session4
say "graphs"
timeout ${T_GRAPHS:-240} python3 benchmarks/graphs_gpu.py --json $OUT/graphs.json --data .carry/data/train \
  --decide .carry >> $LOG 2>&1; say "graphs rc=$?"
for mode in cuda-graphs no-cuda-graphs; do
  say "bench --$mode"
  timeout 150 python3 -m nalasr bench --devices cuda --sizes 192x256,270x480,540x960,1080x1920 --scales 4 \
    --precisions fp16 --attention nala --$mode --json $OUT/bench_$mode.json --markdown $OUT/bench_$mode.md \
    >> $LOG 2>&1; say "bench rc=$?"
done
grep -E "grads|trainer|run_model|choices|nala-auto|==" $LOG | tail -30
