"""fma for every float type against an exact Fraction reference on targeted edge inputs:
products that underflow, cancellation to zero with every sign combination, overflow to inf,
inf*0 + x, NaN. Covers the f64 fast path (Dekker TwoProduct) and its exact fallback, the
f32 path (f64 product + round-to-odd sum) and the f16/bf16 path.

Reference: IEEE 754-2019 §5.4.1 (fusedMultiplyAdd: one rounding), §6.3 (sign of a zero
result: an exact zero sum of opposite-signed operands is +0 under roundTiesToEven; a
nonzero exact result that rounds to zero keeps its sign), §7.2 (0 * inf is invalid).
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest

from anywave.emu import floats as fl
from test_emu_support import FORMATS, elementwise, round_fraction

# (numpy storage dtype, bits dtype) per format
_DT = {"f64": (np.float64, np.uint64), "f32": (np.float32, np.uint32),
       "f16": (np.float16, np.uint16), "bf16": (ml_dtypes.bfloat16, np.uint16)}


def ref_fma(a: float, b: float, c: float, fmt: str) -> float:
    """a*b + c rounded once (RNE) to fmt, IEEE special cases by the book. a, b, c are
    exact values of fmt given as Python floats."""
    if math.isnan(a) or math.isnan(b) or math.isnan(c):
        return math.nan
    if (math.isinf(a) and b == 0) or (math.isinf(b) and a == 0):
        return math.nan
    psign = math.copysign(1.0, a) * math.copysign(1.0, b)
    if math.isinf(a) or math.isinf(b):
        if math.isinf(c) and math.copysign(1.0, c) != psign:
            return math.nan
        return psign * math.inf
    if math.isinf(c):
        return c
    x = Fraction(a) * Fraction(b) + Fraction(c)
    if x == 0:
        both_neg_zero = (a == 0 or b == 0) and c == 0 and psign < 0 and math.copysign(1.0, c) < 0
        return -0.0 if both_neg_zero else 0.0
    p, emin, emax = FORMATS[fmt]
    r = round_fraction(x, p, emin, emax)
    return math.copysign(r, 1.0 if x > 0 else -1.0)


def _bits(values, fmt: str) -> np.ndarray:
    dt, bt = _DT[fmt]
    return np.asarray(values, np.float64).astype(dt).view(bt)


def _run_impl(a: np.ndarray, b: np.ndarray, c: np.ndarray, fmt: str) -> np.ndarray:
    """The emulator's fma helper for fmt; returns the result bits."""
    if fmt == "f64":
        return fl.fma_f64(a, b, c).view(np.uint64)
    if fmt == "f32":
        return fl.fma_f32(a.astype(np.float32), b.astype(np.float32), c.astype(np.float32)).view(np.uint32)
    r = fl.fma_small_bits(a.astype(np.float32), b.astype(np.float32), c.astype(np.float32), fmt == "bf16")
    return r.astype(np.uint16)


def _edges(fmt: str) -> list[float]:
    p, emin, emax = FORMATS[fmt]
    tiny = 2.0 ** (emin - p + 1)              # smallest subnormal
    big = (2 - 2.0 ** (1 - p)) * 2.0 ** emax  # largest finite
    ulp1 = 2.0 ** (1 - p)
    vals = [0.0, tiny, 3 * tiny, 2.0 ** emin - tiny, 2.0 ** emin, 0.5, 0.75, 1.0, 1 + ulp1,
            1 - ulp1 / 2, 1.5, 3.0, big, math.inf]
    return vals + [-v for v in vals] + [math.nan]


def _targeted(fmt: str) -> list[tuple[float, float, float]]:
    p, emin, emax = FORMATS[fmt]
    tiny = 2.0 ** (emin - p + 1)
    big = (2 - 2.0 ** (1 - p)) * 2.0 ** emax
    ulp1 = 2.0 ** (1 - p)
    out = []
    signs = list(itertools.product((1.0, -1.0), repeat=3))
    for sa, sb, sc in signs:
        # tiny products: exact result below half the smallest subnormal, at the tie, above it
        for m in (0.25, 0.5, 0.75, 1.5):
            for c in (0.0, tiny):
                out.append((sa * tiny, sb * m, sc * c))
        out.append((sa * 2.0 ** emin, sb * 2.0 ** (-p), sc * 0.0))
        out.append((sa * 2.0 ** emin, sb * 0.5 ** (p + 1), sc * tiny))
        # exact cancellation to zero (and zero products) with each sign combination
        out.append((sa * 3.0, sb * 5.0, sc * 15.0))
        out.append((sa * 0.0, sb * 5.0, sc * 0.0))
        out.append((sa * tiny, sb * 1.0, sc * tiny))
        # near-cancellation: (1+u)(1-u) - 1 = -u^2, far below 1
        out.append((sa * (1 + ulp1), sb * (1 - ulp1), sc * 1.0))
        # overflow and near-overflow
        out.append((sa * big, sb * 2.0, sc * 0.0))
        out.append((sa * big, sb * (1 + ulp1), sc * big))
        out.append((sa * big, sb * 2.0, sc * big))
        out.append((sa * big, sb * big, sc * math.inf))
        out.append((sa * 2.0 ** emax, sb * 2.0, sc * big))
        # inf * 0 + x, inf * x + (-inf), finite * finite + inf
        out.append((sa * math.inf, sb * 0.0, sc * 1.0))
        out.append((sa * math.inf, sb * 1.0, sc * math.inf))
        out.append((sa * 1.0, sb * 1.0, sc * math.inf))
    return out


