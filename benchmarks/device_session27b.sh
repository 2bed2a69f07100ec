#!/usr/bin/env bash
# Issue 5, session 27 call 2: each call's first pass launched by PDL behind the kernel before, its last pass letting
# the next start (nala._chain, NALASR_PDL_CHAIN): 518K parity; the chain's GPU tests; A/B off / on twice on dense,
# once on qkvg (each its own process); the timeline with it; the one-head map's smallest chunk at 4K-131K again.
. benchmarks/device_lib.sh s27b
check_518k 100
# (as it ran: device_lib.sh's own -k overrode this one, so every GPU kernel test ran and the 200 s ran out; K= since)
kernel_tests 200 tests/test_kernels.py -k "chain or extras_cuda"
grep -E "passed|failed|FAIL|Error" $LOG | cut -c1-600 | tail -4
for r in 1 2; do
  for c in 0 1; do LAYOUT=dense diag_env d${r}c$c NALASR_PDL_CHAIN=$c; done
done
for c in 0 1; do LAYOUT=qkvg diag_env qc$c NALASR_PDL_CHAIN=$c; done
timeout 120 python3 benchmarks/timeline_gpu.py --json $OUT/timeline.json --layout dense >> $LOG 2>&1; say "timeline rc=$?"
grep -A4 -E "^ *(518400|1036800) fwd" $LOG | tail -10
for t in 4096 49152 131072; do
  sweep map$t --pass fwd_map --layout dense --tokens $t --configs 64x2x2 --ppsm 28 --min-chunk 256,128,64,256,128
done
merge_json "sweep_*.json" sweeps.json
pass_times $OUT/diag_*.json | tee -a $LOG
merge_json "diag_*.json" diag.json
grep -E "best first|^  [0-9]" $LOG | tail -20
ls $OUT
