"""The generic evaluation of instruction bodies (:mod:`anywave.isa.bodies`): one lane, Python
integers for the bit patterns, the exact reference semantics of :mod:`refsem` for the float
primitives. It is the oracle the emulator's NumPy paths are tested against
(``tests/test_bodies.py``); it shares no code with the emulator.

A partial primitive reached outside its domain (a shift count >= the width, a zero divisor,
``MIN / -1``) raises :class:`UndefinedPrimitive`: a body that lets a target see such inputs is a bug.
"""

from __future__ import annotations

from collections.abc import Sequence

from anywave.conformance import refsem as R
from anywave.isa.expr import Expr, width

__all__ = ["UndefinedPrimitive", "evaluate", "run_body"]

_FMT = {"f16": R.F16, "bf16": R.BF16, "f32": R.F32, "f64": R.F64}


class UndefinedPrimitive(ValueError):
    """A partial primitive was evaluated outside its domain (names it and the operands)."""


def _signed(v: int, n: int) -> int:
    return v - (1 << n) if v >> (n - 1) & 1 else v


def _int_name(ty: str, signed: bool) -> str:
    return ("i" if signed else "u") + str(width(ty))


def evaluate(e: Expr, args: Sequence[int]) -> int:
    """The bit pattern ``e`` gives for source operands ``args`` (bit patterns; a pred is 0/1;
    an operand wider than its type is cut to it, as a register read is).

    Raises:
        UndefinedPrimitive: a partial primitive outside its domain.
        NotImplementedError: an approximate primitive (no exact value to compare with)."""
    memo: dict[Expr, int] = {}

    def go(n: Expr) -> int:
        hit = memo.get(n)
        if hit is not None:
            return hit
        v = _apply(n, [go(a) for a in n.args], args)
        memo[n] = v
        return v
    return go(e)


def _apply(n: Expr, xs: list[int], args: Sequence[int]) -> int:
    op = n.op
    w = width(n.ty)
    m = (1 << w) - 1
    if op == "arg":
        return int(args[n.value]) & m
    if op == "const":
        return n.value
    if n.args:
        aw = width(n.args[0].ty)
    if op in ("add", "sub", "mul", "and", "or", "xor"):
        a, b = xs
        return {"add": a + b, "sub": a - b, "mul": a * b, "and": a & b, "or": a | b, "xor": a ^ b}[op] & m
    if op == "not":
        return ~xs[0] & m
    if op in ("shl", "lshr", "ashr"):
        a, c = xs
        if c >= w:
            raise UndefinedPrimitive(f"{op} by {c} of a {n.ty} value")
        if op == "shl":
            return (a << c) & m
        return (a >> c) if op == "lshr" else (_signed(a, w) >> c) & m
    if op in ("udiv", "urem", "sdiv", "srem"):
        a, b = xs
        if b == 0:
            raise UndefinedPrimitive(f"{op} by zero")
        if op[0] == "u":
            return a // b if op == "udiv" else a % b
        sa, sb = _signed(a, w), _signed(b, w)
        if sa == -(1 << (w - 1)) and sb == -1:
            raise UndefinedPrimitive(f"{op} MIN / -1")
        q = abs(sa) // abs(sb) * (1 if (sa < 0) == (sb < 0) else -1)
        return (q if op == "sdiv" else sa - sb * q) & m
    if op == "clz":
        return w - xs[0].bit_length()
    if op == "popc":
        return bin(xs[0]).count("1")
    if op == "brev":
        return int(f"{xs[0]:0{w}b}"[::-1], 2)
    if op in ("eq", "ne", "ult", "ule", "slt", "sle"):
        a, b = xs
        if op[0] == "s":
            a, b = _signed(a, aw), _signed(b, aw)
        return int({"eq": a == b, "ne": a != b, "ult": a < b, "ule": a <= b, "slt": a < b, "sle": a <= b}[op])
    if op == "select":
        p, a, b = xs
        return a if p else b
    if op == "zext" or op == "bitcast":
        return xs[0]
    if op == "sext":
        return _signed(xs[0], aw) & m
    if op == "trunc":
        return xs[0] & m
    src_ty = n.args[0].ty if n.args else n.ty
    if op in ("fadd", "fsub", "fmul", "fdiv", "ffma", "fsqrt", "ffloor", "fceil", "ftrunc", "frint"):
        fn = getattr(R, "f_" + op[1:])
        return fn(_FMT[n.ty], *xs)
    if op == "fisnan":
        return int(R.f_setp(_FMT[src_ty], "unord", xs[0], xs[0]))
    if op in ("flt", "feq"):
        return int(R.f_setp(_FMT[src_ty], op[1:], *xs))
    if op == "fcvt":
        return R.cvt(n.ty, src_ty, xs[0])
    if op in ("f2s", "f2u"):
        return R.cvt(_int_name(n.ty, op == "f2s"), src_ty, xs[0])
    if op in ("s2f", "u2f"):
        return R.cvt(n.ty, _int_name(src_ty, op == "s2f"), xs[0])
    if op.startswith("fapprox."):
        raise NotImplementedError(f"{op} is approximate: it has no exact value")
    raise AssertionError(f"bodyeval: primitive {op} has no evaluation")


def run_body(e: Expr, args: Sequence[int]) -> int:
    """:func:`evaluate`, the result as a register holds it (16-bit types zero-extended)."""
    return evaluate(e, args)
