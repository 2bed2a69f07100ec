#!/usr/bin/env bash
# Issue 5, session 31, call 2: the map with its products issued from registers (nala_map_rr, NALASR_MAP_RR, on by
# default for float16 q of 16 dims and an even head count): the 518K parity check; the GPU extras and the float16
# parity cases; the whole attention with NALASR_MAP_RR 0 / 1 twice each on dense q, k, v (518K, 1M), once each at
# 49K and 262K, once on the model's views (qkvg); the reduce's FEAT_A off with the register map on, once.
. benchmarks/device_lib.sh s31b
check_518k 90
K="extras_cuda or (parity_cuda and (fp16 or batch3))" kernel_tests 200 tests/test_kernels.py
grep -E "passed|failed|FAIL|Error" $LOG | cut -c1-900 | tail -6
export SHOW="_fwd_reduce_rr|_fwd_map"
for r in 1 2; do for m in 0 1; do LAYOUT=dense diag_env r${r}m$m NALASR_MAP_RR=$m; done; done
for m in 0 1; do SIZES=49152,262144 PROFILE_N=262144 LAYOUT=dense diag_env small_m$m NALASR_MAP_RR=$m; done
for m in 0 1; do LAYOUT=qkvg diag_env qkvg_m$m NALASR_MAP_RR=$m; done
LAYOUT=dense diag_env f0m1 NALASR_RR_FEAT_A=0
PASSES="_fwd_reduce_rr _fwd_map_pair _fwd_map _fwd_map_rr _bwd_query _bwd_key" pass_times $OUT/diag_*.json | tee -a $LOG
merge_json "diag_*.json" diag_map_rr.json
ls $OUT
