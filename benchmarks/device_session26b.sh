#!/usr/bin/env bash
# Issue 5, session 26 call 2: the pair map's tile, stages and chunk quantum in the model's layout (dense q, k, v;
# config_sweep_gpu.py --pass fwd_map_pair), 518K parity with the dense case, the GPU kernel tests.
. benchmarks/device_lib.sh s26b
check_518k 100
grep -E "^(bfloat16|float16|float32)-N(518400|1048576)" $LOG | tail -8
sweep p1 --pass fwd_map_pair --layout dense --configs 32x1x3,32x1x2 --ppsm 16 --quantum 32,16,8
sweep p2 --pass fwd_map_pair --layout dense --configs 16x1x3 --ppsm 16,32 --quantum 16,8
sweep p3 --pass fwd_map_pair --layout dense --configs 64x2x3,64x1x3 --ppsm 8,16 --quantum 64,32
sweep p4 --pass fwd_map_pair --layout dense --configs 32x1x3 --ppsm 16 --quantum 32,16,8 --tokens 1036800
merge_json "sweep_p*.json" sweeps.json
grep -E "^  [0-9]+x" $LOG | head -40
kernel_tests 300 tests/test_kernels.py
grep -E "passed|failed|FAIL" $LOG | tail -8
