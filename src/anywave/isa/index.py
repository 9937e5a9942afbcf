"""Find an instruction record by what it computes: ``(op, variant, type)`` -> record.

Consumers that emit instructions (the compiler's frontend and passes, the conformance
generators) ask for "``add`` on ``u32``" or "a device load of ``b32`` with a 64-bit
offset" instead of rebuilding a mnemonic with an f-string. The answer is the table's record
(:class:`~anywave.isa.table.InstrDef`); :func:`mnemonic` is its spelling.

Resolution: the records with the given ``op`` (and ``variant``, ``src_type``, address width
where given) whose ``type`` is the asked type; failing that, those that *serve* it
(``InstrDef.types``: a ``bN`` record serves ``uN``/``iN``, the sign-free integer records
``add``/``sub``/``mul``/``neg``/``mad .iN`` serve ``uN``). Exactly one must remain.
"""

from __future__ import annotations

from functools import lru_cache

from anywave.errors import WaveError
from anywave.isa.table import BY_MNEMONIC, INSTRUCTIONS, InstrDef
from anywave.isa.types import ScalarType

__all__ = ["InstructionLookupError", "lookup", "mnemonic", "records"]

_BY_OP: dict[str, tuple[InstrDef, ...]] = {}
for _d in INSTRUCTIONS:
    _BY_OP[_d.op] = _BY_OP.get(_d.op, ()) + (_d,)
_BY_SEM: dict[str, tuple[InstrDef, ...]] = {}
for _d in INSTRUCTIONS:
    _BY_SEM[_d.sem] = _BY_SEM.get(_d.sem, ()) + (_d,)
del _d


class InstructionLookupError(WaveError, KeyError):
    """No record, or more than one, matches a lookup; the message names the query and lists
    the records (or the types) that would be valid. (Also a KeyError, as the old
    ``lookup(mnemonic)`` raised.)"""

    def __str__(self) -> str:  # KeyError would print the message in quotes
        return str(self.args[0]) if self.args else ""


def _type(t: ScalarType | str | None, what: str) -> ScalarType | None:
    if t is None or isinstance(t, ScalarType):
        return t
    if isinstance(t, str):
        try:
            return ScalarType.parse(t)
        except ValueError as e:
            raise InstructionLookupError(f"{what}: {e}") from None
    scalar = getattr(t, "scalar", None)  # a compiler DType
    if isinstance(scalar, ScalarType):
        return scalar
    raise InstructionLookupError(f"{what}: expected a ScalarType or its spelling, got {t!r}")


def records(op: str) -> tuple[InstrDef, ...]:
    """Every record of operation ``op`` (or, for a dotted ``domain.op``, of semantic key
    ``sem``), in table order; () if none."""
    return _BY_SEM.get(op, ()) if "." in op else _BY_OP.get(op, ())


def lookup(op: str, variant: str | None = None, type: ScalarType | str | None = None, *,  # noqa: A002
           src_type: ScalarType | str | None = None, addr64: bool = False) -> InstrDef:
    """The one instruction record computing ``op`` (the record's ``op``, e.g. ``"add"``, or
    its semantic key ``sem``, e.g. ``"pred.and"``) with the given selectors.

    Args:
        op: the operation (``InstrDef.op``) or semantic key (``InstrDef.sem``). A complete
            mnemonic (``"add.f32"``, ``"barrier"``) given alone is accepted too.
        variant: ``InstrDef.variant`` (``"lt"`` for ``setp.lt``, ``"device"`` for device
            loads, ``"local.add"`` for atomics, ``"incl"`` for scans); None: any.
        type: the value type (``InstrDef.type``; for ``cvt`` the destination type), a
            :class:`ScalarType`, its spelling (``"u32"``) or a compiler dtype; None: any.
            A record that does not compute in ``type`` but serves it (``InstrDef.types``)
            is taken when no record computes in it exactly.
        src_type: for conversions and MMA, the source type; None: any.
        addr64: the device-address form with a 64-bit offset pair (``ld.device.b32.o64``).

    Returns:
        The :class:`~anywave.isa.table.InstrDef`.

    Raises:
        InstructionLookupError (a WaveError and KeyError): no record matches (the message
        lists the types, variants or records that would), or several do (it lists them).
    """
    if variant is None and type is None and src_type is None and not addr64 and op in BY_MNEMONIC \
            and len(records(op)) <= 1:
        return BY_MNEMONIC[op]
    return _lookup(op, variant, _type(type, f"lookup({op!r})"), _type(src_type, f"lookup({op!r})"), bool(addr64))


@lru_cache(maxsize=4096)
def _lookup(op: str, variant: str | None, t: ScalarType | None, src: ScalarType | None,
            addr64: bool) -> InstrDef:
    cands = records(op)
    query = _describe(op, variant, t, src, addr64)
    if not cands:
        raise InstructionLookupError(f"no instruction has operation {op!r}; valid operations: "
                                     f"{', '.join(sorted(_BY_OP))}")
    sel = [d for d in cands if (variant is None or d.variant == variant)
           and (src is None or d.src_type is src) and d.addr64 == addr64]
    if not sel:
        valid = sorted({_describe(op, d.variant, None, d.src_type, d.addr64) for d in cands})
        raise InstructionLookupError(f"no instruction {query}; {op!r} exists as: {'; '.join(valid)}")
    if t is not None:
        exact = [d for d in sel if d.type is t]
        sel = exact or [d for d in sel if t in d.types]
        if not sel:
            valid = sorted({d.type.spelling for d in cands if d.type is not None
                            and (variant is None or d.variant == variant)})
            raise InstructionLookupError(f"no instruction {query}; types of {op!r}"
                                         f"{'' if variant is None else f' {variant!r}'}: "
                                         f"{', '.join(valid) or '(none)'}")
    if len(sel) > 1:
        raise InstructionLookupError(f"{query} is ambiguous: {', '.join(d.mnemonic for d in sel)} "
                                     f"(give the variant, type, src_type or addr64)")
    return sel[0]


def _describe(op: str, variant: str | None, t: ScalarType | None, src: ScalarType | None, addr64: bool) -> str:
    parts = [f"op {op!r}"]
    if variant is not None:
        parts.append(f"variant {variant!r}")
    if t is not None:
        parts.append(f"type {t.spelling}")
    if src is not None:
        parts.append(f"src_type {src.spelling}")
    if addr64:
        parts.append("addr64")
    return ", ".join(parts)


def mnemonic(op: str, variant: str | None = None, type: ScalarType | str | None = None, *,  # noqa: A002
             src_type: ScalarType | str | None = None, addr64: bool = False) -> str:
    """The mnemonic of :func:`lookup` ``(op, variant, type, ...)`` (``mnemonic("add", type="u32")``
    is ``"add.i32"``, ``mnemonic("ld", "device", "b32", addr64=True)`` is ``"ld.device.b32.o64"``).

    Raises:
        InstructionLookupError: as :func:`lookup`.
    """
    return lookup(op, variant, type, src_type=src_type, addr64=addr64).mnemonic
