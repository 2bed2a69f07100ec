#!/usr/bin/env bash
# Issue 5, session 22 call 3: which switch moves the three GPU parity cases call 2 failed (dq at N = 1 in fp16 and
# bf16, fp16 large values): each switch alone, and all off (the code of session 21 but for the switches).
# (Its NALASR_RR_* / NALASR_BWDQ_* / NALASR_BWDK_* switches were temporary and left before landing: the landed
# code has their on-state, see benchmarks/results/h200/session22/README.md; on main this script runs that code.)
. benchmarks/device_lib.sh s22c
for v in "0 0 0 0" "1 0 0 0" "0 1 0 0" "0 0 1 0" "0 0 0 1"; do
  set -- $v
  NALASR_RR_ASMLD=$1 NALASR_BWDQ_CHEAP=$2 NALASR_BWDQ_F16=$3 NALASR_BWDK_F16=$4 timeout 100 python3 -m pytest -q -rf \
    -p no:cacheprovider tests/test_kernels.py -k "test_parity_cuda and (N1-H1-D16-contiguous or large-values)" \
    > $OUT/t.tmp 2>&1
  say "asm=$1 cheap=$2 qf16=$3 kf16=$4 rc=$?"
  grep -oE "(passed|failed).*|relative RMS error vs the float64 reference: \{[^}]*\}|'dq': [0-9.e-]+" $OUT/t.tmp \
    | sed "s/^/  /" | tee -a $LOG
done
rm -f $OUT/t.tmp
