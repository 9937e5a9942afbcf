"""What every ALU instruction computes, as one expression over :mod:`anywave.isa.expr`.

:func:`body` gives the expression of a record of the integer, float, bitwise, compare /
select / predicate-logic and conversion domains; :data:`BODIES` holds one builder per semantic
key (``InstrDef.sem``), which reads the record's type and variant. The expressions restate the
record summaries of :mod:`anywave.isa.table` and docs/spec.md §8 (integer edge cases §8.1,
floats §8.2, shifts and bit counts §8.3, compares §8.4, conversions §8.11) in primitives.

Operands (:func:`anywave.isa.expr.arg`) are the record's source operands in order; a source
register of a ``bN``/``iN``/``uN`` record reads as ``b32``/``b64``, a predicate as ``pred``, a
float register as its float type (f16 / bf16: the low 16 bits), a packed ``f16x2`` / ``bf16x2``
register as ``b32``. A result of type ``b16``/``f16``/``bf16`` is written zero-extended to its
32-bit register; ``b64``/``f64`` go to a register pair.

Adding an ALU instruction: its record in the table, its builder here (an expression of
primitives every target has; a backend may still override it natively), and its oracle in
:mod:`anywave.conformance.gen_alu` -- independent of the expression.
"""

from __future__ import annotations

from collections.abc import Callable

from anywave.isa.expr import (
    Expr,
    arg,
    ashr,
    bitcast,
    const,
    eq,
    lshr,
    prim,
    select,
    sext,
    sle,
    slt,
    trunc,
    ule,
    ult,
    zext,
)
from anywave.isa.semantics import CANONICAL_NAN
from anywave.isa.table import InstrDef
from anywave.isa.types import ScalarType

__all__ = ["BODIES", "body", "has_body", "operand_types", "result_type"]

T = ScalarType
_FLOAT_TY = {T.F16: "f16", T.BF16: "bf16", T.F32: "f32", T.F64: "f64"}


def _bits_ty(t: ScalarType) -> str:
    return "b64" if t.bits == 64 else "b32"


def _val_ty(t: ScalarType) -> str:
    """The expression type a register of ScalarType ``t`` reads as."""
    if t is T.PRED:
        return "pred"
    if t in _FLOAT_TY:
        return _FLOAT_TY[t]
    return _bits_ty(t)


def operand_types(rec: InstrDef) -> tuple[str, ...]:
    """The expression type of each source operand of ``rec`` (in operand order)."""
    t = rec.type
    assert t is not None
    src = rec.src_type if rec.op in ("cvt", "cvt_pack") else t
    assert src is not None
    out = []
    for i in rec.srcs:
        kind = rec.operands[i].spelling
        if kind == "ps":
            out.append("pred")
        elif rec.op in ("shl", "shr", "rotl") and len(out) == 1:
            out.append("b32")  # shift and rotate counts: one 32-bit register
        elif src.is_packed:
            out.append("b32")
        else:
            out.append(_val_ty(src))
    return tuple(out)


def result_type(rec: InstrDef) -> str:
    """The expression type of ``rec``'s result."""
    return body(rec).ty


def _args(rec: InstrDef) -> list[Expr]:
    return [arg(i, ty) for i, ty in enumerate(operand_types(rec))]


# --------------------------------------------------------------------------- integer

def _int_arith(rec: InstrDef) -> Expr:
    a, *rest = _args(rec)
    op = rec.op
    if op == "neg":
        return 0 - a
    if op == "abs":  # wrapping: abs MIN = MIN
        return select(slt(a, 0), 0 - a, a)
    if op == "mad":
        b, c = rest
        return a * b + c
    (b,) = rest
    if op in ("add", "sub", "mul"):
        return {"add": a + b, "sub": a - b, "mul": a * b}[op]
    less = slt if rec.type.is_signed else ult
    if op == "min":
        return select(less(b, a), b, a)
    if op == "max":
        return select(less(a, b), b, a)
    if op == "mulhi":  # the high word of the exact 64-bit product
        ext = sext if rec.type.is_signed else zext
        return trunc(lshr(ext(a, "b64") * ext(b, "b64"), 32), "b32")
    raise AssertionError(op)


