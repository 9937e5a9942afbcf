"""Float literals of the ``.wave`` text: exact parsing and shortest round-trip printing.

* :func:`decimal_to_bits` rounds a decimal literal to an IEEE 754 binary format
  (binary16, bfloat16, binary32, binary64) *once*, round-to-nearest-even, from the exact
  decimal value (``fractions.Fraction``), so ``f32`` literals never suffer the double
  rounding of ``float()`` followed by a cast (IEEE 754-2019 §5.12.2 requires correctly
  rounded conversion from decimal character sequences).
* :func:`format_float_bits` prints the shortest decimal string that this parser maps
  back to the same bits (the ``repr`` idea of Steele & White / Grisu / Ryu), ``inf``,
  ``-inf``, ``nan`` for the canonical quiet NaN only, and raw hex bits (``0x7fc00001``)
  for every other NaN.
"""

from __future__ import annotations

import re
import struct
from fractions import Fraction

from anywave.isa.types import ScalarType

#: (exponent bits, stored mantissa bits) of each float format
FLOAT_FORMATS: dict[ScalarType, tuple[int, int]] = {
    ScalarType.F16: (5, 10),
    ScalarType.BF16: (8, 7),
    ScalarType.F32: (8, 23),
    ScalarType.F64: (11, 52),
}

#: the canonical quiet NaN of each format (docs/decisions.md, "Float semantics")
CANONICAL_NAN: dict[ScalarType, int] = {
    ScalarType.F16: 0x7E00,
    ScalarType.BF16: 0x7FC0,
    ScalarType.F32: 0x7FC00000,
    ScalarType.F64: 0x7FF8000000000000,
}

_DECIMAL = re.compile(r"([+-]?)(\d+\.?\d*|\.\d+)(?:[eE]([+-]?\d+))?")


class FloatLiteralError(ValueError):
    """A literal that is not a float of the requested type (message says why)."""


def is_decimal_literal(text: str) -> bool:
    """True if ``text`` has the shape of a decimal number (``1``, ``-2.5``, ``.5e-3``)."""
    return _DECIMAL.fullmatch(text) is not None


def _round_fraction(x: Fraction, ebits: int, mbits: int) -> int | None:
    """Round a positive exact value to (biased exponent << mbits | fraction); None on overflow."""
    bias = (1 << (ebits - 1)) - 1
    emin, emax = 1 - bias, bias
    n, d = x.numerator, x.denominator
    e = n.bit_length() - d.bit_length()
    if (n << max(-e, 0)) < (d << max(e, 0)):  # x < 2^e
        e -= 1
    e = max(e, emin)
    shift = e - mbits  # units of the last place
    if shift >= 0:
        q, r = divmod(n, d << shift)
        den = d << shift
    else:
        q, r = divmod(n << -shift, d)
        den = d
    twice = 2 * r
    if twice > den or (twice == den and q & 1):
        q += 1
    if q >= 1 << (mbits + 1):  # rounding carried into a new binade
        q >>= 1
        e += 1
    if e > emax:
        return None
    if q < 1 << mbits:  # subnormal (or zero); only possible at e == emin
        return q
    return ((e + bias) << mbits) | (q - (1 << mbits))


def decimal_to_bits(text: str, t: ScalarType) -> int:
    """Convert a decimal literal (``-1.5``, ``3``, ``1e-3``, ``inf``, ``-inf``, ``nan``) to
    the bit pattern of float type ``t`` (F16, BF16, F32 or F64), rounded once to nearest
    even from the exact decimal value.

    Returns an unsigned int of ``t.bits`` bits. Raises FloatLiteralError when the text is
    not a decimal literal or its magnitude rounds beyond the type's largest finite value
    (a literal never silently becomes infinity). Values below the smallest subnormal round
    to (signed) zero as IEEE 754 prescribes.
    """
    bits = _parse(text, t)
    if bits is None:
        ebits, mbits = FLOAT_FORMATS[t]
        largest = ((1 << ebits) - 2) << mbits | ((1 << mbits) - 1)
        raise FloatLiteralError(f"{text} overflows {t.spelling} (largest finite value "
                                f"{format_float_bits(largest, t)})")
    return bits


def _parse(text: str, t: ScalarType) -> int | None:
    """decimal_to_bits without the overflow error: None when the literal overflows."""
    ebits, mbits = FLOAT_FORMATS[t]
    sign_bit = 1 << (ebits + mbits)
    low = text.lower()
    if low in ("inf", "+inf", "-inf"):
        inf = ((1 << ebits) - 1) << mbits
        return inf | (sign_bit if low.startswith("-") else 0)
    if low == "nan":
        return CANONICAL_NAN[t]
    m = _DECIMAL.fullmatch(text)
    if m is None:
        raise FloatLiteralError(f"{text!r} is not a decimal number")
    sign, body, exp_text = m.groups()
    int_part, _, frac_part = body.partition(".")
    digits = (int_part + frac_part).lstrip("0")
    sign_mask = sign_bit if sign == "-" else 0
    if not digits:
        return sign_mask
    exp10 = int(exp_text or "0") - len(frac_part)
    # cheap range screen before building huge Fractions: |x| ~ 10^(exp10 + len(digits))
    magnitude = exp10 + len(digits)
    if magnitude > 330:
        return None
    if magnitude < -400:
        return sign_mask
    value = Fraction(int(digits)) * (Fraction(10) ** exp10)
    bits = _round_fraction(value, ebits, mbits)
    return None if bits is None else bits | sign_mask


