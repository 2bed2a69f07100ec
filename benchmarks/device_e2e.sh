#!/usr/bin/env bash
# Issue 38's end-to-end jobs on the H200 in one call: `nalasr upscale` wall clock for a snapshot of the code
# before the change (.carry/before: its nalasr/ and kernels/) and this tree, then this tree's GPU kernel tests
# and the 518K parity check (float16 and float32). Photos for the inputs are carried as .carry/e2e/*.jpg
# (17 of them, >= 1920x1080: 16 for the folder, 1 for the 8K job; `python benchmarks/e2e_upscale.py --pack
# ../shared/datasets/train_extra --photos .carry/e2e` makes them). Results go to $OUT.
#   mkdir -p .carry/before && git archive <old commit> nalasr kernels | tar -x -C .carry/before
#   device run: bash benchmarks/device_e2e.sh       (carry: .carry/before, .carry/e2e)
set -u
OUT=${OUT:-$PWD/e2e_out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.used,clocks.sm --format=csv,noheader
timeout 330 python3 benchmarks/e2e_upscale.py --photos .carry/e2e --tree before=.carry/before --tree after=. \
  --extra "--png-compression 6" --repeats 2 --out "$OUT" 2>&1 | tail -n 20
echo "== GPU kernel tests"
PYTHONPATH=$PWD:$PWD/kernels timeout 200 python3 -m pytest -q -p no:cacheprovider tests/test_kernels_parity.py \
  tests/test_kernels_plan.py tests/test_layernorm_kernel.py tests/test_dwconv_kernel.py tests/test_bias_add_kernel.py \
  > "$OUT/kernel_tests.log" 2>&1; echo "rc=$?"; tail -n 5 "$OUT/kernel_tests.log"
echo "== parity 518K"
PYTHONPATH=$PWD:$PWD/kernels timeout 90 python3 benchmarks/gpu_kernels_check.py --cases 518400 > "$OUT/parity.log" 2>&1
echo "rc=$?"; tail -n 14 "$OUT/parity.log"
