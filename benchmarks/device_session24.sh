#!/usr/bin/env bash
# Issue 5, session 24 call 1: _combine folded into the map (nala._fold: the map's programs claim column slices of
# the state by an atomic count, sum them, release; all wait by ld.acquire). The fold's GPU test and the extras,
# 518K parity, the attention at 518K and 1M against the previous head's kernels (benchmarks/_old_kernels: a copy of
# commit 7f72413's nalasr_kernels) twice, then the poll's sleep and the claimers' load width (temporary switches
# NALASR_FOLD_SLEEP, NALASR_FOLD_CB) and the fold off.
. benchmarks/device_lib.sh s24a
timeout 200 python3 -m pytest -q -rf -p no:cacheprovider tests/test_kernels.py -k "fold or extras_cuda or parity_cuda" >> $LOG 2>&1; say "tests rc=$?"
check_518k 90
ab_old 2 benchmarks/_old_kernels/nalasr_kernels
diag_env off NALASR_FOLD=0
diag_env sleep64 NALASR_FOLD_SLEEP=64
diag_env sleep1000 NALASR_FOLD_SLEEP=1000
diag_env cb64 NALASR_FOLD_CB=64
diag_env cb128 NALASR_FOLD_CB=128
grep -E "rc=|passed|failed|Error" $LOG | tail -14
