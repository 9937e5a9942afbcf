"""Attention, forward and backward, in the kernel language: the ``exact`` variant of
docs/spec.md §8.17 (bit-identical on every target and at every W; batch-invariant by
construction).

``O = softmax(Q Kᵀ · scale + mask) V`` per (batch, query head, query row), as the fixed sequence
of §8.17: the keys are walked in blocks of :data:`BC` = 64 in increasing order with the
online-softmax recurrence (running max ``m``, rescale ``alpha = exp(m_old - m_new)``, running
sum ``l``, accumulator ``acc``); ``O = acc / l`` and ``LSE = m + log(l)`` at the end. Every
operation is of the exact class (fma, add, mul, div, max, and the standard library's ``aw.exp``
and ``aw.log``, which are built from exact operations), so every conformant target returns the
same bits.

Shape of the computation (not part of the definition; nothing below changes a bit):

* forward (:data:`attn_fwd_kernel`): one thread per (query row, slice of :func:`slice_width`
  output columns); a workgroup of :data:`WG` threads holds WG consecutive query rows of one
  (batch, head) and one column slice. The thread computes each block's scores in full (the
  D-long fma chain, reading q and k from device memory), keeps them in its row of a local
  array, folds the max, then accumulates ``p_j v_j`` into its slice of ``acc`` (registers).
  Slices recompute the same scores (so the same bits); they keep the registers per thread
  within the ISA's 255 (``acc`` of at most 64 values) for head dims up to 256.
* decode (:func:`attention_decode`): the same kernel over chunks of :data:`KV_CHUNK` keys
  (the workgroups of one row run in parallel), writing the partial ``(m, l, acc)``; then
  :data:`attn_combine_kernel` merges the chunks in increasing order (§8.17 "Decode").
  :data:`attn_decode_kernel` is that walk over a batch of caches of different lengths (one
  thread per query row; a sequence's chunks past its length are empty), the decode step of
  :func:`anywave.models.gpt.generate`: each row the bits of its sequence decoded alone.
* backward: :data:`attn_bwd_dq_kernel` (one thread per query row and slice: ``Delta``, then
  dQ over the keys in order) and :data:`attn_bwd_dkdv_kernel` (one thread per key row and
  slice: dK and dV over the query heads of the key head's group and their rows, in order).
  No atomics: every sum is one thread's chain, so gradients are reproducible bit for bit.

Speed: this is the identity reference, not the fast path (one fma chain per thread, operands from
device memory). On an H200 at 000d3d5 (bench/results/attention_smoke_h200_000d3d5.json, bf16
inputs through the torch op, B2 H8 S1024 D64 causal and B1 H4 S2048 D128): 1.7 and 1.0 TFLOP/s
forward, 0.77 and 0.72 backward, beside cuDNN SDPA's 175 (forward, D128) in the same run;
``bench/bench_attention.py`` measures the issue's shapes.

Host wrappers take NumPy arrays (float32, or bfloat16/float16 via ml_dtypes: converted to
float32 exactly) in SDPA's layout (batch, heads, sequence, head dim) and return float32.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

import numpy as np

import anywave as aw
from anywave.kernels._launch import KernelInputError, ceil_div, launch_kw

BC = 64  #: keys per block of the online-softmax walk (a constant of the definition, §8.17)
WG = 64  #: threads (query or key rows) per workgroup
KV_CHUNK = 512  #: keys per chunk of the decode form's split walk (a multiple of BC; §8.17 "Decode")
MAX_HEAD_DIM = 256
NEG_INF_BITS = 0xFF800000


def slice_width(d: int) -> int:
    """Output columns per thread for head dim ``d`` (a multiple of 4): ``d`` itself up to 64, else
    the largest multiple of 4 up to 64 that divides ``d`` (96 -> 48, 128 -> 64, 160 -> 40)."""
    if d <= 64:
        return d
    return max(w for w in range(4, 65, 4) if d % w == 0)


@aw.func
def _neg_inf():
    return aw.bitcast(aw.u32(NEG_INF_BITS), aw.f32)


@aw.func
def _visible_end(i, j_end, sq, sk, causal):
    # one past the last visible key of query row i below j_end: key j is visible iff j < sk and
    # (not causal or j <= i + sk - sq)
    lim = min(sk, j_end)
    if causal != 0:
        lim = min(lim, i + (sk - sq) + 1)
    return lim


@aw.func
def _dot(x, y, xb, yb, D):
    # fma chain over d = 0..D-1 of x[xb + d] * y[yb + d], from +0 (128-bit loads; D % 4 == 0);
    # unrolled up to D = 64, a runtime loop over 16 (or 4) columns beyond: the same chain, fewer
    # values alive at once (the ISA's 255 registers)
    s = aw.f32(0.0)
    if D <= 64:
        for d4 in aw.static_range(D // 4):
            a = aw.load4(x, xb + 4 * d4)
            c = aw.load4(y, yb + 4 * d4)
            for e in aw.static_range(4):
                s = aw.fma(a[e], c[e], s)
    elif D % 16 == 0:
        for d0 in range(0, D, 16):
            for d4 in aw.static_range(4):
                a = aw.load4(x, xb + d0 + 4 * d4)
                c = aw.load4(y, yb + d0 + 4 * d4)
                for e in aw.static_range(4):
                    s = aw.fma(a[e], c[e], s)
    else:
        for d0 in range(0, D, 4):
            a = aw.load4(x, xb + d0)
            c = aw.load4(y, yb + d0)
            for e in aw.static_range(4):
                s = aw.fma(a[e], c[e], s)
    return s


@aw.func
def _walk(q, k, v, sb, t, qb, kvb, c0, j0, lim, scale, acc, ml, D, DS):
    # the online-softmax walk of one query row (at qb in q) over keys j0..lim-1 (rows kvb + j of
    # k and v) in blocks of BC: the scores of a block into this thread's row t of local sb, its
    # running maximum m, the rescale of l and of acc (columns c0..c0+DS-1 of v) by exp(m_old - m),
    # then p = exp(s - m) added to l and p * v to acc, each key in order. Returns m in ml[0] and
    # l in ml[1] (m = -inf, l = 0 for an empty range). attn_fwd_kernel and attn_decode_kernel
    # share it, so a decoded row's partial is the bits of the forward's split form
    m = _neg_inf()
    l = aw.f32(0.0)
    for jb in range(j0, lim, BC):
        je = min(jb + BC, lim)
        mn = m
        for j in range(jb, je):
            s = _dot(q, k, qb, (kvb + j) * D, D) * scale
            sb[t, j - jb] = s
            mn = max(mn, s)
        alpha = aw.f32(0.0)
        if m > _neg_inf():
            alpha = aw.exp(m - mn)
        l = l * alpha
        for d in aw.static_range(DS):
            acc[d] = acc[d] * alpha
        for j in range(jb, je):
            p = aw.exp(sb[t, j - jb] - mn)
            l = l + p
            vb = (kvb + j) * D + c0
            for d4 in aw.static_range(DS // 4):
                vv = aw.load4(v, vb + 4 * d4)
                for e in aw.static_range(4):
                    acc[4 * d4 + e] = aw.fma(p, vv[e], acc[4 * d4 + e])
        m = mn
    ml[0] = m
    ml[1] = l


@aw.kernel
def attn_fwd_kernel(q: aw.In[aw.f32], k: aw.In[aw.f32], v: aw.In[aw.f32], o: aw.Out[aw.f32], st: aw.Out[aw.f32],
                    hq: aw.i32, hkv: aw.i32, sq: aw.i32, sk: aw.i32, scale: aw.f32, causal: aw.i32,
                    nch: aw.i32, chunk: aw.i32, *, D: int = 64, DS: int = 64, split: bool = False):
    assert D % DS == 0 and DS % 4 == 0 and DS <= 64 and D <= 256, "attention: D, DS as slice_width(D)"
    nsl = D // DS
    t = aw.local_id(0)
    sb = aw.local_array(aw.f32, (WG, BC))
    sl = aw.workgroup_id(0) % nsl
    i = (aw.workgroup_id(0) // nsl) * WG + t
    h = aw.workgroup_id(1)
    b = aw.workgroup_id(2) // nch
    c = aw.workgroup_id(2) % nch
    if i < sq:
        g = h // (hq // hkv)
        row = (b * hq + h) * sq + i
        qb = row * D
        kvb = (b * hkv + g) * sk
        c0 = sl * DS
        acc = aw.register_array(aw.f32, DS)
        j0 = c * chunk
        lim = _visible_end(i, j0 + chunk, sq, sk, causal)
        ml = aw.register_array(aw.f32, 2)
        _walk(q, k, v, sb, t, qb, kvb, c0, j0, lim, scale, acc, ml, D, DS)
        m = ml[0]
        l = ml[1]
        if split:
            pr = ((b * hq + h) * nch + c) * sq + i
            for d4 in aw.static_range(DS // 4):
                aw.store4(o, pr * D + c0 + 4 * d4, (acc[4 * d4], acc[4 * d4 + 1], acc[4 * d4 + 2], acc[4 * d4 + 3]))
            if sl == 0:
                st[2 * pr] = m
                st[2 * pr + 1] = l
        else:
            if lim > j0:
                for d4 in aw.static_range(DS // 4):
                    aw.store4(o, qb + c0 + 4 * d4, (acc[4 * d4] / l, acc[4 * d4 + 1] / l, acc[4 * d4 + 2] / l,
                                                    acc[4 * d4 + 3] / l))
                if sl == 0:
                    st[row] = m + aw.log(l)
            else:  # no visible key: O = 0, LSE = -inf (§8.17)
                for d in aw.static_range(DS):
                    o[qb + c0 + d] = aw.f32(0.0)
                if sl == 0:
                    st[row] = _neg_inf()


@aw.kernel
def attn_decode_kernel(q: aw.In[aw.f32], k: aw.In[aw.f32], v: aw.In[aw.f32], part: aw.Out[aw.f32],
                       st: aw.Out[aw.f32], lens: aw.In[aw.i32], rows: aw.i32, hq: aw.i32, hkv: aw.i32, sq: aw.i32,
                       cap: aw.i32, scale: aw.f32, nch: aw.i32, *, D: int = 64, DS: int = 64):
    # the decode form over a batch of caches of different lengths: sequence b's keys are rows
    # 0..lens[b]-1 (clamped to the capacity cap) of its cache (B, hkv, cap, D), all visible to
    # its query rows. One thread per query row r = (b * hq + h) * sq + i and column slice, chunk
    # c = workgroup_id(1) of KV_CHUNK keys; the walk of attn_fwd_kernel's split form (_walk),
    # so a row's partial (m, l, acc) are the bits of its sequence alone
    # (attn_fwd_kernel with sk = lens[b]); chunks past a sequence's end are empty (m = -inf),
    # which attn_combine_kernel skips
    assert D % DS == 0 and DS % 4 == 0 and DS <= 64 and D <= 256, "attention: D, DS as slice_width(D)"
    nsl = D // DS
    t = aw.local_id(0)
    sb = aw.local_array(aw.f32, (WG, BC))
    sl = aw.workgroup_id(0) % nsl
    r = (aw.workgroup_id(0) // nsl) * WG + t
    c = aw.workgroup_id(1)
    if r < rows:
        bh = r // sq
        b = bh // hq
        g = (bh % hq) // (hq // hkv)
        qb = r * D
        kvb = (b * hkv + g) * cap
        c0 = sl * DS
        acc = aw.register_array(aw.f32, DS)
        j0 = c * KV_CHUNK
        lim = min(min(lens[b], cap), j0 + KV_CHUNK)
        ml = aw.register_array(aw.f32, 2)
        _walk(q, k, v, sb, t, qb, kvb, c0, j0, lim, scale, acc, ml, D, DS)
        m = ml[0]
        l = ml[1]
        pr = (bh * nch + c) * sq + r % sq
        for d4 in aw.static_range(DS // 4):
            aw.store4(part, pr * D + c0 + 4 * d4, (acc[4 * d4], acc[4 * d4 + 1], acc[4 * d4 + 2], acc[4 * d4 + 3]))
        if sl == 0:
            st[2 * pr] = m
            st[2 * pr + 1] = l


@aw.kernel
def attn_combine_kernel(part: aw.In[aw.f32], st: aw.In[aw.f32], o: aw.Out[aw.f32], lse: aw.Out[aw.f32],
                        rows: aw.i32, sq: aw.i32, nch: aw.i32, *, D: int = 64, DS: int = 64):
    # one thread per (output row r = (b * hq + h) * sq + i, column slice); chunk c of that row is
    # the partial row ((b * hq + h) * nch + c) * sq + i
    assert D % DS == 0 and DS % 4 == 0 and DS <= 64 and D <= 256, "attention: D, DS as slice_width(D)"
    nsl = D // DS
    sl = aw.workgroup_id(0) % nsl
    r = (aw.workgroup_id(0) // nsl) * WG + aw.local_id(0)
    if r < rows:
        bh = r // sq
        i = r % sq
        c0 = sl * DS
        mx = _neg_inf()
        for c in range(nch):
            mx = max(mx, st[2 * ((bh * nch + c) * sq + i)])
        if mx > _neg_inf():
            acc = aw.register_array(aw.f32, DS)
            tot = aw.f32(0.0)
            for c in range(nch):
                pr = (bh * nch + c) * sq + i
                mc = st[2 * pr]
                if mc > _neg_inf():
                    w = aw.exp(mc - mx)
                    tot = aw.fma(st[2 * pr + 1], w, tot)
                    for d4 in aw.static_range(DS // 4):
                        pv = aw.load4(part, pr * D + c0 + 4 * d4)
                        for e in aw.static_range(4):
                            acc[4 * d4 + e] = aw.fma(pv[e], w, acc[4 * d4 + e])
            for d in aw.static_range(DS):
                o[r * D + c0 + d] = acc[d] / tot
            if sl == 0:
                lse[r] = mx + aw.log(tot)
        else:
            for d in aw.static_range(DS):
                o[r * D + c0 + d] = aw.f32(0.0)
            if sl == 0:
                lse[r] = _neg_inf()


@aw.kernel
def attn_bwd_dq_kernel(q: aw.In[aw.f32], k: aw.In[aw.f32], v: aw.In[aw.f32], o: aw.In[aw.f32], do: aw.In[aw.f32],
                       lse: aw.In[aw.f32], dlse: aw.In[aw.f32], dq: aw.Out[aw.f32], delta: aw.Out[aw.f32],
                       hq: aw.i32, hkv: aw.i32, sq: aw.i32, sk: aw.i32, scale: aw.f32, causal: aw.i32,
                       *, D: int = 64, DS: int = 64):
    assert D % DS == 0 and DS % 4 == 0 and DS <= 64 and D <= 256, "attention: D, DS as slice_width(D)"
    nsl = D // DS
    sl = aw.workgroup_id(0) % nsl
    i = (aw.workgroup_id(0) // nsl) * WG + aw.local_id(0)
    h = aw.workgroup_id(1)
    b = aw.workgroup_id(2)
    if i < sq:
        g = h // (hq // hkv)
        row = (b * hq + h) * sq + i
        qb = row * D
        kvb = (b * hkv + g) * sk
        c0 = sl * DS
        # Delta_i = (fma chain over d of dO[d] * O[d], from +0) - dLSE_i
        dl = _dot(do, o, qb, qb, D) - dlse[row]
        if sl == 0:
            delta[row] = dl
        li = lse[row]
        acc = aw.register_array(aw.f32, DS)
        lim = _visible_end(i, sk, sq, sk, causal)
        for j in range(0, lim):
            kb = (kvb + j) * D
            p = aw.exp(_dot(q, k, qb, kb, D) * scale - li)
            ds = p * (_dot(do, v, qb, kb, D) - dl)
            for d4 in aw.static_range(DS // 4):
                kv = aw.load4(k, kb + c0 + 4 * d4)
                for e in aw.static_range(4):
                    acc[4 * d4 + e] = aw.fma(ds, kv[e], acc[4 * d4 + e])
        for d4 in aw.static_range(DS // 4):
            aw.store4(dq, qb + c0 + 4 * d4, (acc[4 * d4] * scale, acc[4 * d4 + 1] * scale, acc[4 * d4 + 2] * scale,
                                             acc[4 * d4 + 3] * scale))


@aw.kernel
def attn_bwd_dkdv_kernel(q: aw.In[aw.f32], k: aw.In[aw.f32], v: aw.In[aw.f32], do: aw.In[aw.f32],
                         lse: aw.In[aw.f32], delta: aw.In[aw.f32], dk: aw.Out[aw.f32], dv: aw.Out[aw.f32],
                         hq: aw.i32, hkv: aw.i32, sq: aw.i32, sk: aw.i32, scale: aw.f32, causal: aw.i32,
                         *, D: int = 64, DS: int = 64):
    assert D % DS == 0 and DS % 4 == 0 and DS <= 64 and D <= 256, "attention: D, DS as slice_width(D)"
    nsl = D // DS
    sl = aw.workgroup_id(0) % nsl
    j = (aw.workgroup_id(0) // nsl) * WG + aw.local_id(0)
    g = aw.workgroup_id(1)
    b = aw.workgroup_id(2)
    if j < sk:
        kb = ((b * hkv + g) * sk + j) * D
        c0 = sl * DS
        rep = hq // hkv
        i0 = 0
        if causal != 0:
            i0 = max(0, j - (sk - sq))
        ak = aw.register_array(aw.f32, DS)
        av = aw.register_array(aw.f32, DS)
        for hh in range(rep):
            rb = (b * hq + g * rep + hh) * sq
            for i in range(i0, sq):
                qb = (rb + i) * D
                p = aw.exp(_dot(q, k, qb, kb, D) * scale - lse[rb + i])
                ds = p * (_dot(do, v, qb, kb, D) - delta[rb + i])
                for d4 in aw.static_range(DS // 4):
                    gv = aw.load4(do, qb + c0 + 4 * d4)
                    qv = aw.load4(q, qb + c0 + 4 * d4)
                    for e in aw.static_range(4):
                        av[4 * d4 + e] = aw.fma(p, gv[e], av[4 * d4 + e])
                        ak[4 * d4 + e] = aw.fma(ds, qv[e], ak[4 * d4 + e])
        for d4 in aw.static_range(DS // 4):
            aw.store4(dk, kb + c0 + 4 * d4, (ak[4 * d4] * scale, ak[4 * d4 + 1] * scale, ak[4 * d4 + 2] * scale,
                                             ak[4 * d4 + 3] * scale))
            aw.store4(dv, kb + c0 + 4 * d4, (av[4 * d4], av[4 * d4 + 1], av[4 * d4 + 2], av[4 * d4 + 3]))


# ----------------------------------------------------------------------------- host side

def default_scale(d: int) -> float:
    """``1 / sqrt(d)`` rounded to float32 (the default ``scale``, §8.17)."""
    return float(np.float32(1.0 / math.sqrt(d)))


def check_shapes(q_shape: tuple[int, ...], k_shape: tuple[int, ...], v_shape: tuple[int, ...],
                 what: str = "attention") -> tuple[int, int, int, int, int, int]:
    """``(B, Hq, Hkv, Sq, Sk, D)`` of q (B, Hq, Sq, D), k and v (B, Hkv, Sk, D); raises
    KernelInputError naming the offending shape otherwise (Hq % Hkv != 0, a head dim that is not a
    multiple of 4 in 4..256, 2^31 or more elements, no heads; an empty batch B = 0 is valid)."""
    for name, s in (("q", q_shape), ("k", k_shape), ("v", v_shape)):
        if len(s) != 4:
            raise KernelInputError(f"{what}: {name} must be 4-D (batch, heads, sequence, head dim), got shape "
                                   f"{tuple(s)}")
    b, hq, sq, d = (int(x) for x in q_shape)
    bk, hkv, sk, dk = (int(x) for x in k_shape)
    if tuple(v_shape) != tuple(k_shape):
        raise KernelInputError(f"{what}: v has shape {tuple(v_shape)} but k has {tuple(k_shape)}; they must match")
    if bk != b or dk != d:
        raise KernelInputError(f"{what}: q {tuple(q_shape)} and k {tuple(k_shape)} must agree in batch and head "
                               "dim")
    if b < 0 or hq < 1 or hkv < 1:
        raise KernelInputError(f"{what}: head counts must be >= 1 (the batch >= 0), got q {tuple(q_shape)}, k "
                               f"{tuple(k_shape)}")
    if hq % hkv:
        raise KernelInputError(f"{what}: the query heads ({hq}) must be a multiple of the key/value heads ({hkv})")
    if not (4 <= d <= MAX_HEAD_DIM and d % 4 == 0):
        raise KernelInputError(f"{what}: head dim {d} is not supported; valid: a multiple of 4 from 4 to "
                               f"{MAX_HEAD_DIM}")
    if max(b * hq * sq * d, b * hkv * sk * d) >= 2**31:
        raise KernelInputError(f"{what}: tensors of 2^31 or more elements are not supported (32-bit indices)")
    return b, hq, hkv, sq, sk, d


def fwd_launch(b: int, hq: int, sq: int, d: int, nch: int = 1) -> tuple[tuple[int, int, int], int]:
    """(grid, workgroup) of :data:`attn_fwd_kernel`."""
    return (ceil_div(sq, WG) * (d // slice_width(d)), hq, b * nch), WG


def _f32(x: Any, name: str) -> np.ndarray:
    a = np.asarray(x)
    if a.dtype.name not in ("float32", "float16", "bfloat16"):
        raise KernelInputError(f"attention: {name} has dtype {a.dtype}; supported: float32, float16, bfloat16 "
                               "(converted to float32 exactly)")
    return a.astype(np.float32, order="C")  # (ascontiguousarray would make a 0-d array 1-d)


def check_scale(scale: Any, what: str = "attention") -> None:
    """Raise KernelInputError unless ``scale`` is None or a real number whose float32 rounding is
    finite (1e39, inf and NaN are refused: the scores would all be inf or NaN)."""
    if scale is None:
        return
    if isinstance(scale, bool) or not isinstance(scale, numbers.Real):
        raise KernelInputError(f"{what}: scale must be a real number or None, got {scale!r} "
                               f"({type(scale).__name__})")
    try:
        s = float(scale)
    except OverflowError:
        s = math.inf
    with np.errstate(over="ignore"):
        if not (math.isfinite(s) and np.isfinite(np.float32(s))):
            raise KernelInputError(f"{what}: scale must be finite in float32 (|scale| <= 3.4028235e38), got "
                                   f"{scale!r}")


def _causal(causal: Any, what: str) -> int:
    if not isinstance(causal, (bool, np.bool_, numbers.Integral)):
        raise KernelInputError(f"{what}: causal must be a bool, got {causal!r} ({type(causal).__name__})")
    return int(bool(causal))


def _scale(scale: float | None, d: int, what: str = "attention") -> np.float32:
    check_scale(scale, what)
    return np.float32(default_scale(d) if scale is None else float(scale))


def attention(q: Any, k: Any, v: Any, causal: bool = False, scale: float | None = None, *,
              wave_width: int | None = None, target: str | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Exact attention (docs/spec.md §8.17) of q (B, Hq, Sq, D), k and v (B, Hkv, Sk, D).

    Args:
        q: (B, Hq, Sq, D) float32 (or float16/bfloat16, converted to float32 exactly); Hq a
            multiple of Hkv (query head h reads key/value head ``h // (Hq // Hkv)``); D a
            multiple of 4 in 4..256.
        k: (B, Hkv, Sk, D), q's dtype rules.
        v: (B, Hkv, Sk, D), q's dtype rules.
        causal: key j visible to query row i iff ``j <= i + (Sk - Sq)``.
        scale: multiplies the scores; default ``1 / sqrt(D)`` rounded to float32.

    Returns:
        ``(O, LSE)``: float32 (B, Hq, Sq, D) and float32 (B, Hq, Sq) (natural log); a row with
        no visible key has O = 0 and LSE = -inf. The same bits on every target and W.

    Raises:
        KernelInputError: shapes as :func:`check_shapes` describes; a dtype other than float32,
            float16, bfloat16; a scale that is not a real number finite in float32
            (:func:`check_scale`); a causal that is not a bool.
    """
    qa, ka, va = _f32(q, "q"), _f32(k, "k"), _f32(v, "v")
    b, hq, hkv, sq, sk, d = check_shapes(qa.shape, ka.shape, va.shape)
    sc, cz = _scale(scale, d), _causal(causal, "attention")
    o = np.zeros((b, hq, sq, d), np.float32)
    lse = np.full((b, hq, sq), -np.inf, np.float32)  # (Sk = 0: no visible key anywhere)
    if b and sq and sk:
        grid, wg = fwd_launch(b, hq, sq, d)
        attn_fwd_kernel(qa, ka, va, o, lse, hq, hkv, sq, sk, sc, cz, 1, sk,
                        D=d, DS=slice_width(d), split=False, grid=grid, workgroup=wg, **launch_kw(wave_width, target))
    return o, lse


