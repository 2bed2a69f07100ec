#!/usr/bin/env bash
# Device call: kernel + LayerNorm parity at full size, then benchmarks/kernel_diag_gpu.py (launch overhead vs
# kernel time, programs-per-SM sweep, old vs new kernels, network and training step with/without the fused
# LayerNorm), then the training choices for training/device_train.sh in the same warm session:
# .carry/train_env (NALASR_FUSED_LAYERNORM=1 when it is correct and faster) and .carry/train_override.toml
# (the reference attention when the kernel check failed). Carry .carry/data (and .carry/old for the A/B).
. benchmarks/device_lib.sh session3

say "kernel + layernorm parity (full sizes)"
timeout ${T_CHECK:-200} python3 benchmarks/gpu_kernels_check.py >> $LOG 2>&1; check=$?; say "kernel check rc=$check"
grep -E "FAIL|ERROR|passed" $LOG | tail -5

say "diagnostics"
OLD=""; [ -f .carry/old/nala_old.py ] && OLD="--old .carry/old/nala_old.py"
timeout ${T_DIAG:-280} python3 benchmarks/kernel_diag_gpu.py --json $OUT/diag.json $OLD --sizes 16384,518400 \
  >> $LOG 2>&1; say "diag rc=$?"

python3 - "$OUT/diag.json" "$check" <<'PY' 2>&1 | tee -a $LOG
import json, sys
d, check = json.load(open(sys.argv[1])), int(sys.argv[2])
rows = {(r["backend"], r["fused_ln"]): r for r in d.get("train", []) if isinstance(r, dict) and "ms" in r}
env, override = [], []
if check != 0:
    override.append('attention_backend = "reference"')
t0, t1, r0 = rows.get(("triton", False)), rows.get(("triton", True)), rows.get(("reference", False))
if check == 0 and t0 and t1 and r0:
    noise = max(3 * r0["grad_rel_vs_triton_torchln"], 5e-2)
    if t1["ms"] < 0.97 * t0["ms"] and t1["grad_rel_vs_triton_torchln"] < noise:
        env.append("export NALASR_FUSED_LAYERNORM=1")
open(".carry/train_env", "w").write("".join(l + "\n" for l in env))
if override:
    open(".carry/train_override.toml", "w").write("".join(l + "\n" for l in override))
print("training choices:", env, override)
PY
grep -E "^ *(16384|518400) |network|train B|µs ×" $LOG | tail -40
