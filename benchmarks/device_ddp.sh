#!/usr/bin/env bash
# Training throughput of one GPU against two under torchrun (DDP), with and without CUDA graphs, on an
# nvidia-h200-x2 machine: the default variant, x2/x3/x4 on one trunk, LR 48², the carried training images
# (.carry/data/train), no validation. Each case trains MIN minutes from scratch and checkpoints at the end,
# where two processes also check that their weights are equal (Trainer._check_in_sync).
#   [CASES="two_graphs_b64 ..."] bash benchmarks/device_ddp.sh  →  $OUT/ddp.json, $OUT/ddp.md, $OUT/ddp.log
. benchmarks/device_lib.sh ddp
[ -f .carry/train_env ] && . .carry/train_env
MIN=${MIN:-0.8}
case_run() {  # NAME PROCS BATCH EXTRA... (CASES="name ...": only those)
  local name=$1 procs=$2 batch=$3; shift 3
  [[ " ${CASES:-$name} " == *" $name "* ]] || return 0
  local launch="python3 -m nalasr"
  [ $procs -gt 1 ] && launch="python3 -m torch.distributed.run --standalone --nproc-per-node $procs -m nalasr"
  rm -rf /tmp/ddp_$name
  timeout 300 $launch train --variant default --scale 2,3,4 --data .carry/data/train --val-set '' --steps 100000 \
    --no-fit-schedule --max-minutes $MIN --batch $batch --out /tmp/ddp_$name --device cuda "$@" > $OUT/ddp_$name.txt 2>&1
  say "$name rc=$?"; grep -i "error\|differ\|Traceback" $OUT/ddp_$name.txt | head -5 | tee -a $LOG
  cp /tmp/ddp_$name/log.jsonl /tmp/ddp_$name.jsonl 2>/dev/null
  echo "$name $procs $batch" >> /tmp/ddp_cases  # what the summary below reads
}
rm -f /tmp/ddp_cases
case_run one_graphs_b64 1 64
case_run two_graphs_b64 2 64
case_run two_graphs_b128 2 128
case_run two_eager_b64 2 64 --no-cuda-graphs
python3 - <<'PY' | tee -a $LOG
import json, os, statistics
rows = []
for name, procs, batch in (line.split() for line in open("/tmp/ddp_cases")):
    procs, batch = int(procs), int(batch)
    try:
        recs = [json.loads(l) for l in open(f"/tmp/ddp_{name}.jsonl") if '"it_s"' in l]
    except OSError:
        recs = []
    its = [r["it_s"] for r in recs[2:]]  # the first two log intervals hold start-up and graph capture
    med = statistics.median(its) if its else None
    rows.append({"case": name, "gpus": procs, "global_batch": batch, "steps": recs[-1]["step"] if recs else 0,
                 "it_s": med, "patches_s": round(med * batch, 1) if med else None})
json.dump(rows, open(os.environ["OUT"] + "/ddp.json", "w"), indent=1)
lines = ["| case | GPUs | global batch | steps | it/s (median) | LR patches/s |", "|---|---|---|---|---|---|"]
lines += [f"| {r['case']} | {r['gpus']} | {r['global_batch']} | {r['steps']} | {r['it_s']} | {r['patches_s']} |" for r in rows]
open(os.environ["OUT"] + "/ddp.md", "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
PY
