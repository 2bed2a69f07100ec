#!/usr/bin/env bash
# Short device call after the session-5 changes (carry .carry/old with the kernels measured earlier):
# kernel parity at 518K (the backward now forms no o, dz goes through the tensor cores, approximate division),
# the kernels against .carry/old/nala_old.py, the block variants (fusion_gpu.py) and the x4 bench with graphs.
. benchmarks/device_lib.sh session6
say "kernel parity at 518K"
timeout 100 python3 benchmarks/gpu_kernels_check.py --cases 518400 >> $LOG 2>&1; say "check rc=$?"
say "attention kernels"
timeout 70 python3 benchmarks/kernel_diag_gpu.py --json $OUT/diag.json --old .carry/old/nala_old.py --sizes 518400 \
  --ppsm 8 --parts attention,profile,registers >> $LOG 2>&1; say "diag rc=$?"
say "block variants"
timeout 60 python3 benchmarks/fusion_gpu.py --json $OUT/fusion.json >> $LOG 2>&1; say "fusion rc=$?"
timeout 60 python3 -m nalasr bench --devices cuda --sizes 192x256,270x480,540x960,1080x1920 --scales 4 \
  --precisions fp16 --attention nala --json $OUT/bench.json --markdown $OUT/bench.md >> $LOG 2>&1; say "bench rc=$?"
grep -E "FAIL|ERROR|passed|518400 |==|variant|µs ×|\| nala" $LOG | tail -40
