"""Where a new process's first image goes before the job clock starts: wall time from process start to each phase.

Issue 38 target: one 960×540 → 4K PNG in a new process in ≤ 3.5 s on a machine that has run nalasr before.
`nalasr upscale --json` times read / model / write from inside the job; this script times what comes before
and around it, in a child process it starts (so interpreter start-up counts), one phase after the other:

    python benchmarks/startup_phases.py --device cuda --runs 2 --out results.json     # H200 (device call)
    python benchmarks/startup_phases.py --device cpu --size 256x256                   # this CPU

The first run on a fresh machine fills Triton's cache; later runs show a machine that has run nalasr before.
The input is noise (the network's time does not depend on the content); encoding does, so it is left to
benchmarks/e2e_upscale.py (real photos, the write stage) and benchmarks/png_encode.py.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PHASES = ("interpreter", "import torch", "import nalasr inference", "device init", "build + load weights",
          "decode input", "first forward", "second forward")


def child(image: Path, device: str) -> None:
    """Print one JSON line: the wall clock (time.time) after each phase."""
    stamps = {"interpreter": time.time()}
    import torch
    stamps["import torch"] = time.time()
    import numpy as np
    from PIL import Image

    import nalasr
    from nalasr.inference import batch  # noqa: F401 (what `nalasr upscale` imports)
    stamps["import nalasr inference"] = time.time()
    if device == "cuda":
        torch.zeros(1, device="cuda")
        torch.cuda.synchronize()
    stamps["device init"] = time.time()
    model = nalasr.load_model(scale=4, device=device)
    stamps["build + load weights"] = time.time()
    pixels = np.asarray(Image.open(image).convert("RGB"))
    stamps["decode input"] = time.time()
    sr = nalasr.upscale(pixels, model=model)  # returns numpy: synchronised
    stamps["first forward"] = time.time()
    sr = nalasr.upscale(pixels, model=model)
    stamps["second forward"] = time.time()
    print(json.dumps({"stamps": stamps, "out_shape": list(sr.shape), "torch": torch.__version__}))


def run_once(args: argparse.Namespace, image: Path) -> dict:
    t0 = time.time()
    cmd = [sys.executable, __file__, "--child", str(image), "--device", args.device]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode:
        sys.exit(f"the timed process failed: {proc.stderr.strip().splitlines()[-1]}")
    data = json.loads(proc.stdout.strip().splitlines()[-1])
    prev, rows = t0, {}
    for name in PHASES:
        rows[name] = {"at_s": round(data["stamps"][name] - t0, 3), "phase_ms": round((data["stamps"][name] - prev) * 1e3, 1)}
        prev = data["stamps"][name]
    return {"phases": rows, "out_shape": data["out_shape"], "torch": data["torch"]}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    p.add_argument("--device", default="cuda")
    p.add_argument("--size", default="960x540", help="WxH of the input")
    p.add_argument("--runs", type=int, default=2)
    p.add_argument("--out", type=Path)
    args = p.parse_args()
    if args.child:
        child(args.child, args.device)
        return
    import numpy as np
    from PIL import Image

    w, h = (int(v) for v in args.size.split("x"))
    with tempfile.TemporaryDirectory() as tmp:
        image = Path(tmp) / "input.png"
        noise = np.random.default_rng(0).integers(0, 256, (h, w, 3), dtype=np.uint8)
        Image.fromarray(noise).save(image, compress_level=1)
        runs = [run_once(args, image) for _ in range(args.runs)]
    print(f"{'phase':<26}" + "".join(f"  run {i + 1}: phase ms (at s)" for i in range(len(runs))))
    for name in PHASES:
        print(f"{name:<26}" + "".join(f"  {r['phases'][name]['phase_ms']:>10.1f} ({r['phases'][name]['at_s']:>6.3f})"
                                      for r in runs))
    if args.out:
        args.out.write_text(json.dumps({"device": args.device, "size": args.size, "runs": runs}, indent=1))


if __name__ == "__main__":
    main()
