"""An independent bit-level reference of docs/spec.md §8.17 (attention), written from the spec's
text alone: float32 arithmetic element by element in the stated order, no kernel code.

* ``fma32``: a correctly rounded float32 fma, from the exact float64 product (two 24-bit
  significands fit in 53 bits), a float64 sum with its TwoSum error, and a correction of the one
  case where rounding the float64 sum to float32 can go wrong (the sum is exactly halfway between
  two float32 values while the exact value is not).
* ``exp32`` / ``log32``: the standard library's ``aw.exp`` / ``aw.log`` (§8.17 names them),
  transcribed from their documented sequence of exact operations (range reduction, Horner fma
  polynomial, scale by powers of two), with their constants rounded to float32.
* ``forward`` / ``decode`` / ``backward``: the §8.17 sequences. Arrays are used only where the
  spec's operations on different elements are independent (different rows, keys or columns); every
  chain (over d, over keys, over chunks, over the query rows of a key) is a Python loop in the
  stated order.

Limitations (said here so that nobody reads more into it): ``fma32`` falls back to float64 rounding
for results within half an ulp of the float32 overflow threshold (never reached by these tests).
"""

from __future__ import annotations

import numpy as np

F32 = np.float32
NEG_INF = F32(-np.inf)
POS_INF = F32(np.inf)


def f32(x) -> np.ndarray:
    return np.asarray(x, dtype=np.float32)


def fma32(a, b, c) -> np.ndarray:
    """round_f32(a * b + c), correctly rounded (ties to even), elementwise (broadcasting)."""
    a64, b64, c64 = (f32(x).astype(np.float64) for x in (a, b, c))
    with np.errstate(all="ignore"):
        p = a64 * b64  # exact: |p| <= 2^256, and a 48-bit significand
        s = p + c64
        # TwoSum(p, c): s + e is the exact p + c (no overflow here)
        p1 = s - c64
        c1 = s - p1
        e = (p - p1) + (c64 - c1)
        r = s.astype(np.float32)
        r64 = r.astype(np.float64)
        fin = np.isfinite(s) & np.isfinite(r64)
        nb = np.nextafter(r, np.where(s > r64, POS_INF, NEG_INF).astype(np.float32))
        nb64 = nb.astype(np.float64)
        mid = (r64 + nb64) * 0.5  # exact: two neighbouring float32 values
        tie = fin & (e != 0) & (r64 != s) & (s == mid)
        # the exact value lies on e's side of the midpoint: take the neighbour on that side
        up = e > 0
        fixed = np.where(up == (nb64 > r64), nb, r)
        out = np.where(tie, fixed, r)
        # signed zero: an exact zero sum keeps IEEE's sign rule, which the float64 sum applied
    return out.astype(np.float32)


def max32(a, b) -> np.ndarray:
    """§8.2 ``max.f32``: NaN operand -> the other one; max(-0, +0) = +0."""
    a, b = f32(a), f32(b)
    an, bn = np.isnan(a), np.isnan(b)
    gt = np.where(a == b, np.where(np.signbit(a), b, a), np.where(a > b, a, b))
    return np.where(an & bn, F32(np.nan), np.where(an, b, np.where(bn, a, gt))).astype(np.float32)


def min32(a, b) -> np.ndarray:
    a, b = f32(a), f32(b)
    an, bn = np.isnan(a), np.isnan(b)
    lt = np.where(a == b, np.where(np.signbit(a), a, b), np.where(a < b, a, b))
    return np.where(an & bn, F32(np.nan), np.where(an, b, np.where(bn, a, lt))).astype(np.float32)


def _pow2(n: np.ndarray) -> np.ndarray:
    return np.ldexp(np.float64(1.0), n).astype(np.float32)  # exact in float32 for n in [-126, 127]


