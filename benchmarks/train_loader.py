"""Does the data pipeline starve the GPU? Training it/s with the real PatchSampler vs. one fixed batch.

The real path decodes nothing per step (images live on the device) but crops, augments and makes LR with
the protocol's bicubic on every step; the synthetic path reuses one pre-made batch. Issue 4 asks for the
real rate to be at least 90% of the synthetic one.

    python benchmarks/train_loader.py --data DIR [--steps 300] [--attention-backend auto] --out results.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from nalasr.train.config import TrainConfig  # noqa: E402
from nalasr.train.loop import Trainer  # noqa: E402


def rate(data: str, steps: int, synthetic: bool, backend: str, variant: str, compile_: bool) -> dict:
    with tempfile.TemporaryDirectory() as out:
        cfg = TrainConfig(scales=[4], data=[data], out=out, variant=variant, steps=steps, batch=64, patch=48,
                          val_set="", compile=compile_, log_every=50, ckpt_every=10**9, device="cuda",
                          attention_backend=backend)
        trainer = Trainer(cfg, log=lambda m: None)
        if synthetic:
            fixed = trainer.sampler.sample(cfg.batch, 4)
            trainer.sampler.sample = lambda batch, scale: fixed  # type: ignore[method-assign]
        recs: list[dict] = []
        trainer.run(progress=lambda r: recs.append(r) if "it_s" in r else None)
    windows = [r["it_s"] for r in recs[1:]]  # the first window pays for warm-up
    return {"synthetic": synthetic, "backend": backend, "variant": variant, "compile": compile_,
            "steps": steps, "it_s_median": statistics.median(windows), "windows": windows}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--attention-backend", default="auto")
    ap.add_argument("--variant", default="default")
    ap.add_argument("--compile", action="store_true")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    rows = [rate(a.data, a.steps, s, a.attention_backend, a.variant, a.compile) for s in (False, True)]
    real, synth = rows[0]["it_s_median"], rows[1]["it_s_median"]
    result = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "rows": rows,
              "real_over_synthetic": real / synth}
    Path(a.out).write_text(json.dumps(result, indent=1))
    print(f"loader: real {real:.2f} it/s, synthetic {synth:.2f} it/s, ratio {real / synth:.3f}")


if __name__ == "__main__":
    main()