def _check(triples: list[tuple[float, float, float]], fmt: str) -> None:
    dt, bt = _DT[fmt]
    a, b, c = (np.array([t[i] for t in triples], np.float64).astype(dt).astype(np.float64)
               for i in range(3))
    got = _run_impl(a, b, c, fmt)
    exp = [ref_fma(float(x), float(y), float(z), fmt) for x, y, z in zip(a, b, c, strict=True)]
    expb = _bits(exp, fmt)
    bad = []
    for i, e in enumerate(exp):
        if math.isnan(e):
            nan_bits = {"f64": 0x7FF, "f32": 0xFF, "f16": 0x1F, "bf16": 0xFF}[fmt]
            shift = {"f64": 52, "f32": 23, "f16": 10, "bf16": 7}[fmt]
            frac = (1 << shift) - 1
            g = int(got[i])
            ok = ((g >> shift) & nan_bits) == nan_bits and (g & frac) != 0
        else:
            ok = int(got[i]) == int(expb[i])
        if not ok:
            bad.append(f"fma({a[i]!r}, {b[i]!r}, {c[i]!r}) = bits 0x{int(got[i]):x}, "
                       f"expected {e!r} (0x{int(expb[i]):x})")
    assert not bad, f"{len(bad)} wrong {fmt} fma results:\n" + "\n".join(bad[:20])


def test_fma_f64_tie_to_zero_keeps_sign():
    # the bug found by the conformance suite: the product underflows to -0 and Dekker's
    # error term computes 0, so the fast path returned -0 + +0 = +0
    r = fl.fma_f64(np.array([2.0 ** -1074]), np.array([-0.5]), np.array([0.0]))
    assert r.view(np.uint64)[0] == 0x8000000000000000
    words = elementwise("fma.f64 r10:r11, r4:r5, r6:r7, r8:r9", 2,
                        np.array([2.0 ** -1074]).view(np.uint32), np.array([-0.5]).view(np.uint32),
                        np.array([0.0]).view(np.uint32))
    assert words.view(np.uint64)[0] == 0x8000000000000000


@pytest.mark.parametrize("fmt", ["f64", "f32", "f16", "bf16"])
def test_fma_targeted_edges(fmt):
    _check(_targeted(fmt), fmt)


@pytest.mark.parametrize("fmt", ["f64", "f32", "f16", "bf16"])
def test_fma_edge_cartesian_product(fmt):
    e = _edges(fmt)
    _check(list(itertools.product(e, e, e)), fmt)


@pytest.mark.parametrize("fmt", ["f64", "f32", "f16", "bf16"])
def test_fma_random_small_exponents(fmt):
    """Random operands around the underflow threshold: products land in the subnormal
    range and the addend is comparable, so rounding, ties and zero signs are all exercised."""
    p, emin, emax = FORMATS[fmt]
    rng = np.random.default_rng(7 + len(fmt))
    n = 400
    def rnd(lo, hi):
        m = rng.integers(1 << (p - 1), 1 << p, n).astype(np.float64) / 2.0 ** (p - 1)
        e = rng.integers(lo, hi, n)
        s = rng.choice([-1.0, 1.0], n)
        return s * np.ldexp(m, e)
    half = emin // 2
    a = rnd(half - p, half + 2)
    b = rnd(half - p, half + 2)
    c = rnd(emin - p, emin + 2)
    c[::5] = 0.0
    c[1::10] = -0.0
    _check(list(zip(a.tolist(), b.tolist(), c.tolist(), strict=True)), fmt)


def test_fma_f64_fast_path_lanes_match_reference_mixed_with_slow():
    """One array mixing fast-path and fallback lanes: the fallback must not disturb others."""
    triples = [(1.5, 2.0, 0.25), (2.0 ** -1074, -0.5, 0.0), (3.0, 5.0, -15.0),
               (1 + 2.0 ** -52, 1 - 2.0 ** -52, -1.0), (2.0 ** 1000, 2.0 ** 30, -1.0),
               (-0.0, 5.0, -0.0), (0.1, 0.2, 0.3)]
    _check(triples, "f64")
