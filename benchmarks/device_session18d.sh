#!/usr/bin/env bash
# Issue 5, session 18 call 4: Nsight Compute of the landed forward passes as they run now (one-warp ZDOT reduce,
# float16 map): throughput breakdown, pipes, warp stalls, at the card's own clocks (--clock-control none).
. benchmarks/device_lib.sh s18d
ncu_attention 200 "_fwd_map|_fwd_reduce" ncu_forward.txt --clock-control none --section SpeedOfLight \
  --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section WarpStateStats --section Occupancy \
  --section SchedulerStats --section InstructionStats --print-details all \
  --metrics regex:smsp__warp_issue_stalled_.*_per_warp_active.pct,l1tex__data_pipe_lsu_wavefronts.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum,dram__bytes_read.sum,dram__bytes_write.sum
grep -E "^  _fwd|Duration|DRAM Throughput|Issue Slots Busy|Issued Warp|No Eligible|Achieved Occupancy|stalled_.*(long|short|mio|barrier|wait|math|lg_throttle|not_selected|dispatch|tex|no_inst|branch|drain|membar|sleep|selected)|wavefronts|requests|sectors|dram__bytes" $OUT/ncu_forward.txt | head -80
