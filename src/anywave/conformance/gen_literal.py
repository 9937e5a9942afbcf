"""Conformance cases for IEEE special cases with literal operands (group ``alu_literal``).

The ALU groups feed every operand from a buffer, so a driver never sees an operand's value.
Here the operands are ``movi`` immediates, the form a compiler may fold (issue 31, item 14:
lavapipe 22.3 gave ``x / 0.0 = +0`` and ``0.0 + -0.0 = -0.0`` for literals, right answers for the
same values at run time). Each f32 operation (add, sub, mul, div, fma) has two kernels: every
operand a literal (``lit_<op>_ll``), and the first operand loaded from a buffer with the others
literal (``lit_<op>_rl``). Every thread evaluates every pair (or triple) of special values and
stores the results in its own row.

Expected values are computed independently of the emulator, with NumPy's IEEE binary32
arithmetic (``np.float32`` add, subtract, multiply, divide); fma from float64, exact for these
operands (their products and sums have at most 3 significant bits). NaN results compare as NaN
(``exact-nan``: the payload is not specified).
"""

from __future__ import annotations

import itertools

import numpy as np

from anywave.conformance.case import Case, Compare

#: special binary32 values (bits): +0, -0, +inf, -inf, qNaN, 1, -1, 2, 0.5, the smallest
#: subnormal, the largest finite, the smallest normal
SPECIALS = (0x00000000, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0x3F800000, 0xBF800000, 0x40000000,
            0x3F000000, 0x00000001, 0x7F7FFFFF, 0x00800000)
#: fma products a * b: these values in pairs; addends c: FMA_ADDENDS. Their products and sums are
#: exact in float64 (so the reference is exact); few, since the exact fma emulation is long code
FMA_SPECIALS = (0x00000000, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0x3F800000)
FMA_ADDENDS = (0x7F800000, 0x80000000, 0xBF800000)

_BINARY = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide,
}
ROWS = 16  # threads (one row of results each)


def _f(bits: int) -> np.float32:
    return np.array([bits], np.uint32).view(np.float32)[0]


def _ref_binary(op: str, a: int, b: int) -> int:
    with np.errstate(all="ignore"):
        r = _BINARY[op](np.float32(_f(a)), np.float32(_f(b)), dtype=np.float32)
    return int(np.array([r], np.float32).view(np.uint32)[0])


def _ref_fma(a: int, b: int, c: int) -> int:
    with np.errstate(all="ignore"):
        r = np.float32(np.float64(_f(a)) * np.float64(_f(b)) + np.float64(_f(c)))
    return int(np.array([r], np.float32).view(np.uint32)[0])


def _operands(op: str) -> list[tuple[int, ...]]:
    if op == "fma":
        return list(itertools.product(FMA_SPECIALS, FMA_SPECIALS, FMA_ADDENDS))
    return list(itertools.product(SPECIALS, repeat=2))


def _kernel(name: str, op: str, tuples: list[tuple[int, ...]], runtime_first: bool) -> str:
    n = len(tuples)
    lines = [f".kernel {name}", ".arg x buffer u32 read", ".arg y buffer u32 write", ".registers 8",
             "    mov.sr        r0, sr_global_id_x",
             f"    movi.b32      r1, {4 * n}",
             "    mul.i32       r6, r0, r1"]  # r6: this thread's row (bytes)
    for k, t in enumerate(tuples):
        if runtime_first:
            lines.append(f"    ld.device.b32 r2, x[r6+{4 * k}]")
        else:
            lines.append(f"    movi.b32      r2, {t[0]:#x}")
        lines.append(f"    movi.b32      r3, {t[1]:#x}")
        if op == "fma":
            lines.append(f"    movi.b32      r4, {t[2]:#x}")
            lines.append("    fma.f32       r5, r2, r3, r4")
        else:
            lines.append(f"    {op}.f32       r5, r2, r3")
        lines.append(f"    st.device.b32 y[r6+{4 * k}], r5")
    lines += ["    halt", ".end", ""]
    return "\n".join(lines)


def cases() -> list[Case]:
    out: list[Case] = []
    for op in ("add", "sub", "mul", "div", "fma"):
        tuples = _operands(op)
        if op == "fma":
            want_row = [_ref_fma(*t) for t in tuples]
        else:
            want_row = [_ref_binary(op, *t) for t in tuples]
        want = np.tile(np.array(want_row, np.uint32), ROWS)
        x = np.tile(np.array([t[0] for t in tuples], np.uint32), ROWS)
        for form, runtime_first in (("ll", False), ("rl", True)):
            name = f"lit_{op}_{form}"
            what = "all operands literal" if form == "ll" else "first operand from a buffer, the others literal"
            out.append(Case(name, "alu_literal", _kernel(name, op, tuples, runtime_first), (1, 1, 1), (ROWS, 1, 1),
                            {"x": x.copy(), "y": np.zeros_like(want)}, {"y": want}, compare=Compare("exact-nan", "f32"),
                            description=f"{op}.f32 of {len(tuples)} special-value operand sets, {what} "
                                        "(NumPy binary32 reference)"))
    return out
