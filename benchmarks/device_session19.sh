#!/usr/bin/env bash
# Issue 5, prepared in session 18 for the next session's first call: the register map prototype
# (benchmarks/rr_map_gpu.py; CPU interpreter: within 1.1e-5 of _fwd_map; offline sm_90, Triton 3.6, no shared memory
# in the loop: SLOTS 2 64 registers / 272 instructions a 16-token iteration, SLOTS 4 128 / 532) against _fwd_map, its
# output checked against the landed forward's (the register order of its nested joins is the GPU's first test:
# an O(1) error means the mma operands are paired wrongly), dense and qkvg inputs.
. benchmarks/device_lib.sh s19
timeout 240 python3 benchmarks/rr_map_gpu.py --json $OUT/rr_map.json --slots 2,4 --ppsm 16,32,64 --maxnreg 0 \
  >> $LOG 2>&1; say "rr map rc=$?"
grep -A 16 "^summary" $LOG; grep -E "rc=|Error" $LOG | tail -4
