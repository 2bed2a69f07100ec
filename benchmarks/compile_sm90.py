"""Compile the attention forward's reduce kernel for sm_90 on a machine without a GPU and count its shared-memory
traffic: a CPU-side look at what Nsight Compute measures on the H200, for trying kernel changes between GPU calls.

    .venv/bin/python benchmarks/compile_sm90.py [--vec4] [--block-n 64] [--warps 4] [--stages 2] [--out DIR]

Prints the kernel's shared memory, the main loop's SASS instructions that matter here (shared stores and loads,
tensor-core products, barriers, global loads) and, for every shared-memory store of the loop (the tl.dot
operands Triton stages through ``ttg.local_alloc``), how many wavefronts one warp's store instruction takes
against the conflict-free minimum, from the register layout and the swizzle of the TTGIR. The launch constants
are those of 518,400 tokens, 4 heads of 16, fp16 inputs (what ``nala_forward`` passes and the autotuner picks
there: BLOCK_N 64, 4 warps, 2 stages). Needs Triton with its bundled ptxas / nvdisasm (the pip wheel has them).
The first run (session 10, Triton 3.9): 8 STS.128 per warp and tile taking 64 wavefronts, 32 of them conflicts —
ncu's 8.3 M store wavefronts with 4.1 M conflicts over the 129,600 warp-tiles at 518K, exactly.
"""

from __future__ import annotations

import argparse
import collections
import math
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "kernels"))

import triton  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402

from nalasr_kernels import nala  # noqa: E402

# nala_forward's arguments at 518,400 tokens, B 1, H 4, D = Dv = 16, fp16, contiguous (B, N, H, D) inputs.
RUNTIME = dict(K="*fp16", V="*fp16", FREQ="*fp32", PART="*fp32", N="i32", W="i32", H="i32", CHUNK="i32",
               n_chunks="i32", N_BUCKET="i32", sk_b="i32", sk_n="i32", sk_h="i32", sk_d="i32",
               sv_b="i32", sv_n="i32", sv_h="i32", sv_d="i32", alpha="fp32", lam="fp32")
DIVISIBLE_16 = ("K", "V", "FREQ", "PART", "CHUNK", "sk_b", "sk_n", "sk_h", "sv_b", "sv_n", "sv_h")
CONSTANTS = dict(sk_d=1, sv_d=1,  # the launcher turns integer arguments equal to 1 into constants
                 D=16, DV=16, BD=16, BDV=16, BDZ=32, LAM_INT=3, ROPE=False, PREC="tf32", APPROX=True, OFFS64=False)
SASS_OPS = r"\b(LDSM[\w.]*|STSM[\w.]*|STS(?:\.\d+)?|LDS(?:\.\d+)?|HMMA[\w.]*|BAR\.SYNC|LDG[\w.]*)\b"


def compile_reduce(vec4: bool, block_n: int, warps: int, stages: int):
    fn = nala._fwd_reduce
    const = {**CONSTANTS, "BLOCK_N": block_n, "VEC4": vec4}
    sig = {a: "constexpr" if a in const else RUNTIME[a] for a in fn.arg_names}
    attrs = {(fn.arg_names.index(a),): [["tt.divisibility", 16]] for a in DIVISIBLE_16}
    src = triton.compiler.ASTSource(fn=fn, signature=sig, constexprs=const, attrs=attrs)
    return triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": warps, "num_stages": stages})


def sass_of(cubin: bytes) -> str:
    nvdisasm = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "nvdisasm"
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        return subprocess.run([str(nvdisasm), "-c", "-g", f.name], capture_output=True, text=True, check=True).stdout


def main_loop(sass: str) -> list[str]:
    """The lines of the longest backward branch's body: the token loop."""
    lines = sass.splitlines()
    labels = {m.group(1): i for i, line in enumerate(lines) if (m := re.match(r"^\s*(\.L_x_\d+):", line))}
    best = (0, 0)
    for i, line in enumerate(lines):
        m = re.search(r"\bBRA\b.*?(\.L_x_\d+)", line)
        if m and labels.get(m.group(1), i) < i and i - labels[m.group(1)] > best[1] - best[0]:
            best = (labels[m.group(1)], i)
    return lines[best[0]:best[1] + 1]


# ----------------------------------------------------------------------------- the shared-store bank model


def _layouts(ttgir: str) -> dict[str, dict]:
    out = {}
    for name, body in re.findall(r"^#(\w+) = #ttg\.\w+<\{(.*)\}>", ttgir, re.M):
        out[name] = {k: [int(x) for x in re.findall(r"\d+", v)] if v.startswith("[") else int(v)
                     for k, v in re.findall(r"(\w+) = (\[[^\]]*\]|\d+)", body)}
    return out


