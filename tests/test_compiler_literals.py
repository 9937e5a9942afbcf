"""Issue 11, items 1 and 2: literals are rounded once from their exact value, 64-bit shift
counts are not cut to 32 bits.

Expectations are independent of the code under test: a literal's expected bits are the
candidate nearest to the exact value (``fractions.Fraction``) among the NumPy/ml_dtypes
conversion of ``float(value)`` and its two neighbours (the true nearest is within one unit
of the last place of a double-rounded result), ties to the even pattern; and they must equal
what the emulator's run-time ``cvt`` gives for the same value.
"""

from __future__ import annotations

from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest

import anywave as aw

WIDTHS = (8, 16, 32, 64)

_NP = {"f16": (np.float16, np.uint16), "bf16": (ml_dtypes.bfloat16, np.uint16),
       "f32": (np.float32, np.uint32), "f64": (np.float64, np.uint64)}


@pytest.fixture(autouse=True)
def _cache(monkeypatch, tmp_path):
    monkeypatch.setenv("ANYWAVE_CACHE_DIR", str(tmp_path / "cache"))


def nearest_bits(value: int | float, tname: str) -> int:
    """Independent oracle: round ``value`` exactly to ``tname`` (finite results only)."""
    ft, ut = _NP[tname]
    x = Fraction(value)
    with np.errstate(over="ignore"):
        b = int(np.array([float(value)], np.float64).astype(ft).view(ut)[0])
    cands = []
    for c in (b - 1, b, b + 1):
        if c < 0 or c >= 1 << (8 * np.dtype(ut).itemsize):
            continue
        v = np.array([c], ut).view(ft)[0]
        if not np.isfinite(np.float64(v)):
            continue
        cands.append((abs(Fraction(float(np.float64(v))) - x), c & 1, c))
    cands.sort()
    return cands[0][2]


# (type, value): ties, values needing more than 53 bits, the spec's own examples (§8.11)
LITERALS = [
    ("bf16", 16842753), ("bf16", -16842753), ("bf16", 1.0039062500009095), ("bf16", 1 + 2**-8),
    ("bf16", 1 + 3 * 2**-8), ("bf16", 2**100 + 2**93 + 1), ("bf16", 3.0e-39), ("bf16", 257.0),
    ("f16", 2049), ("f16", 2051), ("f16", 1 + 2**-11 + 2**-40), ("f16", 65519), ("f16", 6.0e-8),
    ("f16", 2**15 + 2**4 + 1), ("f16", -0.1),
    ("f32", 1152921573326323713), ("f32", 2**24 + 1), ("f32", 2**24 + 3), ("f32", 0.1),
    ("f32", 2**63 + 2**39 + 1), ("f32", -(2**62 + 2**38 + 1)), ("f32", 1e-45),
    ("f64", 2**53 + 1), ("f64", 2**60 + 2**7 + 1), ("f64", 2**64 - 1), ("f64", 0.1),
]

_DT = {"f16": aw.f16, "bf16": aw.bf16, "f32": aw.f32, "f64": aw.f64}


def _const_kernel(tname: str):
    dt = _DT[tname]

    @aw.kernel
    def lit(y: aw.Out[dt], *, v: float = 0.0):  # noqa: ANN202 - a kernel
        y[0] = dt(v)

    return lit


def test_spec_examples_are_exact() -> None:
    """Spec §8.11 / issue 11 item 1: the three examples of the report."""
    for tname, value, want in (("bf16", 16842753, 0x4B81), ("bf16", 1.0039062500009095, 0x3F81),
                               ("f32", 1152921573326323713, 0x5D800001)):
        ft, ut = _NP[tname]
        y = np.zeros(1, ft)
        _const_kernel(tname)(y, v=value, grid=1, workgroup=1, target="emulator")
        assert int(y.view(ut)[0]) == want == nearest_bits(value, tname), (tname, value)


