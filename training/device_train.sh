#!/usr/bin/env bash
# A time-boxed training run on the device machine that resumes the committed run.
#   MIN=8.4 LR=2e-4 bash training/device_train.sh
# By default a warm restart (--restart --lr $LR) whose cosine is fitted to MIN minutes (STEPS only bounds it).
# One cosine over two back-to-back calls: FIT=0 STEPS=<end step> for the first (RESTART=1), then RESTART=0
# FIT=1 for the second (it continues the same schedule and re-fits its end to the minutes left). STEPS unset: with
# RESTART=0 the run's own schedule (the fit re-fits its end after 200 steps), else 1,000,000 (only a bound for
# the fit). Until session 9 it was 1,000,000 for RESTART=0 too, which put a continuation's first 200 steps back
# near the peak LR.
# Needs the training images under .carry/data/train and Set5 under .carry/data/Set5 (carried; see README.md
# here for how to fit them under the 64 MiB a call may carry). Writes the new checkpoint, the log, the
# config and the exported weights to $OUT.
# A new run beside it instead (RUN names its folder), e.g. ×4 alone from the shipped ×4 weights (session 7):
#   RUN=run_x4 INIT=weights/nalasr_default_x4.safetensors SCALE=4 OVR=.carry/x4.toml MIN=8.6 LR=2e-4 bash training/device_train.sh
# or the small variant from scratch, ×2/×3/×4 on one trunk (session 8):
#   RUN=run_small VARIANT=small OVR=.carry/small.toml MIN=7.5 LR=5e-4 bash training/device_train.sh
# (.carry/small.toml: cuda_graphs = true, scale_weights = [1, 1, 2]) and its continuation in a later session:
#   RUN=run_small SEED=training/small_x234 OVR=.carry/small.toml MIN=… LR=… bash training/device_train.sh
set -u
export PYTHONPATH=$PWD:$PWD/kernels PYTHONUNBUFFERED=1
RUN=.carry/${RUN:-run}
LR=${LR:-2e-4}
START="--resume $([ "${RESTART:-1}" = 1 ] && echo --restart --lr $LR)"
if ls $RUN/checkpoints/ckpt_*.pt >/dev/null 2>&1; then
  :  # a later call of the session: the machine kept the run
elif [ -n "${INIT:-}" ]; then  # a new run from weights
  START="--init $INIT --scale ${SCALE:?SCALE with INIT} --lr $LR"
elif [ -n "${VARIANT:-}" ]; then  # a new run from scratch
  START="--variant $VARIANT --scale ${SCALE:-2,3,4} --lr $LR"
else  # first call of a session: seed from the repo (SEED: the run's folder there; the default variant's by default)
  SEED=${SEED:-training/default_x234}
  mkdir -p $RUN/checkpoints && cp $SEED/ckpt_*.pt $RUN/checkpoints/
  cp $SEED/log.jsonl $RUN/ 2>/dev/null
fi
# Choices an earlier call of the same session measured (benchmarks/device_session3.sh writes them):
# .carry/train_env (environment, e.g. the fused LayerNorm) and .carry/train_override.toml (config keys that
# override the run's own, e.g. attention_backend = "reference" when the kernel check failed).
[ -f .carry/train_env ] && . .carry/train_env && cat .carry/train_env
OVR=${OVR:-.carry/train_override.toml}
[ "${RESTART:-1}" = 1 ] && STEPS=${STEPS:-1000000}  # a bound for the fit; a continued run keeps its own
OVERRIDE=""
[ -f $OVR ] && OVERRIDE="--config $OVR" && cat $OVR
nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv,noheader
python3 -m nalasr train --out $RUN $START $OVERRIDE --data .carry/data/train --data-root .carry/data \
  ${STEPS:+--steps $STEPS} --max-minutes ${MIN:-7.5} \
  $([ "${FIT:-1}" = 1 ] && echo --fit-schedule || echo --no-fit-schedule) \
  --device cuda \
  ${EXTRA:-} 2>&1 \
  | tee $OUT/train_stdout.txt | grep -v "^train " | tail -30
cp $(ls $RUN/checkpoints/ckpt_*.pt | tail -1) $RUN/log.jsonl $RUN/config.toml $OUT/
cp $RUN/weights/*.safetensors $OUT/
ls -la $OUT
