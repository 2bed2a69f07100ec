# Sourced by the device-call scripts: `. benchmarks/device_lib.sh NAME` sets up the environment, the log
# $OUT/NAME.log, `say` (a timestamped line to the screen and the log) and records the GPU and its clock.
set -u
export PYTHONPATH=$PWD:$PWD/kernels PYTHONUNBUFFERED=1
LOG=$OUT/$1.log
say() { echo "== $(date +%T) $*" | tee -a $LOG; }
nvidia-smi --query-gpu=name,memory.used,memory.total,clocks.sm --format=csv,noheader | tee -a $LOG
# The steps most calls share. check_518k SECONDS: attention + LayerNorm parity at 518K tokens.
# kernel_tests SECONDS FILE...: the kernel test files in-process on the GPU (the interpreter cases deselected; with
# K=EXPR only the tests EXPR selects: a -k among the files would be overridden by this one's).
check_518k() { timeout $1 python3 benchmarks/gpu_kernels_check.py --cases 518400 >> $LOG 2>&1; say "check rc=$?"; }
kernel_tests() {
  local t=$1; shift
  timeout $t python3 -m pytest -q -rf -p no:cacheprovider "$@" -k "not interpreter${K:+ and ($K)}" >> $LOG 2>&1
  say "kernel tests rc=$?"
}
# diag_ab VAR NAME SECONDS [VALUE...]: attention times at 518K with the environment variable VAR at each VALUE
# (0, then 1 unless given; $OUT/diag_NAME<VALUE>.json), at PPSM programs per SM of _bwd_query (of both reduce
# passes before session 13; 8 unless set; a list like 8,16 tries each).
diag_ab() {
  local a var=$1 name=$2 t=$3
  shift 3
  for a in ${@:-0 1}; do
    env $var=$a timeout $t python3 benchmarks/kernel_diag_gpu.py --json $OUT/diag_$name$a.json --sizes 518400 \
      --ppsm ${PPSM:-8} --parts attention,profile,registers >> $LOG 2>&1; say "diag $var=$a rc=$?"
  done
}
# LAYOUT (qkvg unless set): the q, k, v layout of diag_env and ab_old (kernel_diag_gpu.py --layout).
# diag_env NAME VAR=VALUE...: attention times with those environment variables ($OUT/diag_NAME.json), their figure
# lines and the profile lines matching SHOW (the register reduce's unless set) tagged NAME on the screen and in the
# log. SIZES (518400,1036800), PPSM (8: _bwd_query's programs per SM, a list tries each), PROFILE_N (518400: the
# profile's token count) and DIAG_T (60 s) when unset.
diag_env() {
  local name=$1
  shift
  env "$@" timeout ${DIAG_T:-60} python3 benchmarks/kernel_diag_gpu.py --json $OUT/diag_$name.json \
    --sizes ${SIZES:-518400,1036800} --ppsm ${PPSM:-8} --parts attention,profile --profile-n ${PROFILE_N:-518400} \
    --layout ${LAYOUT:-qkvg} > $OUT/diag_$name.tmp 2>&1
  say "diag $name ($*) rc=$?"
  grep -E "^ *[0-9]+ new|${SHOW:-_fwd_reduce_rr}" $OUT/diag_$name.tmp | sed "s/^/$name: /" | tee -a $LOG
  rm -f $OUT/diag_$name.tmp
}
# ab_old ROUNDS OLD: the attention at 518K and 1M with this tree's kernels and, in the same process, the package copy
# OLD (kernel_diag_gpu.py --old) ROUNDS times ($OUT/ab_r<round>.json); the figure lines tagged r<round>.
ab_old() {
  local round
  for round in $(seq $1); do
    timeout 100 python3 benchmarks/kernel_diag_gpu.py --json $OUT/ab_r$round.json --sizes 518400,1036800 --ppsm 8 \
      --parts attention --old $2 --layout ${LAYOUT:-qkvg} > $OUT/ab.tmp 2>&1; say "ab round $round rc=$?"
    grep -E "^ *(518400|1036800) (new|old)" $OUT/ab.tmp | sed "s/^/r$round: /" | tee -a $LOG
  done
  rm -f $OUT/ab.tmp
}
# sweep NAME ARGS...: benchmarks/config_sweep_gpu.py ARGS → $OUT/sweep_NAME.json (150 s at most).
sweep() {
  local name=$1
  shift
  timeout 150 python3 benchmarks/config_sweep_gpu.py --json $OUT/sweep_$name.json "$@" >> $LOG 2>&1; say "sweep $name rc=$?"
}
_ncu() { command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1; }
# ncu_attention SECONDS KERNEL_REGEX FILE NCU_OPTION...: Nsight Compute over benchmarks/ncu_attention.py → $OUT/FILE.
ncu_attention() {
  local t=$1 k=$2 f=$3 ncu
  shift 3
  ncu=$(_ncu)
  [ -n "$ncu" ] || { say "no ncu on this machine"; return; }
  timeout $t $ncu --profile-from-start off -k regex:"$k" "$@" python3 benchmarks/ncu_attention.py > $OUT/$f 2>&1
  say "ncu rc=$?"
}
# ncu_export REP CSV: the source page (per-instruction stall sampling, benchmarks/ncu_source.py reads it) of the
# report $OUT/REP.ncu-rep as $OUT/CSV; the report goes once exported (at most 8 files come back from a call).
ncu_export() {
  [ -f $OUT/$1.ncu-rep ] || return
  timeout 60 $(_ncu) -i $OUT/$1.ncu-rep --page source --csv --print-source sass > $OUT/$2 2>> $LOG
  say "ncu export rc=$? $(wc -c < $OUT/$2)"
  [ -s $OUT/$2 ] && rm -f $OUT/$1.ncu-rep
}
# merge_json GLOB FILE: the JSON files $OUT/GLOB as one $OUT/FILE ({file stem: content}), the parts removed.
merge_json() {
  python3 - $OUT "$1" "$2" <<'PY'
import json, pathlib, sys
out = pathlib.Path(sys.argv[1])
files = sorted(out.glob(sys.argv[2]))
json.dump({f.stem: json.load(open(f)) for f in files}, open(out / sys.argv[3], "w"), indent=1)
for f in files:
    f.unlink()
PY
}
# pass_times FILE...: the streaming passes' kernel times (µs: reduce, map or pair map, _bwd_query, _bwd_key; with
# PASSES="NAME..." those kernels') in each kernel_diag_gpu.py JSON, a line a file.
pass_times() {
  python3 - "$@" <<'PY'
import json, os, sys
names = os.environ.get("PASSES", "").split() or ["_fwd_reduce_rr", "_fwd_map", "_bwd_query", "_bwd_key"]
for path in sys.argv[1:]:
    us = {r["kernel"]: round(r["us_per_call"], 1) for r in json.load(open(path))["profile"]}
    us.setdefault("_fwd_map", us.get("_fwd_map_pair"))  # the map over head pairs (nala._map_pair)
    print(path.split("/")[-1], *(us.get(k) for k in names))
PY
}
