"""Facts about what instructions compute that more than one consumer needs: the identities
and combine operations of reductions, scans and atomics (docs/spec.md §8.7–§8.8).

The emulator, PTX and the C family each had their own table of reduction identities; they
read them here. Values are bit patterns (Python ints of the type's width), so a consumer
spells them as a literal or views them as its own dtype.

Identities (the value ``e`` with ``combine(e, x) = x`` for every ``x`` of the type):

* ``add``/``sub``/``or``/``xor``: integers 0; ``add`` on floats ``-0.0`` (the exact IEEE
  identity: ``x + (-0) = x`` for every x, ``+0`` included; spec §8.8).
* ``and``: all ones.
* ``min``: the largest value (signed ``2^(n-1) - 1``, unsigned all ones); floats the
  canonical NaN (minimumNumber ignores a NaN operand, spec §8.2).
* ``max``: the smallest value (signed ``-2^(n-1)``, unsigned 0); floats the canonical NaN.
* ``exch``/``cas`` have none.
"""

from __future__ import annotations

from dataclasses import dataclass

from anywave.isa.table import InstrDef
from anywave.isa.types import ScalarType

__all__ = ["CANONICAL_NAN", "COMBINES", "Reduction", "combine", "exclusive_first", "identity", "reduction"]

T = ScalarType

#: canonical quiet NaN bit pattern per float type (docs/spec.md §8.2, "NaN")
CANONICAL_NAN: dict[ScalarType, int] = {T.F32: 0x7FC00000, T.F64: 0x7FF8000000000000, T.F16: 0x7E00,
                                        T.BF16: 0x7FC0}
#: combine operations of the table (``InstrDef.combine``)
COMBINES = ("add", "sub", "min", "max", "and", "or", "xor", "exch", "cas")


@dataclass(frozen=True)
class Reduction:
    """How a reduction, scan or atomic record combines values.

    Attributes:
        combine: the combining operation (one of :data:`COMBINES`).
        type: the type it combines in.
        identity: bit pattern of the identity (None for ``exch``/``cas``).
        order: ``"butterfly"`` (``wred.add.f32``: the spec's fixed XOR-butterfly order, §8.8),
            ``"kogge-stone"`` (scans, §8.8), ``"any"`` (associative and commutative: every
            order gives the same bits) or ``"sequential"`` (atomics: lanes in order, §5).
        exclusive_first: for exclusive scans, the bits lane 0 receives (``+0.0`` / 0); None
            otherwise.
    """

    combine: str
    type: ScalarType
    identity: int | None
    order: str
    exclusive_first: int | None = None


def combine(rec: InstrDef) -> str:
    """The combine operation of a reduction, scan or atomic record (``InstrDef.combine``).

    Raises:
        ValueError: the record combines nothing (names it)."""
    if rec.combine is None:
        raise ValueError(f"{rec.mnemonic} is not a reduction, scan or atomic (it has no combine operation)")
    return rec.combine


def identity(what: InstrDef | str, type: ScalarType | None = None) -> int:  # noqa: A002
    """The identity of a combine operation in a type, as a bit pattern (int, ``type.bits`` wide).

    Args:
        what: a record with a ``combine`` (``wred.min.i32``, ``atom.local.and.b32`` ...) or a
            combine name (``"add"``, ``"min"`` ...).
        type: the type; defaults to the record's ``type`` (required with a name).

    Raises:
        ValueError: the operation has no identity (``exch``, ``cas``), is unknown, or the type
            is not an integer, bit or scalar float type (the message names both).
    """
    op = combine(what) if isinstance(what, InstrDef) else what
    t = type if type is not None else (what.type if isinstance(what, InstrDef) else None)
    if t is None:
        raise ValueError(f"identity({op!r}): give the type")
    if op not in COMBINES:
        raise ValueError(f"unknown combine operation {op!r}; valid: {', '.join(COMBINES)}")
    if op in ("exch", "cas"):
        raise ValueError(f"{op} has no identity")
    n = t.bits
    ones = (1 << n) - 1
    if t.is_float:
        if t not in CANONICAL_NAN:
            raise ValueError(f"identity({op!r}, {t.spelling}): only scalar float types (f16, bf16, f32, f64)")
        if op == "add":
            return 1 << (n - 1)  # -0.0
        if op in ("min", "max"):
            return CANONICAL_NAN[t]
        raise ValueError(f"identity({op!r}, {t.spelling}): {op} is not defined on floats")
    if t is T.PRED or n < 8:
        raise ValueError(f"identity({op!r}, {t.spelling}): not an integer or bit type")
    if op in ("add", "sub", "or", "xor"):
        return 0
    if op == "and":
        return ones
    if op == "min":
        return (ones >> 1) if t.is_signed else ones
    return (1 << (n - 1)) if t.is_signed else 0  # max


def exclusive_first(rec: InstrDef) -> int | None:
    """What lane 0 of an exclusive scan receives (bits: ``+0.0`` / 0, spec §8.8), None for
    records that are not exclusive scans."""
    return 0 if rec.op == "wscan" and rec.variant == "excl" else None


def reduction(rec: InstrDef) -> Reduction | None:
    """The :class:`Reduction` facts of a reduction, scan or atomic record; None for others."""
    op = rec.combine
    if op is None:
        return None
    assert rec.type is not None
    ident = None if op in ("exch", "cas") else identity(op, rec.type)
    if rec.op == "wscan":
        order = "kogge-stone"
    elif rec.op == "wred":
        order = "butterfly" if rec.type.is_float and op == "add" else "any"
    else:
        order = "sequential"
    return Reduction(op, rec.type, ident, order, exclusive_first(rec))
