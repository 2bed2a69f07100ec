#!/usr/bin/env bash
# First device call of a session (issues 5, 6): kernel + LayerNorm parity at 518K, the kernel test files on the
# GPU (they run in-process there: dwconv, bias add, attention parity at small odd sizes), the attention kernels
# (kernel_diag_gpu.py; with .carry/old/nala_old.py carried, that file side by side), the block variants
# (fusion_gpu.py), `nalasr bench` at the issue-6 sizes, where the 540x960 forward spends its GPU time
# (profile_gpu.py) and, where the machine has ncu, an Nsight Compute profile of the attention kernels.
# About 4-5 minutes; carry .carry/data too to start a training call right after it.
. benchmarks/device_lib.sh profile
say "kernel + layernorm parity (518K)"
check_518k 150
say "kernel tests on the GPU (dwconv, bias add, attention parity incl. N = 1)"
kernel_tests 150 tests/test_dwconv_kernel.py tests/test_bias_add_kernel.py tests/test_kernels.py
OLD=""; [ -f .carry/old/nala_old.py ] && OLD="--old .carry/old/nala_old.py"
say "attention kernels"
timeout 100 python3 benchmarks/kernel_diag_gpu.py --json $OUT/diag.json $OLD --sizes 518400 --ppsm 8 \
  --parts attention,profile,registers >> $LOG 2>&1; say "diag rc=$?"
timeout 60 python3 benchmarks/kernel_diag_gpu.py --json $OUT/diag_dense.json --layout dense --sizes 518400 --ppsm 8 \
  --parts attention,profile >> $LOG 2>&1; say "diag dense rc=$?"
say "block variants"
timeout 90 python3 benchmarks/fusion_gpu.py --json $OUT/fusion.json >> $LOG 2>&1; say "fusion rc=$?"
timeout 150 python3 -m nalasr bench --devices cuda --sizes 192x256,270x480,540x960,1080x1920 --scales 4 \
  --precisions fp16 --attention nala --json $OUT/bench.json --markdown $OUT/bench.md >> $LOG 2>&1; say "bench rc=$?"
say "network profile 540x960"
timeout 60 python3 benchmarks/profile_gpu.py > $OUT/profile_540x960.txt 2>&1; say "profile rc=$?"
# where the attention kernels' time goes (the 60%-of-bandwidth item)
ncu_attention 150 "_fwd_reduce|_fwd_map|_bwd_query|_bwd_key" ncu_attention.txt --section SpeedOfLight \
  --section Occupancy --section LaunchStats --section WarpStateStats --section InstructionStats \
  --section MemoryWorkloadAnalysis
grep -E "FAIL|ERROR|passed|failed|518400 |==|variant|µs ×|^\| nala" $LOG | tail -50
head -30 $OUT/profile_540x960.txt
