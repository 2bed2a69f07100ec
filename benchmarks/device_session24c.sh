#!/usr/bin/env bash
# Issue 5, session 24 call 3: _combine covering all its partials in one load where they fit 8,192 floats a
# program (narrower column blocks at 1M: 4 columns; temporary switch NALASR_COMBINE_ONE), the folded combine off
# by default; against the previous head (benchmarks/_old_kernels = 7f72413) twice; the fold with narrower slices
# (NALASR_FOLD_CW, NALASR_FOLD_ELEMS); the timeline of the fold at CW 2.
. benchmarks/device_lib.sh s24c
timeout 100 python3 -m pytest -q -rf -p no:cacheprovider tests/test_kernels.py -k "fold or extras_cuda" >> $LOG 2>&1; say "tests rc=$?"
ab_old 2 benchmarks/_old_kernels/nalasr_kernels
diag_env one0 NALASR_COMBINE_ONE=0
diag_env fold_cw4 NALASR_FOLD=1 NALASR_FOLD_CW=4
diag_env fold_cw2 NALASR_FOLD=1 NALASR_FOLD_CW=2
NALASR_FOLD_CW=2 timeout 100 python3 benchmarks/fold_timeline_gpu.py --json $OUT/fold_timeline_cw2.json 2>&1 | tee -a $LOG; say "timeline rc=$?"
timeout 100 python3 benchmarks/fold_timeline_gpu.py --json $OUT/fold_timeline.json 2>&1 | tee -a $LOG; say "timeline rc=$?"
grep -E "rc=|passed|failed|Error" $LOG | tail -12
