"""Which layout changes take the GPU forward toward issue 6's 540×960 ≤ 19 ms? A/B of block forwards.

    PYTHONPATH=.:kernels python benchmarks/fusion_gpu.py [--sizes 192x256,540x960] [--json OUT.json]

The 540×960 profile (benchmarks/results/h200/device_session2_2026-11-29.log) put ~18 of the 32 ms outside
LayerNorm in elementwise kernels, most of them PyTorch's non-vectorised path: ops on the strided q/k/v/g
views of the single qkvg GEMM (SiLU on g, the gate product, the copy cuDNN makes of v for LePE) and the
layer-scale `addcmul` (a broadcast operand). Variants, all the same function of the weights:

- ``base``: the model as shipped;
- ``split``: q, k, v, g from four C-wide GEMMs (as the CPU path does): every later op reads dense tensors;
- ``split+fold``: also γ folded into proj / fc2 (γ·(Wx + b) = (γW)x + γb), so the residual is a plain add;
- ``+gate``: with NALASR_FUSED_GATE=1, norm(o + LePE)·SiLU(g) in one Triton pass (nalasr.ops.gated_norm).

Each variant is timed eagerly and replayed from a CUDA graph; its output is compared with ``base``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import torch
import torch.nn.functional as F
from triton.testing import do_bench

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "kernels")]

from nalasr.graphs import GraphedForward  # noqa: E402
from nalasr.model import create_model  # noqa: E402
from nalasr.model import nalasr as M  # noqa: E402


def mixer_split(self, x):
    b, h, w, c = x.shape
    q, k, v, g = (F.linear(x, wt, bs) for wt, bs in zip(self.qkvg.weight.chunk(4), self.qkvg.bias.chunk(4)))
    heads = (b, h * w, self.cfg.heads, self.cfg.head_dim)
    o = self._attend(q.reshape(heads), k.reshape(heads), v.reshape(heads), (h, w))
    lepe = M._dwconv(v, self.lepe)
    if M.fused_gate_wanted(x):
        return self.proj(M.gated_norm(o.reshape(b, h, w, c), lepe, g, self.norm.weight, self.norm.bias, self.norm.eps))
    o = M._add(lepe.reshape(heads), o).reshape(b, h, w, c)
    gate = F.silu(g, inplace=True)
    return self.proj(M._mul(self.norm(o), gate))


def block_folded(self, x):
    x = M._add(M._dwconv(x, self.cpe), x)
    x = M._add(x, self.mixer(self.norm1(x)))  # γ1 lives in mixer.proj
    return M._add(x, self.ffn(self.norm2(x)))  # γ2 lives in ffn.fc2


def fold_layerscale(model) -> None:
    with torch.no_grad():
        for blk in model.modules():
            if isinstance(blk, M.NalaBlock):
                for gamma, lin in ((blk.gamma1, blk.mixer.proj), (blk.gamma2, blk.ffn.fc2)):
                    lin.weight.mul_(gamma[:, None])
                    lin.bias.mul_(gamma)
                    gamma.fill_(1.0)


VARIANTS = {  # name: (mixer forward, block forward, fold γ, NALASR_FUSED_GATE)
    "base": (None, None, False, "0"),
    "base+gate": (None, None, False, "1"),
    "split": (mixer_split, None, False, "0"),
    "split+fold": (mixer_split, block_folded, True, "0"),
    "split+fold+gate": (mixer_split, block_folded, True, "1"),
}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="192x256,540x960")
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    rows = []
    orig_mixer, orig_block = M.NalaMixer.forward, M.NalaBlock.forward
    for size in a.sizes.split(","):
        h, w = (int(v) for v in size.split("x"))
        torch.manual_seed(0)
        x = torch.rand(1, 3, h, w, device="cuda", dtype=torch.half).contiguous(memory_format=torch.channels_last)
        ref = None
        for name, (mixer_fwd, block_fwd, fold, gate) in VARIANTS.items():
            os.environ["NALASR_FUSED_GATE"] = gate
            M.NalaMixer.forward = mixer_fwd or orig_mixer
            M.NalaBlock.forward = block_fwd or orig_block
            torch.manual_seed(0)
            model = create_model("default", 4)
            with torch.no_grad():  # non-trivial layer scales, and an upsampler that is not zero (its init)
                for p in model.parameters():
                    if p.dim() == 1 and p.numel() == model.cfg.dim:
                        p.uniform_(0.1, 0.5)
                torch.nn.init.normal_(model.upsampler[0].weight, std=0.02)
            if fold:
                fold_layerscale(model)
            model = model.cuda().half().eval()
            with torch.inference_mode():
                y = model(x).float()
                ref = y if ref is None else ref
                g = GraphedForward(model)
                g(x), g(x)
                row = {"lr": size, "variant": name,
                       "eager_ms": do_bench(lambda: model(x), return_mode="median"),
                       "graph_ms": do_bench(lambda: g(x), return_mode="median"),
                       "max_abs_diff_vs_base": float((y - ref).abs().max())}
            rows.append(row)
            print(json.dumps(row), flush=True)
    M.NalaMixer.forward, M.NalaBlock.forward = orig_mixer, orig_block
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
