#!/usr/bin/env bash
# Issue 5, session 14, second call (one H200): the 16-bit input tiles of each pass reaching float32 as t @ I on the
# tensor cores (nala._upcast, NALASR_EYE_<PASS>=0|1|2) instead of a conversion in the load's blocked layout: the
# elementwise math then runs in the product's accumulator layout, and the operand conversions that went through
# shared memory with barriers become register shuffles (offline sm_90, Triton 3.6: _bwd_query 861 → 731
# instructions and 18 → 5 barriers a warp and tile, 255 → 223 registers; _bwd_key 522 → 468, 14 → 6; _fwd_map
# 270 → 334 instructions but no A operand through shared memory). Per pass: the current picks and the configs the
# new register counts could favour, each switch setting; then the kernel tests and the 518K parity (bwd EYE on).
# (The record of that call: afterwards EYE stayed in the backward kernels only, NALASR_EYE_BWD_QUERY / _BWD_KEY =
# 0|1, _bwd_key's for k and v together, its "2" here; the forward kernels' variants are gone, see nala._eye.)
. benchmarks/device_lib.sh s14b
sweep q --pass bwd_query --configs 32x2x2,16x1x2,64x4x2 --ppsm 8,12 --env NALASR_EYE_BWD_QUERY=0,1
sweep k --pass bwd_key --configs 64x4x2x168,64x4x2x128,32x2x2 --ppsm 24 --env NALASR_EYE_BWD_KEY=0,1,2
sweep m --pass fwd_map --configs 64x4x2,128x4x2,64x2x2,32x1x2 --ppsm 24 --env NALASR_EYE_FWD_MAP=0,1
sweep r --pass fwd_reduce --configs 32x1x2,64x4x2 --ppsm 32 --env NALASR_EYE_FWD_REDUCE=0,1,2
kernel_tests 220 tests/test_kernels.py
check_518k 60
for s in BWD_QUERY BWD_KEY FWD_MAP; do
  PYTHONPATH=$PYTHONPATH:tests timeout 60 python3 benchmarks/switch_errors.py NALASR_EYE_$s >> $LOG 2>&1; say "switch $s rc=$?"
done
grep -h -A30 "best first" $LOG | grep -v "^--" | head -80
grep -E "FAIL|passed|failed|rc=|all passed| vs 1," $LOG | tail -30
