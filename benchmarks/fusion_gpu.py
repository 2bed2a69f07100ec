"""Which layout changes take the GPU forward toward issue 6's 540×960 ≤ 19 ms? A/B of block forwards.

    PYTHONPATH=.:kernels python benchmarks/fusion_gpu.py [--sizes 192x256,540x960] [--json OUT.json]

The 540×960 profile (benchmarks/results/h200/device_session2_2026-11-29.log) put ~18 of the 32 ms outside
LayerNorm in elementwise kernels, most of them PyTorch's non-vectorised path: ops on the strided q/k/v/g
views of a single qkvg GEMM (SiLU on g, the gate product, the copy cuDNN makes of v for LePE) and the
layer-scale `addcmul` (a broadcast operand). The shipped block (since session 5) computes q, k, v, g with four
C-wide GEMMs, folds γ into proj / fc2 (`_scaled_linear`) and runs norm(o + LePE)·SiLU(g) as one Triton pass
(`nalasr.ops.gated_norm`). Variants, all the same function of the weights:

- ``shipped``: the model as it is (since session 7 with the depthwise convs fused with their epilogues,
  nalasr_kernels.dwconv: x + CPE(x) with norm1, the FFN's conv with GELU, LePE with the gated norm);
- ``conv bias add``: NALASR_FUSED_CONV_BIAS=0, PyTorch's biased convs (a strided broadcast add after each) and a
  separate residual add, instead of nalasr.ops.conv2d_bias_add's one pass;
- ``residual add``: NALASR_FUSED_RESIDUAL=0, the residual updates as a product and an add pass instead of one
  in-place GEMM over the fused kernels' ones column (nalasr.ops.fused_residual_wanted);
- ``dwconv off``: NALASR_FUSED_DWCONV=0, cuDNN's depthwise convs and the separate epilogues (shipped until
  session 7; it was 25.6 against 19.9 ms with them, results/h200/session7/fusion.json);
- ``gate off``: NALASR_FUSED_GATE=0, the PyTorch ops for the gate;
- ``one qkvg GEMM``: q, k, v, g as strided views of one 4C-wide GEMM (the layout before), gate off.

Each variant is timed eagerly and replayed from a CUDA graph; its output is compared with ``shipped``.
Results of the session-5 run of the earlier version of this script (base / split / fold / gate): 32.1, 29.2,
27.3 and 25.6 ms at 540×960 (benchmarks/results/h200/session5/fusion.json).
"""

from __future__ import annotations

import json
import os

import torch
import torch.nn.functional as F
from forward_ab import eager_and_replay_ms, lr_image, lr_sizes, parse_args, write_rows  # puts the repo on sys.path

from nalasr.model import create_model
from nalasr.model import nalasr as M


def mixer_one_gemm(self, x, out_scale):
    b, h, w, c = x.shape
    q, k, v, g = self.qkvg(x).chunk(4, dim=-1)  # strided views of one (B, H, W, 4C) output
    heads = (b, h * w, self.cfg.heads, self.cfg.head_dim)
    o = self._attend(q.reshape(heads), k.reshape(heads), v.reshape(heads), (h, w))
    o = M._add(M._dwconv(v, self.lepe).reshape(heads), o).reshape(b, h, w, c)
    return M._scaled_linear(M._mul(self.norm(o), F.silu(g, inplace=True)), self.proj, out_scale)


VARIANTS = {  # name: (mixer forward or None for the shipped one, environment)
    "shipped": (None, {}),
    "conv bias add": (None, {"NALASR_FUSED_CONV_BIAS": "0"}),
    "residual add": (None, {"NALASR_FUSED_RESIDUAL": "0"}),
    "dwconv off": (None, {"NALASR_FUSED_DWCONV": "0"}),
    "gate off": (None, {"NALASR_FUSED_GATE": "0", "NALASR_FUSED_DWCONV": "0"}),
    "one qkvg GEMM": (mixer_one_gemm, {"NALASR_FUSED_GATE": "0", "NALASR_FUSED_DWCONV": "0"}),
}
FLAGS = ("NALASR_FUSED_GATE", "NALASR_FUSED_DWCONV", "NALASR_FUSED_RESIDUAL", "NALASR_FUSED_CONV_BIAS")


def main() -> int:
    a = parse_args(__doc__.splitlines()[0])
    rows = []
    orig_mixer = M.NalaMixer.forward
    for size, h, w in lr_sizes(a.sizes):
        torch.manual_seed(0)
        x = lr_image(h, w)
        ref = None
        for name, (mixer_fwd, env) in VARIANTS.items():
            for flag in FLAGS:
                os.environ.pop(flag, None)
            os.environ.update(env)
            M.NalaMixer.forward = mixer_fwd or orig_mixer
            torch.manual_seed(0)
            model = create_model("default", 4)
            with torch.no_grad():  # non-trivial layer scales, and an upsampler that is not zero (its init)
                for p in model.parameters():
                    if p.dim() == 1 and p.numel() == model.cfg.dim:
                        p.uniform_(0.1, 0.5)
                torch.nn.init.normal_(model.upsampler[0].weight, std=0.02)
            model = model.cuda().half().eval()
            with torch.inference_mode():
                y = model(x).float()
                ref = y if ref is None else ref
                row = {"lr": size, "variant": name, **eager_and_replay_ms(model, x),
                       "max_abs_diff_vs_shipped": float((y - ref).abs().max())}
            rows.append(row)
            print(json.dumps(row), flush=True)
    M.NalaMixer.forward = orig_mixer
    for flag in FLAGS:
        os.environ.pop(flag, None)
    write_rows(rows, a.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
