"""Bit-exact floating-point helpers for the emulator (docs/decisions.md, "Float semantics").

Every function takes and returns NumPy arrays. Values of the 16-bit types travel as
``uint16`` bit patterns or as ``float32`` (exact for both f16 and bf16); f32 and f64 as
``float32``/``float64``. Rounding is always to nearest, ties to even, in a *single*
rounding step: where a result is computed in a wider type first, the wider result is
rounded *to odd* (Boldo & Melquiond, "When double rounding is odd", 2005), which makes
the final rounding to a format with at least two fewer significand bits correct.

NaN results of arithmetic are replaced by the canonical quiet NaN of the result type
(f32 0x7FC00000, f64 0x7FF8000000000000, f16 0x7E00, bf16 0x7FC0).
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

F32_NAN = np.uint32(0x7FC00000)
F64_NAN = np.uint64(0x7FF8000000000000)
F16_NAN = np.uint16(0x7E00)
BF16_NAN = np.uint16(0x7FC0)


def canon32(x: np.ndarray) -> np.ndarray:
    """float32 array -> uint32 bits, NaNs replaced by the canonical quiet NaN."""
    x = np.asarray(x, np.float32)
    bits = x.view(np.uint32)
    with np.errstate(all="ignore"):
        # one reduction instead of a mask: the sum is NaN if any element is (or if infinities
        # of both signs meet; then the exact test below decides)
        if x.size and not np.isnan(np.add.reduce(x, axis=None)):
            return bits
    nan = np.isnan(x)
    if nan.any():
        bits = np.where(nan, F32_NAN, bits)
    return bits


def canon64(x: np.ndarray) -> np.ndarray:
    """float64 array -> uint64 bits, NaNs canonical."""
    x = np.asarray(x, np.float64)
    bits = x.view(np.uint64)
    with np.errstate(all="ignore"):
        if x.size and not np.isnan(np.add.reduce(x, axis=None)):
            return bits
    nan = np.isnan(x)
    if nan.any():
        bits = np.where(nan, F64_NAN, bits)
    return bits


def f16_bits_to_f32(bits: np.ndarray) -> np.ndarray:
    """uint16/uint32 (low 16 bits) f16 patterns -> float32 (exact)."""
    return (np.asarray(bits) & 0xFFFF).astype(np.uint16).view(np.float16).astype(np.float32)


def bf16_bits_to_f32(bits: np.ndarray) -> np.ndarray:
    """uint16/uint32 (low 16 bits) bf16 patterns -> float32 (exact)."""
    return ((np.asarray(bits).astype(np.uint32) & 0xFFFF) << 16).view(np.float32)


def f32_to_f16_bits(x: np.ndarray) -> np.ndarray:
    """float32 -> f16 bits (uint32, high half 0), RNE, overflow to inf, NaN canonical."""
    x = np.asarray(x, np.float32)
    with np.errstate(all="ignore"):
        h = x.astype(np.float16).view(np.uint16).astype(np.uint32)
    nan = np.isnan(x)
    return np.where(nan, np.uint32(F16_NAN), h) if nan.any() else h


def f64_to_f16_bits(x: np.ndarray) -> np.ndarray:
    """float64 -> f16 bits (uint32), one correct RNE rounding (NumPy converts directly)."""
    x = np.asarray(x, np.float64)
    with np.errstate(all="ignore"):
        h = x.astype(np.float16).view(np.uint16).astype(np.uint32)
    nan = np.isnan(x)
    return np.where(nan, np.uint32(F16_NAN), h) if nan.any() else h


def f32_to_bf16_bits(x: np.ndarray) -> np.ndarray:
    """float32 -> bf16 bits (uint32, high half 0), RNE, overflow to inf, NaN canonical.

    Done on the bits (add 0x7FFF plus the kept LSB, truncate) rather than with
    ml_dtypes, whose float64 -> bfloat16 cast double-rounds through float32."""
    x = np.asarray(x, np.float32)
    b = x.view(np.uint32).astype(np.uint64)
    r = ((b + 0x7FFF + ((b >> 16) & 1)) >> 16).astype(np.uint32) & 0xFFFF
    nan = np.isnan(x)
    return np.where(nan, np.uint32(BF16_NAN), r) if nan.any() else r


def f64_to_f32_odd(x: np.ndarray) -> np.ndarray:
    """float64 -> float32 rounded to odd (truncate, then set the LSB if inexact)."""
    x = np.asarray(x, np.float64)
    with np.errstate(all="ignore"):
        r = x.astype(np.float32)
        back = r.astype(np.float64)
        inexact = (back != x) & np.isfinite(x)
        if inexact.any():
            # the exact value lies between r and its neighbour towards x; pick the odd one
            even = (r.view(np.uint32) & 1) == 0
            fix = inexact & even
            toward = np.where(x > back, np.float32(np.inf), np.float32(-np.inf))
            r = np.where(fix, np.nextafter(r, toward), r)
    return r


def f64_to_bf16_bits(x: np.ndarray) -> np.ndarray:
    """float64 -> bf16 bits (uint32), a single correct RNE rounding."""
    return f32_to_bf16_bits(f64_to_f32_odd(x))


def _sum_to_odd(p: np.ndarray, c: np.ndarray) -> np.ndarray:
    """p + c (float64, p and c exact) rounded to odd in float64, via Knuth's TwoSum."""
    with np.errstate(all="ignore"):
        s = p + c
        bb = s - p
        err = (p - (s - bb)) + (c - bb)
        inexact = (err != 0) & np.isfinite(s)
        if inexact.any():
            even = (s.view(np.uint64) & 1) == 0
            fix = inexact & even
            s = np.where(fix, np.nextafter(s, np.where(err > 0, np.inf, -np.inf)), s)
    return s


