"""Compile one of the attention kernels for sm_90 on a machine without a GPU and count its shared-memory
traffic: a CPU-side look at what Nsight Compute measures on the H200, for trying kernel changes between GPU calls.

    .venv/bin/python benchmarks/compile_sm90.py [--kernel fwd_reduce|fwd_reduce_rr|fwd_map|fwd_map_pair|fwd_map_rr|bwd_query|bwd_query_rr|bwd_key|bwd_key_rr] [--vec4 0|1]
        [--split 0|1] [--zacc 0|1] [--zdot 0|1] [--eye 0|1] [--block-n 64] [--warps 4] [--stages 2] [--maxnreg N]
        [--out DIR]

Prints the kernel's shared memory, the main loop's SASS instructions that matter here (shared stores and loads,
tensor-core products, barriers, global loads), how many loop instructions after issue the loop's global loads
are first waited on (load_waits: from the scheduling controls ptxas wrote into each instruction; a load waited
on within a few dozen instructions has its memory latency exposed), and, for every shared-memory store of the
loop (the tl.dot operands Triton stages through ``ttg.local_alloc``), how many wavefronts one warp's store
instruction takes against the conflict-free minimum, from the register layout and the swizzle of the TTGIR (in-loop
``ttg.convert_layout``s also go through shared memory; they are counted, not modelled). The launch constants are
those of 518,400 tokens, 4 heads of 16, fp16 inputs, no RoPE (what ``nala_forward`` / ``nala_backward`` pass);
BLOCK_N, warps, stages and maxnreg default to the autotuner's picks there (see KERNELS). --vec4, --zacc and --zdot
are _fwd_reduce's VEC4, ZACC and ZDOT switches (NALASR_REDUCE_VEC4, _ZACC, _ZDOT; ZACC 0 also sets the ones
column's BDZ = 32, and ZDOT needs ZACC), --split _bwd_query's SPLIT (NALASR_REDUCE_SPLIT), --eye the backward
kernels' EYE (NALASR_EYE_BWD_QUERY / _BWD_KEY), --f16 the F16 of _fwd_map (NALASR_MAP_F16) and of the backward
kernels (NALASR_BWD_F16), --dzacc and --mpow _bwd_query's DZACC and MPOW (NALASR_BWD_DZACC, NALASR_BWD_MPOW); all 1
unless given, like the environment switches (the bank model covers 2-D tiles only: SPLIT's 3-D operand stores show in
the SASS counts, not in the model). The register reduce with --const SK_N=.. --const SV_N=.. (static strides) takes
its whole-tile loads as inline PTX as nala_rr.launch does (--const ASM_LOADS=0 for tl.load).
Needs Triton with its bundled ptxas / nvdisasm (the pip wheel has them); the H200 runs Triton 3.6, so a venv with
triton==3.6.0 matches it (session 14: benchmarks/results/offline/compile_sm90_session14.txt; 3.9 differs a little,
e.g. _fwd_map 280 against 270 instructions). The first run (session 10, Triton 3.9;
now --vec4 0 --zacc 0 --block-n 64 --warps 4): 8 STS.128 per warp and tile taking 64 wavefronts, 32 of them
conflicts — ncu's 8.3 M store wavefronts with 4.1 M conflicts over the 129,600 warp-tiles at 518K, exactly.
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

from nalasr_kernels import nala, nala_bwd_key_rr, nala_bwd_query_rr, nala_map_rr, nala_rr  # noqa: E402

# The launch constants nala_forward / nala_backward pass at 518,400 tokens, B 1, H 4, D = Dv = 16, fp16, no RoPE:
# PREC tf32 (_precision of fp16), PREC_G tf32 (grad=rope, False) so CENTRE (not rope and PREC_G == "tf32"),
# APPROX (16-bit inputs), LAM_INT 3, OFFS64 False, FASTMAG (λτ = 1.5), CLAMP False (α = 1, nala._clamp), HALF2 (fp16
# q, |α| ≤ 1, nala._map_half2; --const HALF2=0 compiles the map's float32 features). Each kernel takes those it declares.
CONSTEXPRS = dict(D=16, DV=16, BD=16, BDV=16, LAM_INT=3, ROPE=False, PREC="tf32", PREC_G="tf32",
                  CENTRE=True, APPROX=True, OFFS64=False, FASTMAG=True, CLAMP=False, HALF2=True)
F32_POINTERS = {"FREQ", "PART", "STATE", "DSTATE"}  # the rest are the fp16 (B, N, H, D) tensors
FLOATS = {"alpha", "lam", "tau", "eps"}
# Per kernel: its pointer arguments, and the autotuner's pick at 518K (BLOCK_N, warps, stages, maxnreg): the
# latest recorded on the H200, benchmarks/results/h200/session16/call1/diag.json ("registers", N_BUCKET 2097152).
KERNELS = {
    "fwd_reduce": (nala._fwd_reduce, "K V FREQ PART", (32, 1, 2, None)),
    "fwd_map": (nala._fwd_map, "Q STATE FREQ O", (64, 2, 2, None)),
    "fwd_map_pair": (nala._fwd_map_pair, "Q STATE O", nala._PAIR_TILE),
    "bwd_query": (nala._bwd_query, "Q DO STATE FREQ DQ PART", (16, 1, 2, None)),
    "bwd_key": (nala._bwd_key, "K V STATE DSTATE FREQ DK DV_", (64, 4, 2, None)),
    # the register reduce (nalasr_kernels.nala_rr): its own fixed plan, 32 tokens on one warp, 128 registers
    "fwd_reduce_rr": (nala_rr._fwd_reduce_rr, "K V PART", (32, 1, 1, nala_rr.MAXNREG)),
    # the register map (nalasr_kernels.nala_map_rr): 32 tokens on one warp, uncapped
    "fwd_map_rr": (nala_map_rr._fwd_map_rr, "Q STATE O", (32, 1, 1, None)),
    # the backward's key pass from registers (nalasr_kernels.nala_bwd_key_rr): 16 tokens on one warp, uncapped
    "bwd_key_rr": (nala_bwd_key_rr._bwd_key_rr, "K V STATE DSTATE DK DV_", (32, 1, 1, None)),
    # the backward's query pass from registers (nalasr_kernels.nala_bwd_query_rr): 16 tokens on one warp, uncapped
    "bwd_query_rr": (nala_bwd_query_rr._bwd_query_rr, "Q DO STATE DQ PART", (32, 1, 1, None)),
}
SASS_OPS = r"\b(LDSM[\w.]*|STSM[\w.]*|STS(?:\.\d+)?|LDS(?:\.\d+)?|HG?MMA[\w.]*|BAR\.SYNC|LDG[\w.]*)\b"


def compile_kernel(kernel: str, switches: dict, block_n: int, warps: int, stages: int, maxnreg: int | None):
    fn, pointers = KERNELS[kernel][:2]
    pointers = pointers.split()
    const, sig, divisible = {}, {}, []
    for p in fn.params:
        a = p.name
        if p.is_constexpr:
            known = {**CONSTEXPRS, **switches}
            const[a] = block_n if a == "BLOCK_N" else known[a] if a in known or not p.has_default else p.default
        elif re.fullmatch(r"s\w*_d", a):  # the launcher turns integer arguments equal to 1 into constants
            const[a] = 1
        elif p.has_default and p.default is None:  # an optional pointer left out (nala_rr's TIMES)
            const[a] = None
        if a in const:
            sig[a] = "constexpr"
            continue
        sig[a] = ("*fp32" if a in F32_POINTERS else "*fp16") if a in pointers else "fp32" if a in FLOATS else "i32"
        if a in pointers or a == "CHUNK" or re.fullmatch(r"s\w*_[bnh]", a):  # multiples of 16 (strides 64·N, 64, 16)
            divisible.append(a)
    attrs = {(fn.arg_names.index(a),): [["tt.divisibility", 16]] for a in divisible}
    src = triton.compiler.ASTSource(fn=fn, signature=sig, constexprs=const, attrs=attrs)
    options = {"num_warps": warps, "num_stages": stages, **({"maxnreg": maxnreg} if maxnreg else {})}
    return triton.compile(src, target=GPUTarget("cuda", 90, 32), options=options)


def _cubin_tool(tool: str, cubin: bytes, *args: str) -> str:
    """stdout of one of Triton's bundled CUDA binary tools run on ``cubin``."""
    exe = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / tool
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        return subprocess.run([str(exe), *args, f.name], capture_output=True, text=True, check=True).stdout


