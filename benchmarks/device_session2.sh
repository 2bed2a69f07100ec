#!/usr/bin/env bash
# Second device call: data-loader rate (issue 4), the kernel parity cases the first call had no time for,
# and a profile of the whole network at 4K output (where the time goes, for the speed work of issue 6).
. benchmarks/device_lib.sh session2
say "loader: real PatchSampler vs one fixed batch"
timeout 80 python3 benchmarks/train_loader.py --data .carry/evaldata/BSD100 --steps 200 --out $OUT/train_loader.json >> $LOG 2>&1; say "loader rc=$?"
for c in bfloat16-train-B32-N4096-H4-D16-rope N130321 N100003 N40000; do
  timeout 40 python3 benchmarks/gpu_kernels_check.py --cases $c 2>&1 | grep -E "^(bfloat|float|all|FAILED)" >> $LOG; say "kernel case $c rc=${PIPESTATUS[0]}"
done
say "profile default x4 fp16 at 540x960"
timeout 40 python3 benchmarks/profile_gpu.py >> $LOG 2>&1; say "profile rc=$?"