def fma_f32(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """a*b + c for float32 arrays with one rounding (float32 result, NaN not canonicalised).

    The float64 product of two float32 values is exact (48 <= 53 bits, no over/underflow).
    Fast path: ``s = p + c`` rounded to nearest in float64, then to float32. That double
    rounding can only be wrong when ``s`` lies exactly on a midpoint between two float32
    neighbours: for a float32 normal result the low 29 significand bits of ``s`` are then
    exactly ``1 << 28``; for a subnormal (or zero) result the low 28 bits are zero. Only
    those lanes are recomputed with the sum rounded to odd in float64 (53 >= 24 + 2 makes
    the final rounding correct; Boldo & Melquiond, "When double rounding is odd", 2005)."""
    a, b, c = np.broadcast_arrays(np.asarray(a, np.float32), np.asarray(b, np.float32),
                                  np.asarray(c, np.float32))
    with np.errstate(all="ignore"):
        p = np.multiply(a, b, dtype=np.float64)
        s = np.add(p, c, dtype=np.float64)
        bits = s.view(np.uint64)
        r = s.astype(np.float32)
        mid = (bits & np.uint64(0x1FFFFFFF)) == np.uint64(0x10000000)
        if int((r.view(np.uint32) & np.uint32(0x7F800000)).min(initial=1)) == 0:
            mid |= ((r.view(np.uint32) & np.uint32(0x7F800000)) == 0) & (
                (bits & np.uint64(0x0FFFFFFF)) == 0)
        if mid.any():
            # a midpoint is harmless if the float64 sum was exact; s = p + c exactly iff
            # s - p == c and s - c == p (if inexact, the difference with the larger operand is
            # computed exactly -- Fast2Sum -- and differs from the other operand)
            inexact = np.not_equal(s - p, c)
            inexact |= np.not_equal(np.subtract(s, c, dtype=np.float64), p)
            mid &= inexact
            if mid.any():
                bad = np.flatnonzero(mid)
                sf, pf = s.reshape(-1), p.reshape(-1)
                sf[bad] = _sum_to_odd(pf[bad], c.reshape(-1)[bad].astype(np.float64))
                r.reshape(-1)[bad] = sf[bad].astype(np.float32)
        return r


def fma_small_bits(a: np.ndarray, b: np.ndarray, c: np.ndarray, bf16: bool) -> np.ndarray:
    """fma for f16/bf16 given float32 values (exact); returns the 16-bit result bits (uint32)."""
    with np.errstate(all="ignore"):
        p = a.astype(np.float64) * b.astype(np.float64)  # exact: <= 22 bits, exponent in range
    s = _sum_to_odd(p, c.astype(np.float64))
    return f64_to_bf16_bits(s) if bf16 else f64_to_f16_bits(s)


_SPLIT = 134217729.0  # 2^27 + 1, Veltkamp splitting constant for binary64


def fma_f64(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """a*b + c for float64 arrays with a single rounding (NaN not canonicalised).

    Fast path: where Dekker's TwoProduct shows a*b is exact in float64, ``a*b + c`` rounds
    once. Other finite lanes are computed exactly with :class:`fractions.Fraction` (whose
    float conversion is correctly rounded). Non-finite inputs follow IEEE 754."""
    a = np.asarray(a, np.float64)
    b = np.asarray(b, np.float64)
    c = np.asarray(c, np.float64)
    with np.errstate(all="ignore"):
        p = a * b
        res = p + c
        finite = np.isfinite(a) & np.isfinite(b) & np.isfinite(c)
        # a, b finite, c inf/nan: the exact product is finite so the result is c
        cinf = np.isfinite(a) & np.isfinite(b) & ~np.isfinite(c)
        res = np.where(cinf, c, res)
        # Dekker's TwoProduct is exact only without overflow (splitting needs |x| < 2^996)
        # and without underflow: a product that rounds to (or near) zero while a, b != 0
        # makes the error term vanish spuriously, so only a true zero factor may pass below
        # 2^-960 (fma(2^-1074, -0.5, +0) = -0, not +0).
        zero_factor = (a == 0) | (b == 0)
        safe = finite & (np.abs(a) < 2.0**995) & (np.abs(b) < 2.0**995) & (
            (np.abs(p) > 2.0**-960) | zero_factor)
        t = _SPLIT * a
        ah = t - (t - a)
        al = a - ah
        t = _SPLIT * b
        bh = t - (t - b)
        bl = b - bh
        pl = ((ah * bh - p) + ah * bl + al * bh) + al * bl
        exact = safe & (pl == 0)
        slow = np.flatnonzero(finite & ~exact)
    if slow.size:
        res = res.copy()
        for i in slow.tolist():
            res[i] = _fma_exact(float(a[i]), float(b[i]), float(c[i]))
    return res


def _fma_exact(a: float, b: float, c: float) -> float:
    x = Fraction(a) * Fraction(b) + Fraction(c)
    if x == 0:
        prod_neg = (np.signbit(a) != np.signbit(b))
        if (a == 0 or b == 0) and c == 0:
            return -0.0 if (prod_neg and np.signbit(c)) else 0.0
        return 0.0
    try:
        return float(x)
    except OverflowError:
        return float("inf") if x > 0 else float("-inf")


def _num_select(a: np.ndarray, b: np.ndarray, want_min: bool) -> np.ndarray:
    """minimumNumber / maximumNumber written out element by element, so the result never
    depends on the array length: ``np.fmin``/``np.fmax`` treat a signalling NaN differently
    in their SIMD loop and their scalar tail (the tail returns NaN), which made the oracle's
    result depend on the lane count (issue 11, item 12)."""
    an, bn = np.isnan(a), np.isnan(b)
    with np.errstate(invalid="ignore"):
        lt = (a < b) if want_min else (a > b)
        gt = (b < a) if want_min else (b > a)
    zero = (a == b) & (a == 0)
    if want_min:
        neg = np.signbit(a) | np.signbit(b)
    else:
        neg = np.signbit(a) & np.signbit(b)
    z = np.where(neg, -a.dtype.type(0), a.dtype.type(0)).astype(a.dtype, copy=False)
    r = np.where(lt, a, b)  # a == b (not zero), gt, or a NaN in b: b; lt: a
    r = np.where(gt, b, r)
    r = np.where(zero, z, r)
    # exactly one NaN: the other operand; both NaN: a NaN (canonicalised by the caller's rounding)
    r = np.where(bn, a, r)
    return np.where(an, b, r)


def min_num(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """IEEE 754-2019 §9.6 minimumNumber on same-dtype float arrays (spec §8.2): one NaN
    operand (quiet or signalling) gives the other operand, two give a NaN (the caller
    canonicalises it), -0 < +0. Independent of the array length."""
    return _num_select(np.asarray(a), np.asarray(b), True)


def max_num(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """IEEE 754-2019 §9.6 maximumNumber on same-dtype float arrays (spec §8.2): one NaN
    operand (quiet or signalling) gives the other operand, two give a NaN (the caller
    canonicalises it), -0 < +0. Independent of the array length."""
    return _num_select(np.asarray(a), np.asarray(b), False)
