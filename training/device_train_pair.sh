#!/usr/bin/env bash
# Two device_train.sh runs side by side on a machine of two GPUs (kind nvidia-h200-x2), one per GPU, e.g.
#   bash training/device_train_pair.sh "RUN=run_a VARIANT=default LR=5e-4 MIN=8.5" "RUN=run_b OVR=.carry/b.toml MIN=8.5"
# Each argument is the environment of one run (see device_train.sh). A call brings back at most 8 files, so
# each run's outputs are packed: NAME_ckpt.pt (its newest checkpoint) and NAME.tar (log, config, stdout,
# exported weights), NAME being the run's RUN. Optional EVAL="set5 set14 bsd100" then scores each run's
# exported weights on its GPU (fp32; needs those sets under .carry/evaldata) into NAME.tar as eval_xS.json.
set -u
FINAL=$OUT
one() {  # GPU "ENV..."
  local gpu=$1 vars=$2 name
  name=$(sed -n 's/.*RUN=\([^ ]*\).*/\1/p' <<< "$vars")
  local out=/tmp/pair_$name
  rm -rf $out && mkdir -p $out
  env CUDA_VISIBLE_DEVICES=$gpu OUT=$out $vars bash training/device_train.sh > $out/summary.txt 2>&1
  echo "== $name (GPU $gpu) rc=$?"; tail -25 $out/summary.txt
  for s in 2 3 4; do
    [ -n "${EVAL:-}" ] && [ -f $out/nalasr_*_x$s.safetensors ] && CUDA_VISIBLE_DEVICES=$gpu timeout 200 \
      python3 -m nalasr eval $EVAL --scale $s --weights $out/nalasr_*_x$s.safetensors --device cuda --precision fp32 \
      --data-root .carry/evaldata --json > $out/eval_x$s.json 2>> $out/summary.txt
  done
  mv $out/ckpt_*.pt $FINAL/${name}_ckpt.pt
  tar -cf $FINAL/$name.tar -C $out .
}
one 0 "$1" > $OUT/pair0.txt 2>&1 &
one 1 "$2" > $OUT/pair1.txt 2>&1 &
wait
cat $OUT/pair0.txt $OUT/pair1.txt
ls -la $FINAL
