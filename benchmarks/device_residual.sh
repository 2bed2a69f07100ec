#!/usr/bin/env bash
# Session 7, third speed call (issue 6): the residual updates as one in-place GEMM over the fused kernels' ones
# column. GPU parity of the dwconv kernels (ones column included), the block variants at 192x256 and 540x960
# (fusion_gpu.py: shipped, residual add, dwconv off, ...), `nalasr bench` and the 540x960 profile.
. benchmarks/device_lib.sh residual
say "dwconv tests on the GPU"
timeout 120 python3 -m pytest -q -p no:cacheprovider tests/test_dwconv_kernel.py tests/test_bias_add_kernel.py >> $LOG 2>&1; say "tests rc=$?"
timeout 120 python3 benchmarks/fusion_gpu.py --json $OUT/fusion.json >> $LOG 2>&1; say "fusion rc=$?"
timeout 150 python3 -m nalasr bench --devices cuda --sizes 192x256,270x480,540x960,1080x1920 --scales 4 \
  --precisions fp16 --attention nala --json $OUT/bench.json --markdown $OUT/bench.md >> $LOG 2>&1; say "bench rc=$?"
timeout 60 python3 benchmarks/profile_gpu.py > $OUT/profile_540x960.txt 2>&1; say "profile rc=$?"
grep -E "passed|failed|variant|==" $LOG | tail -30
grep -E "^\| nala" $OUT/bench.md
grep -E "Self CUDA time total" $OUT/profile_540x960.txt
