"""The query norm ↔ attention entropy diagnostic: NaLa's central claim, measured on a real model and image.

Softmax attention softmax(q·k/√d) sharpens as ‖q‖ grows: the query norm acts as an inverse temperature.
Plain linear attention loses that: with ReLU features the row φ(q)·φ(k_j)/Σ_j φ(q)·φ(k_j) does not change at
all when q is scaled, and 1+ELU barely reacts. NaLa restores it: the exponent p(q) = λ(τ + tanh‖q‖) on the
query's direction grows with the norm, so a larger ‖q‖ concentrates the query on its dominant dimensions
and the distribution over keys gets spikier (lower entropy).

For every NaLa layer of a model run on an image this samples queries, computes each one's exact attention
distribution over all N keys (one row of the N×N matrix, never the whole matrix) for NaLa, linear attention
(1+ELU and ReLU features on the same q, k) and softmax, and reports its entropy against ‖q‖ per head, with
the rank correlation of the two. Entropies are divided by log N: 1 is uniform attention.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..errors import InputError
from ..ops.nala import NalaParams, nala_features

METHODS = ("nala", "linear_elu", "linear_relu", "softmax")
QUERY_CHUNK = 32  # query rows scored at once: QUERY_CHUNK × N floats per head and method


def row_entropy(scores: Tensor) -> Tensor:
    """Entropy (nats) of each row of non-negative ``scores`` (n, N) normalised to sum 1; NaN for a zero row."""
    total = scores.sum(-1, keepdim=True)
    p = scores / total
    h = -(p * torch.log(p.clamp_min(1e-30))).sum(-1)
    return torch.where(total.squeeze(-1) > 0, h, torch.nan)


def attention_entropy(q: Tensor, k: Tensor, method: str, params: NalaParams) -> Tensor:
    """Entropy of each query's attention over all keys. q: (n, d), k: (N, d), one head → (n,) nats."""
    q, k = q.double(), k.double()
    if method == "softmax":
        logits = q @ k.T / math.sqrt(q.shape[-1])
        logp = torch.log_softmax(logits, -1)
        return -(logp.exp() * logp).sum(-1)
    feats: dict[str, Callable[[Tensor, bool], Tensor]] = {
        "nala": lambda x, query: nala_features(x, query=query, params=params),
        "linear_elu": lambda x, query: F.elu(x) + 1,
        "linear_relu": lambda x, query: F.relu(x),
    }
    if method not in feats:
        raise InputError(f"unknown method {method!r}; choose from {', '.join(METHODS)}")
    phi_k = feats[method](k, False)
    return torch.cat([row_entropy(feats[method](qc, True) @ phi_k.T) for qc in q.split(QUERY_CHUNK)])


def spearman(x: np.ndarray, y: np.ndarray) -> float:
    """Rank correlation of x and y over the pairs where both are finite (NaN with fewer than 3)."""
    ok = np.isfinite(x) & np.isfinite(y)
    if ok.sum() < 3:
        return float("nan")
    rx, ry = (np.argsort(np.argsort(a[ok])).astype(float) for a in (x, y))
    rx, ry = rx - rx.mean(), ry - ry.mean()
    den = math.sqrt(float((rx * rx).sum() * (ry * ry).sum()))
    return float((rx * ry).sum() / den) if den > 0 else float("nan")


@dataclass
class LayerEntropy:
    """One NaLa layer: per sampled (query, head) its ‖q‖ (of the head's slice) and normalised entropies."""

    layer: str
    tokens: int  # N, keys per query
    q_norm: list[float]
    entropy: dict[str, list[float]]  # method → entropy / log N per sample
    spearman: dict[str, float] = field(default_factory=dict)  # method → rank correlation with ‖q‖

    def to_dict(self) -> dict[str, Any]:
        return {"layer": self.layer, "tokens": self.tokens, "spearman": self.spearman,
                "mean_entropy": {m: float(np.nanmean(v)) for m, v in self.entropy.items()},
                "q_norm": self.q_norm, "entropy": self.entropy}


def layer_entropy(name: str, q: Tensor, k: Tensor, heads: int, params: NalaParams, samples: int,
                  generator: torch.Generator, methods: tuple[str, ...] = METHODS) -> LayerEntropy:
    """q, k: (N, C) of one image → LayerEntropy over ``samples`` query tokens, every head."""
    n_tok, c = q.shape
    d = c // heads
    idx = torch.randperm(n_tok, generator=generator)[:samples]
    norms, ent = [], {m: [] for m in methods}
    for h in range(heads):
        qh, kh = q[:, h * d:(h + 1) * d], k[:, h * d:(h + 1) * d]
        norms.append(qh[idx].double().norm(dim=-1))
        for m in methods:
            ent[m].append(attention_entropy(qh[idx], kh, m, params) / math.log(n_tok))
    qn = torch.cat(norms).numpy()
    out = LayerEntropy(name, n_tok, qn.tolist(), {m: torch.cat(v).tolist() for m, v in ent.items()})
    out.spearman = {m: spearman(qn, np.asarray(out.entropy[m])) for m in methods}
    return out