def sass_of(cubin: bytes) -> str:
    return _cubin_tool("nvdisasm", cubin, "-c", "-g")


def resources(cubin: bytes) -> str:
    """Registers and stack bytes a thread, from cuobjdump's resource usage (spills show as stack)."""
    out = _cubin_tool("cuobjdump", cubin, "--dump-resource-usage")
    m = re.search(r"REG:(\d+).*?STACK:(\d+)", out)
    return f"{m[1]} registers, {m[2]} B stack" if m else "registers unknown"


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


def branch_skips(loop: list[str]) -> int:
    """Instructions between a conditional forward branch of the loop and its target inside the loop (0 if none)."""
    labels = {m.group(1): i for i, line in enumerate(loop) if (m := re.match(r"^\s*(\.L_x_\d+):", line))}
    for i, line in enumerate(loop[:-1]):
        m = re.search(r"@!?P\d\s+BRA\b.*?(\.L_x_\d+)", line)
        if m and labels.get(m.group(1), -1) > i:
            return sum(bool(re.search(r"\*/\s+\S.*;", x)) for x in loop[i + 1:labels[m.group(1)]])
    return 0


def load_waits(cubin: bytes) -> list[tuple[int, str, int]]:
    """For every global load of the token loop: (its index in the loop, the instruction, how many loop instructions
    later the first instruction waiting on its scoreboard comes, following the loop round into the next tile).

    sm_90 instructions are 128 bits; the top 23 carry the scheduling controls ptxas set (stall cycles, yield, the
    scoreboard an instruction's result sets (write barrier) and the mask of scoreboards it waits on). There are 6
    scoreboards for every variable-latency result (global and shared loads, shuffles, MUFU ops), so ptxas shares
    them: a shuffle on the scoreboard of a load just issued makes the shuffle's first reader wait for the load as
    well. The next tile's loads are meant to be waited on one tile later; a wait a few instructions after issue
    exposes the whole memory latency (session 21: the register reduce with shorter sin/cos series had two loads
    waited 28-30 instructions after issue, and Nsight Compute put 21% of its stall samples on that one wait)."""
    lines = _cubin_tool("nvdisasm", cubin, "-hex", "-c").splitlines()
    loop = [line for line in main_loop("\n".join(lines)) if re.search(r"/\*[0-9a-f]{4,}\*/", line)]
    code = {}  # index of each instruction line in ``lines`` → (text, write barrier, wait mask)
    for i, line in enumerate(lines):
        if (m := re.search(r"/\*[0-9a-f]{4,}\*/\s+(.*?);\s*/\* 0x[0-9a-f]+ \*/", line)) and i + 1 < len(lines):
            hi = int(re.search(r"0x([0-9a-f]+)", lines[i + 1]).group(1), 16)
            code[line] = (m.group(1).strip(), (hi >> 46) & 7, (hi >> 52) & 63)
    body = [code[line] for line in loop if line in code]
    out = []
    for k, (text, wb, _) in enumerate(body):
        if "LDG" in text and wb != 7:
            later = next((j for j in range(1, 2 * len(body) + 1) if body[(k + j) % len(body)][2] >> wb & 1), None)
            if later is not None:  # None: waited on only after the loop
                out.append((k, text, later))
    return out


