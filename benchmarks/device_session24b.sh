#!/usr/bin/env bash
# Issue 5, session 24 call 2: the folded combine's GPU test, and where its time goes (benchmarks/fold_timeline_gpu.py:
# the map's programs' stamps around the wait, the claim, the slice's release and the state's readiness, with and
# without the fold), at 518K and 1M.
. benchmarks/device_lib.sh s24b
timeout 120 python3 -m pytest -q -rf -p no:cacheprovider tests/test_kernels.py -k "fold or stamps" >> $LOG 2>&1; say "tests rc=$?"
timeout 120 python3 benchmarks/fold_timeline_gpu.py --json $OUT/fold_timeline.json 2>&1 | tee -a $LOG; say "timeline rc=$?"
grep -E "rc=|passed|failed|Error" $LOG | tail -8
