"""`nalasr upscale` end to end, as a user waits for it: wall clock from process start to the last file written.

Jobs (issue 38's table): a folder of N photos → PNG and → JPEG, one image in a new process → PNG, one large image
in a new process → PNG. Each job runs for every tree given (e.g. a snapshot of the code before a change and this
tree), the trees alternating so drift of the machine shows in all; a warm-up run first fills the caches a machine
that has run nalasr before has (Triton's, the OS page cache). Then the PNG outputs of the trees are compared:
bytes at the same compression level, and pixels.

    # photos to carry (JPEG, >= 1920x1080, training data: never the test sets)
    python benchmarks/e2e_upscale.py --pack ../shared/datasets/train_extra --photos .carry/e2e
    # H200 (device call): the inputs are made from them at the sizes asked
    python benchmarks/e2e_upscale.py --photos .carry/e2e --tree before=.carry/before --tree after=. --out $OUT
    # this CPU
    python benchmarks/e2e_upscale.py --photos DIR --device cpu --size 256x256 --count 4 --big none --out /tmp/e2e
    # the same tree with and without a resident worker (`nalasr worker start` before its jobs, stopped after)
    python benchmarks/e2e_upscale.py --photos .carry/e2e --tree alone=. --tree worker=. --worker worker --out $OUT

Each tree gets its own XDG_RUNTIME_DIR, so only the trees named by --worker find one.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from PIL import Image
from resident_worker import private_runtime, resident_worker


def pack_photos(src: Path, dst: Path, count: int = 17) -> None:
    """Photos of at least 1920x1080 from ``src`` (spread over its sorted list), shrunk to cover 1920x1080 and
    saved as JPEG q95 in ``dst``: small enough to carry to a device machine (~11 MB for 17)."""
    big = [p for p in sorted(src.rglob("*")) if p.suffix.lower() in (".jpg", ".jpeg", ".png")
           and min(Image.open(p).size[0] / 1920, Image.open(p).size[1] / 1080) >= 1]
    dst.mkdir(parents=True, exist_ok=True)
    for i, p in enumerate(big[::max(1, len(big) // count)][:count]):
        im = Image.open(p).convert("RGB")
        s = max(1920 / im.width, 1080 / im.height)
        im.resize((round(im.width * s), round(im.height * s)), Image.Resampling.LANCZOS).save(dst / f"p{i:02d}.jpg",
                                                                                                quality=95)


def make_inputs(photos: Path, work: Path, size: tuple[int, int], count: int, big: tuple[int, int] | None) -> dict:
    """PNG inputs cut from ``photos`` (centre crop to the aspect, bicubic resize): realistic content for zlib."""
    files = sorted(p for p in photos.iterdir() if p.suffix.lower() in (".jpg", ".jpeg", ".png"))
    if len(files) < count + (big is not None):
        raise SystemExit(f"{photos}: need {count + (big is not None)} photos, found {len(files)}")
    folder = work / "folder"
    folder.mkdir(parents=True, exist_ok=True)
    for i, f in enumerate(files[:count]):
        _fit(f, size).save(folder / f"photo{i:02d}.png")
    made = {"folder": folder, "one": folder / "photo00.png"}
    if big is not None:
        made["big"] = work / "big.png"
        _fit(files[count], big).save(made["big"])
    return made


def _fit(path: Path, size: tuple[int, int]) -> Image.Image:
    im = Image.open(path).convert("RGB")
    w, h = size
    scale = max(w / im.width, h / im.height)
    crop_w, crop_h = round(w / scale), round(h / scale)
    left, top = (im.width - crop_w) // 2, (im.height - crop_h) // 2
    return im.resize((w, h), Image.Resampling.BICUBIC, box=(left, top, left + crop_w, top + crop_h))


WEIGHTS = Path("weights").resolve()  # every tree runs the same shipped weights (a snapshot may carry none)


def tree_env(tree: Path, runtime: Path) -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=f"{tree}{os.pathsep}{tree / 'kernels'}", NALASR_WEIGHTS=str(WEIGHTS),
                **private_runtime(runtime))


def run_job(tree: Path, args: list[str], env: dict[str, str]) -> tuple[float, dict | None, str]:
    """(wall seconds, the --json report or None, stderr tail) of one `nalasr upscale` in a new process."""
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "nalasr", "upscale", *args, "--json"], cwd=tree, env=env,
                          capture_output=True, text=True)
    wall = time.perf_counter() - t0
    try:
        report = json.loads(done.stdout)
    except json.JSONDecodeError:
        report = None
    if done.returncode != 0:
        return wall, None, f"rc={done.returncode}: {done.stderr.strip()[-400:]}"
    return wall, report, ""


def jobs(inputs: dict, out: Path, name: str, scale: int, device: str) -> list[tuple[str, list[str], int]]:
    """(label, arguments, images) of each job for one tree."""
    n = len(list(inputs["folder"].iterdir()))
    common = ["--scale", str(scale), "--device", device]
    listed = [
        (f"folder of {n} → PNG", [str(inputs["folder"]), "-o", str(out / name / "png"), *common], n),
        (f"folder of {n} → JPEG", [str(inputs["folder"]), "-o", str(out / name / "jpg"), "--ext", "jpg", *common], n),
        ("one image, new process → PNG", [str(inputs["one"]), "-o", str(out / name / "one.png"), *common], 1),
    ]
    if "big" in inputs:
        listed.append(("one large image, new process → PNG",
                       [str(inputs["big"]), "-o", str(out / name / "big.png"), *common], 1))
    return listed


def compare(a: Path, b: Path) -> dict:
    """Bytes and pixels of two trees' PNG outputs."""
    names = sorted(p.name for p in a.glob("*.png"))
    same_bytes = sum((a / n).read_bytes() == (b / n).read_bytes() for n in names if (b / n).exists())
    max_diff = 0
    for n in names:
        if (b / n).exists():
            x = np.asarray(Image.open(a / n)).astype(np.int32)
            y = np.asarray(Image.open(b / n)).astype(np.int32)
            max_diff = max(max_diff, int(np.abs(x - y).max()) if x.shape == y.shape else 10**9)
    return {"files": len(names), "bytes_identical": same_bytes, "max_pixel_diff": max_diff}


