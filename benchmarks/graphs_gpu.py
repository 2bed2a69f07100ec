"""CUDA graphs on the H200: are they right, and what do they buy? Training (trunk graphed) and inference.

    PYTHONPATH=.:kernels python benchmarks/graphs_gpu.py --json OUT.json --data DIR [--decide .carry]

1. Gradients of one bf16 training step, graphed trunk vs eager, for a MultiScaleNaLaSR (default variant,
   x2/x3/x4 heads, batch 64, LR 48²), with the fused LayerNorm on and off: relative L2 difference of all
   gradients, beside the difference eager vs eager with the other LayerNorm (the bf16 noise floor).
2. Steps per second of the real trainer (nalasr.train.Trainer) on DIR, eager vs graphed, fused LN on/off.
3. Inference: run_model at 192×256 and 540×960 ×4 fp16, third call (replayed) vs NALASR_CUDA_GRAPHS=0:
   bitwise equality of the outputs and the model time.
With --decide FOLDER: writes FOLDER/train_override.toml (cuda_graphs = true) and FOLDER/train_env (the fused
LayerNorm on or off) for training/device_train.sh when the graphed step is right and faster.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "kernels")]

from nalasr.infer import run_model  # noqa: E402
from nalasr.model import create_model  # noqa: E402
from nalasr.train.config import TrainConfig  # noqa: E402
from nalasr.train.loop import Trainer, graph_trunk  # noqa: E402
from nalasr.train.multiscale import MultiScaleNaLaSR  # noqa: E402


def _grads(model) -> torch.Tensor:
    return torch.cat([p.grad.float().flatten() for p in model.parameters() if p.grad is not None])


def grad_parity() -> list[dict]:
    rows = []
    torch.manual_seed(0)
    x = torch.rand(64, 3, 48, 48, device="cuda")
    y = torch.rand(64, 3, 192, 192, device="cuda")
    eager = {}
    for flag in ("0", "1"):
        os.environ["NALASR_FUSED_LAYERNORM"] = flag
        torch.manual_seed(1)
        model = MultiScaleNaLaSR(create_model("default", 4).cfg, [2, 3, 4]).cuda()
        with torch.autocast("cuda", dtype=torch.bfloat16, cache_enabled=False):
            F.l1_loss(model(x, 4).float(), y).backward()
        eager[flag] = _grads(model)
        model.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16, cache_enabled=False):
            trunk = graph_trunk(model.trunk, x)
            for _ in range(2):  # twice: the second replay must not see the first one's gradients
                model.zero_grad(set_to_none=True)
                F.l1_loss(model(x, 4, trunk).float(), y).backward()
        g = _grads(model)
        rows.append({"fused_ln": flag == "1", "graphed_vs_eager": float((g - eager[flag]).norm() / eager[flag].norm())})
    noise = float((eager["1"] - eager["0"]).norm() / eager["0"].norm())
    for r in rows:
        r["noise_floor"] = noise
        print(f"grads graphed vs eager (fused LN {int(r['fused_ln'])}): {r['graphed_vs_eager']:.2e}  "
              f"(eager fused vs torch LN: {noise:.2e})", flush=True)
    return rows


def trainer_speed(data: str, steps: int) -> list[dict]:
    rows = []
    for graphs, flag in ((False, "1"), (True, "0"), (True, "1")):
        os.environ["NALASR_FUSED_LAYERNORM"] = flag
        with tempfile.TemporaryDirectory() as tmp:
            cfg = TrainConfig(scales=[2, 3, 4], data=[data], out=tmp, batch=64, patch=48, steps=steps, log_every=40,
                              ckpt_every=10**6, val_set="", compile=False, cuda_graphs=graphs, device="cuda")
            t0 = time.perf_counter()
            Trainer(cfg, log=lambda m: None).run()
            wall = time.perf_counter() - t0
            log = [json.loads(line) for line in (Path(tmp) / "log.jsonl").read_text().splitlines()]
        it_s = sum(r["it_s"] for r in log[-2:]) / 2  # steady state: the first records pay warm-up and capture
        rows.append({"cuda_graphs": graphs, "fused_ln": flag == "1", "it_s": it_s, "wall_s": wall,
                     "loss": [round(r["loss"], 5) for r in log]})
        print(f"trainer B64 LR48 x2/x3/x4: graphs {int(graphs)} fused LN {flag}: {it_s:.1f} it/s "
              f"({steps} steps in {wall:.0f} s incl. setup), loss {rows[-1]['loss']}", flush=True)
    return rows


def inference() -> list[dict]:
    rows = []
    os.environ["NALASR_FUSED_LAYERNORM"] = "1"
    model = create_model("default", 4).cuda().half().eval()
    for hw in ((192, 256), (540, 960)):
        x = torch.rand(1, 3, *hw, device="cuda")
        os.environ["NALASR_CUDA_GRAPHS"] = "0"
        ref, _ = run_model(model, x, torch.float16)
        eager = [run_model(model, x, torch.float16)[1].model_ms for _ in range(5)]
        os.environ["NALASR_CUDA_GRAPHS"] = "1"
        outs, ms, peak = [], [], 0
        for _ in range(8):
            y, st = run_model(model, x, torch.float16)
            outs.append(y)
            ms.append(st.model_ms)
            peak = st.peak_bytes
        same = all(torch.equal(o, ref) for o in outs)
        maxdiff = max(float((o - ref).abs().max()) for o in outs)
        r = {"lr": f"{hw[0]}x{hw[1]}", "eager_ms": sorted(eager)[2], "first_ms": ms[0], "capture_ms": ms[1],
             "replay_ms": sorted(ms[2:])[len(ms[2:]) // 2], "bitwise_equal": same, "max_abs_diff": maxdiff,
             "replay_peak_gib": peak / 2**30}
        rows.append(r)
        print(f"run_model x4 fp16 LR {r['lr']}: eager {r['eager_ms']:.1f} ms, first {r['first_ms']:.1f}, capture call "
              f"{r['capture_ms']:.1f}, replay {r['replay_ms']:.1f} ms, same output {same} (max |Δ| {maxdiff:.1e}), "
              f"peak {r['replay_peak_gib']:.3f} GiB", flush=True)
    return rows


def decide(res: dict, folder: Path) -> None:
    grads, speed = res.get("grads"), res.get("trainer")
    env, override = [], []
    if isinstance(grads, list) and isinstance(speed, list) and len(speed) == 3:
        ok = all(r["graphed_vs_eager"] < max(r["noise_floor"], 1e-3) for r in grads)
        eager, g0, g1 = speed
        best = max((g0, g1), key=lambda r: r["it_s"])
        if ok and best["it_s"] > 1.1 * eager["it_s"]:
            override.append("cuda_graphs = true")
            env.append(f"export NALASR_FUSED_LAYERNORM={int(best['fused_ln'])}")
    (folder / "train_env").write_text("".join(line + "\n" for line in env))
    (folder / "train_override.toml").write_text("".join(line + "\n" for line in override))
    print("training choices:", env, override, flush=True)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--steps", type=int, default=160)
    ap.add_argument("--decide", type=Path, default=None)
    a = ap.parse_args()
    res: dict = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__}
    for name, fn in (("grads", grad_parity), ("trainer", lambda: trainer_speed(a.data, a.steps)),
                     ("inference", inference)):
        print(f"== {name}", flush=True)
        try:
            res[name] = fn()
        except Exception as e:  # one broken part must not cost the others
            import traceback
            traceback.print_exc(limit=4)
            res[name] = {"error": repr(e)[:300]}
        Path(a.json).write_text(json.dumps(res, indent=1))
        if name == "trainer" and a.decide is not None:
            decide(res, a.decide)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