def _scale2(p: np.ndarray, n: np.ndarray) -> np.ndarray:
    n = n.astype(np.int64)
    n1 = n >> 1  # arithmetic shift (floor)
    n2 = n - n1
    with np.errstate(all="ignore"):
        return ((p * _pow2(n1)).astype(np.float32) * _pow2(n2)).astype(np.float32)


def exp32(x) -> np.ndarray:
    """``aw.exp``: clamp to [-110, 90], n = rint(x·log2 e), two-step Cody-Waite reduction, a degree-8
    Taylor polynomial by Horner fma, times 2^n in two exact steps; NaN passes through."""
    x = f32(x)
    with np.errstate(all="ignore"):
        xc = min32(max32(x, F32(-110.0)), F32(90.0))
        n = np.rint((xc * F32(1.4426950408889634)).astype(np.float32)).astype(np.float32)
        r = fma32(-n, F32(0.693145751953125), xc)
        r = fma32(-n, F32(1.4286067653301870e-06), r)
        p = fma32(r, F32(1.0 / 40320.0), F32(1.0 / 5040.0))
        for cst in (1.0 / 720.0, 1.0 / 120.0, 1.0 / 24.0, 1.0 / 6.0, 0.5, 1.0, 1.0):
            p = fma32(r, p, F32(cst))
        out = _scale2(p, n.astype(np.int64))
    return np.where(np.isnan(x), x, out).astype(np.float32)


def log32(x) -> np.ndarray:
    """``aw.log``: x = m·2^e with m in [√½, √2) (subnormals scaled by 2^23 first), log m =
    2s + 2s·s²·(1/3 + s²/5 + s⁴/7 + s⁶/9 + s⁸/11) with s = (m − 1)/(m + 1), plus e·ln 2 in two
    parts; log(±0) = −inf, log(x < 0) and log(NaN) = NaN, log(+inf) = +inf."""
    x = f32(x)
    with np.errstate(all="ignore"):
        small = x < F32(1.1754943508222875e-38)
        xs = np.where(small, (x * F32(8388608.0)).astype(np.float32), x).astype(np.float32)
        eadj = np.where(small, -23, 0)
        bits = xs.view(np.int32).astype(np.int64)
        e = ((bits >> 23) & 255) - 127 + eadj
        m = ((bits & 8388607) | 1065353216).astype(np.uint32).view(np.float32)
        big = m > F32(1.4142135623730951)
        m = np.where(big, (m * F32(0.5)).astype(np.float32), m).astype(np.float32)
        e = e + big
        s = ((m - F32(1.0)).astype(np.float32) / (m + F32(1.0)).astype(np.float32)).astype(np.float32)
        s2 = (s * s).astype(np.float32)
        t = fma32(s2, F32(1.0 / 11.0), F32(1.0 / 9.0))
        for cst in (1.0 / 7.0, 1.0 / 5.0, 1.0 / 3.0):
            t = fma32(s2, t, F32(cst))
        t = (t * s2).astype(np.float32)
        s_2 = (s + s).astype(np.float32)
        logm = fma32(s_2, t, s_2)
        ef = e.astype(np.float32)
        r = fma32(ef, F32(0.693145751953125), fma32(ef, F32(1.4286067653301870e-06), logm))
        r = np.where(x == 0, NEG_INF, r)
        r = np.where((x < 0) | np.isnan(x), F32(np.nan), r)
        r = np.where(x == POS_INF, x, r)
    return r.astype(np.float32)


# ----------------------------------------------------------------------------- §8.17


def visible(sq: int, sk: int, causal: bool) -> np.ndarray:
    """(Sq, Sk) bool: key j visible to row i iff j < Sk and (not causal or j <= i + Sk - Sq)."""
    i = np.arange(sq)[:, None]
    j = np.arange(sk)[None, :]
    return (j <= i + (sk - sq)) if causal else np.ones((sq, sk), bool)


