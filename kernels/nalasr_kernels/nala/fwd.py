"""NaLa attention's forward kernels: the reduce of S = Σ φ̃k vᵀ and z = Σ φk over chunks of keys (``fwd_reduce_kernel``;
fwd_reduce_rr holds the register reduce the model's shapes take), the deterministic combine of the chunks' partials
(``combine_kernel``), and the maps of every query, one head (``fwd_map_kernel``) or two (``fwd_map_pair_kernel``) a program, with the
state's load and store helpers the backward shares. Launched by :mod:`nalasr_kernels.nala.binding` (plans, autotuning)."""

from __future__ import annotations

import triton
import triton.language as tl

from . import half2
from .device import (
    FLT_MIN_NORMAL, angle_of, chunk_range, column, f16_state, key_mag, load_tile, log2_fast, pdl_launch, pdl_wait, pow2_scale,
    query_mag, query_mag_fwd, rope_angle, sincos_angle, sincos_any, slab_ptr, span, tf32, token_rows)


# ==================================================================================================== kernels
# Offsets inside one (b, h) slab are int32 unless the host says they could overflow (OFFS64): fewer registers
# and cheaper address arithmetic than 64-bit pointers per element; the (b, h) base offsets are always int64.
# Grids are (H, chunks, B): the head is the fastest axis so programs that run together read neighbouring
# bytes of the same tokens (q/k/v are token-major, (B, N, H, D) with heads interleaved). The state buffer of
# one (b, h) is flat float32: [Sc (BD×BDV) | Ss (BD×BDV) | zc (BD) | zs (BD)], cos half then sin half of φ.


