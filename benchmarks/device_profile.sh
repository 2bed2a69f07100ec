#!/usr/bin/env bash
# Device call for the open speed targets (issues 5, 6): kernel + LayerNorm parity, the attention kernels
# (kernel_diag_gpu.py; with .carry/old/nala_old.py carried, that file side by side), where the 540x960 forward
# spends its GPU time (profile_gpu.py), torch.compile against graph replay (compile_gpu.py), and the x4 NaLa
# sweep eager / graphs. About 5-6 minutes; carry .carry/data too to start a training call right after it.
. benchmarks/device_lib.sh profile
say "kernel + layernorm parity"
timeout 200 python3 benchmarks/gpu_kernels_check.py >> $LOG 2>&1; say "check rc=$?"
OLD=""; [ -f .carry/old/nala_old.py ] && OLD="--old .carry/old/nala_old.py"
say "attention kernels"
timeout 150 python3 benchmarks/kernel_diag_gpu.py --json $OUT/diag.json $OLD --sizes 518400 --ppsm 8 \
  --parts attention,profile,registers >> $LOG 2>&1; say "diag rc=$?"
say "network profile 540x960"
timeout 60 python3 benchmarks/profile_gpu.py > $OUT/profile_540x960.txt 2>&1; say "profile rc=$?"
say "layout variants (split qkvg GEMM, folded layer scale)"
timeout 120 python3 benchmarks/fusion_gpu.py --json $OUT/fusion.json >> $LOG 2>&1; say "fusion rc=$?"
say "torch.compile"
timeout 240 python3 benchmarks/compile_gpu.py --json $OUT/compile.json >> $LOG 2>&1; say "compile rc=$?"
for mode in cuda-graphs no-cuda-graphs; do
  timeout 120 python3 -m nalasr bench --devices cuda --sizes 192x256,270x480,540x960,1080x1920 --scales 4 \
    --precisions fp16 --attention nala --$mode --json $OUT/bench_$mode.json --markdown $OUT/bench_$mode.md \
    >> $LOG 2>&1; say "bench --$mode rc=$?"
done
grep -E "FAIL|ERROR|passed|518400|==|compiled|variant|nala-auto" $LOG | tail -45
head -30 $OUT/profile_540x960.txt