# ----------------------------------------------------------------------------- the shared-store bank model


def _layouts(ttgir: str) -> dict[str, dict]:
    out = {}
    for name, body in re.findall(r"^#(\w+) = #ttg\.\w+<\{(.*)\}>", ttgir, re.M):
        out[name] = {k: [int(x) for x in re.findall(r"\d+", v)] if v.startswith("[") else int(v)
                     for k, v in re.findall(r"(\w+) = (\[[^\]]*\]|\d+)", body)}
    return out


def _owned(lay: dict, shape: tuple[int, int], lane: int) -> list[tuple[int, int]]:
    """Elements (row, col) lane ``lane`` of warp 0 holds in a blocked or mma v2 layout, in register order."""
    if "versionMajor" in lay:  # the mma.sync accumulator: per 16x8 tile (lane/4, 2·(lane%4) + 0..1), 8 rows on
        if lay["versionMajor"] != 2:
            raise NotImplementedError(f"shared store from an mma v{lay['versionMajor']} layout")
        tile = [16 * lay["warpsPerCTA"][0], 8 * lay["warpsPerCTA"][1]]
        return [((rm * tile[0] + lane // 4 + 8 * i) % shape[0], (rn * tile[1] + 2 * (lane % 4) + j) % shape[1])
                for rm in range(max(1, shape[0] // tile[0])) for rn in range(max(1, shape[1] // tile[1]))
                for i in range(2) for j in range(2)]
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
        if bl.get("versionMajor", 2) != 2 or "vec" not in sh:  # wgmma accumulators, nvmma_shared targets
            rows.append({"tile": f"{m[1]}x{m[2]}x{m[3]}", "skipped": f"#{m[4]} -> #{m[5]}"})
            continue
        spt = bl.get("sizePerThread", [1, 2])  # mma v2: runs of 2 columns
        run = min(spt[sh["order"][0]], sh["vec"] if sh["maxPhase"] > 1 else 1 << 30, 16 // esize)
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
        rows.append({"tile": f"{m[1]}x{m[2]}x{m[3]}", "layout": f"sizePerThread {spt}" if "sizePerThread" in bl else
                     f"mma v2 accumulator, warpsPerCTA {bl['warpsPerCTA']}", "swizzle":
                     f"vec {sh['vec']}, perPhase {sh['perPhase']}, maxPhase {sh['maxPhase']}",
                     "stores": len(waves), "bits": run * esize * 8, "wavefronts": sum(waves), "minimum": sum(minimum)})
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kernel", choices=KERNELS, default="fwd_reduce")
    ap.add_argument("--vec4", type=int, choices=(0, 1), default=1, help="NALASR_REDUCE_VEC4 (fwd_reduce)")
    ap.add_argument("--split", type=int, choices=(0, 1), default=1, help="NALASR_REDUCE_SPLIT (bwd_query)")
    ap.add_argument("--zacc", type=int, choices=(0, 1), default=1, help="NALASR_REDUCE_ZACC (fwd_reduce)")
    ap.add_argument("--zdot", type=int, choices=(0, 1), default=1, help="NALASR_REDUCE_ZDOT (fwd_reduce, with ZACC)")
    ap.add_argument("--f16", type=int, choices=(0, 1), default=1,
                    help="NALASR_MAP_F16 (fwd_map), NALASR_BWD_F16 (bwd_query, bwd_key)")
    ap.add_argument("--eye", type=int, choices=(0, 1), default=1, help="NALASR_EYE_BWD_QUERY / _BWD_KEY")
    ap.add_argument("--dzacc", type=int, choices=(0, 1), default=1, help="NALASR_BWD_DZACC (bwd_query)")
    ap.add_argument("--mpow", type=int, choices=(0, 1), default=1, help="NALASR_BWD_MPOW (bwd_query)")
    ap.add_argument("--const", action="append", default=[], metavar="NAME=INT",
                    help="any other constexpr of the kernel (e.g. PF=2 PFH=1 CS=1; default: the kernel's own)")
    ap.add_argument("--block-n", type=int, help="default: the autotuner's pick at 518K (see KERNELS)")
    ap.add_argument("--warps", type=int)
    ap.add_argument("--stages", type=int)
    ap.add_argument("--maxnreg", type=int)
    ap.add_argument("--out", type=Path, help="also write the ttgir, ptx and sass here")
    a = ap.parse_args()
    block_n, warps, stages, maxnreg = (given if given is not None else pick for given, pick in
                                       zip((a.block_n, a.warps, a.stages, a.maxnreg), KERNELS[a.kernel][2]))
    name = KERNELS[a.kernel][0].__name__
    os.environ.pop("TRITON_INTERPRET", None)
    params = {p.name for p in KERNELS[a.kernel][0].params}
    switches = {k: v for k, v in (("VEC4", bool(a.vec4)), ("SPLIT", a.split), ("ZACC", a.zacc), ("EYE", a.eye),
                                  ("F16", bool(a.f16)), ("BDZ", 16 if a.zacc else 32), ("DZACC", bool(a.dzacc)),
                                  ("MPOW", bool(a.mpow)), ("ZDOT", bool(a.zacc and a.zdot))) if k in params}
    for item in a.const:
        k, _, v = item.partition("=")
        if k not in params:
            ap.error(f"--const {item}: {name} has no parameter {k}")
        switches[k] = int(v)
    if "ASM_LOADS" in params and switches.get("SK_N") and switches.get("SV_N"):  # the asm loads, as nala_rr.launch
        if switches.setdefault("ASM_LOADS", int(nala_rr.ASM_LOADS)):
            switches.update(nala_rr.asm_loads_meta(switches["SK_N"], switches["SV_N"]))
    ck = compile_kernel(a.kernel, switches, block_n, warps, stages, maxnreg)
    sass = sass_of(ck.asm["cubin"])
    if a.out:
        a.out.mkdir(parents=True, exist_ok=True)
        for kind, text in (("ttgir", ck.asm["ttgir"]), ("ptx", ck.asm["ptx"]), ("sass", sass)):
            (a.out / f"{name}.{kind}").write_text(text)
        (a.out / f"{name}.cubin").write_bytes(ck.asm["cubin"])  # nvdisasm -hex: the controls load_waits reads
    loop = main_loop(sass)
    counts = collections.Counter(m for line in loop for m in re.findall(SASS_OPS, line))
    # the switches, not the PTX strings derived from them (nala_rr's LD_K, LD_V) nor the derived BDZ
    variant = "".join(f", {k}={int(v)}" for k, v in switches.items() if k != "BDZ" and not isinstance(v, str))
    print(f"{name} sm_90{variant}, BLOCK_N {block_n}, {warps} warps, {stages} stages"
          f"{f', maxnreg {maxnreg}' if maxnreg else ''}, Triton {triton.__version__}: {ck.metadata.shared} B shared, "
          f"{resources(ck.asm['cubin'])}")
    instructions = sum(bool(re.search(r"\*/\s+\S.*;", line)) for line in loop)
    print(f"main loop, per warp and tile: {instructions} instructions; "
          + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    if skipped := branch_skips(loop):
        print(f"  of them {skipped} on a path a forward branch inside the loop skips (the register reduce's masked "
              f"loads of a chunk's last tile): {instructions - skipped} on the other")
    if waits := load_waits(ck.asm["cubin"]):
        first = min(w for _, _, w in waits)
        k, text = next((k, t) for k, t, w in waits if w == first)
        print(f"global loads: first waits {first}-{max(w for _, _, w in waits)} loop instructions after issue "
              f"(earliest: loop instruction {k}, {text})")
    total = minimum = 0
    for r in store_model(ck.asm["ttgir"]):
        if "skipped" in r:
            print(f"  store {r['tile']} ({r['skipped']}): not modelled")
            continue
        total, minimum = total + r["wavefronts"], minimum + r["minimum"]
        print(f"  store {r['tile']} ({r['layout']}; {r['swizzle']}): {r['stores']} x "
              f"st.shared.b{r['bits']} per thread, {r['wavefronts']} wavefronts per warp (minimum {r['minimum']})")
    print(f"shared stores per warp and tile: {total} wavefronts, {total - minimum} of them conflicts")
    loop_ir = ck.asm["ttgir"].split("scf.for", 1)[1].split("scf.yield", 1)[0]
    if converts := loop_ir.count("ttg.convert_layout"):
        print(f"  (+ {converts} ttg.convert_layout in the loop, not modelled: the loop's other shared traffic)")


if __name__ == "__main__":
    main()
