#!/usr/bin/env bash
# Session 7, second speed call (issue 6): the fused depthwise-conv kernels on the GPU — parity (ROWS 1 and 3),
# their launch shape swept at the 540x960 shapes against cuDNN + PyTorch (dwconv_gpu.py), the whole x4 forward
# with the sweep's best shape against the previous one (fusion_gpu.py), then `nalasr bench` with the best shape.
. benchmarks/device_lib.sh dwconv
say "dwconv tests on the GPU"
timeout 120 python3 -m pytest -q -p no:cacheprovider tests/test_dwconv_kernel.py >> $LOG 2>&1; say "tests rc=$?"
say "launch-shape sweep"
timeout 260 python3 benchmarks/dwconv_gpu.py --json $OUT/dwconv.json >> $LOG 2>&1; say "sweep rc=$?"
# the (tile, rows) with the least summed time over the three ops (16 calls of each in a forward)
BEST=$(python3 -c "
import json, collections
t = collections.defaultdict(float)
for r in json.load(open('$OUT/dwconv.json')):
    if r['impl'] == 'triton': t[(r['tile'], r['rows'])] += r['ms']
print(*min(t, key=t.get))" 2>/dev/null || echo "2048 1")
set -- $BEST
say "best tile $1 rows $2"
for cfg in "2048 1" "$1 $2"; do
  set -- $cfg
  NALASR_DWCONV_TILE=$1 NALASR_DWCONV_ROWS=$2 timeout 80 python3 benchmarks/fusion_gpu.py --sizes 540x960 \
    --json $OUT/fusion_t$1_r$2.json >> $LOG 2>&1; say "fusion tile $1 rows $2 rc=$?"
done
set -- $BEST
NALASR_DWCONV_TILE=$1 NALASR_DWCONV_ROWS=$2 timeout 150 python3 -m nalasr bench --devices cuda \
  --sizes 192x256,270x480,540x960,1080x1920 --scales 4 --precisions fp16 --attention nala \
  --json $OUT/bench.json --markdown $OUT/bench.md >> $LOG 2>&1; say "bench rc=$?"
grep -E "passed|failed|µs|variant|==" $LOG | tail -70
grep -E "^\| nala" $OUT/bench.md
