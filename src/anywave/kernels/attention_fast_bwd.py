"""Flash attention backward on the wave-group MMA, the ``fast`` variant (docs/spec.md §8.17
"``fast`` backward"): dQ, dK, dV from the saved log-sum-exp, bf16/f16 operands through the fragment
MMAs with f32 accumulation (on the CUDA target's sm_90: ``wgmma``), in a fixed order with no
atomics, so the gradients are the same bits run to run and batch-invariant.

With ``c = scale · log2 e`` (f32), ``lse2_i = LSE_i · log2 e`` and ``Δ_i = Σ_d dO_i[d] O_i[d] − dLSE_i``
(an f32 fma chain over d from +0, :data:`bwd_prep_kernel`), for every visible pair (i, j):

    p_ij = 2^(fma(s_ij, c, −lse2_i)),  s_ij = q_i · k_j (MMA),
    dp_ij = −Δ_i + dO_i · v_j (MMA, the accumulator starting at −Δ_i),
    ds_ij = p_ij · dp_ij (f32),
    dV_j = Σ_i p_ij dO_i,  dK_j = scale · Σ_i ds_ij q_i,  dQ_i = scale · Σ_j ds_ij k_j,

p and ds rounded to the input type (bf16/f16) as the A operands of the products that sum them.

Two kernels, each a fixed walk (no float atomics, nothing depends on the batch or the grid):

* :data:`attn_bwd_dkdv_fast_kernel`: a workgroup of ``4 GR`` waves owns ``64 GR`` keys of one
  (batch, KV head), wave group g 64 of them, wave w 16 (its rows: S and dP are computed
  transposed, keys as rows, so that Pᵀ and dSᵀ are A fragments for ``dV += Pᵀ dO`` and
  ``dK += dSᵀ Q``); it walks the query heads of the key head's group in increasing order and, in
  each, the query blocks of 64 rows in increasing order (Q and dO double-buffered in local memory
  by ``aw.async_copy``, in the forward's K/V layout, which is both the swizzled row layout of
  ``mma.group.bt`` and the swizzled panel layout of ``mma.group``). ``lse2`` and ``−Δ`` enter as
  column-broadcast accumulators (a device load with row stride 0), the causal diagonal as the
  initial value of Sᵀ (0 where visible, −inf elsewhere: a constant 64 x 64 tile).
* :data:`attn_bwd_dq_fast_kernel`: as the forward, a workgroup owns ``64 GR`` query rows, walks
  the key blocks of 64 in increasing order, recomputes S and dP, and sums ``dQ += dS K``.

Speed (bench/results/gpu_attention_bwd.md, H200, same run as cuDNN): 221 / 175 TFLOP/s at B4 H16
S4096 D128 (causal: the second), 0.43 / 0.38 of cuDNN's backward; 218 / 159 at B8 H16 S2048 D64,
0.55 / 0.53 — below the 0.6 aimed at: at D = 128 the fragment file (32 slots) leaves no room to hold
K and V (dQ: dO) as A fragments, so they are reloaded per 16-deep step with a wait each; no
local-memory spills, HGMMA in the walks' loops.

Shapes (the kernels trust them; :func:`backward_numpy` and :func:`backward` keep them): q, do
(B, Hq, Sp, D) and k, v (B, Hkv, Sp, D) of 16-bit elements, passed both as u16 (A fragments loaded
from device memory) and as 32-bit words (copies into local memory), Sp = S rounded up to 64 GR
(rows past S zero); D = 64 or 128. The per-row vectors from :data:`bwd_prep_kernel`: ``ncol``,
``lcol`` (B, Hq, Sp) = −Δ and lse2 (+inf past S, so p = 0 there), ``nrep``, ``lrep``
(B, Hq, Sp, 16) the same values 16 times (row-broadcast tiles). Outputs f32: dq (B, Hq, Sp, D),
dk, dv (B, Hkv, Sp, D).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

import anywave as aw
from anywave.kernels._launch import KernelInputError
from anywave.kernels.attention_fast import (
    BC,
    HEAD_DIMS,
    PANEL,
    _bits16,
    _copy_block,
    check_shapes,
    kernel_head_dim,
    launch_wave_width,
    pad_head_dim,
)

LOG2E = math.log2(math.e)


@aw.kernel
def bwd_prep_kernel(o: aw.In[aw.f32], do: aw.In[aw.f32], lse: aw.In[aw.f32], dlse: aw.In[aw.f32],
                    ncol: aw.Out[aw.f32], lcol: aw.Out[aw.f32], nrep: aw.Out[aw.f32], lrep: aw.Out[aw.f32],
                    rows: aw.i32, s_len: aw.i32, s_pad: aw.i32, *, D: int = 128):
    # one thread per padded row r = bh * s_pad + i; o, do (rows of S) f32, lse, dlse (B, H, S)
    r = aw.global_id(0)
    if r < rows:
        bh = r // s_pad
        i = r % s_pad
        nd = aw.f32(0.0)
        l2 = aw.bitcast(aw.u32(0x7F800000), aw.f32)  # +inf: p = 0 for rows past S
        if i < s_len:
            row = bh * s_len + i
            acc = aw.f32(0.0)
            for d4 in aw.static_range(D // 4):
                a = aw.load4(do, row * D + 4 * d4)
                b = aw.load4(o, row * D + 4 * d4)
                for e in aw.static_range(4):
                    acc = aw.fma(a[e], b[e], acc)
            nd = dlse[row] - acc
            l2 = lse[row] * LOG2E
        ncol[r] = nd
        lcol[r] = l2
        for e in aw.static_range(16):
            nrep[r * 16 + e] = nd
            lrep[r * 16 + e] = l2


@aw.kernel
def attn_bwd_dkdv_fast_kernel(q16: aw.In[aw.u16], k16: aw.In[aw.u16], v16: aw.In[aw.u16], do16: aw.In[aw.u16],
                              q: aw.In[aw.f32], do: aw.In[aw.f32], ncol: aw.In[aw.f32], lcol: aw.In[aw.f32],
                              tri: aw.In[aw.f32], dk: aw.Out[aw.f32], dv: aw.Out[aw.f32], s_len: aw.i32,
                              s_pad: aw.i32, hq: aw.i32, hkv: aw.i32, c: aw.f32, scale: aw.f32,
                              *, D: int = 128, GR: int = 1, W: int = 32, causal: bool = False, f16: bool = False):
    elt = aw.f16 if f16 else aw.bf16
    NT = 4 * GR * W
    TILE = BC * D * 2
    STAGE = 2 * TILE  # Q then dO
    CR = D // 8
    PASSES = BC * CR // NT
    HOLD = D == 64  # K and V held as A fragments for the whole walk (else loaded per step)
    NK = D // 16 if HOLD else 2
    assert D == 64 or D == 128, "attention_fast backward: D must be 64 or 128"
    assert NT % CR == 0 and PASSES * NT == BC * CR, "attention_fast backward: the threads must divide a block"
    ring = aw.local_array(aw.f32, (2 * STAGE // 64, 16), align=1024)
    ka = aw.fragments(NK, "a", elt)
    va = aw.fragments(NK, "a", elt)
    pa = aw.fragments(BC // 16, "a", elt)
    st = aw.fragments(BC // 16, "acc")  # S^T, then P^T
    dpt = aw.fragments(BC // 16, "acc")  # lse2, then -Delta + dP^T, then dS^T
    dkf = aw.fragments(D // 16, "acc")
    dvf = aw.fragments(D // 16, "acc")
    t = aw.local_id(0)
    wv = aw.wave_id()
    grp = wv // 4
    bx = aw.workgroup_id(0)
    nkb = aw.num_workgroups(0)
    if causal:
        bx = nkb - 1 - bx  # the longest walks first
    g = aw.workgroup_id(1)
    b = aw.workgroup_id(2)
    rep = hq // hkv
    key0 = (b * hkv + g) * s_pad + bx * (64 * GR) + 16 * wv  # this wave's first key row
    diag = bx * GR + grp  # causal: the query block holding the group's diagonal
    nqb = (s_len + BC - 1) // BC
    qb0 = 0
    if causal:
        qb0 = bx * GR
    per = nqb - qb0  # query blocks walked per head
    if HOLD:
        for kk in aw.static_range(D // 16):
            aw.mma_load(ka[kk], k16, key0 * D + 16 * kk, D)
            aw.mma_load(va[kk], v16, key0 * D + 16 * kk, D)
    cr = t % CR
    rr = t // CR
    qh0 = (b * hq + g * rep) * s_pad  # first query row of the group's first head
    _copy_block(q, do, ring, qh0 + qb0 * BC, 0, rr, cr, D, NT, PASSES, CR, TILE)
    aw.async_commit()
    total = rep * per
    for it in range(total):
        aw.async_wait(0)
        aw.barrier()  # block it landed for every thread; every wave is done with block it - 1
        if it + 1 < total:
            nx = it + 1
            _copy_block(q, do, ring, qh0 + (nx // per) * s_pad + (qb0 + nx % per) * BC, ((it + 1) % 2) * STAGE, rr,
                        cr, D, NT, PASSES, CR, TILE)
        aw.async_commit()
        blk = qb0 + it % per
        if not causal or blk >= diag:
            sb = (it % 2) * STAGE
            qr = qh0 + (it // per) * s_pad + blk * BC  # the block's first query row
            for j in aw.static_range(BC // 16):
                aw.mma_load(dpt[j], lcol, qr + 16 * j, 0)  # column-broadcast lse2
            if causal and blk == diag:
                for j in aw.static_range(BC // 16):
                    aw.mma_load(st[j], tri, 16 * (wv % 4) * BC + 16 * j, BC)
            else:
                for j in aw.static_range(BC // 16):
                    aw.mma_fill(st[j], 0.0)
            for kk in aw.static_range(D // 16):
                if HOLD:
                    aw.mma_group_bt(st, ka[kk], ring, sb + PANEL * (kk // 4) + 32 * (kk % 4))
                else:
                    aw.mma_load(ka[kk % 2], k16, key0 * D + 16 * kk, D)
                    aw.mma_group_bt(st, ka[kk % 2], ring, sb + PANEL * (kk // 4) + 32 * (kk % 4))
            for j in aw.static_range(BC // 16):
                aw.mma_exp2(st[j], st[j], dpt[j], c)
                aw.mma_cvt(pa[j], st[j])
            for j in aw.static_range(BC // 16):
                aw.mma_load(dpt[j], ncol, qr + 16 * j, 0)  # column-broadcast -Delta
            # dV += P^T dO and dP^T = -Delta + V dO^T: independent accumulators, in flight together
            for kk in aw.static_range(BC // 16):
                aw.mma_group(dvf, pa[kk], ring, sb + TILE + 2048 * kk, PANEL)
            for kk in aw.static_range(D // 16):
                if HOLD:
                    aw.mma_group_bt(dpt, va[kk], ring, sb + TILE + PANEL * (kk // 4) + 32 * (kk % 4))
                else:
                    aw.mma_load(va[kk % 2], v16, key0 * D + 16 * kk, D)
                    aw.mma_group_bt(dpt, va[kk % 2], ring, sb + TILE + PANEL * (kk // 4) + 32 * (kk % 4))
            for j in aw.static_range(BC // 16):
                aw.mma_mul(dpt[j], st[j], dpt[j])
                aw.mma_cvt(pa[j], dpt[j])
            for kk in aw.static_range(BC // 16):
                aw.mma_group(dkf, pa[kk], ring, sb + 2048 * kk, PANEL)
    aw.async_wait(0)
    for j in aw.static_range(D // 16):
        aw.mma_scale(dkf[j], dkf[j], scale)
        aw.mma_store(dk, dkf[j], key0 * D + 16 * j, D)
        aw.mma_store(dv, dvf[j], key0 * D + 16 * j, D)


@aw.kernel
def attn_bwd_dq_fast_kernel(q16: aw.In[aw.u16], do16: aw.In[aw.u16], k: aw.In[aw.f32], v: aw.In[aw.f32],
                            nrep: aw.In[aw.f32], lrep: aw.In[aw.f32], dq: aw.Out[aw.f32], s_len: aw.i32,
                            s_pad: aw.i32, hq: aw.i32, hkv: aw.i32, c: aw.f32, scale: aw.f32,
                            *, D: int = 128, GR: int = 1, W: int = 32, causal: bool = False, f16: bool = False):
    elt = aw.f16 if f16 else aw.bf16
    NT = 4 * GR * W
    TILE = BC * D * 2
    STAGE = 2 * TILE  # K then V
    CR = D // 8
    PASSES = BC * CR // NT
    HOLD = D == 64  # dO held as A fragments (else loaded per step)
    assert D == 64 or D == 128, "attention_fast backward: D must be 64 or 128"
    assert NT % CR == 0 and PASSES * NT == BC * CR, "attention_fast backward: the threads must divide a block"
    ring = aw.local_array(aw.f32, (2 * STAGE // 64, 16), align=1024)
    qa = aw.fragments(D // 16, "a", elt)
    ND = D // 16 if HOLD else 2
    doa = aw.fragments(ND, "a", elt)
    dsa = aw.fragments(BC // 16, "a", elt)
    sf = aw.fragments(BC // 16, "acc")
    dp = aw.fragments(BC // 16, "acc")
    dqf = aw.fragments(D // 16, "acc")
    l2 = aw.fragment("acc")  # row-broadcast lse2
    nd = aw.fragment("acc")  # row-broadcast -Delta
    t = aw.local_id(0)
    wv = aw.wave_id()
    grp = wv // 4
    nqb = aw.num_workgroups(0)
    bx = aw.workgroup_id(0)
    if causal:
        bx = nqb - 1 - bx
    h = aw.workgroup_id(1)
    b = aw.workgroup_id(2)
    hk = h // (hq // hkv)
    q0 = bx * (64 * GR) + 16 * wv
    diag = bx * GR + grp
    qrow0 = (b * hq + h) * s_pad + q0
    kv0 = (b * hkv + hk) * s_pad
    for kk in aw.static_range(D // 16):
        aw.mma_load(qa[kk], q16, qrow0 * D + 16 * kk, D)
        if HOLD:
            aw.mma_load(doa[kk], do16, qrow0 * D + 16 * kk, D)
    aw.mma_load(l2, lrep, qrow0 * 16, 16)
    aw.mma_load(nd, nrep, qrow0 * 16, 16)
    nb = (s_len + BC - 1) // BC
    if causal:
        nb = min(nb, bx * GR + GR)
    cr = t % CR
    rr = t // CR
    _copy_block(k, v, ring, kv0, 0, rr, cr, D, NT, PASSES, CR, TILE)
    aw.async_commit()
    for blk in range(nb):
        aw.async_wait(0)
        aw.barrier()
        if blk + 1 < nb:
            _copy_block(k, v, ring, kv0 + (blk + 1) * BC, ((blk + 1) % 2) * STAGE, rr, cr, D, NT, PASSES, CR, TILE)
        aw.async_commit()
        if not causal or blk <= diag:
            sb = (blk % 2) * STAGE
            for j in aw.static_range(BC // 16):
                aw.mma_fill(sf[j], 0.0)
                aw.mma_scale(dp[j], nd, 1.0)
            # dP = -Delta + dO V^T, then S = Q K^T: independent accumulators, in flight together
            for kk in aw.static_range(D // 16):
                if HOLD:
                    aw.mma_group_bt(dp, doa[kk], ring, sb + TILE + PANEL * (kk // 4) + 32 * (kk % 4))
                else:
                    aw.mma_load(doa[kk % 2], do16, qrow0 * D + 16 * kk, D)
                    aw.mma_group_bt(dp, doa[kk % 2], ring, sb + TILE + PANEL * (kk // 4) + 32 * (kk % 4))
            for kk in aw.static_range(D // 16):
                aw.mma_group_bt(sf, qa[kk], ring, sb + PANEL * (kk // 4) + 32 * (kk % 4))
            k0 = blk * BC
            if causal:
                if blk == diag or k0 + BC > s_len:
                    for j in aw.static_range(BC // 16):
                        aw.mma_mask(sf[j], sf[j], q0 - (k0 + 16 * j), s_len - (k0 + 16 * j))
            elif k0 + BC > s_len:
                for j in aw.static_range(BC // 16):
                    aw.mma_mask(sf[j], sf[j], 1 << 30, s_len - (k0 + 16 * j))
            for j in aw.static_range(BC // 16):
                aw.mma_exp2(sf[j], sf[j], l2, c)
                aw.mma_mul(dp[j], sf[j], dp[j])
                aw.mma_cvt(dsa[j], dp[j])
            for kk in aw.static_range(BC // 16):
                aw.mma_group(dqf, dsa[kk], ring, sb + 2048 * kk, PANEL)
    aw.async_wait(0)
    for j in aw.static_range(D // 16):
        aw.mma_scale(dqf[j], dqf[j], scale)
        aw.mma_store(dq, dqf[j], qrow0 * D + 16 * j, D)


def _tri() -> np.ndarray:
    """The causal diagonal block as the initial Sᵀ: row = key r, column = query c, 0 if r <= c."""
    r = np.arange(BC)[:, None]
    cc = np.arange(BC)[None, :]
    return np.where(r <= cc, np.float32(0.0), np.float32(-np.inf)).astype(np.float32)


def _check_scale(scale: float) -> None:
    if not (scale > 0 and math.isfinite(scale)):
        raise KernelInputError(f"attention_fast backward: scale must be positive and finite, got {scale!r} (the "
                               "causal diagonal enters as -inf scores times c > 0)")


def backward_numpy(q: Any, k: Any, v: Any, o: Any, lse: Any, do: Any, dlse: Any = None, causal: bool = False,
                   scale: float | None = None, *, f16: bool = False, target: str = "emulator",
                   wave_width: int | None = None, GR: int = 1) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The backward kernels on NumPy arrays (the emulator by default; any target offering
    ``mma_acc``): ``(dq, dk, dv)`` float32.

    Args:
        q: (B, Hq, S, D), k, v: (B, Hkv, S, D), do: (B, Hq, S, D) float arrays rounded to bf16
            (f16 with ``f16=True``; uint16 arrays are taken as bit patterns), D 1 to 128 (run at
            64 or 128, zero-padded: :func:`anywave.kernels.attention_fast.kernel_head_dim`).
        o: the forward's output (B, Hq, S, D) float (as stored: e.g. rounded to bf16), lse
            (B, Hq, S) float32 (natural log), dlse: dL/dLSE (B, Hq, S) or None (zeros).
        causal, scale: as the forward (scale default 1/sqrt(D); it must be positive).
        target, wave_width, GR: where to run; wave groups per workgroup (the same bits for every GR).
    Returns: dq (B, Hq, S, D), dk, dv (B, Hkv, S, D) float32 (before any rounding to 16 bits).
    Accuracy: the bound of docs/spec.md §8.17 "``fast`` backward".
    Raises: KernelInputError for shapes outside the above or a scale that is not positive.
    """
    qb, kb, vb, gb = (_bits16(x, f16) for x in (q, k, v, do))
    check_shapes(qb.shape, kb.shape, vb.shape, "attention_fast.backward_numpy")
    if gb.shape != qb.shape:
        raise KernelInputError(f"attention_fast.backward_numpy: do {gb.shape} must have q's shape {qb.shape}")
    B, Hq, S, D0 = qb.shape
    Hkv = kb.shape[1]
    sc = float(np.float32(1.0 / math.sqrt(D0) if scale is None else scale))
    _check_scale(sc)
    D = kernel_head_dim(D0)
    blk = 64 * GR
    Sp = -(-S // blk) * blk

    o32 = np.ascontiguousarray(o, np.float32)
    lse32 = np.ascontiguousarray(lse, np.float32)
    dl = np.zeros((B, Hq, S), np.float32) if dlse is None else np.ascontiguousarray(dlse, np.float32)
    if o32.shape != qb.shape or lse32.shape != (B, Hq, S) or dl.shape != (B, Hq, S):
        raise KernelInputError(f"attention_fast.backward_numpy: o {o32.shape}, lse {lse32.shape}, dlse {dl.shape} "
                               f"must be {qb.shape}, {(B, Hq, S)}, {(B, Hq, S)}")
    qp, kp, vp, gp = (pad_head_dim(x, D, Sp) for x in (qb, kb, vb, gb))
    o32 = pad_head_dim(o32, D)
    g32 = pad_head_dim((fl_f16(gb) if f16 else fl_bf16(gb)).astype(np.float32), D)
    W = launch_wave_width(target, wave_width)
    kw = {"target": target, "wave_width": W}
    rows = B * Hq * Sp
    ncol = np.zeros(rows, np.float32)
    lcol = np.zeros(rows, np.float32)
    nrep = np.zeros(rows * 16, np.float32)
    lrep = np.zeros(rows * 16, np.float32)
    bwd_prep_kernel(o32, g32, lse32, dl, ncol, lcol, nrep, lrep, rows, S, Sp, D=D, grid=(-(-rows // 64),),
                    workgroup=(64, 1, 1), **kw)
    c = float(np.float32(np.float32(sc) * np.float32(LOG2E)))
    dq = np.zeros((B, Hq, Sp, D), np.float32)
    dk = np.zeros((B, Hkv, Sp, D), np.float32)
    dv = np.zeros((B, Hkv, Sp, D), np.float32)
    w32 = [x.reshape(-1).view(np.float32) for x in (qp, gp, kp, vp)]
    consts = {"D": D, "GR": GR, "W": W, "causal": bool(causal), "f16": f16, "workgroup": (4 * GR * W, 1, 1)}
    attn_bwd_dkdv_fast_kernel(qp.reshape(-1), kp.reshape(-1), vp.reshape(-1), gp.reshape(-1), w32[0], w32[1], ncol,
                              lcol, _tri().reshape(-1), dk.reshape(-1), dv.reshape(-1), S, Sp, Hq, Hkv, c, sc,
                              grid=(Sp // blk, Hkv, B), **consts, **kw)
    attn_bwd_dq_fast_kernel(qp.reshape(-1), gp.reshape(-1), w32[2], w32[3], nrep, lrep, dq.reshape(-1), S, Sp, Hq,
                            Hkv, c, sc, grid=(Sp // blk, Hq, B), **consts, **kw)
    cut = (slice(None), slice(None), slice(0, S), slice(0, D0))
    return np.ascontiguousarray(dq[cut]), np.ascontiguousarray(dk[cut]), np.ascontiguousarray(dv[cut])


def fl_bf16(bits: np.ndarray) -> np.ndarray:
    from anywave.emu import floats as fl

    return fl.bf16_bits_to_f32(bits)


def fl_f16(bits: np.ndarray) -> np.ndarray:
    from anywave.emu import floats as fl

    return fl.f16_bits_to_f32(bits)


_TRI_CACHE: dict[Any, Any] = {}


def backward(q: Any, k: Any, v: Any, o: Any, lse: Any, do: Any, dlse: Any = None, causal: bool = False,
             scale: float | None = None, *, GR: int = 1) -> tuple[Any, Any, Any]:
    """Flash attention backward (the ``fast`` variant) on CUDA tensors: ``(dq, dk, dv)`` in the
    input dtype (the kernels' f32 results rounded once).

    Args:
        q: (B, Hq, S, D), k, v: (B, Hkv, S, D), o, do: (B, Hq, S, D) torch tensors on one CUDA
            device, all bf16 or all f16, contiguous; D 1 to 128 (run at 64 or 128, zero-padded:
            :func:`anywave.kernels.attention_fast.kernel_head_dim`); Hkv dividing Hq.
        lse: the forward's (B, Hq, S) float32 log-sum-exp; dlse: (B, Hq, S) float32 or None.
        causal, scale: as the forward (scale default 1/sqrt(D), positive).
        GR: wave groups (64 rows each) per workgroup (the same bits for every GR).
    Accuracy: the bound of docs/spec.md §8.17 "``fast`` backward".
    Raises: KernelInputError for tensors off CUDA, of another dtype, not contiguous, of shapes
        outside the above, or a scale that is not positive.
    """
    import torch

    for name, x in (("q", q), ("k", k), ("v", v), ("o", o), ("do", do)):
        if not isinstance(x, torch.Tensor) or x.device.type != "cuda":
            raise KernelInputError(f"attention_fast.backward: {name} must be a CUDA torch tensor")
        if x.dtype not in (torch.bfloat16, torch.float16) or x.dtype != q.dtype:
            raise KernelInputError("attention_fast.backward: q, k, v, o, do must all be bfloat16 or all float16")
        if x.device != q.device:
            raise KernelInputError(f"attention_fast.backward: q is on {q.device} but {name} on {x.device}")
    check_shapes(tuple(q.shape), tuple(k.shape), tuple(v.shape), "attention_fast.backward")
    if o.shape != q.shape or do.shape != q.shape:
        raise KernelInputError("attention_fast.backward: o and do must have q's shape")
    B, Hq, S, D0 = q.shape
    Hkv = k.shape[1]
    sc = float(np.float32(1.0 / math.sqrt(D0) if scale is None else scale))
    _check_scale(sc)
    D = kernel_head_dim(D0)
    blk = 64 * GR
    Sp = -(-S // blk) * blk
    q, k, v, do = (pad_head_dim(x.contiguous(), D, Sp) for x in (q, k, v, do))
    o = pad_head_dim(o, D)
    dev = q.device
    rows = B * Hq * Sp
    f32 = torch.float32
    ncol, lcol = torch.empty(rows, dtype=f32, device=dev), torch.empty(rows, dtype=f32, device=dev)
    nrep, lrep = torch.empty(rows * 16, dtype=f32, device=dev), torch.empty(rows * 16, dtype=f32, device=dev)
    lse = lse.to(f32).contiguous()
    dl = torch.zeros_like(lse) if dlse is None else dlse.to(f32).contiguous()
    tri = _TRI_CACHE.get(dev)
    if tri is None:
        tri = _TRI_CACHE[dev] = torch.from_numpy(_tri().reshape(-1)).to(dev)
    c = float(np.float32(np.float32(sc) * np.float32(LOG2E)))
    dq = torch.empty((B, Hq, Sp, D), dtype=f32, device=dev)
    dk = torch.empty((B, Hkv, Sp, D), dtype=f32, device=dev)
    dv = torch.empty((B, Hkv, Sp, D), dtype=f32, device=dev)
    f16 = q.dtype == torch.float16
    consts = {"D": D, "GR": GR, "W": 32, "causal": bool(causal), "f16": f16, "workgroup": (4 * GR * 32, 1, 1),
              "target": "cuda"}
    u16 = torch.uint16
    with torch.cuda.device(dev):
        bwd_prep_kernel(o.to(f32).contiguous(), do[:, :, :S].to(f32).contiguous(), lse, dl, ncol, lcol, nrep, lrep,
                        rows, S, Sp, D=D, grid=(-(-rows // 64),), workgroup=(64, 1, 1), target="cuda")
        attn_bwd_dkdv_fast_kernel(q.view(u16), k.view(u16), v.view(u16), do.view(u16), q.view(f32), do.view(f32),
                                  ncol, lcol, tri, dk, dv, S, Sp, Hq, Hkv, c, sc, grid=(Sp // blk, Hkv, B), **consts)
        attn_bwd_dq_fast_kernel(q.view(u16), do.view(u16), k.view(f32), v.view(f32), nrep, lrep, dq, S, Sp, Hq, Hkv,
                                c, sc, grid=(Sp // blk, Hq, B), **consts)
    dt = q.dtype
    return dq[:, :, :S, :D0].to(dt), dk[:, :, :S, :D0].to(dt), dv[:, :, :S, :D0].to(dt)


__all__ = ["HEAD_DIMS", "attn_bwd_dkdv_fast_kernel", "attn_bwd_dq_fast_kernel", "backward", "backward_numpy",
           "bwd_prep_kernel"]
