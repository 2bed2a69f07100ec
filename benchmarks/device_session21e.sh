#!/usr/bin/env bash
# Issue 5, session 21 call 5: the training step (default model, B 32, LR 64², bf16, Adam) with the fused kernels and
# with the reference, single steps and 10 back to back (benchmarks/attention.py --train-only), at _bwd_key's plan of
# session 20 (8 programs an SM) and at the 32 of before (NALASR_PROGRAMS_PER_SM_BWD_KEY=32), twice in turn: does the
# plan explain the step's 110 ms of session 20 call 7 against 80.3 in call 5?
. benchmarks/device_lib.sh s21e
for round in 1 2; do
  for pp in 8 32; do
    NALASR_PROGRAMS_PER_SM_BWD_KEY=$pp timeout 150 python3 benchmarks/attention.py --out $OUT/train_pp${pp}_r$round \
      --train-only > $OUT/train.tmp 2>&1
    grep "^train step" $OUT/train.tmp | head -2 | sed "s/^/bwd_key ppsm $pp round $round: /" | tee -a $LOG
  done
done
python3 - $OUT <<'PY'
import json, pathlib, sys
out = pathlib.Path(sys.argv[1])
runs = {d.name: json.load(open(d / "attention_float16.json"))["train_step"] for d in sorted(out.glob("train_pp*"))}
json.dump(runs, open(out / "train_steps.json", "w"), indent=1)
PY
rm -rf $OUT/train_pp* $OUT/train.tmp
