"""Cases whose kernels are written in the kernel language and compiled by ``@aw.kernel``, so
every target checks what the compiler emits (issue 11: both classes were wrong on every
target while the hand-written ISA cases passed):

* **literal conversions** (groups ``literals``, ``literals.f16``, ``literals.bf16``,
  ``literals.f64``): ``out[k] = aw.T(v)`` for constants ``v`` that are ties, need more than
  53 significant bits, are subnormal in ``T`` or sit next to a rounding boundary; plus
  ``x * literal`` in bf16. Expected bits: :meth:`refsem.FloatFormat.round` of the exact value
  (``fractions.Fraction`` of the Python int or float), rounded once;
* **64-bit shift counts** (group ``shift64.int64``): ``x << c``, ``x >> c`` for u64/i64 and
  u32/i32 values with u64 counts including 2^32, 2^32 + 1, 2^63 and 2^64 - 1. Expected: the
  language's rule (Python's result after wrapping: counts >= the width give 0, or -1 for
  ``>>`` of a negative signed value), computed with Python ints.

The kernel text of a case is the compiler's output, disassembled
(``.loc`` and ``.version`` lines dropped), so the suite stays ``.wave`` data like every other
group.
"""

# no ``from __future__ import annotations``: the kernels below are annotated with closure
# variables (aw.In[ut]), which must be evaluated where the kernel is defined
from fractions import Fraction
from typing import Any

import numpy as np

from anywave.conformance import refsem as R
from anywave.conformance.build import BITS_DTYPE, SENTINEL, launch_1d, rng_for
from anywave.conformance.case import EXACT, Case

#: (type, values): literals of each class; ints are exact, floats are their exact binary64 value
LITERALS: dict[str, list[int | float]] = {
    "f32": [1152921573326323713, 2**24 + 1, 2**24 + 3, 16777217.0, 0.1, -(2**62 + 2**38 + 1),
            2**63 + 2**39 + 1, 1e-45, 2.0**-150, 3 * 2.0**-150, -0.0, 1 / 3, 2**100 + 2**76 + 1,
            3.4028234e38],
    "f16": [2049, 2051, 1 + 2**-11 + 2**-40, 65519, 6.0e-8, -0.1, 2**15 + 2**4 + 1, 2.0**-25, 3 * 2.0**-25,
            1 / 3, 2**-14 - 2**-30],
    "bf16": [16842753, -16842753, 1.0039062500009095, 1 + 2**-8, 1 + 3 * 2**-8, 2**100 + 2**93 + 1, 3.0e-39,
             257.0, 3.0e38, 2**-133 + 2**-150, 1 / 3],
    "f64": [2**53 + 1, 2**53 + 3, 2**60 + 2**7 + 1, 2**64 - 1, 0.1, 2**1000 + 2**947 + 1, 5e-324, -(2**70 + 2**17)],
}

_FMT = {"f16": R.F16, "bf16": R.BF16, "f32": R.F32, "f64": R.F64}
_GROUP = {"f32": "literals", "f16": "literals.f16", "bf16": "literals.bf16", "f64": "literals.f64"}

#: (x, literal) pairs of the bf16 * literal case
BF16_PRODUCTS: list[tuple[float, float]] = [(1.0, 1.0039062500009095), (3.0, 1.0039062500009095),
                                            (1.0, 16842753.0), (-2.0, 1 + 2**-8 + 2**-30), (0.5, 257.0)]

SHIFT_COUNTS64 = [0, 1, 31, 32, 33, 63, 64, 65, 255, 2**32 - 1, 2**32, 2**32 + 1, 2**33 + 3, 2**63, 2**64 - 1]


def exact_bits(fmt: R.FloatFormat, value: int | float) -> int:
    """Independent expectation: the exact value rounded once (refsem's rounding)."""
    if isinstance(value, float):
        return fmt.from_float(value)
    return fmt.round(1 if value < 0 else 0, abs(Fraction(value)))


def _source(kern: Any, **consts: Any) -> tuple[str, tuple[str, ...]]:
    """The compiler's output for ``kern`` (with the compile-time parameters ``consts``: a type
    parameter, ``local_bytes``, an ``aw.Const``) as ``.wave`` text, and the capabilities it needs."""
    from anywave.asm import disassemble

    m = kern.compile(**consts)
    # module-level .version and per-instruction .loc lines do not belong in a group's shared text
    # (by their first word: .local_memory stays)
    text = "\n".join(ln for ln in disassemble(m).splitlines()
                     if ln.split()[:1] not in ([".loc"], [".version"]))
    return text + "\n", tuple(m.kernels[0].capabilities.spellings())


def _dtypes() -> dict[str, Any]:
    import anywave as aw

    return {"f16": aw.f16, "bf16": aw.bf16, "f32": aw.f32, "f64": aw.f64}


