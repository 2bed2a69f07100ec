#!/usr/bin/env bash
# Issue 5, session 21 call 1: the sin/cos of the 16-bit paths as degree 4 / 5 minimax polynomials (NALASR_SERIES7=1:
# the degree 6 / 7 series of before) and _fwd_map's den from the products it multiplies anyway (NALASR_MAP_DENMC=0:
# as before), A/B twice in alternating order at 518K and 1M; 518K parity; _fwd_map on one warp (config sweep);
# Nsight Compute's per-instruction stall sampling of the register reduce and the map (SourceCounters).
# (NALASR_SERIES7 and NALASR_MAP_DENMC were temporary switches of the tree it ran on; they left before landing,
# see benchmarks/results/h200/session21/README.md.)
. benchmarks/device_lib.sh s21
check_518k 90
for round in 1 2; do
  for v in "1 0" "1 1" "0 1"; do
    set -- $v
    NALASR_SERIES7=$1 NALASR_MAP_DENMC=$2 timeout 60 python3 benchmarks/kernel_diag_gpu.py \
      --json $OUT/diag_s$1_d$2_r$round.json --sizes 518400,1036800 --ppsm 8 --parts attention,profile >> $LOG 2>&1
    say "diag series7=$1 denmc=$2 round $round rc=$?"
  done
done
sweep map1w --pass fwd_map --configs 64x2x2,32x1x2,16x1x2 --ppsm 24,48,96
ncu_attention 150 "_fwd_reduce_rr|_fwd_map" ncu_source.txt --section SourceCounters --section WarpStateStats \
  --import-source no -o $OUT/ncu_fwd
ncu=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
[ -f $OUT/ncu_fwd.ncu-rep ] && timeout 60 $ncu -i $OUT/ncu_fwd.ncu-rep --page source --csv --print-source sass \
  > $OUT/ncu_source.csv 2>> $LOG; say "ncu export rc=$? $(wc -c < $OUT/ncu_source.csv)"
[ -s $OUT/ncu_source.csv ] && rm -f $OUT/ncu_fwd.ncu-rep  # at most 8 files come back
grep -E "rc=" $LOG | tail -12
for f in $OUT/diag_*.json; do python3 - "$f" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
us = {r["kernel"]: round(r["us_per_call"], 1) for r in d["profile"]}
print(sys.argv[1].split("/")[-1], us.get("_fwd_reduce_rr"), us.get("_fwd_map"), us.get("_bwd_query"), us.get("_bwd_key"))
PY
done
grep -E "^ *(518400|1036800) new" $LOG | head -12
python3 - $OUT <<'PY'
import json, pathlib, sys
out = pathlib.Path(sys.argv[1])
files = sorted(out.glob("diag_*.json"))
json.dump({f.stem: json.load(open(f)) for f in files}, open(out / "diag_all.json", "w"), indent=1)
for f in files:
    f.unlink()
PY
ls $OUT
