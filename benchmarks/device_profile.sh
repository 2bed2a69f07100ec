#!/usr/bin/env bash
# Device call for the open speed targets (issues 5, 6): kernel + LayerNorm parity, the attention kernels
# (kernel_diag_gpu.py; with .carry/old/nala_old.py carried, that file side by side), where the 540x960 forward
# spends its GPU time (profile_gpu.py), torch.compile against graph replay (compile_gpu.py) and the x4 forward
# (fusion_gpu.py: base vs split/fold/gate variants, eager and graphs). About 5 minutes; carry .carry/data too to start a training call right after it.
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
timeout 200 python3 benchmarks/compile_gpu.py --sizes 540x960 --json $OUT/compile.json >> $LOG 2>&1; say "compile rc=$?"
grep -E "FAIL|ERROR|passed|518400|==|compiled|variant" $LOG | tail -45
head -30 $OUT/profile_540x960.txt
