"""Compile-time constants of the kernel language: Python values → register bit patterns.

Every literal (``aw.bf16(16842753)``, ``x * 1.0039062500009095`` with ``x: bf16``, a float
``Const`` parameter ...) is converted from its **exact** value — a Python ``int`` is exact, a
Python ``float`` is the exact binary64 value it holds — to the target type, rounded once to
nearest even (spec §8.11: double rounding through binary64 or binary32 is not conformant).
The rounding itself is the assembler's (:func:`anywave.asm.floats.exact_to_bits`), so a
literal in a kernel and the same literal in ``.wave`` text give the same bits.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np

from anywave.asm.floats import FLOAT_FORMATS, exact_to_bits, format_float_bits

from . import types as ty
from .types import DType

#: value range of each integer register type (two's complement / unsigned)
INT_RANGE = {"i32": (-(1 << 31), (1 << 31) - 1), "u32": (0, (1 << 32) - 1),
             "i64": (-(1 << 63), (1 << 63) - 1), "u64": (0, (1 << 64) - 1)}


class LiteralError(ValueError):
    """A constant that cannot be represented in the requested type (the message says why
    and what is valid); the frontend reports it as a CompileError at the literal."""


def largest_finite(t: DType) -> str:
    """The largest finite value of float type ``t``, as the shortest decimal that reads back."""
    ebits, mbits = FLOAT_FORMATS[t.scalar]
    return format_float_bits(((1 << ebits) - 2) << mbits | ((1 << mbits) - 1), t.scalar)


def literal_bits(value: Any, t: DType) -> int:
    """The bit pattern (an unsigned int of ``t.bits`` bits) of Python constant ``value`` as a
    value of kernel type ``t``.

    * float types: the exact value rounded once to nearest even; ``nan`` is the canonical
      quiet NaN, ``±inf`` and ``-0.0`` are kept; a finite value whose rounded magnitude is
      beyond the largest finite value is an error (a literal never silently becomes inf);
    * integer types: the value must be an ``int`` in the type's range (two's complement bits);
    * ``bool``: ``True``/``False`` (or an int) as 1/0.

    NumPy scalars are read by their exact value (``np.float32(0.1)`` is 0.100000001490116...).

    Raises:
        LiteralError: the value is not a number of a suitable kind or does not fit.
    """
    if isinstance(value, np.generic):
        value = value.item()
    if t is ty.bool_:
        if not isinstance(value, (bool, int)):
            raise LiteralError(f"cannot use {value!r} as a bool")
        return 1 if value else 0
    if t.is_float:
        if not isinstance(value, (bool, int, float, Fraction)):
            raise LiteralError(f"cannot use {value!r} as {t.name}")
        bits = exact_to_bits(int(value) if isinstance(value, bool) else value, t.scalar)
        if bits is None:
            raise LiteralError(f"literal {value!r} overflows {t.name} (largest finite: {largest_finite(t)})")
        return bits
    if isinstance(value, float):
        raise LiteralError(f"float literal {value!r} used where {t.name} is expected; "
                           f"write an integer or cast the other operand with aw.f32(...)")
    if not isinstance(value, (bool, int)):
        raise LiteralError(f"cannot use {value!r} as {t.name}")
    lo, hi = INT_RANGE[t.scalar.spelling]
    v = int(value)
    if not lo <= v <= hi:
        raise LiteralError(f"integer literal {v} does not fit in {t.name} (valid: {lo}..{hi})")
    return v & ((1 << t.bits) - 1)