def measure(opts: argparse.Namespace, trees: list[tuple[str, Path]], envs: dict[str, dict[str, str]],
            inputs: dict[str, Path], work: Path) -> dict:
    """Every job of every tree, --repeats times, after one warm-up each; then the PNG comparison of the trees."""
    for name, tree in trees:  # warm-up: the caches of a machine that has run nalasr before
        run_job(tree, [str(inputs["one"]), "-o", str(work / f"warm_{name}.png"), "--scale", str(opts.scale),
                       "--device", opts.device, "--overwrite"], envs[name])
    rows: dict[tuple[str, str], dict] = {}
    for rep in range(opts.repeats):
        for name, tree in trees:
            target = work / f"run{rep}"
            for label, args, n in jobs(inputs, target, name, opts.scale, opts.device):
                wall, report, err = run_job(tree, args, envs[name])
                row = rows.setdefault((label, name), {"wall_s": [], "images": n, "error": "", "report": None})
                row["wall_s"].append(round(wall, 3))
                row["error"] = row["error"] or err
                if report is not None and (row["report"] is None or wall <= min(row["wall_s"])):
                    row["report"] = {k: report.get(k) for k in ("wall_s", "images_per_s", "stages_ms", "device")}
    result = {"machine": _machine(opts.device), "command": "python " + shlex.join(sys.argv), "rows": [
        {"job": label, "tree": name, **row} for (label, name), row in rows.items()]}
    if len(trees) > 1:  # the first tree's PNGs against each other tree's, written with --extra (same zlib level)
        first = trees[0][0]
        result["png_vs_" + first] = {}
        for name, tree in trees[1:]:
            same = work / "identity" / name
            run_job(tree, [str(inputs["folder"]), "-o", str(same), "--scale", str(opts.scale), "--device", opts.device,
                           *opts.extra.split()], envs[name])
            result["png_vs_" + first][name] = {"extra": opts.extra, **compare(work / "run0" / first / "png", same)}
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--photos", type=Path, required=True, help="folder of photographs to make the inputs from")
    ap.add_argument("--tree", action="append", default=[], help="NAME=PATH of a checkout to run (repeatable)")
    ap.add_argument("--out", type=Path)
    ap.add_argument("--size", default="960x540", help="WxH of the folder's images")
    ap.add_argument("--count", type=int, default=16)
    ap.add_argument("--big", default="1920x1080", help="WxH of the large image, or none")
    ap.add_argument("--scale", type=int, default=4)
    ap.add_argument("--device", default="auto")
    ap.add_argument("--repeats", type=int, default=2, help="runs of each job per tree (the best is reported)")
    ap.add_argument("--extra", default="", help="arguments for the other trees' run compared with the first tree's "
                                                "PNGs, e.g. '--png-compression 6' (the first tree's level)")
    ap.add_argument("--worker", action="append", default=[], metavar="NAME",
                    help="run this tree's jobs with a resident worker started first (repeatable)")
    ap.add_argument("--pack", type=Path, metavar="SRC", help="only write --photos from the photographs in SRC "
                                                                "(e.g. ../shared/datasets/train_extra) and exit")
    opts = ap.parse_args()
    if opts.pack:
        return pack_photos(opts.pack, opts.photos)
    trees = [(t.split("=", 1)[0], Path(t.split("=", 1)[1]).resolve()) for t in opts.tree] or [("this", Path.cwd())]
    wh = lambda s: tuple(int(v) for v in s.lower().split("x"))  # noqa: E731
    work = opts.out / "work"
    inputs = make_inputs(opts.photos, work / "inputs", wh(opts.size), opts.count,
                         None if opts.big == "none" else wh(opts.big))
    envs = {name: tree_env(tree, work / f"rt_{name}") for name, tree in trees}
    workers = {}
    with contextlib.ExitStack() as resident:  # each worker stopped after the jobs, also when one fails
        for name, tree in trees:
            if name in opts.worker:
                t0 = time.perf_counter()
                resident.enter_context(resident_worker(["--device", opts.device, "--scale", str(opts.scale)],
                                                       cwd=tree, env=envs[name]))
                workers[name] = round(time.perf_counter() - t0, 3)
        result = {**measure(opts, trees, envs, inputs, work), "worker_start_s": workers}
    (opts.out / "e2e_upscale.json").write_text(json.dumps(result, indent=1))
    (opts.out / "e2e_upscale.md").write_text(markdown(result))
    print(markdown(result))
    shutil.rmtree(work / "run1", ignore_errors=True)