def capture_qk(model: nn.Module, lr: Tensor) -> list[tuple[str, Tensor, Tensor, int, NalaParams]]:
    """Run ``model`` on ``lr`` (1, 3, H, W) and return each NaLa layer's (name, q, k, heads, params), q and k
    (N, C) as that layer's q/k projection of its input gives them (the same numbers attention sees)."""
    found: list[tuple[str, Tensor, Tensor, int, NalaParams]] = []
    hooks = []
    for name, mod in model.named_modules():
        if hasattr(mod, "qkvg") and hasattr(mod, "cfg"):  # a NaLa mixer: q, k, v, g from one Linear
            if getattr(mod.cfg, "rope", False):
                raise InputError("the diagnostic covers models without RoPE (the rotation acts on the numerator only)")

            def grab(m: nn.Module, args: tuple, name: str = name) -> None:
                x = args[0]  # (1, H, W, C) token-major input of the mixer
                wq, wk = m.qkvg.weight.chunk(4)[:2]
                bq, bk = m.qkvg.bias.chunk(4)[:2]
                flat = x.reshape(-1, x.shape[-1]).float()
                found.append((name, F.linear(flat, wq.float(), bq.float()), F.linear(flat, wk.float(), bk.float()),
                              m.cfg.heads, m.cfg.nala))
            hooks.append(mod.register_forward_pre_hook(grab))
    if not hooks:
        raise InputError("this model has no NaLa attention layer to diagnose")
    try:
        with torch.inference_mode():
            model(lr)
    finally:
        for hk in hooks:
            hk.remove()
    return found


@dataclass
class DiagnoseReport:
    image_size: tuple[int, int]  # (H, W) of the model's input
    samples: int  # queries sampled per layer (each over all heads)
    layers: list[LayerEntropy]

    def summary(self) -> dict[str, dict[str, float]]:
        """method → median over layers of the rank correlation, and mean normalised entropy."""
        return {m: {"median_spearman": float(np.nanmedian([l.spearman[m] for l in self.layers])),
                    "mean_entropy": float(np.nanmean([np.nanmean(l.entropy[m]) for l in self.layers]))}
                for m in self.layers[0].entropy}

    def to_dict(self) -> dict[str, Any]:
        return {"image_size": list(self.image_size), "samples": self.samples, "summary": self.summary(),
                "layers": [l.to_dict() for l in self.layers]}


def diagnose(model: nn.Module, lr: Tensor, *, samples: int = 256, seed: int = 0,
             methods: tuple[str, ...] = METHODS) -> DiagnoseReport:
    """The diagnostic on one image. lr: (1, 3, H, W) float in [0, 1] on the model's device."""
    if samples < 3:
        raise InputError("--samples must be at least 3")
    g = torch.Generator().manual_seed(seed)
    layers = [layer_entropy(name, q.cpu(), k.cpu(), heads, params, samples, g, methods)
              for name, q, k, heads, params in capture_qk(model, lr)]
    return DiagnoseReport(tuple(lr.shape[-2:]), samples, layers)


LABELS = {"nala": "NaLa", "linear_elu": "linear (1+ELU)", "linear_relu": "linear (ReLU)", "softmax": "softmax"}


def plot(report: DiagnoseReport, path: str, title: str = "") -> None:
    """A PNG: one panel per method, normalised entropy against ‖q‖, every layer's samples coloured by depth."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise InputError("the plot needs matplotlib: pip install 'nalasr[plot]' (or pass --json only)") from None
    methods = list(report.layers[0].entropy)
    fig, axes = plt.subplots(1, len(methods), figsize=(4.2 * len(methods), 3.8), sharey=True)
    cmap = plt.get_cmap("viridis")
    for ax, m in zip(np.atleast_1d(axes), methods):
        for i, layer in enumerate(report.layers):
            ax.scatter(layer.q_norm, layer.entropy[m], s=3, alpha=0.35, color=cmap(i / max(1, len(report.layers) - 1)))
        rho = report.summary()[m]["median_spearman"]
        ax.set_title(f"{LABELS.get(m, m)}  (median ρ = {rho:+.2f})", fontsize=10)
        ax.set_xlabel("‖q‖ of the head")
        ax.grid(alpha=0.3)
    np.atleast_1d(axes)[0].set_ylabel("attention entropy / log N")
    h, w = report.image_size
    fig.suptitle(title or f"query norm against attention entropy, {len(report.layers)} layers, {w}x{h} input "
                 "(colour: depth)", fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def diagnose_image(
    image: str,
    *,
    scale: int = 4,
    variant: str | None = None,
    weights: str | None = None,
    device: str = "auto",
    samples: int = 256,
    seed: int = 0,
    plot_path: str | None = None,
) -> DiagnoseReport:
    """``nalasr diagnose``: the diagnostic of a model (shipped, or ``weights``) on one image file, taken as
    the model's LR input; the plot written to ``plot_path`` when given."""
    from .. import load_model
    from ..inference.upscaling import lr_tensor
    from ..io.imageio import read_image

    lr = lr_tensor(read_image(image).pixels)[0].expand(-1, 3, -1, -1)  # gray: the model sees it as RGB
    model = load_model(scale, variant=variant, weights=weights, device=device)
    model.set_attention_backend("reference")  # the distributions are computed from q, k the plain path sees
    report = diagnose(model, lr.to(next(model.parameters()).device), samples=samples, seed=seed)
    if plot_path:
        plot(report, plot_path, title=f"query norm against attention entropy: {Path(image).name}, x{scale} model, "
                                      f"{len(report.layers)} NaLa layers (colour: depth)")
    return report