@pytest.mark.parametrize("tname,value", LITERALS)
def test_literal_rounded_once(tname: str, value: float) -> None:
    ft, ut = _NP[tname]
    y = np.zeros(1, ft)
    _const_kernel(tname)(y, v=value, grid=1, workgroup=1, target="emulator")
    assert int(y.view(ut)[0]) == nearest_bits(value, tname), hex(int(y.view(ut)[0]))


@aw.kernel
def _cvt_from_i64(x: aw.In[aw.i64], ob: aw.Out[aw.bf16], oh: aw.Out[aw.f16], of: aw.Out[aw.f32], n: aw.i32):
    i = aw.global_id(0)
    if i < n:
        ob[i] = aw.bf16(x[i])
        oh[i] = aw.f16(x[i])
        of[i] = aw.f32(x[i])


@aw.kernel
def _cvt_from_f64(x: aw.In[aw.f64], ob: aw.Out[aw.bf16], oh: aw.Out[aw.f16], of: aw.Out[aw.f32], n: aw.i32):
    i = aw.global_id(0)
    if i < n:
        ob[i] = aw.bf16(x[i])
        oh[i] = aw.f16(x[i])
        of[i] = aw.f32(x[i])


def test_literals_match_run_time_conversion() -> None:
    """A literal gives the bits the emulator's run-time cvt gives for the same exact value."""
    ints = [v for t, v in LITERALS if isinstance(v, int) and abs(v) < 2**63 and t != "f64"]
    floats = [v for t, v in LITERALS if isinstance(v, float)]
    for kern, vals, dt in ((_cvt_from_i64, ints, np.int64), (_cvt_from_f64, floats, np.float64)):
        x = np.array(vals, dt)
        outs = [np.zeros(len(vals), t) for t in (ml_dtypes.bfloat16, np.float16, np.float32)]
        with np.errstate(over="ignore"):
            kern(x, *outs, len(vals), grid=1, workgroup=len(vals), target="emulator", wave_width=8)
        for tname, out in zip(("bf16", "f16", "f32"), outs, strict=True):
            for k, v in enumerate(vals):
                got_rt = int(out.view(_NP[tname][1])[k])
                if not np.isfinite(np.float64(out[k])):
                    continue  # run-time overflow to inf; a literal refuses instead (tested below)
                y = np.zeros(1, _NP[tname][0])
                _const_kernel(tname)(y, v=v, grid=1, workgroup=1, target="emulator")
                assert int(y.view(_NP[tname][1])[0]) == got_rt, (tname, v)


def test_bf16_times_literal_is_exact() -> None:
    """``x * 1.0039062500009095`` with ``x: bf16``: the literal becomes 0x3f81, not 0x3f80."""
    @aw.kernel
    def scale(x: aw.In[aw.bf16], y: aw.Out[aw.bf16]):
        y[0] = x[0] * 1.0039062500009095

    x = np.array([1.0], ml_dtypes.bfloat16)
    y = np.zeros(1, ml_dtypes.bfloat16)
    scale(x, y, grid=1, workgroup=1, target="emulator")
    assert int(y.view(np.uint16)[0]) == nearest_bits(1.0039062500009095, "bf16") == 0x3F81


def test_overflowing_literal_is_an_error_naming_the_value() -> None:
    with pytest.raises(aw.CompileError, match="65520 overflows f16"):
        _const_kernel("f16").compile(v=65520)
    with pytest.raises(aw.CompileError, match="overflows bf16"):
        _const_kernel("bf16").compile(v=2**128)


def test_nan_inf_and_negative_zero_literals() -> None:
    for tname, (ft, _ut) in _NP.items():
        for v in (float("inf"), float("-inf"), -0.0, float("nan")):
            y = np.zeros(1, ft)
            _const_kernel(tname)(y, v=v, grid=1, workgroup=1, target="emulator")
            got = np.float64(y[0])
            if v != v:
                assert np.isnan(got)
            else:
                assert got == v and np.signbit(got) == np.signbit(v), (tname, v)


