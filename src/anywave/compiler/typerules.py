"""Type rules of the kernel language: how literals are typed, how two operands meet, which
conversions exist and which instruction implements an operation on a type.

The rules (docs in :mod:`anywave.compiler`):

* a Python literal takes the type of the typed operand it meets; alone, ``bool`` is bool,
  an ``int`` is i32 (a literal outside i32 is an error: write ``aw.i64(...)``), a ``float``
  is f32; a float literal never meets an integer value;
* two typed operands meet only within one kind: the wider of two floats (f16 with bf16 gives
  f32), the wider of two integers of the same signedness; everything else (int with float,
  signed with unsigned) needs an explicit cast;
* conversions are ``cvt.<to>.<from>`` where the table has one; a bitcast keeps the bits and
  needs types of one width.

The functions here are pure (no IR, no AST): they return a type or a mnemonic, or raise
:class:`TypeRuleError` with the complete message; the frontend reports it as a
:class:`~anywave.compiler.errors.CompileError` at the expression (or literal) at fault.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from anywave.isa import InstructionLookupError, mnemonic
from anywave.isa.table import BY_MNEMONIC

from . import types as ty
from .bindings import describe
from .types import DType

#: the range of Python ints a literal of each integer type may hold
INT_RANGE = {"i32": (-(1 << 31), (1 << 31) - 1), "u32": (0, (1 << 32) - 1),
             "i64": (-(1 << 63), (1 << 63) - 1), "u64": (0, (1 << 64) - 1)}


#: ``TypeRuleError.literal`` when no Python constant is at fault
NO_LITERAL: Any = object()


class TypeRuleError(Exception):
    """A type rule refuses: ``message`` is complete; ``literal`` is the Python constant at
    fault when there is one, else :data:`NO_LITERAL` (so the error can point at that literal)."""

    def __init__(self, message: str, literal: Any = NO_LITERAL) -> None:
        super().__init__(message)
        self.message = message
        self.literal = literal


def literal_type(value: Any) -> DType:
    """The type a Python constant gets on its own: bool, i32 or f32; a NumPy scalar its own type
    (narrow integers widened to i32/u32).

    Raises:
        TypeRuleError: an int outside i32, or a value that is not a number or bool.
    """
    if isinstance(value, np.generic):  # a NumPy scalar on its own (aw.finfo(aw.f16).max): its own type
        t = ty.bool_ if isinstance(value, np.bool_) else ty.from_numpy(value.dtype)
        if t is not None:
            return ty.value_type_of_element(t)
    if isinstance(value, bool):
        return ty.bool_
    if isinstance(value, int):
        lo, hi = INT_RANGE["i32"]
        if lo <= value <= hi:
            return ty.i32
        raise TypeRuleError(f"integer literal {value} does not fit in i32; write aw.i64({value}) for a 64-bit "
                            "value", literal=value)
    if isinstance(value, float):
        return ty.f32
    raise TypeRuleError(f"{describe(value)} is not a kernel value; valid: numbers, booleans and typed values")


def literal_fits(lit: Any, t: DType) -> DType:
    """The type of literal ``lit`` used with a value of type ``t`` (``t``; a float literal
    with an integer value is refused: TypeRuleError)."""
    if isinstance(lit, float) and not t.is_float:
        raise TypeRuleError(f"float literal {lit!r} used with an {t.name} value; cast the value with "
                            f"aw.f32(...) or write an integer literal", literal=lit)
    return t


def common_type(ta: DType | None, a: Any, tb: DType | None, b: Any, what: str) -> DType:
    """The type operands ``a`` (type ``ta``, None for a Python constant) and ``b`` meet in
    (``what``: the operation, for the message). A predicate counts as bool.

    Raises:
        TypeRuleError: the types differ in kind or signedness, or a literal does not fit.
    """
    if ta is ty.pred:
        ta = ty.bool_
    if tb is ty.pred:
        tb = ty.bool_
    if ta is None and tb is None:
        return literal_type(a) if not isinstance(b, float) else ty.f32
    if ta is None:
        return literal_fits(a, tb)  # type: ignore[arg-type]
    if tb is None:
        return literal_fits(b, ta)
    if ta is tb:
        return ta
    if ta.is_float and tb.is_float:
        if {ta, tb} == {ty.f16, ty.bf16}:
            return ty.f32
        return ta if ta.bits >= tb.bits else tb
    if ta.is_int and tb.is_int and ta.is_signed == tb.is_signed:
        return ta if ta.bits >= tb.bits else tb
    if ta.is_float != tb.is_float:  # name the integer operand and the float type it would need
        ft, it = (ta, tb) if ta.is_float else (tb, ta)
        hint = f"cast the {it.name} operand, e.g. aw.{ft.name}(...), or the {ft.name} one to an integer type"
    else:
        hint = "cast one side, e.g. aw.i32(x) or aw.u32(x)"
    raise TypeRuleError(f"operands of {what} have different types {ta.name} and {tb.name}; {hint} "
                        "(the language never converts silently between signedness or int/float)")


def alu_mnemonic(op: str, t: DType, what: str | None = None) -> str:
    """The table mnemonic of operation ``op`` (``add``, ``shl``, ``floor`` ...) on values of
    type ``t`` (:func:`anywave.isa.mnemonic`: the record computing in ``t``, else the one
    serving it: integer add/sub/mul/neg/mad ``.i32``/``.i64`` for both signednesses, bit
    operations ``.b32``/``.b64``; bool computes as u32).

    Raises:
        TypeRuleError: the instruction set has no such instruction (the message lists the
            types it has ``op`` for; ``what`` names the operation as the user wrote it).
    """
    hit = _ALU.get((op, id(t)))
    if hit is not None and hit[0] is t:
        return hit[1]
    try:
        m = mnemonic(op, type=ty.u32 if t is ty.bool_ else t)
    except InstructionLookupError:
        raise TypeRuleError(f"{what or op!r} is not supported for type {t.name}" + valid_types_hint(op)) from None
    _ALU[(op, id(t))] = (t, m)
    return m


#: (op, id(type)) -> (type, mnemonic) of :func:`alu_mnemonic`'s successful lookups (the table
#: does not change; the type is kept so that its id cannot be reused)
_ALU: dict[tuple[str, int], tuple[DType, str]] = {}


def compare_mnemonic(cmp: str, t: DType) -> str:
    """``setp.<cmp>.<type>`` for comparison ``cmp`` (lt, le, gt, ge, eq, ne) on ``t`` (bool
    compares as u32). Raises TypeRuleError when the table has none."""
    try:
        return mnemonic("setp", cmp, ty.u32 if t is ty.bool_ else t)
    except InstructionLookupError:
        raise TypeRuleError(f"comparison {cmp} is not supported for {t.name}") from None


def conversion_mnemonic(src: DType, dst: DType, src_name: str | None = None) -> str:
    """``cvt.<dst>.<src>``: value conversion (int↔float round to nearest even / truncate with
    saturation, int↔int wrap or extend). Raises TypeRuleError when there is none."""
    try:
        return mnemonic("cvt", type=dst, src_type=src)
    except InstructionLookupError:
        raise TypeRuleError(f"no conversion from {src_name or src.name} to {dst.name}") from None


def check_bitcast(src: DType, dst: DType, src_name: str) -> None:
    """A bitcast keeps the bits: ``src`` and ``dst`` must be equally wide and ``dst`` not bool
    (TypeRuleError otherwise; ``src_name``: the operand's type as the user sees it)."""
    if src.scalar.bits != dst.scalar.bits or dst is ty.bool_:
        raise TypeRuleError(f"bitcast needs types of the same width: {src_name} is {src.scalar.bits} bits, "
                            f"{dst.name} is {dst.scalar.bits}")


def valid_types_hint(op: str) -> str:
    """`` (the instruction set has <op> for: f32, i32 ...)``, or "" when it has none."""
    valid = sorted({m.split(".", 1)[1] for m in BY_MNEMONIC if m.split(".")[0] == op and m.count(".") == 1})
    return f" (the instruction set has {op} for: {', '.join(valid)})" if valid else ""


class TypeRules:
    """The rules above as one object: what :class:`~anywave.compiler.frontend_ops.IRBuilder`
    consults for every literal, operand pair, operation and conversion (:data:`RULES`, unless a
    builder is given other rules). Stateless; each method is the function of the same name."""

    literal_type = staticmethod(literal_type)
    literal_fits = staticmethod(literal_fits)
    common_type = staticmethod(common_type)
    alu_mnemonic = staticmethod(alu_mnemonic)
    compare_mnemonic = staticmethod(compare_mnemonic)
    conversion_mnemonic = staticmethod(conversion_mnemonic)
    check_bitcast = staticmethod(check_bitcast)
    valid_types_hint = staticmethod(valid_types_hint)


#: the kernel language's type rules
RULES = TypeRules()
