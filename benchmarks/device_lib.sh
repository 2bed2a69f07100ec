# Sourced by the device-call scripts: `. benchmarks/device_lib.sh NAME` sets up the environment, the log
# $OUT/NAME.log, `say` (a timestamped line to the screen and the log) and records the GPU and its clock.
set -u
export PYTHONPATH=$PWD:$PWD/kernels PYTHONUNBUFFERED=1
LOG=$OUT/$1.log
say() { echo "== $(date +%T) $*" | tee -a $LOG; }
nvidia-smi --query-gpu=name,memory.used,memory.total,clocks.sm --format=csv,noheader | tee -a $LOG
# The steps most calls share. check_518k SECONDS: attention + LayerNorm parity at 518K tokens.
# kernel_tests SECONDS FILE...: the kernel test files in-process on the GPU (the interpreter cases deselected).
check_518k() { timeout $1 python3 benchmarks/gpu_kernels_check.py --cases 518400 >> $LOG 2>&1; say "check rc=$?"; }
kernel_tests() {
  local t=$1; shift
  timeout $t python3 -m pytest -q -rf -p no:cacheprovider "$@" -k "not interpreter" >> $LOG 2>&1; say "kernel tests rc=$?"
}
