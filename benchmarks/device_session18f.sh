#!/usr/bin/env bash
# Issue 5, session 18 call 6: the register-resident reduce prototype (mma.sync from registers, no shared memory;
# offline sm_90 with Triton 3.6: 466-471 instructions a warp-tile, 0 shared memory, 128-166 registers) against
# _fwd_reduce, checked against its state, on dense, qkvg and head-major inputs. benchmarks/rr_reduce_gpu.py then
# held the prototype's own kernel (as in commit 5fc4f03); it now drives the landed nalasr_kernels/nala_rr.py.
. benchmarks/device_lib.sh s18f
timeout 240 python3 benchmarks/rr_reduce_gpu.py --json $OUT/rr.json >> $LOG 2>&1; say "rr rc=$?"
grep -A 30 "^summary" $LOG; grep -E "rc=|Error|error" $LOG | tail -5
