#!/usr/bin/env bash
# Issue 5, session 31, call 3: the register map storing a token's four columns of a lane as one 8-byte word (call 2's
# two 4-byte words a token took the pass to 75 µs): the GPU map tests; the attention with NALASR_MAP_RR 0 / 1 twice
# on dense q, k, v, once on the model's views; Nsight Compute's stall sampling of the register map (source CSV).
. benchmarks/device_lib.sh s31c
K="extras_cuda or (parity_cuda and (map-rr or batch3 or pair))" kernel_tests 150 tests/test_kernels.py
grep -E "passed|failed|FAIL|Error" $LOG | cut -c1-900 | tail -4
export SHOW="_fwd_reduce_rr|_fwd_map"
for r in 1 2; do for m in 0 1; do LAYOUT=dense diag_env r${r}m$m NALASR_MAP_RR=$m; done; done
LAYOUT=qkvg diag_env qkvg_m1 NALASR_MAP_RR=1
PASSES="_fwd_reduce_rr _fwd_map_pair _fwd_map _fwd_map_rr _bwd_query _bwd_key" pass_times $OUT/diag_*.json | tee -a $LOG
merge_json "diag_*.json" diag_map_rr.json
ncu_attention 150 "_fwd_map_rr" ncu_map_rr.txt --section SourceCounters --section WarpStateStats \
  --section SpeedOfLight --section MemoryWorkloadAnalysis --import-source no -o $OUT/ncu_map_rr
grep -E "Duration|Throughput|Issue|Warp Cycles|Stall|L1/TEX Hit|L2 Hit|Mem Busy" $OUT/ncu_map_rr.txt | head -30 | tee -a $LOG
ncu_export ncu_map_rr ncu_map_rr.csv
python3 benchmarks/ncu_source.py $OUT/ncu_map_rr.csv --top 12 | tee -a $LOG
ls $OUT
