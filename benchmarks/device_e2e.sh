#!/usr/bin/env bash
# Issue 38's end-to-end jobs on a GPU machine in one call: the device stage piece by piece
# (benchmarks/device_stage.py), then `nalasr upscale` wall clock for a snapshot of the code before the change
# (.carry/before: its nalasr/ and kernels/) and this tree, each served by a resident worker started before its
# jobs, then this tree's CUDA tests of the pipeline. Photos for the inputs are carried as .carry/e2e/*.jpg (17, >=
# 1920x1080: `python benchmarks/e2e_upscale.py --pack ../shared/datasets/train_extra --photos .carry/e2e`).
#   mkdir -p .carry/before && git archive <old commit> nalasr kernels | tar -x -C .carry/before
#   device run: bash benchmarks/device_e2e.sh       (carry: .carry/before, .carry/e2e)
set -u
OUT=${OUT:-$PWD/e2e_out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD:$PWD/kernels
nvidia-smi --query-gpu=name,memory.used,clocks.sm --format=csv,noheader
timeout 150 python3 benchmarks/device_stage.py --out "$OUT" 2>&1 | tail -n 30
timeout 300 python3 benchmarks/e2e_upscale.py --photos .carry/e2e --tree before=.carry/before --tree after=. \
  --worker before --worker after --repeats ${REPEATS:-2} --out "$OUT" 2>&1 | tail -n 20
echo "== CUDA tests of the pipeline"
timeout 120 python3 -m pytest -q -p no:cacheprovider tests/test_pipeline.py > "$OUT/pipeline_tests.log" 2>&1
echo "rc=$?"; tail -n 3 "$OUT/pipeline_tests.log"