def markdown(result: dict) -> str:
    started = "; ".join(f"{n}'s worker started in {s:.1f} s (before its jobs)" for n, s in
                        result.get("worker_start_s", {}).items())
    lines = [f"Machine: {result['machine']}", f"Command: `{result['command']}`", *([started] if started else []), "",
             "| job | tree | wall s (best) | images/s (wall) | in-job images/s | stage ms (read / model / write) |",
             "|---|---|---|---|---|---|"]
    for r in result["rows"]:
        best = min(r["wall_s"])
        rep = r["report"] or {}
        st = rep.get("stages_ms") or {}
        stages = " / ".join(f"{st.get(k, 0):,.0f}" for k in ("read_ms", "model_ms", "write_ms")) if st else "-"
        inner = f"{rep['images_per_s']:.2f}" if rep.get("images_per_s") else "-"
        lines.append(f"| {r['job']} | {r['tree']} | {best:.2f} | {r['images'] / best:.2f} | {inner} | {stages} |"
                     + (f" error: {r['error']}" if r["error"] else ""))
    for key, value in result.items():
        if key.startswith("png_vs_"):
            lines += ["", f"PNG outputs against {key[7:]}: {json.dumps(value)}"]
    return "\n".join(lines) + "\n"


def _machine(device: str) -> str:
    gpu = ""
    if device != "cpu":
        try:
            gpu = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                                 text=True).stdout.strip().splitlines()[0] + ", "
        except (OSError, IndexError):
            gpu = ""
    return f"{gpu}{os.cpu_count()} CPU cores, Python {platform.python_version()}"


if __name__ == "__main__":
    main()