# ----------------------------------------------------------------------------- item 2: shifts

@aw.kernel
def _shifts64(x: aw.In[aw.u64], xs: aw.In[aw.i64], c: aw.In[aw.u64], shl: aw.Out[aw.u64], shr: aw.Out[aw.u64],
              sar: aw.Out[aw.i64], n: aw.i32):
    i = aw.global_id(0)
    if i < n:
        shl[i] = x[i] << c[i]
        shr[i] = x[i] >> c[i]
        sar[i] = xs[i] >> c[i]


@aw.kernel
def _shifts32(x: aw.In[aw.u32], xs: aw.In[aw.i32], c: aw.In[aw.u64], shl: aw.Out[aw.u32], shr: aw.Out[aw.u32],
              sar: aw.Out[aw.i32], n: aw.i32):
    i = aw.global_id(0)
    if i < n:
        shl[i] = x[i] << c[i]
        shr[i] = x[i] >> c[i]
        sar[i] = xs[i] >> c[i]


COUNTS = [0, 1, 31, 32, 33, 63, 64, 65, 255, 256, 2**32 - 1, 2**32, 2**32 + 1, 2**33 + 3, 2**63, 2**64 - 1]


@pytest.mark.parametrize("W", WIDTHS)
@pytest.mark.parametrize("bits", [64, 32])
def test_64bit_shift_counts(W: int, bits: int) -> None:
    """Counts >= the width give 0 (and the sign fill for >> of a negative signed value), as
    Python would after wrapping to the width; a 64-bit count is never cut to 32 bits."""
    mask = (1 << bits) - 1
    ut, st = (np.uint64, np.int64) if bits == 64 else (np.uint32, np.int32)
    xs_py = [1, mask, 0x8000_0000 if bits == 32 else 0x8000_0000_0000_0000, 0x1234_5679 & mask]
    rows = [(x, c) for x in xs_py for c in COUNTS]
    x = np.array([r[0] for r in rows], ut)
    xs = x.view(st)
    c = np.array([r[1] for r in rows], np.uint64)
    n = len(rows)
    shl, shr, sar = np.zeros(n, ut), np.zeros(n, ut), np.zeros(n, st)
    kern = _shifts64 if bits == 64 else _shifts32
    kern(x, xs, c, shl, shr, sar, n, grid=(n + 63) // 64, workgroup=64, target="emulator", wave_width=W)
    for k, (xv, cv) in enumerate(rows):
        sv = xv - (1 << bits) if xv >> (bits - 1) else xv
        c_eff = min(cv, bits)  # Python's x << c / x >> c for c >= the width, after wrapping
        assert int(shl[k]) == (xv << c_eff) & mask, (xv, cv)
        assert int(shr[k]) == xv >> c_eff, (xv, cv)
        assert int(sar[k]) == sv >> c_eff, (xv, cv)


def test_shift_by_large_literal_count() -> None:
    @aw.kernel
    def k(x: aw.In[aw.u64], y: aw.Out[aw.u64]):
        y[0] = x[0] << (2**32 + 1)
        y[1] = x[0] >> (2**63)
        y[2] = x[0] << 3

    x = np.array([1], np.uint64)
    y = np.full(3, 7, np.uint64)
    k(x, y, grid=1, workgroup=1, target="emulator")
    assert list(map(int, y)) == [0, 0, 8]


@pytest.mark.parametrize("tname,value", LITERALS)
def test_host_dtype_call_rounds_like_a_literal(tname: str, value: float) -> None:
    """``aw.bf16(v)`` outside a kernel is the same exactly rounded value (not NumPy's double rounding)."""
    got = _DT[tname](value)
    assert int(np.array([got]).view(_NP[tname][1])[0]) == nearest_bits(value, tname)
