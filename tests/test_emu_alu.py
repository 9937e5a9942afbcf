"""Emulator ALU semantics against independent references (NumPy, struct, exact Fractions)."""

from __future__ import annotations

from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest

from test_emu_support import FORMATS, elementwise, f32bits, f64_from_bits, f64words, round_fraction

RNG = np.random.default_rng(1234)
U = np.uint32


def _u32(vals) -> np.ndarray:
    return np.array([v & 0xFFFFFFFF for v in vals], U)


EDGE32 = [0, 1, 2, 3, 7, 31, 32, 33, 0x7FFFFFFF, 0x80000000, 0x80000001, 0xFFFFFFFF, 0xFFFFFFFE,
          12345, 0xDEADBEEF, 64, 255]


def _pairs():
    a = [x for x in EDGE32 for _ in EDGE32]
    b = [y for _ in EDGE32 for y in EDGE32]
    return _u32(a), _u32(b)


def _s(v: int) -> int:
    return v - (1 << 32) if v & 0x80000000 else v


@pytest.mark.parametrize("W", [8, 64])
def test_integer_division_rules(W):
    a, b = _pairs()
    q = elementwise("div.i32 r10, r4, r6", 1, a, b, W=W)
    r = elementwise("rem.i32 r10, r4, r6", 1, a, b, W=W)
    qu = elementwise("div.u32 r10, r4, r6", 1, a, b, W=W)
    ru = elementwise("rem.u32 r10, r4, r6", 1, a, b, W=W)
    for i, (x, y) in enumerate(zip(a.tolist(), b.tolist(), strict=False)):
        sx, sy = _s(x), _s(y)
        if sy == 0:
            eq, er = -1, sx
        elif sx == -(1 << 31) and sy == -1:
            eq, er = sx, 0
        else:
            eq = abs(sx) // abs(sy) * (1 if (sx < 0) == (sy < 0) else -1)
            er = sx - sy * eq
        assert (int(q[i]), int(r[i])) == (eq & 0xFFFFFFFF, er & 0xFFFFFFFF), (sx, sy)
        assert int(qu[i]) == (0xFFFFFFFF if y == 0 else x // y)
        assert int(ru[i]) == (x if y == 0 else x % y)


def test_i64_division_min_by_minus_one():
    mn = 1 << 63
    a = np.array([mn, 7, (-7) & (2**64 - 1), 5], np.uint64)
    b = np.array([(-1) & (2**64 - 1), 0, 2, (-3) & (2**64 - 1)], np.uint64)
    q = elementwise("div.i64 r10:r11, r4:r5, r6:r7", 2, a.view(U), b.view(U)).view(np.uint64)
    r = elementwise("rem.i64 r10:r11, r4:r5, r6:r7", 2, a.view(U), b.view(U)).view(np.uint64)
    assert q.tolist() == [mn, 2**64 - 1, (-3) & (2**64 - 1), (-1) & (2**64 - 1)]
    assert r.tolist() == [0, 7, (-1) & (2**64 - 1), 2]


def test_wrapping_arith_and_mulhi():
    a, b = _pairs()
    ia, ib = a.view(np.int32).astype(np.int64), b.view(np.int32).astype(np.int64)
    assert np.array_equal(elementwise("add.i32 r10, r4, r6", 1, a, b), ((ia + ib) & 0xFFFFFFFF).astype(U))
    assert np.array_equal(elementwise("mul.i32 r10, r4, r6", 1, a, b), ((ia * ib) & 0xFFFFFFFF).astype(U))
    hi = ((ia * ib) >> 32).astype(np.int64).astype(U)
    assert np.array_equal(elementwise("mulhi.i32 r10, r4, r6", 1, a, b), hi)
    ua, ub = a.astype(object), b.astype(object)
    exp = [(x * y) >> 32 for x, y in zip(ua, ub, strict=True)]
    assert elementwise("mulhi.u32 r10, r4, r6", 1, a, b).tolist() == exp
    assert elementwise("abs.i32 r10, r4", 1, a).tolist() == [abs(_s(x)) & 0xFFFFFFFF for x in a.tolist()]
    assert elementwise("min.i32 r10, r4, r6", 1, a, b).tolist() == [
        min(_s(x), _s(y)) & 0xFFFFFFFF for x, y in zip(a.tolist(), b.tolist(), strict=False)]
    exp = [max(x, y) for x, y in zip(a.tolist(), b.tolist(), strict=True)]
    assert elementwise("max.u32 r10, r4, r6", 1, a, b).tolist() == exp


def test_shifts_full_count():
    a, b = _pairs()
    shl = elementwise("shl.b32 r10, r4, r6", 1, a, b)
    shr = elementwise("shr.u32 r10, r4, r6", 1, a, b)
    sar = elementwise("shr.i32 r10, r4, r6", 1, a, b)
    for i, (x, c) in enumerate(zip(a.tolist(), b.tolist(), strict=False)):
        assert int(shl[i]) == ((x << c) & 0xFFFFFFFF if c < 32 else 0)
        assert int(shr[i]) == (x >> c if c < 32 else 0)
        assert int(sar[i]) == (_s(x) >> min(c, 31)) & 0xFFFFFFFF
    # 64-bit: count is one 32-bit register
    v = np.array([0x8000000000000001, 5], np.uint64)
    cnt = np.array([63, 0, 64, 0], U)
    out = elementwise("shr.i64 r10:r11, r4:r5, r6", 2, v.view(U), cnt).view(np.uint64)
    assert out.tolist() == [2**64 - 1, 0]  # 5 >> 64 = 0 (sign-filled)


def test_bit_counting():
    vals = _u32(EDGE32 + RNG.integers(0, 2**32, 50, dtype=np.uint64).tolist())
    assert elementwise("popc.b32 r10, r4", 1, vals).tolist() == [bin(v).count("1") for v in vals.tolist()]
    assert elementwise("clz.b32 r10, r4", 1, vals).tolist() == [32 - v.bit_length() for v in vals.tolist()]
    assert elementwise("ctz.b32 r10, r4", 1, vals).tolist() == [
        32 if v == 0 else (v & -v).bit_length() - 1 for v in vals.tolist()]
    exp = [int(f"{v:032b}"[::-1], 2) for v in vals.tolist()]
    assert elementwise("brev.b32 r10, r4", 1, vals).tolist() == exp


SPECIAL_F32 = [0.0, -0.0, 1.0, -1.0, 1.5, 3.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 1.17549435e-38,
               3.4028235e38, -3.4028235e38, 0.1, 1e30, 2.5e-39]


def _f32_cases(n=200):
    sp = np.array(SPECIAL_F32, np.float32)
    def rnd() -> np.ndarray:
        return (RNG.standard_normal(n) * 10.0 ** RNG.integers(-40, 38, n)).astype(np.float32)
    a = np.concatenate([np.repeat(sp, sp.size), rnd()])
    b = np.concatenate([np.tile(sp, sp.size), rnd()])
    return a, b


def _same_f32(got_bits: np.ndarray, exp: np.ndarray) -> None:
    exp = np.asarray(exp, np.float32)
    got = got_bits.view(np.float32)
    nan = np.isnan(exp)
    assert np.array_equal(np.isnan(got), nan)
    assert np.array_equal(got_bits[~nan], exp.view(U)[~nan])
    assert np.all(got_bits[nan] == 0x7FC00000)  # canonical NaN


@pytest.mark.parametrize("op,fn", [("add", np.add), ("sub", np.subtract), ("mul", np.multiply),
                                   ("div", np.divide)])
def test_f32_arith_matches_numpy(op, fn):
    a, b = _f32_cases()
    with np.errstate(all="ignore"):
        _same_f32(elementwise(f"{op}.f32 r10, r4, r6", 1, f32bits(a), f32bits(b)), fn(a, b))


def test_f32_sqrt_rounding_ops():
    a, _ = _f32_cases()
    with np.errstate(all="ignore"):
        for op, fn in (("sqrt", np.sqrt), ("floor", np.floor), ("ceil", np.ceil), ("trunc", np.trunc),
                       ("rint", np.rint)):
            _same_f32(elementwise(f"{op}.f32 r10, r4", 1, f32bits(a)), fn(a))
    assert f32bits(np.float32(-0.0)) == elementwise("sqrt.f32 r10, r4", 1, f32bits([-0.0]))[0]


def test_f32_min_max_minimum_number():
    a = np.array([np.nan, 1.0, np.nan, -0.0, 0.0, -0.0, 2.0], np.float32)
    b = np.array([1.0, np.nan, np.nan, 0.0, -0.0, -0.0, -3.0], np.float32)
    mn = elementwise("min.f32 r10, r4, r6", 1, f32bits(a), f32bits(b))
    mx = elementwise("max.f32 r10, r4, r6", 1, f32bits(a), f32bits(b))
    assert mn.tolist() == [0x3F800000, 0x3F800000, 0x7FC00000, 0x80000000, 0x80000000, 0x80000000, 0xC0400000]
    assert mx.tolist() == [0x3F800000, 0x3F800000, 0x7FC00000, 0x00000000, 0x00000000, 0x80000000, 0x40000000]


def test_neg_abs_are_sign_bit_ops():
    a = np.array([0x7FC00001, 0xFFC00000, 0x3F800000, 0x00000000], U)
    assert elementwise("neg.f32 r10, r4", 1, a).tolist() == [0xFFC00001, 0x7FC00000, 0xBF800000, 0x80000000]
    assert elementwise("abs.f32 r10, r4", 1, a).tolist() == [0x7FC00001, 0x7FC00000, 0x3F800000, 0]


def _fma_hard_f32(n):
    # products whose exact sum lies just off a rounding midpoint: a*b + c with c cancelling
    a = (1 + RNG.integers(0, 2**23, n) / 2**23).astype(np.float32)
    b = (1 + RNG.integers(0, 2**23, n) / 2**23).astype(np.float32)
    p = a.astype(np.float64) * b.astype(np.float64)
    c = (-p.astype(np.float32)).astype(np.float32)  # cancels the leading bits
    c2 = (p * 2**-25).astype(np.float32)  # near-midpoint additions
    return np.concatenate([a, a]), np.concatenate([b, b]), np.concatenate([c, c2])


def _exact_fma(a, b, c, fmt):
    p, emin, emax = FORMATS[fmt]
    out = []
    for x, y, z in zip(a.tolist(), b.tolist(), c.tolist(), strict=False):
        if not all(np.isfinite([x, y, z])):
            out.append(np.float64(x) * np.float64(y) + np.float64(z))
            continue
        v = Fraction(x) * Fraction(y) + Fraction(z)
        r = round_fraction(v, p, emin, emax)
        if v == 0:
            r = -0.0 if (np.signbit(x) != np.signbit(y)) and np.signbit(z) and (x * y == 0) else 0.0
        elif r == 0:
            r = -0.0 if v < 0 else 0.0
        out.append(r)
    return np.array(out, np.float64)


def test_fma_f32_single_rounding():
    a1, b1 = _f32_cases(300)
    c1 = (RNG.standard_normal(a1.size) * 10.0 ** RNG.integers(-40, 38, a1.size)).astype(np.float32)
    a2, b2, c2 = _fma_hard_f32(300)
    a, b, c = (np.concatenate([x, y]).astype(np.float32) for x, y in ((a1, a2), (b1, b2), (c1, c2)))
    got = elementwise("fma.f32 r10, r4, r6, r8", 1, f32bits(a), f32bits(b), f32bits(c))
    with np.errstate(all="ignore"):
        exp = _exact_fma(a, b, c, "f32").astype(np.float32)
    _same_f32(got, exp)
    # a case where computing in f64 and rounding twice is wrong
    x, y, z = np.float32(1 + 2**-23), np.float32(1 + 2**-23), np.float32(-1.0)
    wrong = np.float32(np.float64(x) * np.float64(y) + np.float64(z))
    right = _exact_fma(np.array([x]), np.array([y]), np.array([z]), "f32").astype(np.float32)
    got = elementwise("fma.f32 r10, r4, r6, r8", 1, f32bits([x]), f32bits([y]), f32bits([z]))
    assert got[0] == right.view(U)[0]
    del wrong


def test_fma_f32_double_rounding_trap():
    # a*b = 1 + 2^-11 + 2^-24 is exactly an f32 midpoint; adding c = +-2^-80 moves the exact
    # value just off it. Rounding a*b + c in f64 first lands on the midpoint again and the
    # f32 rounding then ties to even: wrong for c = +2^-80.
    a = b = np.float32(1 + 2**-12)
    for c, exp in ((2.0**-80, 1 + 2**-11 + 2**-23), (-(2.0**-80), 1 + 2**-11), (0.0, 1 + 2**-11)):
        exact = Fraction(float(a)) * Fraction(float(b)) + Fraction(c)
        assert round_fraction(exact, 24, -126, 127) == exp
        got = elementwise("fma.f32 r10, r4, r6, r8", 1, f32bits([a]), f32bits([b]), f32bits([c]))
        assert got[0] == f32bits(exp), c


def test_fma_f64_single_rounding():
    n = 150
    a = np.concatenate([1 + RNG.integers(0, 2**52, n) / 2**52, RNG.standard_normal(n) * 1e300,
                        [3.0, -0.0, 1e308, np.inf, 0.0]])
    b = np.concatenate([1 + RNG.integers(0, 2**52, n) / 2**52, RNG.standard_normal(n) * 1e-300,
                        [5.0, 2.0, 10.0, 1.0, -1.0]])
    c = np.concatenate([-(a[:n] * b[:n]), RNG.standard_normal(n), [1.0, -0.0, -1e308, 1.0, -0.0]])
    got = elementwise("fma.f64 r10:r11, r4:r5, r6:r7, r8:r9", 2, f64words(a), f64words(b), f64words(c))
    got = got.view(np.float64)
    with np.errstate(all="ignore"):
        exp = _exact_fma(a, b, c, "f64")
    assert np.array_equal(got, exp, equal_nan=True)
    assert np.array_equal(np.signbit(got), np.signbit(exp))
    assert got[2 * n + 2] == np.inf  # 1e308*10 - 1e308 overflows exactly
    assert got[2 * n + 1] == 0 and np.signbit(got[2 * n + 1])  # -0*2 + -0 = -0


def _h(v) -> np.ndarray:
    return np.asarray(v, np.float16).view(np.uint16).astype(U)


def test_f16_ops_round_once():
    a = RNG.standard_normal(300).astype(np.float16)
    b = (RNG.standard_normal(300) * 100).astype(np.float16)
    c = (RNG.standard_normal(300) * 0.01).astype(np.float16)
    for op, fn in (("add", np.add), ("mul", np.multiply), ("sub", np.subtract)):
        got = elementwise(f"{op}.f16 r10, r4, r6", 1, _h(a), _h(b))
        exp = [round_fraction(fn(Fraction(float(x)), Fraction(float(y))), 11, -14, 15)
               for x, y in zip(a, b, strict=True)]
        assert np.array_equal(got, _h(exp)), op
    got = elementwise("fma.f16 r10, r4, r6, r8", 1, _h(a), _h(b), _h(c))
    exp = [round_fraction(Fraction(float(x)) * Fraction(float(y)) + Fraction(float(z)), 11, -14, 15)
           for x, y, z in zip(a, b, c, strict=False)]
    assert np.array_equal(got, _h(exp))


def _bf(v) -> np.ndarray:
    return np.asarray(v, ml_dtypes.bfloat16).view(np.uint16).astype(U)


def test_bf16_and_packed():
    a = RNG.standard_normal(200).astype(ml_dtypes.bfloat16)
    b = (RNG.standard_normal(200) * 3).astype(ml_dtypes.bfloat16)
    c = RNG.standard_normal(200).astype(ml_dtypes.bfloat16)
    got = elementwise("fma.bf16 r10, r4, r6, r8", 1, _bf(a), _bf(b), _bf(c))
    exp = [round_fraction(Fraction(float(x)) * Fraction(float(y)) + Fraction(float(z)), 8, -126, 127)
           for x, y, z in zip(a, b, c, strict=False)]
    assert np.array_equal(got, np.array([_bf_bits_exact(v) for v in exp], U))
    # packed: low and high halves independently
    lo, hi = _h(a.astype(np.float32).astype(np.float16)), _h(b.astype(np.float32).astype(np.float16))
    packed_a = lo | (hi << 16)
    got = elementwise("add.f16x2 r10, r4, r6", 1, packed_a, packed_a)
    exp_lo = _h(a.astype(np.float32).astype(np.float16).astype(np.float32) * 2)
    exp_hi = _h(b.astype(np.float32).astype(np.float16).astype(np.float32) * 2)
    assert np.array_equal(got, exp_lo | (exp_hi << 16))


def _bf_bits_exact(v: float) -> int:
    # v is exactly representable in bf16: its f32 bits' top half
    return int(np.array([v], np.float32).view(U)[0] >> 16)


def test_cvt_saturation_and_rounding():
    f = np.array([np.nan, -np.inf, np.inf, -1.5, 2.7, 3e9, -3e9, 4294967296.0, -0.9], np.float32)
    assert elementwise("cvt.i32.f32 r10, r4", 1, f32bits(f)).tolist() == [
        0, 0x80000000, 0x7FFFFFFF, 0xFFFFFFFF, 2, 0x7FFFFFFF, 0x80000000, 0x7FFFFFFF, 0]
    assert elementwise("cvt.u32.f32 r10, r4", 1, f32bits(f)).tolist() == [
        0, 0, 0xFFFFFFFF, 0, 2, 3000000000, 0, 0xFFFFFFFF, 0]
    out = elementwise("cvt.u64.f32 r10:r11, r4", 1, f32bits(f), out_words=2).view(np.uint64)
    assert out.tolist() == [0, 0, 2**64 - 1, 0, 2, 3000000000, 0, 4294967296, 0]
    # int -> float rounds to nearest even
    i = _u32([16777217, 16777219, 0x7FFFFFFF, 0x80000000])
    assert elementwise("cvt.f32.i32 r10, r4", 1, i).view(np.float32).tolist() == [
        16777216.0, 16777220.0, 2147483648.0, -2147483648.0]
    # f64 -> f16 must not double-round through f32
    x = np.array([1 + 2**-11 + 2**-40], np.float64)
    assert elementwise("cvt.f16.f64 r10, r4:r5", 2, f64words(x), out_words=1)[0] == _h([1 + 2**-10])[0]
    x = np.array([1 + 2**-8 + 2**-40], np.float64)
    assert elementwise("cvt.bf16.f64 r10, r4:r5", 2, f64words(x), out_words=1)[0] == 0x3F81
    # u64 -> f16 via round-to-odd
    v = np.array([(1 << 40) + (1 << 29) + 1], np.uint64)
    exp = round_fraction(Fraction(int(v[0])), 11, -14, 15)
    assert elementwise("cvt.f16.u64 r10, r4:r5", 2, v.view(U), out_words=1)[0] == _h([exp])[0]


def test_integer_widen_narrow():
    v = _u32([0x80000000, 5, 0xFFFFFFFF])
    s = elementwise("cvt.i64.i32 r10:r11, r4", 1, v, out_words=2).view(np.uint64)
    z = elementwise("cvt.u64.u32 r10:r11, r4", 1, v, out_words=2).view(np.uint64)
    assert s.tolist() == [0xFFFFFFFF80000000, 5, 2**64 - 1]
    assert z.tolist() == [0x80000000, 5, 0xFFFFFFFF]


def test_compare_nan_rules():
    a = np.array([np.nan, 1.0, 2.0], np.float32)
    b = np.array([1.0, 1.0, np.nan], np.float32)
    for cmp, exp in (("eq", [0, 1, 0]), ("ne", [1, 0, 1]), ("lt", [0, 0, 0]), ("ge", [0, 1, 0]),
                     ("unord", [1, 0, 1])):
        got = elementwise(f"setp.{cmp}.f32 p1, r4, r6\n movi.b32 r10, 0\n @p1 movi.b32 r10, 1", 1,
                          f32bits(a), f32bits(b))
        assert got.tolist() == exp, cmp


def test_f64_pair_registers_and_words():
    a = np.array([1.5, -2.25], np.float64)
    b = np.array([0.25, 4.0], np.float64)
    got = elementwise("add.f64 r10:r11, r4:r5, r6:r7", 2, f64words(a), f64words(b))
    assert [f64_from_bits(int(got[2 * i]), int(got[2 * i + 1])) for i in range(2)] == [1.75, 1.75]


def test_every_table_instruction_has_semantics():
    from anywave.binary.module import DeviceAddr, Instruction, LocalAddr, Pred
    from anywave.emu.machine import compile_instruction
    from anywave.isa.table import INSTRUCTIONS, Operand
    from anywave.isa.types import MemoryOrder, Scope, SpecialRegister

    sample = {Operand.PS: Pred(0), Operand.DADDR: DeviceAddr(0, 0), Operand.DADDR64: DeviceAddr(0, 0),
              Operand.LADDR: LocalAddr(0), Operand.SREG: SpecialRegister.LANE_ID, Operand.SCOPE: Scope.DEVICE,
              Operand.ORDER: MemoryOrder.RELAXED}
    for d in INSTRUCTIONS:
        ins = Instruction(d, tuple(sample.get(k, 0) for k in d.operands))
        compile_instruction(ins)  # raises if the emulator lacks the semantics