@triton.jit(do_not_specialize=["N", "W", "n_chunks", "N_BUCKET"])
def fwd_reduce_kernel(
    K, V, FREQ, PART,
    N, W, H, CHUNK, n_chunks, N_BUCKET,
    sk_b, sk_n, sk_h, sk_d, sv_b, sv_n, sv_h, sv_d,
    alpha, lam,
    D: tl.constexpr, DV: tl.constexpr, BD: tl.constexpr, BDV: tl.constexpr, BDZ: tl.constexpr,
    LAM_INT: tl.constexpr, ROPE: tl.constexpr, PREC: tl.constexpr, APPROX: tl.constexpr, OFFS64: tl.constexpr,
    BLOCK_N: tl.constexpr, ZACC: tl.constexpr, CLAMP: tl.constexpr, ZDOT: tl.constexpr,
    PDL: tl.constexpr = False,
):
    """Partial Σφ̃k vᵀ and Σφk over one chunk of tokens of one (b, h) → PART[b, h, chunk, :].

    z (see plan (zacc)): ZACC sums φk into an elementwise (BLOCK_N, BD) accumulator, reduced over the tokens
    once after the loop; without RoPE (where ZACC means tf32 products) φk is first truncated to tf32 as the tensor
    cores take it: z must sum the operand S multiplied, or the backward's centring v̄ = Sᵀz/(z·z) is not v at
    N = 1 (dq, dk off by O(1) there). ZDOT (see plan (zdot); ZACC with tf32 products) takes z instead from a
    second product of S's own φk operand with ones, which truncates it the same way. Otherwise (no RoPE: there S
    takes φ̃k, z φk) the values get a column of ones at index DV (BDZ wide: BDV, or 2·BDV when DV fills BDV) and z
    comes out of the S product."""
    pdl_launch(PDL)  # the combine's programs may take the SMs this pass leaves as it ends (see plan.pdl)
    pid_h = tl.program_id(0)
    pid_c = tl.program_id(1)
    pid_b = tl.program_id(2)
    offs_d = tl.arange(0, BD)
    offs_z = tl.arange(0, BDZ)
    dmask = offs_d < D
    zmask = offs_z < DV
    k_base = slab_ptr(K, pid_b, pid_h, sk_b, sk_h)
    v_base = slab_ptr(V, pid_b, pid_h, sv_b, sv_h)
    # The same column offsets, written so Triton sees runs of 4 contiguous columns, not BD: a thread's 4 float32 then
    # store to shared memory without bank conflicts (8 columns: half the store wavefronts conflict).
    col_d = (offs_d // 4) * 4 + offs_d % 4
    col_z = (offs_z // 4) * 4 + offs_z % 4
    if ROPE:
        freq = tl.load(FREQ + offs_d)
    acc_c = tl.zeros((BD, BDZ), dtype=tl.float32)
    acc_s = tl.zeros((BD, BDZ), dtype=tl.float32)
    if ZDOT:  # z = φkᵀ·1 (every column), the S product's own operand (see plan (zdot))
        zd_c = tl.zeros((BD, 16), dtype=tl.float32)
        zd_s = tl.zeros((BD, 16), dtype=tl.float32)
        ones = tl.full((BLOCK_N, 16), 1.0, tl.float32)
    elif ZACC:
        za_c = tl.zeros((BLOCK_N, BD), dtype=tl.float32)
        za_s = tl.zeros((BLOCK_N, BD), dtype=tl.float32)
    start, end = chunk_range(pid_c, CHUNK, N)
    x_next = load_tile(k_base, start, end, sk_n, col_d, sk_d, dmask, BLOCK_N, OFFS64)
    v_next = load_tile(v_base, start, end, sv_n, col_z, sv_d, zmask, BLOCK_N, OFFS64)
    for n0 in tl.range(start, end, BLOCK_N):
        offs_n = n0 + tl.arange(0, BLOCK_N)
        # Masked tokens and padded dims load as 0, and φ(0) = 0 (m = 0): they add nothing to S or z.
        x = x_next.to(tl.float32)
        vv = v_next.to(tl.float32)
        x_next = load_tile(k_base, n0 + BLOCK_N, end, sk_n, col_d, sk_d, dmask, BLOCK_N, OFFS64)
        v_next = load_tile(v_base, n0 + BLOCK_N, end, sv_n, col_z, sv_d, zmask, BLOCK_N, OFFS64)
        x2 = x * x
        r = tl.rsqrt(tl.sum(x2, axis=1) + 1e-12)
        if APPROX:  # α·dir without dir, which nothing else here needs
            u, uc = angle_of(x * (alpha * r)[:, None], APPROX, CLAMP)
        else:  # float32 inputs: the accurate path (see sincos_angle)
            u, uc = angle_of(alpha * (x * r[:, None]), APPROX, CLAMP)
        m = key_mag(x, x2, lam, LAM_INT)
        c, s = sincos_angle(uc, APPROX)
        fc = m * c
        fs = m * s
        if ZDOT:
            zd_c = tl.dot(tl.trans(fc), ones, zd_c, input_precision=PREC)
            zd_s = tl.dot(tl.trans(fs), ones, zd_s, input_precision=PREC)
        elif ZACC:
            if not ROPE:
                fc = tf32(fc)
                fs = tf32(fs)
            za_c += fc
            za_s += fs
        else:
            vv = tl.where(offs_z[None, :] == DV, 1.0, vv)
        if ROPE:  # S takes the rotated φ̃k, z the plain φk (RoPE acts on the numerator only)
            c, s = sincos_any(uc * 0.7853981633974483 + rope_angle(offs_n, W, freq, offs_d, D // 2))
            fc = m * c
            fs = m * s
        # Measured alternative: Sᵀ += vᵀ·φ with v loaded
        # transposed, so φ is not transposed for the product: 129.8 against 112.7 µs at 518K, the same 4.1 M
        # bank-conflicted shared-memory store wavefronts (they are not this transpose's) and 20% more loads.
        # Measured alternative: the 3-D grouped product of bwd_query_kernel (reduce_dot) here: 150.5
        # against 101.0 µs at 518K. Triton lays out these operands' shared copies with the group dimension
        # between the other two (the register tiles carry their warps on the token axis, not the groups):
        # 4-way conflicted loads, and 125 instead of 72 registers.
        # Measured alternative: one 64-row product, the φ halves of the first half of the tokens
        # stacked over zeros and those of the second under them (tl.join / permute / reshape, then tl.where), so
        # Triton emits a Hopper wgmma reading v straight from shared memory: 144.5 against 101.1 µs, although the
        # offline compile had 32 instead of 80 shared loads per warp and tile.
        acc_c = tl.dot(tl.trans(fc), vv, acc_c, input_precision=PREC)
        acc_s = tl.dot(tl.trans(fs), vv, acc_s, input_precision=PREC)
    if ZDOT:
        z_c = column(zd_c, tl.arange(0, 16), 0)
        z_s = column(zd_s, tl.arange(0, 16), 0)
    elif ZACC:
        z_c = tl.sum(za_c, axis=0)
        z_s = tl.sum(za_s, axis=0)
    else:
        z_c = column(acc_c, offs_z, DV)
        z_s = column(acc_s, offs_z, DV)
        acc_c = tl.where(zmask[None, :], acc_c, 0.0)
        acc_s = tl.where(zmask[None, :], acc_s, 0.0)
    store_state(PART, (pid_b * H + pid_h) * n_chunks + pid_c, acc_c, acc_s, z_c, z_s, BD, BDV, BDZ)


@triton.jit(do_not_specialize=["n_chunks"])
def combine_kernel(PART, OUT, n_chunks, scale, STATE: tl.constexpr, BLOCK: tl.constexpr, CB: tl.constexpr,
             PDL: tl.constexpr = False):
    """OUT[bh, :] = scale · Σ_c PART[bh, c, :], summed in a fixed order (bitwise reproducible)."""
    pdl_launch(PDL)
    pdl_wait(PDL)  # PART comes from the reduce pass before
    pid_bh = tl.program_id(0)
    offs = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < STATE
    base = PART + pid_bh.to(tl.int64) * n_chunks * STATE
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for c0 in range(0, n_chunks, CB):  # CB chunks per load: many loads in flight instead of a serial chain
        cs = c0 + tl.arange(0, CB)
        x = tl.load(base + cs[:, None].to(tl.int64) * STATE + offs[None, :],
                    mask=(cs < n_chunks)[:, None] & mask[None, :], other=0.0)
        acc += tl.sum(x, axis=0)
    tl.store(OUT + pid_bh.to(tl.int64) * STATE + offs, acc * scale, mask=mask)


@triton.jit
def store_state(STATE, slot, s_c, s_s, z_c, z_s, BD: tl.constexpr, BDV: tl.constexpr, SW: tl.constexpr):
    """Write one state (or one chunk's partial) at index ``slot``, in the layout :func:`load_state` reads.
    s_c, s_s are (BD, SW), SW ≥ BDV: columns from BDV on are not stored."""
    offs_d = tl.arange(0, BD)
    cols = tl.arange(0, SW)
    se = offs_d[:, None] * BDV + cols[None, :]
    keep = (offs_d[:, None] < BD) & (cols[None, :] < BDV)
    st = STATE + slot.to(tl.int64) * (2 * BD * BDV + 2 * BD)
    tl.store(st + se, s_c, mask=keep)
    tl.store(st + BD * BDV + se, s_s, mask=keep)
    tl.store(st + 2 * BD * BDV + offs_d, z_c)
    tl.store(st + 2 * BD * BDV + BD + offs_d, z_s)


@triton.jit
def load_state(STATE, bh, BD: tl.constexpr, BDV: tl.constexpr):
    """One (b, h)'s state, laid out [S_cos (BD×BDV), S_sin (BD×BDV), z_cos (BD), z_sin (BD)] → the four parts."""
    offs_d = tl.arange(0, BD)
    se = offs_d[:, None] * BDV + tl.arange(0, BDV)[None, :]
    st = STATE + bh.to(tl.int64) * (2 * BD * BDV + 2 * BD)
    return (tl.load(st + se), tl.load(st + BD * BDV + se),
            tl.load(st + 2 * BD * BDV + offs_d), tl.load(st + 2 * BD * BDV + BD + offs_d))


@triton.jit
def centre_state(s_c, s_s, z_c, z_s):
    """v̄ = Sᵀz / (z·z) (BDV,): a weighted mean of the values (weights φk_j·z; 0 when z = 0). The backward works
    with S − z·v̄ᵀ and v − v̄ instead of S and v (see the module docstring: the cancellation at small spreads)."""
    zz = tl.sum(z_c * z_c, axis=0) + tl.sum(z_s * z_s, axis=0)
    vs = tl.sum(s_c * z_c[:, None], axis=0) + tl.sum(s_s * z_s[:, None], axis=0)
    return vs * tl.where(zz > 0, 1.0 / tl.where(zz > 0, zz, 1.0), 0.0)


@triton.jit
def _den(phi_c, phi_s, z_c, z_s, eps):
    """φq·z + ε (BLOCK_N,) from φq's halves (BLOCK_N, BD), the products the map's numerator multiplies anyway,
    summed as one row of 2·BD terms: one FMA a term, two operations a head dim where m·(c·z_c + s·z_s) took three
    (and summing phi_c·z_c + phi_s·z_s as two terms of a head dim adds an FADD each). Offline sm_90: fwd_map_kernel 493 →
    476 instructions a warp-tile; on the H200 at 518K 57.1-58.1 → 55.9 µs.
    Not in bwd_query_kernel, where it changed the float32 N = 1 dq test's rounding past its tolerance (see there)."""
    terms = tl.join(phi_c * z_c[None, :], phi_s * z_s[None, :])
    return tl.sum(tl.reshape(terms, (phi_c.shape[0], 2 * phi_c.shape[1])), axis=1) + eps


@triton.jit
def _z_mats(z_c, z_s, up, eps, BD: tl.constexpr, BDV: tl.constexpr):
    """HALF2's den operands: (BD, BDV) float16 matrices whose every column is z_c·zd, z_s·zd, with zd the power of two
    that puts max |z| in [0.5, 1) (pow2_scale), and the output factor and ε rescaled to match: with den from z·zd,
    o = num·up / (den/zd + ε) = num·(up·zd) / (den + ε·zd). Returns zc_mat, zs_mat, up·zd, ε·zd."""
    zd, _ = pow2_scale(tl.maximum(tl.max(tl.abs(z_c), axis=0), tl.max(tl.abs(z_s), axis=0)))
    zc_mat = (z_c[:, None] * zd + tl.zeros((BD, BDV), tl.float32)).to(tl.float16)
    zs_mat = (z_s[:, None] * zd + tl.zeros((BD, BDV), tl.float32)).to(tl.float16)
    return zc_mat, zs_mat, up * zd, eps * zd


@triton.jit
def _map_tile_h2(x, ss, r, s_c, s_s, zc_mat, zs_mat, up, eps, alpha, lga, lam, tau, APPROX: tl.constexpr):
    """HALF2's map of one query tile: x (BLOCK_N, BD) float32, ss = Σx², r = (ss + 1e-12)^(-1/2) (BLOCK_N,), the
    float16 S halves (f16_state), z matrices and the rescaled up, ε (_z_mats) → o (BLOCK_N, BDV) float32, in the
    products' accumulator layout. den ≥ ε·zd, zd ≥ 2^-65 (float16 keys, λ ≤ 4): a normal float unless ε < 2^-61,
    which the max with FLT_MIN keeps off rcp.approx's flush to zero."""
    xa = x * (alpha * r)[:, None]
    fc, fs = half2.features_h2(query_mag_fwd(xa, ss * r, lam, tau, lga, APPROX), xa)
    num = tl.dot(fc, s_c)
    num = tl.dot(fs, s_s, num)
    den = half2.den_h2(fc, fs, zc_mat, zs_mat) + eps
    return num * (up * half2.rcp_fast(tl.maximum(den, FLT_MIN_NORMAL)))[:, None]


@triton.jit(do_not_specialize=["N", "W", "n_chunks", "N_BUCKET"])
def fwd_map_kernel(
    Q, STATE, FREQ, O,
    N, W, H, CHUNK, n_chunks, N_BUCKET,
    sq_b, sq_n, sq_h, sq_d, so_b, so_n, so_h, so_d,
    alpha, lam, tau, eps,
    D: tl.constexpr, DV: tl.constexpr, BD: tl.constexpr, BDV: tl.constexpr,
    ROPE: tl.constexpr, PREC: tl.constexpr, APPROX: tl.constexpr, OFFS64: tl.constexpr, FASTMAG: tl.constexpr,
    F16: tl.constexpr, BLOCK_N: tl.constexpr, CLAMP: tl.constexpr, PDL: tl.constexpr = False,
    STRIDED: tl.constexpr = False,
    HALF2: tl.constexpr = False,
):
    """o = φ̃qᵀS / (φqᵀz + ε) for one chunk of queries of one (b, h); S, z stay in registers for the chunk.
    F16 (see plan (f16)): the product takes φ̃q and S as float16, S scaled into range (f16_state).
    HALF2 (see plan.map_half2; needs F16 and FASTMAG, no CLAMP): φq formed in float16 pairs (nalasr_kernels.nala.half2), den
    from float16 products with z scaled into range.
    PDL (see plan.pdl): the first q tile loads before the state is waited for.
    Measured alternative: the loads two tiles ahead instead of one (ptxas issues the
    next tile's two loads at 73% of the loop body, offline sm_90): 57.8-60.2 against 55.8-56.4 µs at 518K, 96 instead
    of 78 registers."""
    pid_h = tl.program_id(0)
    pid_c = tl.program_id(1)
    pid_b = tl.program_id(2)
    offs_d = tl.arange(0, BD)
    offs_e = tl.arange(0, BDV)
    dmask = offs_d < D
    emask = offs_e < DV
    q_base = slab_ptr(Q, pid_b, pid_h, sq_b, sq_h)
    o_base = slab_ptr(O, pid_b, pid_h, so_b, so_h)
    if ROPE:
        freq = tl.load(FREQ + offs_d)
    start, end, step = span(pid_c, CHUNK, N, n_chunks, BLOCK_N, STRIDED)
    x_next = load_tile(q_base, start, end, sq_n, offs_d, sq_d, dmask, BLOCK_N, OFFS64)
    pdl_wait(PDL)  # STATE comes from the combine before
    s_c, s_s, z_c, z_s = load_state(STATE, pid_b * H + pid_h, BD, BDV)
    if F16:
        s_c, s_s, up = f16_state(s_c, s_s)
    else:
        up = 1.0
    if FASTMAG:
        lga = log2_fast(tl.abs(alpha))
    if HALF2:
        zc_mat, zs_mat, up, eps = _z_mats(z_c, z_s, up, eps, BD, BDV)
    for n0 in tl.range(start, end, step):
        offs_n, nmask, rows = token_rows(n0, end, BLOCK_N, OFFS64)
        x = x_next.to(tl.float32)
        x_next = load_tile(q_base, n0 + step, end, sq_n, offs_d, sq_d, dmask, BLOCK_N, OFFS64)
        ss = tl.sum(x * x, axis=1)
        r = tl.rsqrt(ss + 1e-12)
        if HALF2:
            o = _map_tile_h2(x, ss, r, s_c, s_s, zc_mat, zs_mat, up, eps, alpha, lga, lam, tau, APPROX)
        else:
            if FASTMAG:  # 4 operations an element fewer (see query_mag_fwd)
                xa = x * (alpha * r)[:, None]
                m = query_mag_fwd(xa, ss * r, lam, tau, lga, APPROX)
                u, uc = angle_of(xa, APPROX, CLAMP)
            else:
                dirn = x * r[:, None]
                tn, p, l2, m, _ = query_mag(dirn, ss * r, lam, tau, APPROX)
                u, uc = angle_of(alpha * dirn, APPROX, CLAMP)
            c, s = sincos_angle(uc, APPROX, SIN5=True)
            mc = m * c
            ms = m * s
            den = _den(mc, ms, z_c, z_s, eps)
            if ROPE:
                c2, s2 = sincos_any(uc * 0.7853981633974483 + rope_angle(offs_n, W, freq, offs_d, D // 2))
                mc = m * c2
                ms = m * s2
            if F16:
                num = tl.dot(mc.to(tl.float16), s_c)
                num = tl.dot(ms.to(tl.float16), s_s, num)
            else:
                num = tl.dot(mc, s_c, input_precision=PREC)
                num = tl.dot(ms, s_s, num, input_precision=PREC)
            # Measured alternative: den from a second float16 product
            # of the same φq with z split in two float16 halves, so den comes out in num's accumulator layout (offline
            # sm_90 505 → 493 instructions a warp-tile, 5 → 3 barriers, one layout conversion fewer): 57.9 against
            # 55.9 µs at 518K on the H200. HALF2 takes
            # den from such products (z in every column, so no reduction either; half2.den_h2), with its own features.
            o = num * (up / den)[:, None]  # one division per token, not per element
        tl.store(o_base + rows[:, None] * so_n + offs_e[None, :] * so_d, o.to(O.dtype.element_ty),
                 mask=nmask[:, None] & emask[None, :])


@triton.jit
def _state_h2(STATE, bh, eps, BD: tl.constexpr):
    """HALF2's map operands of one (b, h) (BD = BDV): the float16 S halves, the z matrices and the rescaled output
    factor and ε (f16_state, _z_mats)."""
    s_c, s_s, z_c, z_s = load_state(STATE, bh, BD, BD)
    s_c, s_s, up = f16_state(s_c, s_s)
    zc_mat, zs_mat, up, eps = _z_mats(z_c, z_s, up, eps, BD, BD)
    return s_c, s_s, zc_mat, zs_mat, up, eps


@triton.jit
def _query_h2(x, s_c, s_s, zc_mat, zs_mat, up, eps, alpha, lga, lam, tau, APPROX: tl.constexpr):
    """o (BLOCK_N, BD) float32 of one query tile x as loaded (BLOCK_N, BD), HALF2's features (_map_tile_h2)."""
    xf = x.to(tl.float32)
    ss = tl.sum(xf * xf, axis=1)
    return _map_tile_h2(xf, ss, tl.rsqrt(ss + 1e-12), s_c, s_s, zc_mat, zs_mat, up, eps, alpha, lga, lam, tau, APPROX)


@triton.jit(do_not_specialize=["N", "n_chunks"])
def fwd_map_pair_kernel(
    Q, STATE, O,
    N, H, CHUNK, n_chunks,
    sq_b, sq_n, sq_h, sq_d, so_b, so_n,
    alpha, lam, tau, eps,
    BD: tl.constexpr, APPROX: tl.constexpr, OFFS64: tl.constexpr, BLOCK_N: tl.constexpr, PDL: tl.constexpr = False,
    STRIDED: tl.constexpr = False,
):
    """fwd_map_kernel with HALF2 over the two heads 2·program_id(0), 2·program_id(0) + 1 of one chunk of queries (see
    plan.map_pair): D = DV = BD, o's heads side by side with unit-stride dims (nala_forward's contiguous o), so a token's
    two outputs go out as one (2·BD)-element store, 64 bytes at 16 dims, where one head a program stores 32 bytes of
    each 128-byte row. STRIDED: see plan.STRIDED."""
    pid_p = tl.program_id(0)
    pid_c = tl.program_id(1)
    pid_b = tl.program_id(2)
    h0 = 2 * pid_p
    offs_d = tl.arange(0, BD)
    dmask = offs_d < BD
    offs_o = tl.arange(0, 2 * BD)
    qa = slab_ptr(Q, pid_b, h0, sq_b, sq_h)
    qb = qa + sq_h
    o_base = slab_ptr(O, pid_b, h0, so_b, BD)
    start, end, step = span(pid_c, CHUNK, N, n_chunks, BLOCK_N, STRIDED)
    xa_next = load_tile(qa, start, end, sq_n, offs_d, sq_d, dmask, BLOCK_N, OFFS64)
    xb_next = load_tile(qb, start, end, sq_n, offs_d, sq_d, dmask, BLOCK_N, OFFS64)
    pdl_wait(PDL)  # STATE comes from the combine before
    sca, ssa, zca, zsa, upa, epa = _state_h2(STATE, pid_b * H + h0, eps, BD)
    scb, ssb, zcb, zsb, upb, epb = _state_h2(STATE, pid_b * H + h0 + 1, eps, BD)
    lga = log2_fast(tl.abs(alpha))
    for n0 in tl.range(start, end, step):
        offs_n, nmask, rows = token_rows(n0, end, BLOCK_N, OFFS64)
        xa = xa_next
        xb = xb_next
        xa_next = load_tile(qa, n0 + step, end, sq_n, offs_d, sq_d, dmask, BLOCK_N, OFFS64)
        xb_next = load_tile(qb, n0 + step, end, sq_n, offs_d, sq_d, dmask, BLOCK_N, OFFS64)
        oa = _query_h2(xa, sca, ssa, zca, zsa, upa, epa, alpha, lga, lam, tau, APPROX)
        ob = _query_h2(xb, scb, ssb, zcb, zsb, upb, epb, alpha, lga, lam, tau, APPROX)
        o = tl.reshape(tl.permute(tl.join(oa, ob), (0, 2, 1)), (BLOCK_N, 2 * BD))  # column BD·head + dim
        tl.store(o_base + rows[:, None] * so_n + offs_o[None, :], o.to(O.dtype.element_ty), mask=nmask[:, None])
