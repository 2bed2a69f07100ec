#!/usr/bin/env bash
# Issue 5, session 26 call 1: the map over two heads a program (_fwd_map_pair, nala._map_pair) in the model's own
# layout (q, k, v separate contiguous tensors): 518K parity with the dense case; its programs per SM; A/B against
# the previous head (benchmarks/_old_kernels = 9e6ec85) on dense and on the benchmark's strided views, where it is
# off unless forced (NALASR_MAP_PAIR=1).
. benchmarks/device_lib.sh s26
check_518k 100
grep -E "518400|FAIL" $LOG | grep -v "^==" | tail -12
LAYOUT=dense ab_old 3 benchmarks/_old_kernels/nalasr_kernels
LAYOUT=qkvg ab_old 1 benchmarks/_old_kernels/nalasr_kernels
for p in 12 16 17 24 34; do LAYOUT=dense diag_env pp$p NALASR_PROGRAMS_PER_SM_FWD_MAP_PAIR=$p; done
LAYOUT=dense diag_env d_pair0 NALASR_MAP_PAIR=0
LAYOUT=qkvg diag_env q_pair1 NALASR_MAP_PAIR=1
LAYOUT=qkvg diag_env q_pair0 NALASR_MAP_PAIR=0
pass_times $OUT/diag_*.json | tee -a $LOG
grep -E "^r[0-9]: " $LOG
