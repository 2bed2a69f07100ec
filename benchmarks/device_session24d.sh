#!/usr/bin/env bash
# Issue 5, session 24 call 4: the map's m_q from xa = α·dir (nala._query_mag_fwd: log2|xa| − log2|α|, no log2 of r
# a token; offline 444 → 439 loop instructions, 56 → 54 MUFU ops a warp-tile). 518K parity, the GPU kernel tests,
# the forward / backward at 518K and 1M against the previous head's kernels (benchmarks/_old_kernels = 7f72413)
# three times.
. benchmarks/device_lib.sh s24d
check_518k 90
ab_old 3 benchmarks/_old_kernels/nalasr_kernels
kernel_tests 300 tests/test_kernels.py
grep -E "rc=|passed|failed" $LOG | tail -8
