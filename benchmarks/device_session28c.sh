#!/usr/bin/env bash
# Issue 5, session 28 call 3: the tree with the ring taken out (nala_rr.py as before session 27's ring): 518K parity,
# the register reduce's GPU tests, the attention at 518K / 1M (dense); then the whole network at the README's sizes
# (`nalasr bench`, ×4 fp16, NaLa), replayed from CUDA graphs and eager, for the README's model table.
. benchmarks/device_lib.sh s28c
check_518k 100
grep -E "518400|passed|FAIL" $LOG | tail -6
K="extras_cuda or rr" kernel_tests 120 tests/test_kernels.py
grep -E "passed|failed|FAIL|Error" $LOG | cut -c1-600 | tail -3
LAYOUT=dense diag_env base
timeout 200 python3 -m nalasr bench --devices cuda --sizes 192x256,270x480,540x960,1080x1920 --scales 4 \
  --precisions fp16 --attention nala --json $OUT/bench.json --markdown $OUT/bench.md >> $LOG 2>&1; say "bench rc=$?"
timeout 150 python3 -m nalasr bench --devices cuda --sizes 192x256,270x480,540x960 --scales 4 --no-cuda-graphs \
  --precisions fp16 --attention nala --json $OUT/bench_eager.json --markdown $OUT/bench_eager.md >> $LOG 2>&1
say "bench eager rc=$?"
cat $OUT/bench.md $OUT/bench_eager.md | grep -E "^\|" | head -20
ls $OUT
