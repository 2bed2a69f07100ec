#!/usr/bin/env bash
# Issue 5, session 22 call 2: the backward's instruction cuts, each a temporary switch (A/B twice at 518K and 1M):
# NALASR_BWDQ_CHEAP (_bwd_query's |dir|^(p-1) without selects, its sign by a bit operation; offline 658 -> 626),
# NALASR_BWDQ_F16 (_bwd_query's S·dnum as g (float16, exact) times the scaled S in float16, 1/den after: 626 -> 613),
# NALASR_BWDK_F16 (_bwd_key's two products in float16: φ̃k/‖k‖³ and (v − v̄)/2 against the scaled dS, no register
# shuffles into tf32 operands: 445 -> 411). With everything on (and the register reduce's asm loads): 518K parity,
# the GPU kernel tests.
# (Its NALASR_RR_* / NALASR_BWDQ_* / NALASR_BWDK_* switches were temporary and left before landing: the landed
# code has their on-state, see benchmarks/results/h200/session22/README.md; on main this script runs that code.)
. benchmarks/device_lib.sh s22b
check_518k 90
for round in 1 2; do
  for v in "0 0 0" "1 0 0" "1 1 0" "0 0 1" "1 1 1"; do
    set -- $v
    diag_env c$1q$2k$3_r$round NALASR_BWDQ_CHEAP=$1 NALASR_BWDQ_F16=$2 NALASR_BWDK_F16=$3
  done
done
pass_times $OUT/diag_c*.json | tee -a $LOG
merge_json "diag_c*.json" diag_bwd.json
kernel_tests 220 tests/test_kernels.py
grep -E "rc=|passed|failed|all passed" $LOG | tail -16
