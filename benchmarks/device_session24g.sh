#!/usr/bin/env bash
# Issue 5, session 24 call 7: the backward's ∂θ/∂u as ka − ka·u² (nala._dtanh, 16-bit inputs: one FFMA on the u² the
# sine formed; offline _bwd_query 613 → 605, _bwd_key 411 → 401 loop instructions). 518K parity, the forward /
# backward at 518K and 1M against the previous head's kernels (benchmarks/_old_kernels = 1ac09dc) twice.
. benchmarks/device_lib.sh s24g
check_518k 80
ab_old 2 benchmarks/_old_kernels/nalasr_kernels
grep -E "rc=|passed|failed" $LOG | tail -6