def _int_div(rec: InstrDef) -> Expr:
    """b = 0 gives all ones (div) / a (rem); signed MIN / -1 gives MIN / 0: the divisor is made
    1 there, and MIN / 1 = MIN, MIN % 1 = 0 are those answers (spec §8.1)."""
    a, b = _args(rec)
    n = rec.type.bits
    zero = eq(b, 0)
    if rec.type.is_signed:
        bad = prim("or", zero, prim("and", eq(a, 1 << (n - 1)), eq(b, -1)))
        safe = select(bad, 1, b)
        q = prim("sdiv" if rec.op == "div" else "srem", a, safe)
    else:
        safe = select(zero, 1, b)
        q = prim("udiv" if rec.op == "div" else "urem", a, safe)
    return select(zero, -1 if rec.op == "div" else a, q) if rec.op == "div" else select(zero, a, q)


# --------------------------------------------------------------------------- bitwise

def _bit_logic(rec: InstrDef) -> Expr:
    xs = _args(rec)
    if rec.op == "not":
        return ~xs[0]
    a, b = xs
    return {"and": a & b, "or": a | b, "xor": a ^ b}[rec.op]


def _shift(rec: InstrDef) -> Expr:
    """Counts read unsigned; ``>= n`` gives 0 (``shl``, ``shr.uN``) or the sign (``shr.iN``)."""
    a, c = _args(rec)
    n = rec.type.bits
    if rec.op == "shr" and rec.type.is_signed:
        return ashr(a, select(ult(c, n), c, n - 1))
    inside = (a << (c & (n - 1))) if rec.op == "shl" else lshr(a, c & (n - 1))
    return select(ult(c, n), inside, 0)


def _bitcount(rec: InstrDef) -> Expr:
    (a,) = _args(rec)
    if rec.op == "ctz":
        return prim("clz", prim("brev", a))
    return prim(rec.op, a)


def _rotl(rec: InstrDef) -> Expr:
    """Rotate left by the count modulo 32."""
    a, b = _args(rec)
    c = b & 31
    return (a << c) | (a >> ((32 - c) & 31))


# --------------------------------------------------------------------------- float

def _per_half(rec: InstrDef, f: Callable[..., Expr]) -> Expr:
    """A packed record: ``f`` on the low halves and on the high halves, repacked."""
    h = "f16" if rec.type is T.F16X2 else "bf16"
    xs = _args(rec)
    lo = f(*[bitcast(trunc(x, "b16"), h) for x in xs])
    hi = f(*[bitcast(trunc(lshr(x, 16), "b16"), h) for x in xs])
    return zext(bitcast(lo, "b16"), "b32") | (zext(bitcast(hi, "b16"), "b32") << 16)


def _float_ty(f: Callable[..., Expr]) -> Callable[[InstrDef], Expr]:
    def build(rec: InstrDef) -> Expr:
        if rec.type.is_packed:
            return _per_half(rec, f)
        return f(*_args(rec))
    return build


_SIGN = {"f16": 0x8000, "bf16": 0x8000, "f32": 0x80000000, "f64": 1 << 63}
_BITS = {"f16": "b16", "bf16": "b16", "f32": "b32", "f64": "b64"}


def _sign(neg: bool) -> Callable[..., Expr]:
    def f(a: Expr) -> Expr:  # the sign bit alone: exact on NaN too
        bits = bitcast(a, _BITS[a.ty])
        return bitcast(bits ^ _SIGN[a.ty] if neg else bits & ~_SIGN[a.ty], a.ty)
    return f


def _minmax(maximum: bool) -> Callable[..., Expr]:
    """IEEE 754-2019 minimumNumber / maximumNumber: a NaN operand is ignored, both NaN give the
    canonical NaN, -0 < +0 (equal non-zero values have equal bits: ``or`` / ``and`` of the bits
    picks -0 for min and +0 for max)."""
    def f(a: Expr, b: Expr) -> Expr:
        ty = a.ty
        bt = _BITS[ty]
        ba, bb = bitcast(a, bt), bitcast(b, bt)
        tie = bitcast((ba & bb) if maximum else (ba | bb), ty)
        first = prim("flt", b, a) if maximum else prim("flt", a, b)
        second = prim("flt", a, b) if maximum else prim("flt", b, a)
        r = select(first, a, select(second, b, tie))
        na, nb = prim("fisnan", a), prim("fisnan", b)
        nan = bitcast(const(CANONICAL_NAN[{v: k for k, v in _FLOAT_TY.items()}[ty]], bt), ty)
        return select(prim("and", na, nb), nan, select(na, b, select(nb, a, r)))
    return f


