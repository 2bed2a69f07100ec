#!/usr/bin/env bash
# One time-boxed training call on the device machine. Resumes the run the machine kept from an earlier call,
# else the run's committed checkpoint (training/$RUN/ckpt_*.pt), else starts it from SEED (a checkpoint to
# warm-restart, carried; FROM=folder resumes a checkpoint carried there instead) with a new warm-up and cosine
# peaking at LR.
#   first call:  SEED=.carry/seed/ckpt_00022545.pt LR=3e-4 STEPS=48000 FIT=0 MIN=9 bash training/device_train.sh
#   a new run:   NEW=1 RUN=x4_p96 MIN=9 bash training/device_train.sh   (starts from the config's init)
#   later calls: MIN=9 bash training/device_train.sh          (FIT=1 re-fits the cosine's end to the minutes)
# The data comes first (training/device_data.sh: exit 3 names the parts a fresh machine lacks); Set5 for the
# validation is carried as .carry/data/Set5. Writes the checkpoint, log, config, weights and stdout to $OUT.
set -u
export PYTHONPATH=$PWD:$PWD/kernels PYTHONUNBUFFERED=1
bash training/device_data.sh || exit 3
RUN=${RUN:-default_v2}
DIR=.carry/runs/$RUN
START="--resume"
if ls $DIR/checkpoints/ckpt_*.pt >/dev/null 2>&1; then
  echo "resuming $DIR (kept by this machine)"
elif ls ${FROM:=training/$RUN}/ckpt_*.pt >/dev/null 2>&1; then
  mkdir -p $DIR/checkpoints && cp $FROM/ckpt_*.pt $DIR/checkpoints/ && cp $FROM/log.jsonl $DIR/
  echo "resuming the run's checkpoint in $FROM"
elif [ "${NEW:-0}" = 1 ]; then
  echo "new run from training/$RUN.toml (its init, if any, seeds the weights)"
else
  mkdir -p $DIR/checkpoints
  cp ${SEED:?no run to resume: give SEED=checkpoint, or NEW=1 for a new run} $DIR/checkpoints/
  START="--resume --restart --lr ${LR:-3e-4}"
  echo "warm restart of $SEED at peak LR ${LR:-3e-4}"
fi
nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv,noheader
python3 -m nalasr train --out $DIR $START --config training/$RUN.toml ${STEPS:+--steps $STEPS} \
  --max-minutes ${MIN:-9} $([ "${FIT:-1}" = 1 ] && echo --fit-schedule || echo --no-fit-schedule) --device cuda \
  ${EXTRA:-} 2>&1 | tee $OUT/train_stdout.txt | grep -v "^train " | tail -40
cp $(ls $DIR/checkpoints/ckpt_*.pt | tail -1) $DIR/log.jsonl $DIR/config.toml $OUT/
cp $DIR/weights/*.safetensors $OUT/ 2>/dev/null
ls -la $OUT