def exact_to_bits(value: int | float | Fraction, t: ScalarType) -> int | None:
    """The bit pattern of float type ``t`` nearest (ties to even) to the exact value of a
    Python ``int``, ``float`` or ``Fraction``, rounded **once** (no intermediate binary64 or
    binary32 step: ``aw.bf16(2**24 + 2**16 + 1)`` is ``0x4b81``, not the double-rounded
    ``0x4b80``; spec §8.11). ``-0.0`` keeps its sign, ``±inf`` map to the infinities and every
    NaN to the canonical quiet NaN of ``t``. Returns None when the rounded magnitude exceeds
    the largest finite value (the caller reports the overflow).
    """
    ebits, mbits = FLOAT_FORMATS[t]
    sign_bit = 1 << (ebits + mbits)
    if isinstance(value, float):
        if value != value:
            return CANONICAL_NAN[t]
        if value in (float("inf"), float("-inf")):
            return (((1 << ebits) - 1) << mbits) | (sign_bit if value < 0 else 0)
        negative = value < 0 or (value == 0 and struct.pack("<d", value)[7] & 0x80 != 0)
    else:
        negative = value < 0
    return round_to_bits(Fraction(value), negative, t)


def round_to_bits(x: Fraction, negative: bool, t: ScalarType) -> int | None:
    """The exact value ``x`` rounded once, to nearest (ties to even), to float type ``t``, as
    its bit pattern with the sign bit set when ``negative`` (which gives zeros their sign:
    ``x`` itself is only used by magnitude). None when the rounded magnitude exceeds the
    largest finite value. The one rounding shared by the assembler's literals
    (:func:`exact_to_bits`) and the runtime ABI's float arguments
    (:func:`anywave.abi.scalar_word`)."""
    ebits, mbits = FLOAT_FORMATS[t]
    sign_mask = (1 << (ebits + mbits)) if negative else 0
    if x == 0:
        return sign_mask
    bits = _round_fraction(abs(x), ebits, mbits)
    return None if bits is None else bits | sign_mask


def bits_to_float(bits: int, t: ScalarType) -> float:
    """The value of a bit pattern as a Python float (exact: every format fits in binary64)."""
    ebits, mbits = FLOAT_FORMATS[t]
    if t is ScalarType.F64:
        return struct.unpack("<d", struct.pack("<Q", bits))[0]
    sign = -1.0 if bits >> (ebits + mbits) & 1 else 1.0
    e = (bits >> mbits) & ((1 << ebits) - 1)
    f = bits & ((1 << mbits) - 1)
    bias = (1 << (ebits - 1)) - 1
    if e == (1 << ebits) - 1:
        return sign * float("inf") if f == 0 else float("nan")
    if e == 0:
        return sign * f * 2.0 ** (1 - bias - mbits)
    return sign * ((1 << mbits) | f) * 2.0 ** (e - bias - mbits)


def _pretty(sci: str) -> str:
    """Lay out ``d.ddde±XX`` (from ``format(v, '.Ne')``) as Python's repr would."""
    mant, _, exp = sci.partition("e")
    sign = "-" if mant.startswith("-") else ""
    mant = mant.lstrip("-")
    digits = mant.replace(".", "").rstrip("0") or "0"
    x = int(exp)
    if -4 <= x < 16:
        if x >= 0:
            whole = digits[: x + 1].ljust(x + 1, "0")
            frac = digits[x + 1:] or "0"
            return f"{sign}{whole}.{frac}"
        return f"{sign}0.{'0' * (-x - 1)}{digits}"
    rest = "." + digits[1:] if len(digits) > 1 else ""
    return f"{sign}{digits[0]}{rest}e{'-' if x < 0 else '+'}{abs(x):02d}"


def format_float_bits(bits: int, t: ScalarType) -> str:
    """Text for a float bit pattern that :func:`decimal_to_bits` maps back to ``bits``.

    Shortest round-tripping decimal (``1.5``, ``-0.0``, ``1e-45``), ``inf``/``-inf``,
    ``nan`` for the canonical quiet NaN, and ``0x...`` raw bits for any other NaN.
    """
    ebits, mbits = FLOAT_FORMATS[t]
    width = ebits + mbits + 1
    exp_all = ((1 << ebits) - 1) << mbits
    if bits & exp_all == exp_all:
        if bits & ((1 << mbits) - 1) == 0:
            return "-inf" if bits >> (width - 1) else "inf"
        if bits == CANONICAL_NAN[t]:
            return "nan"
        return f"0x{bits:0{width // 4}x}"
    value = bits_to_float(bits, t)
    for precision in range(1, 18):
        text = f"{value:.{precision - 1}e}"
        if _parse(text, t) == bits:
            return _pretty(text)
    raise AssertionError(f"no round-tripping decimal for {bits:#x} ({t.spelling})")  # pragma: no cover
