"""Instruction bodies as data: a small typed expression vocabulary over the primitives every
target has, and the one legaliser that expands a primitive a target lacks.

An :class:`Expr` is a tree of primitive applications over the instruction's source operands
(:func:`arg`) and constants (:func:`const`). Every value has a :data:`type <TYPES>`: ``b16``,
``b32``, ``b64`` (bit patterns; signedness lives in the primitive, ``slt`` / ``ult``, ``sdiv`` /
``udiv``, ``ashr`` / ``lshr``, as in LLVM IR), ``pred`` (a boolean), and the float types ``f16``,
``bf16``, ``f32``, ``f64`` (values held as their bit patterns). What each instruction computes is
one such expression (:mod:`anywave.isa.bodies`); a backend spells the primitives
(:mod:`anywave.backends.lowering.bodies`) and may override a whole body with a native instruction
(PTX ``shf.l.wrap``, OpenCL ``rotate``). The generic evaluation, the oracle the emulator's NumPy
paths are tested against, is :func:`anywave.conformance.bodyeval.evaluate`.

Primitives are *total* unless :data:`PRIMITIVES` says otherwise: ``shl``/``lshr``/``ashr`` are
defined for counts below the width only, ``udiv``/``urem`` for a non-zero divisor, ``sdiv``/
``srem`` also not for ``MIN / -1`` (the bodies select around those inputs, so a target may use its
own instruction whatever it does there). Float primitives round to nearest even and give the
canonical NaN for a NaN result (docs/spec.md §8.2); ``fapprox.*`` are the approximate class.

Operators build expressions: ``a & 31``, ``a << c``, ``a >> c`` (logical), ``a + b``, ``~a``;
an ``int`` operand becomes a constant of the other operand's type.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

__all__ = ["EXPANSIONS", "PRIMITIVES", "TYPES", "Expr", "Primitive", "arg", "ashr", "bitcast", "const", "eq",
           "legalise", "lshr", "ne", "prim", "primitives_of", "select", "sext", "sle", "slt", "trunc", "ule", "ult",
           "width", "zext"]

#: value types and their widths in bits
TYPES: dict[str, int] = {"pred": 1, "b16": 16, "b32": 32, "b64": 64, "f16": 16, "bf16": 16, "f32": 32, "f64": 64}
FLOAT_TYPES = frozenset({"f16", "bf16", "f32", "f64"})


def width(ty: str) -> int:
    """Bits of a value of type ``ty`` (1 for ``pred``); KeyError for an unknown type."""
    return TYPES[ty]


@dataclass(frozen=True)
class Primitive:
    """One primitive of the vocabulary.

    Attributes:
        name: its name (``add``, ``clz``, ``fadd`` ...).
        arity: number of operands.
        domain: ``int`` (bit-pattern operands of one type), ``shift`` (a value and a b32
            count), ``cmp`` (two operands, a ``pred`` result), ``pred``, ``select``, ``conv``
            (one operand, the result type given), ``float`` / ``fcmp`` (float operands).
        partial: inputs it is undefined for (empty when total): a body never reaches them.
    """

    name: str
    arity: int
    domain: str
    partial: str = ""


def _prims() -> dict[str, Primitive]:
    p: list[Primitive] = []
    for n in ("add", "sub", "mul", "and", "or", "xor"):
        p.append(Primitive(n, 2, "int"))
    p.append(Primitive("not", 1, "int"))
    for n in ("shl", "lshr", "ashr"):
        p.append(Primitive(n, 2, "shift", "count >= width"))
    p += [Primitive("udiv", 2, "int", "divisor 0"), Primitive("urem", 2, "int", "divisor 0"),
          Primitive("sdiv", 2, "int", "divisor 0, MIN / -1"), Primitive("srem", 2, "int", "divisor 0, MIN / -1")]
    for n in ("clz", "popc", "brev"):
        p.append(Primitive(n, 1, "int"))
    for n in ("eq", "ne", "ult", "ule", "slt", "sle"):
        p.append(Primitive(n, 2, "cmp"))
    p.append(Primitive("select", 3, "select"))
    for n in ("zext", "sext", "trunc", "bitcast"):
        p.append(Primitive(n, 1, "conv"))
    for n in ("fadd", "fsub", "fmul", "fdiv"):
        p.append(Primitive(n, 2, "float"))
    p.append(Primitive("ffma", 3, "float"))
    for n in ("fsqrt", "ffloor", "fceil", "ftrunc", "frint"):
        p.append(Primitive(n, 1, "float"))
    for n in ("ex2", "lg2", "sin", "cos", "rsqrt", "rcp", "tanh"):
        p.append(Primitive(f"fapprox.{n}", 1, "float"))
    p += [Primitive("fisnan", 1, "fcmp"), Primitive("flt", 2, "fcmp"), Primitive("feq", 2, "fcmp")]
    # float <-> float and float <-> integer conversions (docs/spec.md §8.11): fcvt rounds to
    # nearest even (overflow to inf); f2i truncates toward zero, saturates, NaN gives 0; i2f
    # (u2f for unsigned sources) rounds to nearest even
    p += [Primitive("fcvt", 1, "conv"), Primitive("f2s", 1, "conv"), Primitive("f2u", 1, "conv"),
          Primitive("s2f", 1, "conv"), Primitive("u2f", 1, "conv")]
    return {x.name: x for x in p}


#: every primitive by name
PRIMITIVES: dict[str, Primitive] = _prims()


@dataclass(frozen=True)
class Expr:
    """A node: primitive ``op`` applied to ``args``, of type ``ty``. ``op == "arg"``: source
    operand number ``value`` (0 = the first source); ``op == "const"``: the bit pattern
    ``value``. Nodes compare and hash by structure, so a renderer computes equal subtrees once."""

    op: str
    args: tuple[Expr, ...]
    ty: str
    value: int = 0

    def _bin(self, name: str, other: Expr | int, swap: bool = False) -> Expr:
        o = other if isinstance(other, Expr) else const(other, self.ty)
        return prim(name, o, self) if swap else prim(name, self, o)

    def __and__(self, o: Expr | int) -> Expr:
        return self._bin("and", o)

    def __rand__(self, o: int) -> Expr:
        return self._bin("and", o, True)

    def __or__(self, o: Expr | int) -> Expr:
        return self._bin("or", o)

    def __ror__(self, o: int) -> Expr:
        return self._bin("or", o, True)

    def __xor__(self, o: Expr | int) -> Expr:
        return self._bin("xor", o)

    def __add__(self, o: Expr | int) -> Expr:
        return self._bin("add", o)

    def __radd__(self, o: int) -> Expr:
        return self._bin("add", o, True)

    def __sub__(self, o: Expr | int) -> Expr:
        return self._bin("sub", o)

    def __rsub__(self, o: int) -> Expr:
        return self._bin("sub", o, True)

    def __mul__(self, o: Expr | int) -> Expr:
        return self._bin("mul", o)

    def __invert__(self) -> Expr:
        return prim("not", self)

    def __lshift__(self, o: Expr | int) -> Expr:
        return prim("shl", self, o if isinstance(o, Expr) else const(o, "b32"))

    def __rshift__(self, o: Expr | int) -> Expr:
        return lshr(self, o)

    def __str__(self) -> str:
        if self.op == "arg":
            return "abcd"[self.value] if self.value < 4 else f"s{self.value}"
        if self.op == "const":
            return str(self.value) if self.value < 1 << 16 else hex(self.value)
        inner = ", ".join(str(a) for a in self.args)
        if self.op in ("zext", "sext", "trunc", "bitcast", "fcvt", "f2s", "f2u", "s2f", "u2f"):
            return f"{self.op}.{self.ty}({inner})"
        return f"{self.op}({inner})"


def arg(index: int, ty: str) -> Expr:
    """Source operand ``index`` (0-based, in operand order) read as type ``ty``."""
    width(ty)
    return Expr("arg", (), ty, index)


def const(value: int, ty: str) -> Expr:
    """The constant of type ``ty`` with bit pattern ``value`` (negative ints wrap)."""
    n = width(ty)
    return Expr("const", (), ty, value & ((1 << n) - 1))


def _result_type(name: str, args: tuple[Expr, ...], to: str | None) -> str:
    p = PRIMITIVES.get(name)
    if p is None:
        raise ValueError(f"unknown primitive {name!r}; valid: {', '.join(sorted(PRIMITIVES))}")
    if len(args) != p.arity:
        raise ValueError(f"{name} takes {p.arity} operands, got {len(args)}")
    tys = [a.ty for a in args]
    if p.domain == "conv":
        if to is None:
            raise ValueError(f"{name} needs a result type")
        if name == "bitcast" and width(to) != width(tys[0]):
            raise ValueError(f"bitcast {tys[0]} -> {to}: widths differ")
        return to
    if p.domain == "shift":
        if tys[1] != "b32" or tys[0] not in ("b32", "b64"):
            raise ValueError(f"{name}({', '.join(tys)}): a b32/b64 value and a b32 count")
        return tys[0]
    if p.domain == "select":
        if tys[0] != "pred" or tys[1] != tys[2]:
            raise ValueError(f"select({', '.join(tys)}): a pred and two operands of one type")
        return tys[1]
    if len(set(tys)) != 1:
        raise ValueError(f"{name}({', '.join(tys)}): operands of one type")
    if p.domain in ("float", "fcmp"):
        if tys[0] not in FLOAT_TYPES:
            raise ValueError(f"{name} takes float operands, got {tys[0]}")
        return "pred" if p.domain == "fcmp" else tys[0]
    if tys[0] in FLOAT_TYPES:
        raise ValueError(f"{name} takes bit patterns, got {tys[0]} (bitcast it)")
    if p.domain == "cmp":
        return "pred"
    if name in ("clz", "popc", "brev") and tys[0] != "b32":
        raise ValueError(f"{name} is defined on b32")
    if tys[0] == "pred" and name not in ("and", "or", "xor", "not", "eq", "ne"):
        raise ValueError(f"{name} is not defined on pred")
    return tys[0]


def prim(name: str, *args: Expr, to: str | None = None) -> Expr:
    """Apply primitive ``name`` (``to``: the result type of a conversion).

    Raises:
        ValueError: unknown primitive, wrong operand count or operand types (named)."""
    return Expr(name, tuple(args), _result_type(name, tuple(args), to))


def _k(x: Expr | int, like: Expr) -> Expr:
    return x if isinstance(x, Expr) else const(x, like.ty)


def lshr(a: Expr, c: Expr | int) -> Expr:
    """Logical right shift (count < width)."""
    return prim("lshr", a, c if isinstance(c, Expr) else const(c, "b32"))


def ashr(a: Expr, c: Expr | int) -> Expr:
    """Arithmetic right shift (count < width)."""
    return prim("ashr", a, c if isinstance(c, Expr) else const(c, "b32"))


def select(p: Expr, a: Expr | int, b: Expr | int) -> Expr:
    """``p ? a : b``."""
    like = a if isinstance(a, Expr) else b
    assert isinstance(like, Expr)
    return prim("select", p, _k(a, like), _k(b, like))


def _cmp(name: str) -> Callable[[Expr, Expr | int], Expr]:
    def f(a: Expr, b: Expr | int) -> Expr:
        return prim(name, a, _k(b, a))
    f.__name__ = name
    f.__doc__ = f"``{name}(a, b)``: a pred."
    return f


eq, ne, ult, ule, slt, sle = (_cmp(n) for n in ("eq", "ne", "ult", "ule", "slt", "sle"))


def zext(a: Expr, to: str) -> Expr:
    """Zero-extend to the wider type ``to``."""
    return prim("zext", a, to=to)


def sext(a: Expr, to: str) -> Expr:
    """Sign-extend to the wider type ``to``."""
    return prim("sext", a, to=to)


def trunc(a: Expr, to: str) -> Expr:
    """The low bits, as the narrower type ``to``."""
    return prim("trunc", a, to=to)


def bitcast(a: Expr, to: str) -> Expr:
    """The same bits read as ``to`` (of the same width: ``b32`` <-> ``f32``)."""
    return prim("bitcast", a, to=to)


# --------------------------------------------------------------------------- legaliser

def _x_srem(e: Expr) -> Expr:
    a, b = e.args
    return a - b * prim("sdiv", a, b)


def _x_urem(e: Expr) -> Expr:
    a, b = e.args
    return a - b * prim("udiv", a, b)


def _x_ne(e: Expr) -> Expr:
    return ~eq(*e.args) if e.args[0].ty == "pred" else prim("not", eq(*e.args))


def _x_ule(e: Expr) -> Expr:
    a, b = e.args
    return ~ult(b, a)


def _x_sle(e: Expr) -> Expr:
    a, b = e.args
    return ~slt(b, a)


def _x_popc(e: Expr) -> Expr:  # SWAR bit count (Hacker's Delight §5-1)
    (a,) = e.args
    x = a - ((a >> 1) & 0x55555555)
    x = (x & 0x33333333) + ((x >> 2) & 0x33333333)
    x = (x + (x >> 4)) & 0x0F0F0F0F
    return (x * 0x01010101) >> 24


def _x_brev(e: Expr) -> Expr:  # swap halves of ever smaller fields (Hacker's Delight §7-1)
    (x,) = e.args
    for s, m in ((1, 0x55555555), (2, 0x33333333), (4, 0x0F0F0F0F), (8, 0x00FF00FF)):
        x = ((x >> s) & m) | ((x & m) << s)
    return (x >> 16) | (x << 16)


def _x_clz(e: Expr) -> Expr:  # smear the leading one right, count the zeros left
    (a,) = e.args
    x = a
    for s in (1, 2, 4, 8, 16):
        x = x | (x >> s)
    return prim("popc", ~x)


def _x_ashr(e: Expr) -> Expr:  # (a >> c) with the sign smeared over the vacated bits
    a, c = e.args
    return select(slt(a, 0), ~lshr(~a, c), lshr(a, c))


#: how the legaliser expands a primitive a target lacks, in primitives every target keeps
#: (``add sub mul and or xor not shl lshr eq ult slt select udiv sdiv``). An expansion may use
#: another expandable primitive (``clz`` uses ``popc``); :func:`legalise` repeats until none is left.
EXPANSIONS: dict[str, Callable[[Expr], Expr]] = {
    "srem": _x_srem, "urem": _x_urem, "ne": _x_ne, "ule": _x_ule, "sle": _x_sle, "popc": _x_popc,
    "brev": _x_brev, "clz": _x_clz, "ashr": _x_ashr,
}


def legalise(e: Expr, has: Callable[[Expr], bool] | Iterable[str]) -> Expr:
    """``e`` with every primitive the target lacks expanded (:data:`EXPANSIONS`).

    Args:
        e: an expression.
        has: the primitives the target spells (names), or a predicate on a node (a target may
            have a primitive for some types only: ``clz`` on b32 but not b64).

    Raises:
        ValueError: a primitive the target lacks has no expansion (names it and the target's
            missing set)."""
    if not callable(has):
        names = frozenset(has)
        has = lambda n: n.op in names  # noqa: E731
    memo: dict[Expr, Expr] = {}

    def go(n: Expr) -> Expr:
        hit = memo.get(n)
        if hit is not None:
            return hit
        if n.op in ("arg", "const"):
            out = n
        else:
            m = Expr(n.op, tuple(go(a) for a in n.args), n.ty, n.value)
            if has(m):
                out = m
            elif m.op in EXPANSIONS:
                out = go(EXPANSIONS[m.op](m))
            else:
                raise ValueError(f"primitive {m.op} ({m.ty}) is neither spelled by the target nor expandable "
                                 f"(expandable: {', '.join(sorted(EXPANSIONS))})")
        memo[n] = out
        return out
    return go(e)


def primitives_of(e: Expr) -> set[str]:
    """The primitive names ``e`` uses (args and constants excluded)."""
    out: set[str] = set()
    stack = [e]
    while stack:
        n = stack.pop()
        if n.op not in ("arg", "const"):
            out.add(n.op)
        stack.extend(n.args)
    return out