def _literal_kernel(tname: str, values: tuple[int | float, ...], name: str) -> Any:
    import anywave as aw

    dt = _dtypes()[tname]

    def lit(out: aw.Out[dt]) -> None:  # type: ignore[valid-type]
        for k in aw.static_range(len(values)):
            out[k] = dt(values[k])

    return aw.kernel(lit, name=name)


def _bf16_product_kernel(lits: tuple[float, ...], name: str) -> Any:
    import anywave as aw

    def bf16_mul_literal(x: aw.In[aw.bf16], out: aw.Out[aw.bf16]) -> None:
        for k in aw.static_range(len(lits)):
            out[k] = x[k] * lits[k]

    return aw.kernel(bf16_mul_literal, name=name)


def literal_cases() -> list[Case]:
    out: list[Case] = []
    for tname, values in LITERALS.items():
        fmt = _FMT[tname]
        name = f"literal_{tname}"
        src, caps = _source(_literal_kernel(tname, tuple(values), name))
        want = np.array([exact_bits(fmt, v) for v in values], BITS_DTYPE[fmt.bits])
        out.append(Case(name, _GROUP[tname], src, (1, 1, 1), (1, 1, 1),
                        {"out": np.full(len(values), SENTINEL[fmt.bits], BITS_DTYPE[fmt.bits])},
                        {"out": want}, EXACT, requires=caps,
                        description=f"{tname} literals rounded once from their exact value"))
    xs = [x for x, _ in BF16_PRODUCTS]
    lits = tuple(v for _, v in BF16_PRODUCTS)
    name = "literal_bf16_mul"
    src, caps = _source(_bf16_product_kernel(lits, name))
    xbits = [R.BF16.from_float(x) for x in xs]
    want = np.array([R.f_mul(R.BF16, xb, exact_bits(R.BF16, v)) for xb, v in zip(xbits, lits, strict=True)],
                    np.uint16)
    out.append(Case(name, "literals.bf16", src, (1, 1, 1), (1, 1, 1),
                    {"x": np.array(xbits, np.uint16), "out": np.full(len(lits), SENTINEL[16], np.uint16)},
                    {"out": want}, EXACT, requires=caps, description="bf16 value times a float literal"))
    return out


# ----------------------------------------------------------------------------- 64-bit shift counts

def _shift_kernel(bits: int, name: str) -> Any:
    import anywave as aw

    ut, st = (aw.u64, aw.i64) if bits == 64 else (aw.u32, aw.i32)

    def shifts(x: aw.In[ut], xs: aw.In[st], c: aw.In[aw.u64], shl: aw.Out[ut],  # type: ignore[valid-type]
               shr: aw.Out[ut], sar: aw.Out[st], n: aw.i32) -> None:  # type: ignore[valid-type]
        i = aw.global_id(0)
        if i < n:
            shl[i] = x[i] << c[i]
            shr[i] = x[i] >> c[i]
            sar[i] = xs[i] >> c[i]

    return aw.kernel(shifts, name=name)


def shift_cases() -> list[Case]:
    out: list[Case] = []
    for bits in (64, 32):
        name = f"shift{bits}_by_u64_count"
        mask = (1 << bits) - 1
        rng = rng_for(name)
        values = [1, mask, 1 << (bits - 1), 0x1234_5679_9ABC_DEF1 & mask] + \
            [int(v) & mask for v in rng.integers(0, 1 << 62, 4)]
        rows = [(v, c) for v in values for c in SHIFT_COUNTS64]
        n = len(rows)
        ud = BITS_DTYPE[bits]
        sd = np.int64 if bits == 64 else np.int32
        x = np.array([v for v, _ in rows], ud)
        c = np.array([c for _, c in rows], np.uint64)
        shl, shr, sar = [], [], []
        for v, cnt in rows:
            k = min(cnt, bits)  # Python's shift after wrapping: counts >= the width act like the width
            sv = v - (1 << bits) if v >> (bits - 1) else v
            shl.append((v << k) & mask)
            shr.append(v >> k)
            sar.append((sv >> k) & mask)
        src, caps = _source(_shift_kernel(bits, name))
        grid, wg = launch_1d(n)
        args = {"x": x, "xs": x.view(sd).copy(), "c": c, "shl": np.full(n, SENTINEL[bits], ud),
                "shr": np.full(n, SENTINEL[bits], ud), "sar": np.full(n, SENTINEL[bits], ud).view(sd).copy(),
                "n": np.int32(n)}
        exp = {"shl": np.array(shl, ud), "shr": np.array(shr, ud), "sar": np.array(sar, ud).view(sd)}
        out.append(Case(name, "shift64.int64", src, grid, wg, args, exp, EXACT, requires=caps,
                        description=f"{bits}-bit values shifted by 64-bit counts (never cut to 32 bits)"))
    return out


def cases() -> list[Case]:
    """Every case of this module."""
    return literal_cases() + shift_cases()