def _float(rec: InstrDef) -> Expr:
    op = rec.op
    if op in ("neg", "abs"):
        return _float_ty(_sign(op == "neg"))(rec)
    if op in ("min", "max"):
        return _float_ty(_minmax(op == "max"))(rec)
    name = {"add": "fadd", "sub": "fsub", "mul": "fmul", "div": "fdiv", "fma": "ffma", "sqrt": "fsqrt",
            "floor": "ffloor", "ceil": "fceil", "trunc": "ftrunc", "rint": "frint"}.get(op, f"fapprox.{op}")
    return _float_ty(lambda *xs: prim(name, *xs))(rec)


# --------------------------------------------------------------------------- compare, select, predicates

def _setp(rec: InstrDef) -> Expr:
    a, b = _args(rec)
    v = rec.variant
    if rec.type.is_float:
        lt = lambda x, y: prim("flt", x, y)  # noqa: E731
        feq = prim("feq", a, b)
        return {"eq": feq, "ne": prim("not", feq), "lt": lt(a, b), "gt": lt(b, a),
                "le": prim("or", lt(a, b), feq), "ge": prim("or", lt(b, a), feq),
                "unord": prim("or", prim("fisnan", a), prim("fisnan", b))}[v]
    less, less_eq = (slt, sle) if rec.type.is_signed else (ult, ule)
    return {"eq": eq(a, b), "ne": prim("ne", a, b), "lt": less(a, b), "le": less_eq(a, b), "gt": less(b, a),
            "ge": less_eq(b, a)}[v]


def _selp(rec: InstrDef) -> Expr:
    a, b, p = _args(rec)
    return select(p, a, b)


def _pred(rec: InstrDef) -> Expr:
    if rec.op == "setp_const":
        return const(1 if rec.variant == "true" else 0, "pred")
    xs = _args(rec)
    if rec.op == "mov":
        return xs[0]
    return prim(rec.op, *xs)


# --------------------------------------------------------------------------- conversions

def _cvt(rec: InstrDef) -> Expr:
    dst, src = rec.type, rec.src_type
    (a,) = _args(rec)
    to = _val_ty(dst)
    if not dst.is_float and not src.is_float:
        if dst.bits > src.bits:
            return (sext if src.is_signed else zext)(a, to)
        return trunc(a, to) if dst.bits < src.bits else a
    if dst.is_float and src.is_float:
        return prim("fcvt", a, to=to)
    if dst.is_float:
        return prim("s2f" if src.is_signed else "u2f", a, to=to)
    return prim("f2s" if dst.is_signed else "f2u", a, to=to)


def _cvt_pack(rec: InstrDef) -> Expr:
    h = "f16" if rec.type is T.F16X2 else "bf16"
    a, b = _args(rec)
    lo, hi = (zext(bitcast(prim("fcvt", x, to=h), "b16"), "b32") for x in (a, b))
    return lo | (hi << 16)


#: the body builder of every semantic key of the ALU domains (rec -> expression)
BODIES: dict[str, Callable[[InstrDef], Expr]] = {
    **{f"int.{op}": _int_arith for op in ("add", "sub", "mul", "neg", "abs", "min", "max", "mulhi", "mad")},
    "int.div": _int_div, "int.rem": _int_div,
    **{f"float.{op}": _float for op in ("add", "sub", "mul", "fma", "min", "max", "neg", "abs", "div", "sqrt",
                                        "floor", "ceil", "trunc", "rint", "ex2", "lg2", "sin", "cos", "rsqrt",
                                        "rcp", "tanh")},
    **{f"bit.{op}": _bit_logic for op in ("and", "or", "xor", "not")},
    "bit.shl": _shift, "bit.shr": _shift, **{f"bit.{op}": _bitcount for op in ("popc", "clz", "ctz", "brev")},
    "bit.rotl": _rotl,
    "cmp.setp": _setp, "cmp.selp": _selp,
    **{f"pred.{op}": _pred for op in ("and", "or", "xor", "mov", "setp_const")},
    "cvt.cvt": _cvt, "cvt.cvt_pack": _cvt_pack,
}

_CACHE: dict[InstrDef, Expr] = {}


def has_body(rec: InstrDef) -> bool:
    """True for the records :func:`body` describes (the ALU domains)."""
    return rec.sem in BODIES


def body(rec: InstrDef) -> Expr:
    """The expression ``rec`` computes (cached per opcode).

    Raises:
        KeyError: ``rec`` is not an ALU record (memory, wave, control ... have no body here)."""
    e = _CACHE.get(rec)
    if e is None:
        e = _CACHE[rec] = BODIES[rec.sem](rec)
    return e
