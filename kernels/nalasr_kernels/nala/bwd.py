"""NaLa attention's backward kernels: ``bwd_query_kernel`` (dq, and the chunks' partial dS, dz over the queries) and
``bwd_key_kernel`` (dk, dv from the combined dS, dz). Launched by :mod:`nalasr_kernels.nala.binding`; the gradients' algebra and
the centring that keeps tf32 accurate are in its docstring."""

from __future__ import annotations

import triton
import triton.language as tl

from .device import (
    FLT_MIN_NORMAL, U_MAX, angle_of, direction, fdiv, dtanh, f16_state, feature_grad_angle, key_mag,
    key_mag_grad, load_tile, pdl_launch, pdl_wait, query_mag, reduce_acc, reduce_dot, reduce_total,
    rope_angle, sincos_angle, sincos_any, slab_ptr, span, token_rows, upcast)
from .fwd import centre_state, load_state, store_state


@triton.jit(do_not_specialize=["N", "W", "n_chunks", "N_BUCKET"])
def bwd_query_kernel(
    Q, DO, STATE, FREQ, DQ, PART,
    N, W, H, CHUNK, n_chunks, N_BUCKET,
    sq_b, sq_n, sq_h, sq_d, sg_b, sg_n, sg_h, sg_d, sdq_b, sdq_n, sdq_h, sdq_d,
    alpha, lam, tau, eps,
    D: tl.constexpr, DV: tl.constexpr, BD: tl.constexpr, BDV: tl.constexpr,
    ROPE: tl.constexpr, PREC_G: tl.constexpr, CENTRE: tl.constexpr, APPROX: tl.constexpr, OFFS64: tl.constexpr,
    BLOCK_N: tl.constexpr, EYE: tl.constexpr, MPOW: tl.constexpr,
    CLAMP: tl.constexpr, PDL: tl.constexpr = False, F16: tl.constexpr = False,
    STRIDED: tl.constexpr = False,
):
    """Over one chunk of queries: dq (map), and partial dS = Σ φ̃q dnumᵀ, dz = Σ dden·φq (reduce) → PART.
    dS comes from products that split a tile's tokens into groups of 16, one batch of a 3-D tl.dot each (reduce_dot:
    fewer shared loads than one 2-D product); dz = Σ dden·φq from elementwise float32 (BLOCK_N, BD) accumulators summed
    once after the loop. MPOW (plan.bwd_mpow): m/dir as sign(dir)·|dir|^(p−1), one exp2 an element, m = that·|dir|."""
    pdl_launch(PDL)  # see fwd_reduce_kernel
    pid_h = tl.program_id(0)
    pid_c = tl.program_id(1)
    pid_b = tl.program_id(2)
    offs_d = tl.arange(0, BD)
    offs_e = tl.arange(0, BDV)
    dmask = offs_d < D
    emask = offs_e < DV
    s_c, s_s, z_c, z_s = load_state(STATE, pid_b * H + pid_h, BD, BDV)
    if CENTRE:  # centred values: S − z·v̄ᵀ (v̄ enters dden below)
        vbar = centre_state(s_c, s_s, z_c, z_s)
        s_c = s_c - z_c[:, None] * vbar[None, :]
        s_s = s_s - z_s[:, None] * vbar[None, :]
    s_cT = tl.trans(s_c)
    s_sT = tl.trans(s_s)
    if F16:  # see plan.bwd_f16
        s_cT16, s_sT16, s_up = f16_state(s_cT, s_sT)
    q_base = slab_ptr(Q, pid_b, pid_h, sq_b, sq_h)
    g_base = slab_ptr(DO, pid_b, pid_h, sg_b, sg_h)
    dq_base = slab_ptr(DQ, pid_b, pid_h, sdq_b, sdq_h)
    if ROPE:
        freq = tl.load(FREQ + offs_d)
    GROUPS: tl.constexpr = BLOCK_N // 16  # see reduce_dot
    ds_c = reduce_acc(BD, BDV, GROUPS)
    ds_s = reduce_acc(BD, BDV, GROUPS)
    dz_c = tl.zeros((BLOCK_N, BD), dtype=tl.float32)
    dz_s = tl.zeros((BLOCK_N, BD), dtype=tl.float32)
    start, end, step = span(pid_c, CHUNK, N, n_chunks, BLOCK_N, STRIDED)
    x_next = load_tile(q_base, start, end, sq_n, offs_d, sq_d, dmask, BLOCK_N, OFFS64)
    g_next = load_tile(g_base, start, end, sg_n, offs_e, sg_d, emask, BLOCK_N, OFFS64)
    for n0 in tl.range(start, end, step):
        offs_n, nmask, rows = token_rows(n0, end, BLOCK_N, OFFS64)
        mask_d = nmask[:, None] & dmask[None, :]
        x = upcast(x_next, offs_d, EYE)
        # Masked tokens: g = 0 ⇒ dnum = dden = 0, so they add nothing to dS, dz (and dq is not stored).
        g = upcast(g_next, offs_e, EYE)
        x_next = load_tile(q_base, n0 + step, end, sq_n, offs_d, sq_d, dmask, BLOCK_N, OFFS64)
        g_next = load_tile(g_base, n0 + step, end, sg_n, offs_e, sg_d, emask, BLOCK_N, OFFS64)
        # ---- recompute the forward for this tile (o in float32, as the reference's autograd sees it)
        ss, r, dirn = direction(x)
        nrm = ss * r
        tn, p, l2, m, mo = query_mag(dirn, nrm, lam, tau, APPROX, MPOW)
        u, uc = angle_of(alpha * dirn, APPROX, CLAMP)
        c, s = sincos_angle(uc, APPROX)
        phi_c = m * c
        phi_s = m * s
        # Measured alternative: den and dden summed as one row of 2·BD products, as _den does for
        # fwd_map_kernel (offline 658 → 645 instructions a warp-tile): 164.7-165.1 against 165.1 µs at 518K, and the
        # float32 N = 1 dq test over its tolerance.
        den = tl.sum(phi_c * z_c[None, :] + phi_s * z_s[None, :], axis=1) + eps
        if ROPE:
            c2, s2 = sincos_any(uc * 0.7853981633974483 + rope_angle(offs_n, W, freq, offs_d, D // 2))
            phi_c2 = m * c2
            phi_s2 = m * s2
        else:
            c2 = c
            s2 = s
            phi_c2 = phi_c
            phi_s2 = phi_s
        rden = 1.0 / den
        # ---- o = num/den, num = Sᵀφ̃q. ∂L/∂φ̃q = S·dnum, and g·num = den·(φ̃q·S·dnum): dden comes from ∂L/∂φ̃q,
        # so num (o) is never formed (two products and a (BLOCK_N, BDV) accumulator fewer). With CENTRE, S is
        # the centred S − z·v̄ᵀ here, and dden the centred dden + v̄·dnum = −(φq·(S − z·v̄ᵀ)·dnum − ε·v̄·dnum)/den.
        dnum = g * rden[:, None]                                  # (BLOCK_N, BDV)
        if F16:  # S·dnum as g (exact in float16) times the scaled S, 1/den and the scale after the product
            g16 = g.to(tl.float16)
            gsc = (rden * s_up)[:, None]
            gc2 = tl.dot(g16, s_cT16) * gsc
            gs2 = tl.dot(g16, s_sT16) * gsc
        else:
            gc2 = tl.dot(dnum, s_cT, input_precision=PREC_G)         # (BLOCK_N, BD)
            gs2 = tl.dot(dnum, s_sT, input_precision=PREC_G)
        dden = -tl.sum(phi_c2 * gc2 + phi_s2 * gs2, axis=1)
        if CENTRE:
            dden += eps * tl.sum(dnum * vbar[None, :], axis=1)
        dden *= rden                                              # (BLOCK_N,)
        ds_c = reduce_dot(phi_c2, dnum, ds_c, GROUPS, PREC_G)
        ds_s = reduce_dot(phi_s2, dnum, ds_s, GROUPS, PREC_G)
        dz_c += dden[:, None] * phi_c
        dz_s += dden[:, None] * phi_s
        gc = dden[:, None] * z_c[None, :]
        gs = dden[:, None] * z_s[None, :]
        dm, dth = feature_grad_angle(m, c, s, c2, s2, gc, gs, gc2, gs2, ROPE)
        # ---- θ = clamp((π/4)·tanh(α·dir)) and m = |dir|^p → ∂L/∂dir, ∂L/∂p
        if CLAMP:
            dth = tl.where(tl.abs(u) <= U_MAX, dth, 0.0)
        ddir = dtanh(dth, u, 0.7853981633974483 * alpha, APPROX)
        if MPOW:  # m/dir = sign(dir)·mo (mo ≥ 0 takes dir's sign bit: one LOP3, no compare and select)
            mos = (mo.to(tl.int32, bitcast=True) | (dirn.to(tl.int32, bitcast=True) & -2147483648)).to(
                tl.float32, bitcast=True)
            ddir += dm * p[:, None] * mos
        else:
            pos = tl.abs(dirn) >= FLT_MIN_NORMAL  # as in query_mag: m = 0 below
            ddir += tl.where(pos, fdiv(dm * p[:, None] * m, tl.where(pos, dirn, 1.0)), 0.0)
        dp = tl.sum(dm * m * l2, axis=1) * 0.6931471805599453     # m·ln|dir| = m·log2|dir|·ln 2; l2 = 0 at dir = 0
        dnrm = dp * lam * (1.0 - tn * tn)
        # ---- dir = x·r and ‖x‖ = Σx²·r, r = (Σx² + 1e-12)^(-1/2)
        proj = tl.sum(ddir * dirn, axis=1)
        dx = r[:, None] * (ddir - dirn * proj[:, None]) + (dnrm * r * (2.0 - ss * r * r))[:, None] * x
        tl.store(dq_base + rows[:, None] * sdq_n + offs_d[None, :] * sdq_d, dx.to(DQ.dtype.element_ty), mask=mask_d)
    ds_c = reduce_total(ds_c, GROUPS)
    ds_s = reduce_total(ds_s, GROUPS)
    dz_c = tl.sum(dz_c, axis=0)
    dz_s = tl.sum(dz_s, axis=0)
    store_state(PART, (pid_b * H + pid_h) * n_chunks + pid_c, ds_c, ds_s, dz_c, dz_s, BD, BDV, BDV)


@triton.jit(do_not_specialize=["N", "W", "n_chunks", "N_BUCKET"])
def bwd_key_kernel(
    K, V, STATE, DSTATE, FREQ, DK, DV_,
    N, W, H, CHUNK, n_chunks, N_BUCKET,
    sk_b, sk_n, sk_h, sk_d, sv_b, sv_n, sv_h, sv_d,
    sdk_b, sdk_n, sdk_h, sdk_d, sdv_b, sdv_n, sdv_h, sdv_d,
    alpha, lam,
    D: tl.constexpr, DV: tl.constexpr, BD: tl.constexpr, BDV: tl.constexpr,
    LAM_INT: tl.constexpr, ROPE: tl.constexpr, PREC: tl.constexpr, PREC_G: tl.constexpr, CENTRE: tl.constexpr,
    APPROX: tl.constexpr, OFFS64: tl.constexpr, BLOCK_N: tl.constexpr, EYE: tl.constexpr, CLAMP: tl.constexpr,
    PDL: tl.constexpr = False, F16: tl.constexpr = False,
    STRIDED: tl.constexpr = False,
):
    """Over one chunk of keys: dv = (dS/N)ᵀφ̃k, ∂L/∂φ̃k = (dS/N)·v, ∂L/∂φk = dz/N, chained into dk."""
    pid_h = tl.program_id(0)
    pid_c = tl.program_id(1)
    pid_b = tl.program_id(2)
    offs_d = tl.arange(0, BD)
    offs_e = tl.arange(0, BDV)
    dmask = offs_d < D
    emask = offs_e < DV
    if CENTRE:
        s_c, s_s, z_c, z_s = load_state(STATE, pid_b * H + pid_h, BD, BDV)
        vbar = centre_state(s_c, s_s, z_c, z_s)
    k_base = slab_ptr(K, pid_b, pid_h, sk_b, sk_h)
    v_base = slab_ptr(V, pid_b, pid_h, sv_b, sv_h)
    dk_base = slab_ptr(DK, pid_b, pid_h, sdk_b, sdk_h)
    dv_base = slab_ptr(DV_, pid_b, pid_h, sdv_b, sdv_h)
    if ROPE:
        freq = tl.load(FREQ + offs_d)
    start, end, step = span(pid_c, CHUNK, N, n_chunks, BLOCK_N, STRIDED)
    x_next = load_tile(k_base, start, end, sk_n, offs_d, sk_d, dmask, BLOCK_N, OFFS64)
    v_next = load_tile(v_base, start, end, sv_n, offs_e, sv_d, emask, BLOCK_N, OFFS64)
    pdl_wait(PDL)  # DSTATE comes from the combine before (STATE, k, v from earlier kernels)
    ds_c, ds_s, gc, gs = load_state(DSTATE, pid_b * H + pid_h, BD, BDV)  # dS already scaled by 1/N
    gc = gc[None, :]  # ∂L/∂φk: the same for every key (CENTRE: the centred dz, so v − v̄ below)
    gs = gs[None, :]
    if F16:  # see plan.bwd_f16
        ds_c, ds_s, ds_up = f16_state(ds_c, ds_s)
        tl.static_assert(CENTRE, "the float16 products are for the centred backward (see plan.bwd_f16)")
        g_unit = 2.0 * ds_up  # (v − v̄)/2 against the scaled dS: ∂L/∂φ̃k, ∂L/∂φk, dm, dth in units of g_unit
        gc = gc / g_unit
        gs = gs / g_unit
        vbar_h = vbar * 0.5
    else:
        g_unit = 1.0
    ds_cT = tl.trans(ds_c)
    ds_sT = tl.trans(ds_s)
    for n0 in tl.range(start, end, step):
        offs_n, nmask, rows = token_rows(n0, end, BLOCK_N, OFFS64)
        mask_d = nmask[:, None] & dmask[None, :]
        mask_e = nmask[:, None] & emask[None, :]
        x = upcast(x_next, offs_d, EYE)
        vv = upcast(v_next, offs_e, EYE)
        x_next = load_tile(k_base, n0 + step, end, sk_n, offs_d, sk_d, dmask, BLOCK_N, OFFS64)
        v_next = load_tile(v_base, n0 + step, end, sv_n, offs_e, sv_d, emask, BLOCK_N, OFFS64)
        ss, r, dirn = direction(x)
        u, uc = angle_of(alpha * dirn, APPROX, CLAMP)
        m = key_mag(x, x * x, lam, LAM_INT)  # x·x: direction's, formed once
        c, s = sincos_angle(uc, APPROX, SIN5=True)
        if ROPE:
            c2, s2 = sincos_any(uc * 0.7853981633974483 + rope_angle(offs_n, W, freq, offs_d, D // 2))
        else:
            c2 = c
            s2 = s
        if F16:  # φ̃k/‖k‖^λ = |dir|^λ·(cos, sin) lies in [−1, 1]; ‖k‖^λ and dS's scale after the product
            rl = key_mag(r, r * r, lam, LAM_INT)  # r^λ (r > 0): m_k·r^λ = |dir|^λ
            md = m * rl[:, None]
            dv = tl.dot((md * c2).to(tl.float16), ds_c)
            dv = tl.dot((md * s2).to(tl.float16), ds_s, dv)
            dv = dv * (ds_up / rl)[:, None]
        else:
            dv = tl.dot(m * c2, ds_c, input_precision=PREC)
            dv = tl.dot(m * s2, ds_s, dv, input_precision=PREC)
        tl.store(dv_base + rows[:, None] * sdv_n + offs_e[None, :] * sdv_d, dv.to(DV_.dtype.element_ty), mask=mask_e)
        if F16:  # (v − v̄)/2 fits float16 for float16 v (|v − v̄| ≤ 2·65504); masked tokens: −v̄/2, not stored
            vh = (vv * 0.5 - vbar_h[None, :]).to(tl.float16)
            gc2 = tl.dot(vh, ds_cT)  # in units of g_unit (gc, gs too)
            gs2 = tl.dot(vh, ds_sT)
        else:
            if CENTRE:
                vv = vv - vbar[None, :]  # masked tokens become −v̄: nothing of theirs is stored
            gc2 = tl.dot(vv, ds_cT, input_precision=PREC_G)          # (BLOCK_N, BD)
            gs2 = tl.dot(vv, ds_sT, input_precision=PREC_G)
        dm, dth = feature_grad_angle(m, c, s, c2, s2, gc, gs, gc2, gs2, ROPE)
        if CLAMP:
            dth = tl.where(tl.abs(u) <= U_MAX, dth, 0.0)
        ddir = dtanh(dth, u, 0.7853981633974483 * alpha * g_unit, APPROX)
        proj = tl.sum(ddir * dirn, axis=1)
        dx = r[:, None] * (ddir - dirn * proj[:, None]) + dm * key_mag_grad(x, lam, LAM_INT, g_unit)
        tl.store(dk_base + rows[:, None] * sdk_n + offs_d[None, :] * sdk_d, dx.to(DK.dtype.element_ty), mask=mask_d)