def attention_decode(q: Any, k: Any, v: Any, causal: bool = False, scale: float | None = None, *,
                     chunk: int = KV_CHUNK, wave_width: int | None = None,
                     target: str | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Decode form of :func:`attention` (docs/spec.md §8.17 "Decode"): the key walk split in
    chunks of ``chunk`` keys (a multiple of :data:`BC`; default :data:`KV_CHUNK`) whose partial
    (m, l, acc) are computed in parallel and combined in increasing chunk order. Its own fixed
    sequence: batch-invariant and the same bits on every target; equal to :func:`attention`
    within rounding (bit-equal when Sk <= chunk). Arguments and results as :func:`attention`."""
    if isinstance(chunk, bool) or not isinstance(chunk, numbers.Integral) or chunk < BC or chunk % BC:
        raise KernelInputError(f"attention_decode: chunk must be a positive multiple of {BC}, got {chunk!r}")
    chunk = int(chunk)
    qa, ka, va = _f32(q, "q"), _f32(k, "k"), _f32(v, "v")
    b, hq, hkv, sq, sk, d = check_shapes(qa.shape, ka.shape, va.shape, "attention_decode")
    sc, cz = _scale(scale, d, "attention_decode"), _causal(causal, "attention_decode")
    o = np.zeros((b, hq, sq, d), np.float32)
    lse = np.full((b, hq, sq), -np.inf, np.float32)
    if not b or not sq or not sk:
        return o, lse
    nch = max(1, ceil_div(sk, chunk))
    if b * hq * nch * sq * d >= 2**31:
        raise KernelInputError(f"attention_decode: the partial results ({b * hq * nch * sq * d} values for {nch} "
                               "chunks) need 2^31 or more elements (32-bit indices); use a larger chunk")
    # a chunk holding every key is one chunk whatever its size: clamp it (the same bits) so that a
    # large chunk stays within the kernel's 32-bit key indices
    chunk = min(chunk, ceil_div(sk, BC) * BC)
    part = np.zeros((b, hq, nch, sq, d), np.float32)
    st = np.zeros((b, hq, nch, sq, 2), np.float32)
    grid, wg = fwd_launch(b, hq, sq, d, nch)
    kw = launch_kw(wave_width, target)
    attn_fwd_kernel(qa, ka, va, part, st, hq, hkv, sq, sk, sc, cz, nch, chunk,
                    D=d, DS=slice_width(d), split=True, grid=grid, workgroup=wg, **kw)
    rows = b * hq * sq
    attn_combine_kernel(part, st, o, lse, rows, sq, nch, D=d, DS=slice_width(d),
                        grid=ceil_div(rows, WG) * (d // slice_width(d)), workgroup=WG, **kw)
    return o, lse


def attention_backward(q: Any, k: Any, v: Any, o: Any, lse: Any, do: Any, dlse: Any = None, causal: bool = False,
                       scale: float | None = None, *, wave_width: int | None = None,
                       target: str | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Gradients of :func:`attention` (docs/spec.md §8.17 "Backward") from the saved O and LSE.

    Args:
        q: as the forward (B, Hq, Sq, D).
        k: as the forward (B, Hkv, Sk, D).
        v: as the forward (B, Hkv, Sk, D).
        o: the forward's O (B, Hq, Sq, D), as stored.
        lse: the forward's LSE (B, Hq, Sq), as stored.
        do: dL/dO (B, Hq, Sq, D).
        causal: as the forward.
        scale: as the forward.
        dlse: dL/dLSE (B, Hq, Sq) or None (zeros).

    Returns:
        ``(dQ, dK, dV)`` float32, shaped as q, k, v. Fixed order, no atomics: the same bits on
        every target and W.

    Raises:
        KernelInputError: shapes, dtypes, scale or causal.
    """
    qa, ka, va = _f32(q, "q"), _f32(k, "k"), _f32(v, "v")
    b, hq, hkv, sq, sk, d = check_shapes(qa.shape, ka.shape, va.shape, "attention_backward")
    oa, doa, la = _f32(o, "o"), _f32(do, "do"), _f32(lse, "lse")
    dla = np.zeros((b, hq, sq), np.float32) if dlse is None else _f32(dlse, "dlse")
    for name, a, want in (("o", oa, qa.shape), ("do", doa, qa.shape), ("lse", la, (b, hq, sq)),
                          ("dlse", dla, (b, hq, sq))):
        if a.shape != tuple(want):
            raise KernelInputError(f"attention_backward: {name} has shape {a.shape}, expected {tuple(want)}")
    sc, cz = _scale(scale, d, "attention_backward"), _causal(causal, "attention_backward")
    # an empty chain is +0, times scale (-0 for a negative scale): what the kernels write for rows
    # and keys with nothing visible (§8.17 "Backward")
    dq = np.zeros_like(qa) * sc
    dk = np.zeros_like(ka) * sc
    dv = np.zeros_like(va)
    delta = np.zeros((b, hq, sq), np.float32)
    kw = launch_kw(wave_width, target)
    nsl = d // slice_width(d)
    if b and sq and sk:
        attn_bwd_dq_kernel(qa, ka, va, oa, doa, la, dla, dq, delta, hq, hkv, sq, sk, sc, cz, D=d, DS=slice_width(d),
                           grid=(ceil_div(sq, WG) * nsl, hq, b), workgroup=WG, **kw)
        attn_bwd_dkdv_kernel(qa, ka, va, doa, la, delta, dk, dv, hq, hkv, sq, sk, sc, cz, D=d, DS=slice_width(d),
                             grid=(ceil_div(sk, WG) * nsl, hkv, b), workgroup=WG, **kw)
    return dq, dk, dv
