#!/usr/bin/env bash
# Issue 5, session 22 call 1: the register reduce's loads as inline asm with the slot offsets as immediates
# (NALASR_RR_ASMLD, a temporary switch: one 64-bit address a tensor and tile instead of one a load, no predicates
# or zeroing on full tiles; offline sm_90 455 -> 402 instructions a tile on the fast path) and unrolled by two
# (NALASR_RR_UNR=2, temporary), A/B twice at 518K and 1M; 518K parity with the asm loads; Nsight Compute
# (--clock-control none) of the four streaming passes: throughput, pipes, occupancy, scheduler, warp states.
# (Its NALASR_RR_* / NALASR_BWDQ_* / NALASR_BWDK_* switches were temporary and left before landing: the landed
# code has their on-state, see benchmarks/results/h200/session22/README.md; on main this script runs that code.)
. benchmarks/device_lib.sh s22
check_518k 90
for round in 1 2; do
  for v in "0 1" "1 1" "1 2"; do
    set -- $v
    diag_env a$1u$2_r$round NALASR_RR_ASMLD=$1 NALASR_RR_UNR=$2
  done
done
pass_times $OUT/diag_a*.json | tee -a $LOG
merge_json "diag_a*.json" diag_asm.json
ncu_attention 150 "_fwd_reduce_rr|_fwd_map|_bwd_query|_bwd_key" ncu_details.txt --clock-control none \
  --section SpeedOfLight --section ComputeWorkloadAnalysis --section Occupancy --section SchedulerStats \
  --section WarpStateStats --section LaunchStats --section InstructionStats \
  --metrics sm__cycles_elapsed.avg.per_second,sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active,sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_lsu.avg.pct_of_peak_sustained_active,sm__pipe_shared_cycles_active.avg.pct_of_peak_sustained_active,dram__throughput.avg.pct_of_peak_sustained_elapsed
grep -E "rc=|all passed" $LOG | tail -12
