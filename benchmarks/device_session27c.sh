#!/usr/bin/env bash
# Issue 5, session 27 call 3: the one-head map's 128-token smallest chunk (nala._FWD_MAP_MIN_CHUNK): GPU parity at
# 49K dense and an odd 4K, autotuned; the reduce's smallest chunk at 4K and 49K (config_sweep_gpu.py --pass
# fwd_reduce --min-chunk: the register reduce's plan); the attention table.
. benchmarks/device_lib.sh s27c
timeout 120 python3 benchmarks/gpu_kernels_check.py --cases N49152-H4-D16-dense >> $LOG 2>&1; say "check 49K rc=$?"
timeout 60 python3 benchmarks/gpu_kernels_check.py --cases N4097 >> $LOG 2>&1; say "check 4K rc=$?"
grep -E "N49152-H4-D16-dense|N4097|passed|FAIL" $LOG
for t in 4096 49152; do
  sweep red$t --pass fwd_reduce --layout dense --tokens $t --configs 32x1x2 --ppsm 16 --min-chunk 256,128,64,32,256
done
merge_json "sweep_*.json" sweeps.json
grep -E "best first|^  [0-9]" $LOG | tail -12
timeout 200 python3 benchmarks/attention.py --out $OUT --heads 4x16 --budget-s 120 >> $LOG 2>&1; say "table rc=$?"
grep -E "graph" $LOG | grep -E "^\| *(4096|49152|131072|518400)" | head -12
ls $OUT
