# Sourced by the device-call scripts: `. benchmarks/device_lib.sh NAME` sets up the environment, the log
# $OUT/NAME.log, `say` (a timestamped line to the screen and the log) and records the GPU and its clock.
set -u
export PYTHONPATH=$PWD:$PWD/kernels PYTHONUNBUFFERED=1
LOG=$OUT/$1.log
say() { echo "== $(date +%T) $*" | tee -a $LOG; }
nvidia-smi --query-gpu=name,memory.used,memory.total,clocks.sm --format=csv,noheader | tee -a $LOG