def _owned(lay: dict, shape: tuple[int, int], lane: int) -> list[tuple[int, int]]:
    """Elements (row, col) lane ``lane`` of warp 0 holds in a blocked layout, in register order."""
    spt, tpw, wpc, order = lay["sizePerThread"], lay["threadsPerWarp"], lay["warpsPerCTA"], lay["order"]
    lc, rest = [0, 0], lane
    for d in order:
        lc[d], rest = rest % tpw[d], rest // tpw[d]
    tile = [spt[d] * tpw[d] * wpc[d] for d in range(2)]
    reps = [max(1, shape[d] // tile[d]) for d in range(2)]

    def walk(ext):  # order[0] fastest
        for flat in range(math.prod(ext)):
            idx = [0, 0]
            for d in order:
                idx[d], flat = flat % ext[d], flat // ext[d]
            yield idx

    return [tuple((r[d] * tile[d] + lc[d] * spt[d] + e[d]) % shape[d] for d in range(2))
            for r in walk(reps) for e in walk(spt)]


def _swizzled(sh: dict, shape: tuple[int, int], rc: tuple[int, int]) -> int:
    """Element offset of (row, col) in a swizzled shared buffer: 16-byte-ish vectors XOR-ed by the row's phase."""
    inner_d, outer_d = sh["order"]
    inner, outer = rc[inner_d], rc[outer_d]
    phase = (outer // sh["perPhase"]) % sh["maxPhase"]
    return outer * shape[inner_d] + ((inner // sh["vec"]) ^ phase) * sh["vec"] + inner % sh["vec"]


def store_model(ttgir: str) -> list[dict]:
    """For each in-loop local_alloc: store instructions per thread, and wavefronts per warp (model vs minimum)."""
    lay = _layouts(ttgir)
    loop = ttgir.split("scf.for", 1)[1].split("scf.yield", 1)[0]
    rows = []
    pat = r"ttg\.local_alloc %\S+ : \(tensor<(\d+)x(\d+)x(f32|f16|bf16), #(\w+)>\) -> !ttg\.memdesc<[^,]*, #(\w+),"
    for m in re.finditer(pat, loop):
        shape, esize = (int(m[1]), int(m[2])), 4 if m[3] == "f32" else 2
        bl, sh = lay[m[4]], lay[m[5]]
        run = min(bl["sizePerThread"][sh["order"][0]], sh["vec"] if sh["maxPhase"] > 1 else 1 << 30, 16 // esize)
        owned = [_owned(bl, shape, lane) for lane in range(32)]
        waves, minimum = [], []
        for k in range(0, len(owned[0]), run):  # one st.shared of `run` elements per thread
            words: dict[int, set[int]] = collections.defaultdict(set)
            for lane in range(32):
                for rc in owned[lane][k:k + run]:
                    byte = _swizzled(sh, shape, rc) * esize
                    words[(byte // 4) % 32].add(byte // 4)
            waves.append(max(len(w) for w in words.values()))
            minimum.append(max(1, 32 * run * esize // 128))
        rows.append({"tile": f"{m[1]}x{m[2]}x{m[3]}", "sizePerThread": bl["sizePerThread"], "swizzle":
                     f"vec {sh['vec']}, perPhase {sh['perPhase']}, maxPhase {sh['maxPhase']}",
                     "stores": len(waves), "bits": run * esize * 8, "wavefronts": sum(waves), "minimum": sum(minimum)})
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--vec4", action="store_true", help="the NALASR_REDUCE_VEC4=1 variant")
    ap.add_argument("--block-n", type=int, default=64)
    ap.add_argument("--warps", type=int, default=4)
    ap.add_argument("--stages", type=int, default=2)
    ap.add_argument("--out", type=Path, help="also write the ttgir, ptx and sass here")
    a = ap.parse_args()
    os.environ.pop("TRITON_INTERPRET", None)
    ck = compile_reduce(a.vec4, a.block_n, a.warps, a.stages)
    sass = sass_of(ck.asm["cubin"])
    if a.out:
        a.out.mkdir(parents=True, exist_ok=True)
        for kind, text in (("ttgir", ck.asm["ttgir"]), ("ptx", ck.asm["ptx"]), ("sass", sass)):
            (a.out / f"_fwd_reduce.{kind}").write_text(text)
    loop = main_loop(sass)
    counts = collections.Counter(m for line in loop for m in re.findall(SASS_OPS, line))
    print(f"_fwd_reduce sm_90, VEC4={int(a.vec4)}, BLOCK_N {a.block_n}, {a.warps} warps, {a.stages} stages, "
          f"Triton {triton.__version__}: {ck.metadata.shared} B shared")
    instructions = sum(bool(re.search(r"\*/\s+\S.*;", line)) for line in loop)
    print(f"main loop, per warp and tile: {instructions} instructions; "
          + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    total = minimum = 0
    for r in store_model(ck.asm["ttgir"]):
        total, minimum = total + r["wavefronts"], minimum + r["minimum"]
        print(f"  store {r['tile']} (sizePerThread {r['sizePerThread']}; {r['swizzle']}): {r['stores']} x "
              f"st.shared.b{r['bits']} per thread, {r['wavefronts']} wavefronts per warp (minimum {r['minimum']})")
    print(f"shared stores per warp and tile: {total} wavefronts, {total - minimum} of them conflicts")


if __name__ == "__main__":
    main()