def scores(q: np.ndarray, k: np.ndarray, scale) -> np.ndarray:
    """(Sq, Sk): (fma chain over d = 0..D-1 of q[i, d]·k[j, d], from +0) · scale."""
    s = np.zeros((q.shape[0], k.shape[0]), np.float32)
    for d in range(q.shape[1]):
        s = fma32(q[:, d][:, None], k[:, d][None, :], s)
    with np.errstate(all="ignore"):
        return (s * F32(scale)).astype(np.float32)


def _walk(s: np.ndarray, v: np.ndarray, vis: np.ndarray, j0: int, j1: int, bc: int = 64):
    """Steps 1-2 of §8.17 over keys [j0, j1) for every row: (m, l, acc)."""
    sq, d = s.shape[0], v.shape[1]
    m = np.full(sq, NEG_INF, np.float32)
    l_ = np.zeros(sq, np.float32)
    acc = np.zeros((sq, d), np.float32)
    with np.errstate(all="ignore"):
        for jb in range(j0, j1, bc):
            je = min(jb + bc, j1)
            blk = vis[:, jb:je]
            take = blk.any(1)  # rows with at least one visible key in this block
            mn = m.copy()
            for j in range(jb, je):
                mn = np.where(vis[:, j], max32(mn, s[:, j]), mn).astype(np.float32)
            alpha = np.where(m > NEG_INF, exp32((m - mn).astype(np.float32)), F32(0.0)).astype(np.float32)
            l_ = np.where(take, (l_ * alpha).astype(np.float32), l_)
            acc = np.where(take[:, None], (acc * alpha[:, None]).astype(np.float32), acc)
            for j in range(jb, je):
                p = exp32((s[:, j] - mn).astype(np.float32))
                l_ = np.where(vis[:, j], (l_ + p).astype(np.float32), l_)
                acc = np.where(vis[:, j][:, None], fma32(p[:, None], v[j][None, :], acc), acc)
            m = np.where(take, mn, m).astype(np.float32)
    return m, l_, acc


def _heads(q, k, v):
    b, hq = q.shape[:2]
    rep = hq // k.shape[1]
    for bi in range(b):
        for h in range(hq):
            yield bi, h, h // rep


def forward(q, k, v, causal: bool, scale) -> tuple[np.ndarray, np.ndarray]:
    """§8.17 forward: (O, LSE) float32."""
    q, k, v = f32(q), f32(k), f32(v)
    sq, sk = q.shape[2], k.shape[2]
    o = np.zeros(q.shape, np.float32)
    lse = np.full(q.shape[:3], NEG_INF, np.float32)
    vis = visible(sq, sk, causal)
    has = vis.any(1)
    for bi, h, g in _heads(q, k, v):
        s = scores(q[bi, h], k[bi, g], scale)
        m, l_, acc = _walk(s, v[bi, g], vis, 0, sk)
        with np.errstate(all="ignore"):
            o[bi, h] = np.where(has[:, None], (acc / l_[:, None]).astype(np.float32), F32(0.0))
            lse[bi, h] = np.where(has, (m + log32(l_)).astype(np.float32), NEG_INF)
    return o, lse


def decode(q, k, v, causal: bool, scale, chunk: int) -> tuple[np.ndarray, np.ndarray]:
    """§8.17 "Decode": chunks of ``chunk`` keys, each walked alone, merged in increasing order."""
    q, k, v = f32(q), f32(k), f32(v)
    sq, sk = q.shape[2], k.shape[2]
    o = np.zeros(q.shape, np.float32)
    lse = np.full(q.shape[:3], NEG_INF, np.float32)
    vis = visible(sq, sk, causal)
    for bi, h, g in _heads(q, k, v):
        s = scores(q[bi, h], k[bi, g], scale)
        parts = [_walk(s, v[bi, g], vis, c0, min(c0 + chunk, sk)) for c0 in range(0, sk, chunk)]
        big_m = np.full(sq, NEG_INF, np.float32)
        for m_c, _, _ in parts:
            big_m = max32(big_m, m_c)
        big_l = np.zeros(sq, np.float32)
        big_a = np.zeros(q.shape[2:], np.float32)
        with np.errstate(all="ignore"):
            for m_c, l_c, a_c in parts:
                use = m_c > NEG_INF
                w = exp32((m_c - big_m).astype(np.float32))
                big_l = np.where(use, fma32(l_c, w, big_l), big_l)
                big_a = np.where(use[:, None], fma32(a_c, w[:, None], big_a), big_a)
            any_ = big_m > NEG_INF
            o[bi, h] = np.where(any_[:, None], (big_a / big_l[:, None]).astype(np.float32), F32(0.0))
            lse[bi, h] = np.where(any_, (big_m + log32(big_l)).astype(np.float32), NEG_INF)
    return o, lse


