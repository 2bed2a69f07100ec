"""Fused LayerNorm vs F.layer_norm on CUDA: parity and time at NaLaSR's shapes, then the whole network.

    PYTHONPATH=.:kernels python benchmarks/layernorm_gpu.py

Prints a table; if the fused kernel wins and matches, flip the default in nalasr.ops.layer_norm (today
opt-in with NALASR_FUSED_LAYERNORM=1) and re-run `nalasr bench --preset h200`.
"""

from __future__ import annotations

import os

import torch
import torch.nn.functional as F
from triton.testing import do_bench

from nalasr.model import create_model
from nalasr_kernels import layer_norm_triton


def main() -> None:
    print(f"{'tokens':>9} {'C':>3} {'dtype':>8} {'torch ms':>9} {'fused ms':>9} {'rel err':>9} {'fwd+bwd torch':>14} {'fused':>8}")
    for n, c in ((49152, 64), (518400, 64), (2073600, 64), (147456, 64), (518400, 48)):
        for dtype in (torch.float16, torch.bfloat16):
            x = torch.randn(n, c, device="cuda", dtype=dtype)
            w, b = torch.randn(c, device="cuda"), torch.randn(c, device="cuda")
            ref = F.layer_norm(x.float(), (c,), w, b, 1e-5)
            out = layer_norm_triton(x, (c,), w, b, 1e-5)
            err = float((out.float() - ref).norm() / ref.norm())
            t_ref = do_bench(lambda: F.layer_norm(x, (c,), w.to(dtype), b.to(dtype), 1e-5), return_mode="median")
            t_new = do_bench(lambda: layer_norm_triton(x, (c,), w, b, 1e-5), return_mode="median")
            xg = x.clone().requires_grad_()
            dy = torch.randn_like(x)
            t_ref_b = do_bench(lambda: F.layer_norm(xg, (c,), w.to(dtype), b.to(dtype), 1e-5).backward(dy), return_mode="median")
            t_new_b = do_bench(lambda: layer_norm_triton(xg, (c,), w, b, 1e-5).backward(dy), return_mode="median")
            print(f"{n:9d} {c:3d} {str(dtype)[6:]:>8} {t_ref:9.3f} {t_new:9.3f} {err:9.1e} {t_ref_b:14.3f} {t_new_b:8.3f}")
    model = create_model("default", 4).cuda().half().eval()
    for hw in ((192, 256), (540, 960)):
        x = torch.rand(1, 3, *hw, device="cuda", dtype=torch.half)
        with torch.inference_mode():
            times = {}
            for flag in ("0", "1"):
                os.environ["NALASR_FUSED_LAYERNORM"] = flag
                times[flag] = do_bench(lambda: model(x), warmup=200, rep=1000, return_mode="median")
        print(f"network x4 fp16 LR {hw[0]}x{hw[1]}: torch LN {times['0']:.1f} ms, fused LN {times['1']:.1f} ms")


if __name__ == "__main__":
    main()
