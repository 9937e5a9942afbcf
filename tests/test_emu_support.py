"""Shared helpers for the emulator tests (no tests here): assembling small kernels and
an independent exact rounding reference built on fractions.Fraction."""

from __future__ import annotations

import math
import struct
from fractions import Fraction

import numpy as np

from anywave.asm import assemble
from anywave.emu import emulate

WIDTHS = (8, 16, 32, 64)


def kernel(body: str, args: str, registers: int = 32, extra: str = "") -> str:
    """A kernel named k with the given .arg lines and body."""
    return f".kernel k\n{args}\n.registers {registers}\n{extra}\n{body}\n.end\n"


ELEMENTWISE_ARGS = """
.arg a buffer u32 read
.arg b buffer u32 read
.arg c buffer u32 read
.arg out buffer u32 readwrite
"""


def elementwise(op_lines: str, words: int, a, b=None, c=None, out_words: int | None = None,
                W: int = 32) -> np.ndarray:
    """Run one instruction (op_lines, using ra, rb, rc -> rd as r4/r6/r8 -> r10, pairs for
    64-bit) per element. Inputs are uint32 arrays of words*n; returns out words."""
    out_words = out_words or words
    n = len(a) // words
    b = np.zeros_like(a) if b is None else b
    c = np.zeros_like(a) if c is None else c
    ld = {1: "b32", 2: "b64"}
    lo = {1: "", 2: ":r{}"}
    shift_in = {1: 2, 2: 3}[words]
    src = f"""
    mov.sr r0, sr_global_id_x
    movi.b32 r1, {shift_in}
    shl.b32 r2, r0, r1
    ld.device.{ld[words]} r4{lo[words].format(5)}, a[r2]
    ld.device.{ld[words]} r6{lo[words].format(7)}, b[r2]
    ld.device.{ld[words]} r8{lo[words].format(9)}, c[r2]
    {op_lines}
    movi.b32 r1, {({1: 2, 2: 3}[out_words])}
    shl.b32 r2, r0, r1
    st.device.{ld[out_words]} out[r2], r10{lo[out_words].format(11)}
    """
    out = np.zeros(n * out_words, np.uint32)
    m = assemble(kernel(src, ELEMENTWISE_ARGS), "t.wave")
    emulate(m, "k", grid=n, workgroup=1, args={"a": a, "b": b, "c": c, "out": out}, wave_width=W)
    return out


def f32bits(x) -> np.ndarray:
    return np.asarray(x, np.float32).view(np.uint32)


def f64words(x) -> np.ndarray:
    return np.asarray(x, np.float64).view(np.uint32)


def round_fraction(x: Fraction, p: int, emin: int, emax: int) -> float:
    """Exact value x rounded to nearest-even in a binary format with p significand bits,
    minimum normal exponent emin and maximum exponent emax; returned as a Python float
    (exact for the formats used), +-inf on overflow. Zero results come back as +0.0."""
    if x == 0:
        return 0.0
    sign = -1 if x < 0 else 1
    a = abs(x)
    e = a.numerator.bit_length() - a.denominator.bit_length()
    if Fraction(2) ** e > a:
        e -= 1
    if Fraction(2) ** (e + 1) <= a:
        e += 1
    e = max(e, emin)
    q = Fraction(2) ** (e - p + 1)
    n = a / q
    r = math.floor(n)
    rem = n - r
    if rem > Fraction(1, 2) or (rem == Fraction(1, 2) and r % 2 == 1):
        r += 1
    v = r * q
    if v >= Fraction(2) ** (emax + 1):
        return sign * math.inf
    return sign * float(v)


FORMATS = {"f64": (53, -1022, 1023), "f32": (24, -126, 127), "f16": (11, -14, 15), "bf16": (8, -126, 127)}


def f64_from_bits(lo: int, hi: int) -> float:
    return struct.unpack("<d", struct.pack("<II", lo, hi))[0]
