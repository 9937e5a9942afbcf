"""Arithmetic rules every backend spells the same way: the spec's integer edge cases and
the rounding paths of narrowing conversions.

Integer division (spec §8.1, "Integer arithmetic"): ``div`` by 0 gives all ones (-1),
``rem`` by 0 gives the dividend; for signed types ``MIN / -1`` gives ``MIN`` and
``MIN % -1`` gives 0. Vendor division leaves these cases unspecified (PTX) or undefined (C),
so a backend divides by a *safe divisor* -- 1 wherever the divisor is 0 or (signed) the
pair is ``MIN, -1`` -- which already gives the overflow answers (``MIN / 1 = MIN``,
``MIN % 1 = 0``), and patches only the b = 0 lanes with :attr:`DivRule.zero_result`.

Narrowing (spec §8.11, "Conversions"): a conversion that could round twice (f64 → f16/bf16,
int → f16/bf16) goes through wider formats with *round-to-odd* and rounds to nearest even
only at the end, which gives the correctly rounded result (Boldo & Melquiond, "Emulation of
FMA and correctly rounded sums: proved algorithms using rounding to odd", IEEE TC 2008)
because each intermediate format has at least p + 2 bits for the next one's precision p.
"""

from __future__ import annotations

from dataclasses import dataclass

from anywave.isa.types import ScalarType

T = ScalarType


@dataclass(frozen=True)
class DivRule:
    """How to compute ``div``/``rem`` of one integer type without reaching undefined cases.

    Attributes:
        op: ``"div"`` or ``"rem"``.
        bits: 32 or 64.
        signed: the type is signed (the ``MIN, -1`` pair also needs the safe divisor).
        min_value: bits of the type's MIN (signed types; 0 otherwise).
        zero_result: ``"all_ones"`` (div) or ``"dividend"`` (rem): the result where b = 0.
    """

    op: str
    bits: int
    signed: bool
    min_value: int
    zero_result: str


def div_rule(op: str, t: ScalarType) -> DivRule:
    """The :class:`DivRule` of ``div``/``rem`` (``op``) on integer type ``t``."""
    if op not in ("div", "rem"):
        raise ValueError(f"div_rule: op must be 'div' or 'rem', not {op!r}")
    signed = t.is_signed
    return DivRule(op, t.bits, signed, (1 << (t.bits - 1)) if signed else 0,
                   "all_ones" if op == "div" else "dividend")


@dataclass(frozen=True)
class Step:
    """One rounding step of a conversion: to ``to`` with ``mode`` ``"exact"`` (lossless),
    ``"odd"`` (round to odd: truncate, set the last bit when inexact) or ``"rne"``
    (round to nearest, ties to even)."""

    mode: str
    to: ScalarType


def narrowing_steps(src: ScalarType, dst: ScalarType) -> tuple[Step, ...]:
    """The rounding path from ``src`` to a 16-bit float ``dst`` (f16/bf16), or ``()`` when one
    direct conversion is already correctly rounded (every other pair).

    * 32-bit integer: exact to f64, odd to f32, nearest to ``dst``;
    * 64-bit integer: odd to f64, odd to f32, nearest to ``dst``;
    * f64: odd to f32, nearest to ``dst``;
    * f32 (and 16-bit floats): one rounding to nearest.
    """
    if dst not in (T.F16, T.BF16):
        return ()
    if src.is_float:
        if src is T.F64:
            return (Step("odd", T.F32), Step("rne", dst))
        return ()
    first = Step("odd" if src.bits == 64 else "exact", T.F64)
    return (first, Step("odd", T.F32), Step("rne", dst))


def needs_f64(src: ScalarType | None, dst: ScalarType | None) -> bool:
    """Whether converting ``src`` to ``dst`` uses double precision (an f64 operand, or an f64
    step of :func:`narrowing_steps`): a device without fp64 refuses it."""
    if src is None or dst is None:
        return False
    if T.F64 in (src, dst):
        return True
    return any(s.to is T.F64 for s in narrowing_steps(src, dst))


def shift_limit(bits: int) -> int:
    """Shift counts (read as unsigned 32-bit) at or above ``bits`` give 0 for ``shl`` and
    ``shr.u`` and the sign fill for ``shr.s`` (spec §8.3): the count a backend clamps to is
    ``bits - 1`` for an arithmetic right shift."""
    return bits - 1
