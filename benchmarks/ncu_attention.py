"""A short, fixed workload for Nsight Compute: the fused NaLa forward (and one backward) at 518,400 tokens,
4 heads x 16, fp16, q/k/v as the model passes them (dense, from four GEMMs).

    ncu --profile-from-start off -k regex:"_fwd|_bwd" --section SpeedOfLight python benchmarks/ncu_attention.py

Autotuning runs first, outside the profiled range (cudaProfilerStart/Stop), so ncu sees only the chosen configs.
"""

from __future__ import annotations

import torch

from nalasr_kernels.nala import nala_attention_triton


def main() -> None:
    torch.manual_seed(0)
    n, h, d = 518_400, 4, 16
    q, k, v = (torch.randn(1, n, h, d, device="cuda", dtype=torch.float16, requires_grad=True) for _ in range(3))
    g = torch.randn(1, n, h, d, device="cuda", dtype=torch.float16)
    for _ in range(2):
        nala_attention_triton(q, k, v).backward(g)
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStart()
    nala_attention_triton(q, k, v).backward(g)
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStop()


if __name__ == "__main__":
    main()
