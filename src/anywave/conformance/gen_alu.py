"""Cases for integer, float, bitwise, compare and conversion instructions, generated from the
instruction table: one kernel per record with a shared load-compute-store template, inputs =
edge values (crossed) plus random values, expectations from :mod:`refsem`."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from fractions import Fraction

import numpy as np

from anywave.conformance import refsem as R
from anywave.conformance.build import (
    BITS_ARG,
    BITS_DTYPE,
    SHIFT_COUNTS,
    float_crafted_pairs,
    float_edges,
    guard_prologue,
    int_edges,
    kernel_text,
    launch_1d,
    load_line,
    out_buffer,
    random_float_bits,
    reg,
    rng_for,
    store_line,
)
from anywave.conformance.case import EXACT, Case, Compare
from anywave.isa.table import INSTRUCTIONS, Category, Determinism, InstrDef, Operand
from anywave.isa.types import ScalarType

T = ScalarType
_INT_BITS = {
    T.I32: (32, True),
    T.U32: (32, False),
    T.B32: (32, False),
    T.I64: (64, True),
    T.U64: (64, False),
    T.B64: (64, False),
}
_FMT = {T.F16: R.F16, T.BF16: R.BF16, T.F32: R.F32, T.F64: R.F64, T.F16X2: R.F16, T.BF16X2: R.BF16}


def group_of(d: InstrDef, base: str) -> str:
    """``base`` plus the record's most demanding optional capability (f64 > bf16 > f16 > int64),
    so a target lacking one capability loses as few groups as possible."""
    caps = d.capability.spellings()
    for c in ("f64", "bf16", "f16", "int64"):
        if c in caps:
            return f"{base}.{c}"
    return base


def _requires(d: InstrDef) -> tuple[str, ...]:
    return tuple(d.capability.spellings())


# ----------------------------------------------------------------------------- semantics


def _int_ref(op: str, t: ScalarType) -> Callable[..., int]:
    bits, signed = _INT_BITS[t]
    m = (1 << bits) - 1

    def sv(v: int) -> int:
        return R.to_signed(v, bits) if signed else v & m

    table: dict[str, Callable[..., int]] = {
        "add": lambda a, b: (a + b) & m,
        "sub": lambda a, b: (a - b) & m,
        "mul": lambda a, b: (a * b) & m,
        "neg": lambda a: (-a) & m,
        "abs": lambda a: abs(R.to_signed(a, bits)) & m,
        "div": lambda a, b: R.i_div(a, b, bits, signed),
        "rem": lambda a, b: R.i_rem(a, b, bits, signed),
        "min": lambda a, b: min(sv(a), sv(b)) & m,
        "max": lambda a, b: max(sv(a), sv(b)) & m,
        "mulhi": lambda a, b: ((sv(a) * sv(b)) >> 32) & m,
        "mad": lambda a, b, c: (a * b + c) & m,
        "and": lambda a, b: a & b,
        "or": lambda a, b: a | b,
        "xor": lambda a, b: a ^ b,
        "not": lambda a: ~a & m,
        "shl": lambda a, b: R.i_shl(a, b, bits),
        "shr": lambda a, b: R.i_shr(a, b, bits, signed),
        "popc": lambda a: bin(a & m).count("1"),
        "clz": R.clz32,
        "ctz": R.ctz32,
        "brev": R.brev32,
        "rotl": R.rotl32,
    }
    return table[op]


_FLOAT_OPS: dict[str, Callable[..., int]] = {
    "add": R.f_add,
    "sub": R.f_sub,
    "mul": R.f_mul,
    "div": R.f_div,
    "fma": R.f_fma,
    "sqrt": R.f_sqrt,
    "min": R.f_min,
    "max": R.f_max,
    "neg": R.f_neg,
    "abs": R.f_abs,
    "floor": R.f_floor,
    "ceil": R.f_ceil,
    "trunc": R.f_trunc,
    "rint": R.f_rint,
}


def _float_ref(op: str, t: ScalarType) -> Callable[..., int]:
    fmt = _FMT[t]
    f = _FLOAT_OPS[op]
    if not t.is_packed:
        return lambda *xs: f(fmt, *xs)

    def packed(*xs: int) -> int:
        lo = f(fmt, *(x & 0xFFFF for x in xs))
        hi = f(fmt, *(x >> 16 for x in xs))
        return hi << 16 | lo

    return packed


def _approx_ref(op: str) -> tuple[Callable[[int], int], Compare]:
    def wrap(fn: Callable[[float], float]) -> Callable[[int], int]:
        def g(a: int) -> int:
            x = R.F32.to_float(a)
            if math.isnan(x):
                return R.F32.canonical_nan
            return R.F32.from_float(fn(x))

        return g

    def ex2(x: float) -> float:
        if x == math.inf:
            return math.inf
        if x == -math.inf:
            return 0.0
        try:
            return 2.0**x
        except OverflowError:
            return math.inf

    def lg2(x: float) -> float:
        if x < 0:
            return math.nan
        if x == 0:
            return -math.inf
        return math.inf if x == math.inf else math.log2(x)

    def rsqrt(x: float) -> float:
        if x == 0:
            return math.copysign(math.inf, x)
        if x < 0:
            return math.nan
        return 0.0 if x == math.inf else 1.0 / math.sqrt(x)

    def rcp(x: float) -> float:
        if x == 0:
            return math.copysign(math.inf, x)
        return math.copysign(0.0, x) if math.isinf(x) else 1.0 / x

    def trig(fn: Callable[[float], float]) -> Callable[[float], float]:
        return lambda x: math.nan if math.isinf(x) else fn(x)

    f32 = "f32"
    return {
        "ex2": (wrap(ex2), Compare("ulp", f32, 2)),
        "lg2": (wrap(lg2), Compare("ulp", f32, 2)),
        "sin": (wrap(trig(math.sin)), Compare("abs", f32, 2.0**-20.5)),
        "cos": (wrap(trig(math.cos)), Compare("abs", f32, 2.0**-20.5)),
        "rsqrt": (wrap(rsqrt), Compare("ulp", f32, 2)),
        "rcp": (wrap(rcp), Compare("ulp", f32, 1)),
        "tanh": (wrap(math.tanh), Compare("rel", f32, 2.0**-10.9)),
    }[op]


def _approx_inputs(op: str, rng: np.random.Generator) -> list[float]:
    special = [math.nan]
    if op == "ex2":
        xs = [0.0, -0.0, 1.0, -1.0, 10.0, -10.0, 0.5, 100.25, -100.5, math.inf, -math.inf]
        xs += list(rng.uniform(-60, 60, 40))
    elif op == "lg2":
        xs = [0.0, -0.0, -1.0, 2.0, 0.25, 1024.0, 0.3, 3.0, 1e30, 1e-30, math.inf, -math.inf]
        xs += list(rng.uniform(2, 1000, 20)) + list(rng.uniform(0.01, 0.5, 20))
    elif op in ("sin", "cos"):
        xs = [0.0, -0.0, math.pi / 2, -math.pi / 2, 1.0, -3.0, 3.1, math.inf, -math.inf]
        xs += list(rng.uniform(-math.pi, math.pi, 40))
    elif op == "rsqrt":
        xs = [0.0, -0.0, -1.0, 1.0, 4.0, 0.25, 2.0, 1e20, 1e-20, math.inf]
        xs += list(rng.uniform(0.001, 1000, 40))
    elif op == "rcp":
        xs = [0.0, -0.0, 1.0, -1.0, 3.0, -7.0, 0.1, 1e30, -1e-30, math.inf, -math.inf]
        xs += list(rng.uniform(-1000, 1000, 40))
    else:  # tanh
        xs = [0.0, -0.0, 0.5, -0.5, 1.0, 5.0, -20.0, 100.0, math.inf, -math.inf]
        xs += list(rng.uniform(-4, 4, 40))
    return special + xs


# ----------------------------------------------------------------------------- inputs


def _src_bits(d: InstrDef, i: int, kind: Operand) -> int:
    """Width of the value held by the i-th source operand of d."""
    if kind in (Operand.RS64, Operand.RD64):
        return 64
    if d.op in ("shl", "shr", "rotl") and i == 1:
        return 32
    t = d.src_type if d.op == "cvt" else d.type
    assert t is not None
    return 16 if t in (T.F16, T.BF16) else 32


def _values_for(d: InstrDef, i: int, bits: int, rng: np.random.Generator) -> list[int]:
    t = d.src_type if d.op in ("cvt", "cvt_pack") else d.type
    assert t is not None
    if d.op in ("shl", "shr", "rotl") and i == 1:
        return SHIFT_COUNTS
    if t.is_packed:
        fmt = _FMT[t]
        e = float_edges(fmt)
        return [a | b << 16 for a, b in zip(e, e[3:] + e[:3], strict=False)]
    if t.is_float:
        return float_edges(_FMT[t])
    return int_edges(bits)


def _tuples(d: InstrDef, nsrc: int, src_bits: list[int], rng: np.random.Generator) -> list[tuple[int, ...]]:
    t = d.src_type if d.op in ("cvt", "cvt_pack") else d.type
    assert t is not None
    edges = [_values_for(d, i, src_bits[i], rng) for i in range(nsrc)]
    if nsrc == 1:
        vals = list(edges[0])
        if d.op == "cvt":
            vals += _cvt_crafted(d)
        if t.is_float and not t.is_packed:
            vals += random_float_bits(rng, _FMT[t], 24)
        else:
            vals += [int(v) for v in rng.integers(0, 1 << src_bits[0], 24, dtype=np.uint64)]
        return [(v,) for v in vals]
    if nsrc == 3:
        small = [lst[:: max(1, len(lst) // 7)][:8] for lst in edges]
        out = list(itertools.product(*small))
        if t.is_float and not t.is_packed:
            out += _fma_crafted(_FMT[t])
            fmt = _FMT[t]
            r = [random_float_bits(rng, fmt, 32) for _ in range(3)]
            out += list(zip(*r, strict=False))
        else:
            r = [rng.integers(0, 1 << b, 32, dtype=np.uint64) for b in src_bits]
            out += [tuple(int(x) for x in z) for z in zip(*r, strict=False)]
        return out
    out = list(itertools.product(*edges))
    if t.is_float and not t.is_packed:
        out += float_crafted_pairs(_FMT[t])
        fmt = _FMT[t]
        out += list(zip(random_float_bits(rng, fmt, 32), random_float_bits(rng, fmt, 32), strict=False))
    else:
        r = [rng.integers(0, 1 << b, 32, dtype=np.uint64) for b in src_bits]
        out += [tuple(int(x) for x in z) for z in zip(*r, strict=False)]
    return out


def _fma_crafted(fmt: R.FloatFormat) -> list[tuple[int, int, int]]:
    """Inputs where rounding the product first (double rounding) gives a different answer."""
    q = fmt.mbits // 2 + 1
    a = fmt.round(0, 1 + Fraction(1, 2**q))  # a*a = 1 + 2^(1-q) + 2^-2q, last term below an ulp
    m1 = fmt.from_float(-1.0)
    c2 = fmt.round(1, 1 + Fraction(2, 2**q))
    big = fmt.inf - 1
    return [
        (a, a, m1),
        (a, a, c2),
        (a, a | fmt.sign_bit, fmt.from_float(1.0)),
        (big, fmt.from_float(2.0), fmt.inf | fmt.sign_bit),
        (big, fmt.from_float(2.0), big | fmt.sign_bit),
        (1, fmt.from_float(0.5), 0),
        (1, fmt.from_float(0.5) | fmt.sign_bit, 0),
        (0, fmt.sign_bit, 0),
        (0, fmt.sign_bit, fmt.sign_bit),
        (fmt.inf, 0, fmt.from_float(1.0)),
    ]


def _cvt_crafted(d: InstrDef) -> list[int]:
    """Rounding ties and saturation edges for conversions."""
    src, dst = d.src_type, d.type
    assert src is not None and dst is not None
    out: list[int] = []
    if not src.is_float and dst.is_float:
        p = _FMT[dst].mbits + 1
        sbits = src.bits
        for k in (p, p + 1, min(p + 8, sbits - 2)):
            if k >= sbits - 1 or k < p:
                continue
            base = 1 << k
            out += [base + 1, base + 2, base + 3, base + (1 << (k - p)), base + 3 * (1 << (k - p))]
            if src.is_signed:
                out += [-(base + 1) & ((1 << sbits) - 1), -(base + 3) & ((1 << sbits) - 1)]
        if dst is T.F16:
            out += [65504, 65519, 65520, 65536, 70000]
    elif src.is_float and not dst.is_float:
        fmt = _FMT[src]
        bits, signed = _INT_BITS[dst]
        lim = [
            2.0 ** (bits - 1),
            -(2.0 ** (bits - 1)),
            2.0**bits,
            -1.0,
            -0.5,
            0.99,
            1e30,
            -1e30,
            2.0 ** (bits - 1) - 2.0 ** (bits - 25),
            65504.0,
            -65504.0,
            3.5,
            -3.5,
        ]
        out += [fmt.from_float(x) for x in lim]
    elif src.is_float and dst.is_float:
        sfmt, dfmt = _FMT[src], _FMT[dst]
        one = Fraction(1)
        dp = dfmt.mbits
        if sfmt.mbits > dfmt.mbits or sfmt.ebits != dfmt.ebits:
            for v in (
                one + Fraction(1, 2 ** (dp + 1)),
                one + Fraction(3, 2 ** (dp + 1)),
                one + Fraction(1, 2 ** (dp + 1)) + Fraction(1, 2 ** min(sfmt.mbits, dp + 6)),
                Fraction(2) ** (dfmt.emin - dfmt.mbits - 1),
                Fraction(3) * Fraction(2) ** (dfmt.emin - dfmt.mbits - 1),
                Fraction(2) ** dfmt.emax * (2 - Fraction(1, 2 ** (dp + 1))),
                Fraction(2) ** dfmt.emax * (2 - Fraction(1, 2 ** (dp + 2))),
                Fraction(2) ** (dfmt.emax + 1),
            ):
                for sign in (0, 1):
                    b = sfmt.round(sign, v)
                    if not sfmt.decode(b).is_inf:
                        out.append(b)
    return out


# ----------------------------------------------------------------------------- case building


def _alu_case(d: InstrDef, group: str, tuples: list[tuple[int, ...]] | None = None, suffix: str = "",
              workgroup: int = 64) -> Case:
    name = "alu_" + d.mnemonic.replace(".", "_") + suffix
    rng = rng_for(name)
    srcs = [(i, k) for i, k in enumerate(d.operands) if not k.is_dest]
    dest = d.operands[0]
    src_bits = [_src_bits(d, i, k) for i, (_, k) in enumerate(srcs)]
    if tuples is None:
        tuples = _tuples(d, len(srcs), src_bits, rng)
    n = len(tuples)
    names = "abc"
    args: dict[str, np.ndarray] = {}
    decls = []
    body = guard_prologue(n)
    regs_in = []
    for j, bits in enumerate(src_bits):
        args[names[j]] = np.array([tp[j] for tp in tuples], dtype=BITS_DTYPE[bits])
        decls.append((names[j], "buffer", BITS_ARG[bits], "read"))
        body.append(load_line(10 + 2 * j, names[j], bits))
        regs_in.append(reg(10 + 2 * j, bits))
    if dest is Operand.PD:
        out_bits = 32
        body.append(f"{d.mnemonic} p0, {', '.join(regs_in)}")
        body += ["movi.u32 r5, 1", "movi.u32 r6, 0", "selp.b32 r20, r5, r6, p0"]
    else:
        out_bits = 64 if dest is Operand.RD64 else (16 if d.type in (T.F16, T.BF16) else 32)
        body.append(f"{d.mnemonic} {reg(20, out_bits)}, {', '.join(regs_in)}")
    body.append(store_line("out", 20, out_bits))
    decls.append(("out", "buffer", BITS_ARG[out_bits], "write"))
    args["out"] = out_buffer(n, out_bits)

    compare = EXACT
    if d.op == "setp":
        t = d.type
        assert t is not None
        if t.is_float:
            ref = lambda a, b, t=t: int(R.f_setp(_FMT[t], d.variant, a, b))  # noqa: E731
        else:
            bits, signed = _INT_BITS[t]
            conv = (lambda v: R.to_signed(v, bits)) if signed else (lambda v: v)
            ops = {
                "eq": lambda x, y: x == y,
                "ne": lambda x, y: x != y,
                "lt": lambda x, y: x < y,
                "le": lambda x, y: x <= y,
                "gt": lambda x, y: x > y,
                "ge": lambda x, y: x >= y,
            }
            ref = lambda a, b, f=ops[d.variant]: int(f(conv(a), conv(b)))  # noqa: E731
    elif d.op == "cvt":
        assert d.type is not None and d.src_type is not None
        ref = lambda a: R.cvt(d.type.spelling, d.src_type.spelling, a)  # noqa: E731
        if d.determinism is Determinism.EXACT_NAN:
            compare = Compare("exact-nan", d.type.spelling)
    elif d.op == "cvt_pack":
        fmt_name = "f16" if d.type is T.F16X2 else "bf16"
        ref = lambda a, b: R.cvt(fmt_name, "f32", b) << 16 | R.cvt(fmt_name, "f32", a)  # noqa: E731
        compare = Compare("exact-nan", fmt_name + "x2")
    elif d.determinism is Determinism.APPROX:
        ref, compare = _approx_ref(d.op)
    elif d.type is not None and d.type.is_float:
        ref = _float_ref(d.op, d.type)
        if d.determinism is Determinism.EXACT_NAN:
            compare = Compare("exact-nan", d.type.spelling)
    else:
        assert d.type is not None
        ref = _int_ref(d.op, d.type)
    expected = np.array([ref(*tp) for tp in tuples], dtype=BITS_DTYPE[out_bits])
    grid, wg = launch_1d(n, workgroup)
    src = kernel_text(name, decls, body)
    return Case(
        name,
        group,
        src,
        grid,
        wg,
        args,
        {"out": expected},
        compare,
        requires=_requires(d),
        description=d.summary,
    )


def _approx_case(d: InstrDef, group: str) -> Case:
    name = "alu_" + d.mnemonic.replace(".", "_")
    rng = rng_for(name)
    xs = _approx_inputs(d.op, rng)
    vals = [R.F32.from_float(float(x)) for x in xs]
    n = len(vals)
    body = guard_prologue(n) + [load_line(10, "a", 32), f"{d.mnemonic} r20, r10", store_line("out", 20, 32)]
    ref, compare = _approx_ref(d.op)
    grid, wg = launch_1d(n)
    return Case(
        name,
        group,
        kernel_text(name, [("a", "buffer", "u32", "read"), ("out", "buffer", "u32", "write")], body),
        grid,
        wg,
        {"a": np.array(vals, np.uint32), "out": out_buffer(n, 32)},
        {"out": np.array([ref(v) for v in vals], np.uint32)},
        compare,
        requires=_requires(d),
        description=d.summary,
    )


_GENERIC_CATEGORIES = {
    Category.INTEGER: "integer",
    Category.FLOAT: "float",
    Category.BITWISE: "bitwise",
    Category.CONVERT: "convert",
}


#: thread counts of the small-launch NaN cases: a whole workgroup of 1..17 threads, so the
#: emulator's arrays are short (at W = 8: 8..24 lanes) -- NumPy's SIMD loops and scalar tails
#: must agree (issue 11, item 12: ``np.fmax`` gave NaN for a signalling NaN in the tail)
NAN_LANE_COUNTS = (1, 2, 5, 8, 9, 17)


def _nan_pairs(fmt: R.FloatFormat) -> list[tuple[int, int]]:
    """(a, b) pairs with signalling / quiet NaNs of both signs against numbers and each other."""
    snan, qnan = fmt.inf | 1, fmt.canonical_nan
    nums = [fmt.from_float(1.0), fmt.from_float(-2.0), 0, fmt.sign_bit, fmt.inf, fmt.inf | fmt.sign_bit]
    nans = [snan, snan | fmt.sign_bit, qnan, qnan | fmt.sign_bit, fmt.inf | (1 << (fmt.mbits - 2)) | 3]
    out = []
    for i, x in enumerate(nans):
        y = nums[i % len(nums)]
        out += [(x, y), (y, x)]
    out += [(snan, qnan), (qnan, snan), (snan, snan)]
    return out


def _minmax_nan_cases() -> list[Case]:
    """min/max with signalling NaNs in launches of few threads, every float type."""
    out = []
    for d in INSTRUCTIONS:
        if d.op not in ("min", "max") or d.type is None or not d.type.is_float or d.category is not Category.FLOAT:
            continue
        fmt = _FMT[d.type]
        pairs = _nan_pairs(fmt)
        if d.type.is_packed:
            pairs = [(a | c << 16, b | e << 16) for (a, b), (c, e) in zip(pairs, pairs[3:] + pairs[:3], strict=True)]
        for n in NAN_LANE_COUNTS:
            tuples = [pairs[(i + n) % len(pairs)] for i in range(n)]
            out.append(_alu_case(d, group_of(d, "float.nan_lanes"), tuples, f"_nan_lanes{n}", workgroup=n))
    return out


def cases() -> list[Case]:
    """One case per integer, float, bitwise, conversion and setp record of the table, plus the
    small-launch min/max NaN cases."""
    out = _minmax_nan_cases()
    for d in INSTRUCTIONS:
        if d.determinism is Determinism.APPROX:
            out.append(_approx_case(d, "float.approx"))
        elif d.category in _GENERIC_CATEGORIES:
            out.append(_alu_case(d, group_of(d, _GENERIC_CATEGORIES[d.category])))
        elif d.category is Category.COMPARE and d.op == "setp" and d.type is not T.PRED:
            out.append(_alu_case(d, group_of(d, "compare")))
    return out
