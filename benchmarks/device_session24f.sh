#!/usr/bin/env bash
# Issue 5, session 24 call 6: the backward passes under register caps at 1M tokens (the 1M backward ratio): _bwd_query
# (224 registers uncapped, 8 one-warp programs an SM) capped at 192 (10 fit; offline 613 → 638 loop instructions, 26
# spill instructions) and 168 (12; 688, 93); _bwd_key (122 registers, 4 four-warp programs an SM) capped at 96 (5 fit;
# 411 → 437, 38).
. benchmarks/device_lib.sh s24f
sweep q1m --pass bwd_query --configs 16x1x2,16x1x2x192,16x1x2x168 --ppsm 8,10,12 --tokens 1036800
sweep k1m --pass bwd_key --configs 64x4x2,64x4x2x96 --ppsm 8,10 --tokens 1036800
grep -E "rc=" $LOG | tail -4
python3 - $OUT <<'PY'
import json, sys
for name in ("q1m", "k1m"):
    d = json.load(open(f"{sys.argv[1]}/sweep_{name}.json"))
    for r in d["rows"]:
        print(name, r["config"], r["ppsm"], round(r["pass_us"], 1), round(r["graph_ms"], 4), r.get("n_regs"), r.get("n_spills"))
PY
