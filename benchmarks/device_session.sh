#!/usr/bin/env bash
# One device call that measures what the CPU machines cannot: kernel parity at full size, the attention
# benchmark, the whole-network benchmark against softmax, and `nalasr eval` timing of four sets.
# Expects Urban100 carried in two halves (.carry/u1, .carry/u2) and Set5/Set14/BSD100 in .carry/evaldata.
# Every step has its own time limit; all results land in $OUT (at most 8 files).
. benchmarks/device_lib.sh session
mkdir -p .carry/evaldata/Urban100/HR && cp -n .carry/u1/* .carry/u2/* .carry/evaldata/Urban100/HR/ 2>/dev/null
say "urban100 images: $(ls .carry/evaldata/Urban100/HR | wc -l)"

say "kernel parity (full sizes)"
timeout ${T_CHECK:-90} python3 benchmarks/gpu_kernels_check.py >> $LOG 2>&1; say "kernel check rc=$?"

say "eval x4, four sets (timed)"
/usr/bin/time -f "eval_x4 wall %e s" timeout 150 python3 -m nalasr eval set5 set14 bsd100 urban100 --scale 4 \
  --data-root .carry/evaldata --device cuda --json > $OUT/eval_x4.json 2>> $LOG; say "eval x4 rc=$?"
tail -1 $LOG

say "attention benchmark"
timeout ${T_ATT:-130} python3 benchmarks/attention.py --out /tmp/att --budget-s ${B_ATT:-70} --heads 4x16 >> $LOG 2>&1; say "attention rc=$?"
cp /tmp/att/attention_float16.json /tmp/att/attention_float16.md $OUT/ 2>/dev/null

say "network benchmark"
timeout ${T_BENCH:-150} python3 -m nalasr bench --devices cuda --sizes 192x256,270x480,540x960,1080x1920 --scales 4 \
  --precisions fp16 --attention nala,nala-reference,sdpa,materialised --time-budget ${B_BENCH:-120} \
  --json $OUT/bench.json --markdown $OUT/bench.md --plot $OUT/bench.png >> $LOG 2>&1; say "bench rc=$?"

say "eval x2 and x3 (for the weights card)"
for s in 2 3; do
  timeout 60 python3 -m nalasr eval set5 set14 bsd100 urban100 --scale $s --data-root .carry/evaldata \
    --device cuda --json > /tmp/eval_x$s.json 2>> $LOG; say "eval x$s rc=$?"
done
python3 -c "import json; json.dump([json.load(open(f'/tmp/eval_x{s}.json')) for s in (2, 3)], open('$OUT/eval_x2_x3.json', 'w'))" 2>> $LOG
say "done"
tail -25 $OUT/bench.md 2>/dev/null