def backward(q, k, v, o, lse, do, dlse, causal: bool, scale):
    """§8.17 "Backward": (dQ, dK, dV) float32 from the stored O, LSE and dO, dLSE (None: zeros)."""
    q, k, v, o, lse, do = (f32(x) for x in (q, k, v, o, lse, do))
    dlse = np.zeros(lse.shape, np.float32) if dlse is None else f32(dlse)
    b, hq, sq, d = q.shape
    hkv, sk = k.shape[1], k.shape[2]
    rep = hq // hkv
    vis = visible(sq, sk, causal)
    dq = np.zeros(q.shape, np.float32)
    dk = np.zeros(k.shape, np.float32)
    dv = np.zeros(v.shape, np.float32)
    p_all = np.zeros((b, hq, sq, sk), np.float32)
    ds_all = np.zeros((b, hq, sq, sk), np.float32)
    with np.errstate(all="ignore"):
        for bi, h, g in _heads(q, k, v):
            delta = np.zeros(sq, np.float32)
            for dd in range(d):
                delta = fma32(do[bi, h, :, dd], o[bi, h, :, dd], delta)
            delta = (delta - dlse[bi, h]).astype(np.float32)
            s = scores(q[bi, h], k[bi, g], scale)
            p = exp32((s - lse[bi, h][:, None]).astype(np.float32))
            dp = np.zeros((sq, sk), np.float32)
            for dd in range(d):
                dp = fma32(do[bi, h, :, dd][:, None], v[bi, g, :, dd][None, :], dp)
            ds = (p * (dp - delta[:, None]).astype(np.float32)).astype(np.float32)
            p_all[bi, h], ds_all[bi, h] = p, ds
            acc = np.zeros((sq, d), np.float32)
            for j in range(sk):
                acc = np.where(vis[:, j][:, None], fma32(ds[:, j][:, None], k[bi, g, j][None, :], acc), acc)
            dq[bi, h] = (acc * F32(scale)).astype(np.float32)
        for bi in range(b):
            for g in range(hkv):
                ak = np.zeros((sk, d), np.float32)
                av = np.zeros((sk, d), np.float32)
                for h in range(g * rep, (g + 1) * rep):
                    for i in range(sq):
                        col = vis[i][:, None]
                        av = np.where(col, fma32(p_all[bi, h, i][:, None], do[bi, h, i][None, :], av), av)
                        ak = np.where(col, fma32(ds_all[bi, h, i][:, None], q[bi, h, i][None, :], ak), ak)
                dk[bi, g] = (ak * F32(scale)).astype(np.float32)
                dv[bi, g] = av
    return dq, dk, dv


def round_bf16(x: np.ndarray) -> np.ndarray:
    """float32 -> bfloat16 (nearest, ties to even) as the float32 holding it (NaN kept quiet)."""
    b = f32(x).view(np.uint32).astype(np.uint64)
    r = ((b + 0x7FFF + ((b >> 16) & 1)) >> 16) << 16
    r = np.where(np.isnan(f32(x)), (b | 0x400000) >> 16 << 16, r)
    return r.astype(np.uint32).view(np.float32)
