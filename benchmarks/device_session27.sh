#!/usr/bin/env bash
# Issue 5, session 27 call 1 (no code change): the pair map under a register cap (19 an SM), at 518K and 1M; the
# forward's timeline in the model's layout; the map passes' smallest chunks at 49K and 262K (dense, pair forced
# and one-head map).
. benchmarks/device_lib.sh s27
LAYOUT=dense diag_env base
sweep cap --pass fwd_map_pair --layout dense --configs 32x1x3,32x1x3x104,32x1x3x112,32x1x2x104 --ppsm 16,17,18,19
sweep cap1m --pass fwd_map_pair --layout dense --tokens 1036800 --configs 32x1x3,32x1x3x104 --ppsm 16,19
timeout 120 python3 benchmarks/timeline_gpu.py --json $OUT/timeline.json --layout dense >> $LOG 2>&1; say "timeline rc=$?"
sweep small_pair --pass fwd_map_pair --layout dense --tokens 49152 --env NALASR_MAP_PAIR=1 --configs 32x1x3 --ppsm 16 --min-chunk 32,64,128,256
sweep small_map --pass fwd_map --layout dense --tokens 49152 --configs 64x2x2 --ppsm 28 --min-chunk 64,128,256
sweep mid_pair --pass fwd_map_pair --layout dense --tokens 262144 --env NALASR_MAP_PAIR=1 --configs 32x1x3 --ppsm 16 --min-chunk 64,128,256
sweep mid_map --pass fwd_map --layout dense --tokens 262144 --configs 64x2x2 --ppsm 28 --min-chunk 64,256
merge_json "sweep_*.json" sweeps.json
grep -E "best first|^  [0-9]" $LOG | head -80
pass_times $OUT/diag_base.json
ls $OUT
