#!/usr/bin/env bash
# The GPU check of a change, on the H200, in one call (~2-3 min): for this tree and for a pre-change snapshot
# carried as .carry/before (its nalasr/ and kernels/ folders), the 518K-token attention + LayerNorm parity check
# (gpu_kernels_check.py --cases 518400) and `nalasr bench` at 192x256, 540x960, 1080x1920 LR (x4, fp16, NaLa),
# the snapshots alternating so drift of the machine shows in both; then this tree's GPU kernel tests.
# Logs and bench tables go to $OUT (default ./device_check_out).
#
#   mkdir -p .carry/before && cp -r /path/to/old/{nalasr,kernels} .carry/before/   # once, on the development machine
#   device run: bash benchmarks/device_check.sh        (carry: .carry/before)
set -u
OUT=${OUT:-$PWD/device_check_out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
TREE=$PWD
LOG=$OUT/device_check.log
say() { echo "== $(date +%T) $*" | tee -a "$LOG"; }
nvidia-smi --query-gpu=name,memory.used,memory.total,clocks.sm --format=csv,noheader | tee -a "$LOG"

# run NAME ROOT: the parity check and the bench with ROOT's nalasr and nalasr_kernels (python -m runs from ROOT, so
# its nalasr is the one imported; the scripts append the tree to sys.path, after PYTHONPATH).
run() {
  local name=$1 root=$2
  if [ ! -d "$root/nalasr" ]; then say "$name: $root/nalasr missing, skipped"; return; fi
  say "$name: parity 518K"
  (cd "$root" && PYTHONPATH=$root:$root/kernels timeout 150 python3 "$TREE/benchmarks/gpu_kernels_check.py" \
    --cases 518400 >> "$OUT/parity_$name.log" 2>&1); say "$name: parity rc=$?"
  tail -n 12 "$OUT/parity_$name.log" | sed "s/^/$name: /" | tee -a "$LOG"
  say "$name: bench"
  (cd "$root" && PYTHONPATH=$root:$root/kernels timeout 150 python3 -m nalasr bench --devices cuda \
    --sizes 192x256,540x960,1080x1920 --scales 4 --precisions fp16 --attention nala \
    --json "$OUT/bench_$name.json" --markdown "$OUT/bench_$name.md" >> "$OUT/bench_$name.log" 2>&1)
  say "$name: bench rc=$?"
  grep -E "^\|" "$OUT/bench_$name.md" 2>/dev/null | head -n 8 | sed "s/^/$name: /" | tee -a "$LOG"
}

run before "$TREE/.carry/before"
run after "$TREE"
say "GPU kernel tests (this tree)"
PYTHONPATH=$TREE:$TREE/kernels timeout 240 python3 -m pytest -q -rf -p no:cacheprovider \
  tests/test_kernels_parity.py tests/test_layernorm_kernel.py tests/test_dwconv_kernel.py tests/test_bias_add_kernel.py \
  -k "not interpreter" >> "$OUT/kernel_tests.log" 2>&1
say "kernel tests rc=$?"
tail -n 5 "$OUT/kernel_tests.log" | tee -a "$LOG"
