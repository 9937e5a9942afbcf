"""Differential fuzzer of the compiler: random kernels *with control flow*, compiled and run on
the emulator, compared bit for bit with an independent plain-Python reference.

The generator writes kernel *source text*; the same text runs twice:

* compiled by anywave and executed on the emulator (``aw`` is the real package);
* executed by CPython once per thread with ``aw`` bound to :data:`MOCK`, a small model of the
  kernel language written from the documented semantics only (docs/decisions.md and the
  frontend's module docstring) — it uses nothing from the compiler.

Reference semantics: i32/u32 wrap (masking); ``//`` and ``%`` floor like Python, and on a
zero divisor give the documented ``div``/``rem`` results (quotient -1 / all ones, remainder =
dividend) with no floor correction on top (docs/decisions.md, "Kernel language"); shift
counts are unsigned 32-bit, counts >= 32 give 0
(or -1 for ``>>`` of a negative i32); f32 arithmetic on ``numpy.float32`` scalars (correctly
rounded); ``min``/``max`` are IEEE minimumNumber/maximumNumber (NaN ignored, -0 < +0);
f32 → int truncates, saturates, NaN → 0. Floats compare bit for bit except that any two NaNs
are equal (class exact-nan).

Scale with ``ANYWAVE_FUZZ_EXAMPLES`` (default 40); the ``slow`` variant (the slow tier:
``python -m pytest -m slow``) also covers W = 16, 64.
A seeded campaign: ``python tests/test_compiler_fuzz.py START COUNT [W,W...]``.
"""

from __future__ import annotations

import importlib.util
import itertools
import math
import os
import random
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import anywave as aw

SLOTS = 8  # per-thread scratch elements of each input buffer

# ----------------------------------------------------------------------------- reference model

_M32 = 0xFFFFFFFF


def _wrap_i32(v: int) -> int:
    v &= _M32
    return v - (1 << 32) if v & 0x80000000 else v


class _Int:
    """A 32-bit integer of the kernel language (subclasses fix the signedness)."""

    __slots__ = ("v",)
    signed = True
    lo, hi = -(1 << 31), (1 << 31) - 1

    def __init__(self, v: int) -> None:
        v = int(v)
        self.v = _wrap_i32(v) if self.signed else v & _M32

    def _o(self, other: Any) -> int:
        if type(other) is type(self):
            return other.v
        if isinstance(other, int) and not isinstance(other, bool):
            if not self.lo <= other <= self.hi:
                raise TypeError(f"literal {other} does not fit {type(self).__name__}")
            return other
        raise TypeError(f"{type(self).__name__} op {type(other).__name__}")

    def _new(self, v: int) -> _Int:
        return type(self)(v)

    def __add__(self, o: Any) -> _Int:
        return self._new(self.v + self._o(o))

    def __radd__(self, o: Any) -> _Int:
        return self._new(self._o(o) + self.v)

    def __sub__(self, o: Any) -> _Int:
        return self._new(self.v - self._o(o))

    def __rsub__(self, o: Any) -> _Int:
        return self._new(self._o(o) - self.v)

    def __mul__(self, o: Any) -> _Int:
        return self._new(self.v * self._o(o))

    def __rmul__(self, o: Any) -> _Int:
        return self._new(self._o(o) * self.v)

    def _divmod(self, a: int, b: int) -> tuple[int, int]:
        if b == 0:
            q, r = (-1 if self.signed else _M32), a
        else:
            q = abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1)
            q = _wrap_i32(q) if self.signed else q
            r = a - q * b if not (self.signed and a == -(1 << 31) and b == -1) else 0
        if self.signed and b != 0 and r != 0 and (r < 0) != (b < 0):  # floor correction ((r ^ b) < 0)
            q, r = q - 1, r + b
        return q, r

    def __floordiv__(self, o: Any) -> _Int:
        return self._new(self._divmod(self.v, self._o(o))[0])

    def __rfloordiv__(self, o: Any) -> _Int:
        return self._new(self._divmod(self._o(o), self.v)[0])

    def __mod__(self, o: Any) -> _Int:
        return self._new(self._divmod(self.v, self._o(o))[1])

    def __rmod__(self, o: Any) -> _Int:
        return self._new(self._divmod(self._o(o), self.v)[1])

    def __and__(self, o: Any) -> _Int:
        return self._new(self.v & self._o(o))

    __rand__ = __and__

    def __or__(self, o: Any) -> _Int:
        return self._new(self.v | self._o(o))

    __ror__ = __or__

    def __xor__(self, o: Any) -> _Int:
        return self._new(self.v ^ self._o(o))

    __rxor__ = __xor__

    @staticmethod
    def _count(o: Any) -> int:
        if isinstance(o, _Int):
            return o.v & _M32
        if isinstance(o, int) and not isinstance(o, bool) and o >= 0:
            return o
        raise TypeError(f"shift count {o!r}")

    def __lshift__(self, o: Any) -> _Int:
        c = self._count(o)
        return self._new(0 if c >= 32 else self.v << c)

    def __rshift__(self, o: Any) -> _Int:
        c = self._count(o)
        if c >= 32:
            return self._new(-1 if self.v < 0 else 0)
        return self._new(self.v >> c)

    def __neg__(self) -> _Int:
        return self._new(-self.v)

    def __invert__(self) -> _Int:
        return self._new(~self.v)

    def __abs__(self) -> _Int:
        return self._new(abs(self.v))

    def __lt__(self, o: Any) -> bool:
        return self.v < self._o(o)

    def __le__(self, o: Any) -> bool:
        return self.v <= self._o(o)

    def __gt__(self, o: Any) -> bool:
        return self.v > self._o(o)

    def __ge__(self, o: Any) -> bool:
        return self.v >= self._o(o)

    def __eq__(self, o: Any) -> bool:  # type: ignore[override]
        return self.v == self._o(o)

    def __ne__(self, o: Any) -> bool:  # type: ignore[override]
        return self.v != self._o(o)

    __hash__ = None  # type: ignore[assignment]

    def __bool__(self) -> bool:
        return self.v != 0

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.v})"


class I32(_Int):
    signed = True
    lo, hi = -(1 << 31), (1 << 31) - 1


class U32(_Int):
    signed = False
    lo, hi = 0, _M32


class F32:
    """An f32 value (a ``numpy.float32`` scalar; every operation rounds once)."""

    __slots__ = ("v",)

    def __init__(self, v: Any) -> None:
        self.v = np.float32(v)

    @staticmethod
    def _o(o: Any) -> np.float32:
        if type(o) is F32:
            return o.v
        if isinstance(o, (int, float)) and not isinstance(o, bool):
            return np.float32(float(o))
        raise TypeError(f"F32 op {type(o).__name__}")

    def _bin(self, a: Any, b: Any, f: Callable[[Any, Any], Any]) -> F32:
        with np.errstate(all="ignore"):
            return F32(f(self._o(a), self._o(b)))

    def __add__(self, o: Any) -> F32:
        return self._bin(self, o, lambda a, b: a + b)

    def __radd__(self, o: Any) -> F32:
        return self._bin(o, self, lambda a, b: a + b)

    def __sub__(self, o: Any) -> F32:
        return self._bin(self, o, lambda a, b: a - b)

    def __rsub__(self, o: Any) -> F32:
        return self._bin(o, self, lambda a, b: a - b)

    def __mul__(self, o: Any) -> F32:
        return self._bin(self, o, lambda a, b: a * b)

    def __rmul__(self, o: Any) -> F32:
        return self._bin(o, self, lambda a, b: a * b)

    def __truediv__(self, o: Any) -> F32:
        return self._bin(self, o, lambda a, b: a / b)

    def __rtruediv__(self, o: Any) -> F32:
        return self._bin(o, self, lambda a, b: a / b)

    def __floordiv__(self, o: Any) -> F32:
        return self._bin(self, o, lambda a, b: np.floor(np.float32(a / b)))

    def __rfloordiv__(self, o: Any) -> F32:
        return self._bin(o, self, lambda a, b: np.floor(np.float32(a / b)))

    def __neg__(self) -> F32:
        return F32(-self.v)

    def __abs__(self) -> F32:
        return F32(np.abs(self.v))

    def __lt__(self, o: Any) -> bool:
        return bool(self.v < self._o(o))

    def __le__(self, o: Any) -> bool:
        return bool(self.v <= self._o(o))

    def __gt__(self, o: Any) -> bool:
        return bool(self.v > self._o(o))

    def __ge__(self, o: Any) -> bool:
        return bool(self.v >= self._o(o))

    def __eq__(self, o: Any) -> bool:  # type: ignore[override]
        return bool(self.v == self._o(o))

    def __ne__(self, o: Any) -> bool:  # type: ignore[override]
        return bool(self.v != self._o(o))

    __hash__ = None  # type: ignore[assignment]

    def __bool__(self) -> bool:
        return bool(self.v != 0)

    def __repr__(self) -> str:
        return f"F32({self.v!r})"


def _to_i32(x: Any) -> I32:
    if isinstance(x, bool):
        return I32(int(x))
    if isinstance(x, _Int):
        return I32(x.v)
    if isinstance(x, F32):
        f = float(x.v)
        if math.isnan(f):
            return I32(0)
        if math.isinf(f):
            return I32(I32.hi if f > 0 else I32.lo)
        return I32(max(I32.lo, min(I32.hi, math.trunc(f))))
    if isinstance(x, int):
        return I32(x)
    raise TypeError(f"aw.i32({x!r})")


def _to_u32(x: Any) -> U32:
    if isinstance(x, bool):
        return U32(int(x))
    if isinstance(x, _Int):
        return U32(x.v)
    if isinstance(x, F32):
        f = float(x.v)
        if math.isnan(f):
            return U32(0)
        if math.isinf(f):
            return U32(_M32 if f > 0 else 0)
        return U32(max(0, min(_M32, math.trunc(f))))
    if isinstance(x, int):
        return U32(x)
    raise TypeError(f"aw.u32({x!r})")


def _to_f32(x: Any) -> F32:
    if isinstance(x, bool):
        return F32(1.0 if x else 0.0)
    if isinstance(x, _Int):
        return F32(float(x.v))  # |v| < 2^53: exact in f64, one rounding to f32
    if isinstance(x, F32):
        return x
    if isinstance(x, (int, float)):
        return F32(float(x))
    raise TypeError(f"aw.f32({x!r})")


def _minmax(a: Any, b: Any, is_min: bool) -> Any:
    if isinstance(a, F32) or isinstance(b, F32):
        fa, fb = F32._o(a), F32._o(b)
        if np.isnan(fa) and np.isnan(fb):
            return F32(np.float32("nan"))
        if np.isnan(fa):
            return F32(fb)
        if np.isnan(fb):
            return F32(fa)
        if fa == fb:  # equal, or -0 vs +0: minimum takes the negative sign
            neg = bool(np.signbit(fa)) or bool(np.signbit(fb)) if is_min else \
                bool(np.signbit(fa)) and bool(np.signbit(fb))
            return F32(-abs(fa) if neg else abs(fa)) if fa == 0 else F32(fa)
        return F32(fa if (fa < fb) == is_min else fb)
    x = a if isinstance(a, _Int) else b
    va, vb = x._o(a), x._o(b)
    return type(x)(min(va, vb) if is_min else max(va, vb))


def _range(*args: Any) -> Any:
    vals = [a.v if isinstance(a, _Int) else a for a in args]
    for v in range(*vals):
        yield I32(v)


class _MockBuffer:
    def __init__(self, arr: np.ndarray, cls: type) -> None:
        self.arr, self.cls = arr, cls

    def __getitem__(self, i: Any) -> Any:
        return self.cls(self.arr[i.v])

    def __setitem__(self, i: Any, value: Any) -> None:
        if not isinstance(value, self.cls):
            value = self.cls(value if self.cls is not F32 else float(value))
        self.arr[i.v] = value.v


class _Sub:
    def __getitem__(self, _: Any) -> None:
        return None


class _ThreadState:
    tid = 0


def _global_id(d: int = 0) -> I32:
    assert d == 0
    return I32(_ThreadState.tid)


def _quiet(f: Callable[[Any], Any], x: Any) -> Any:
    with np.errstate(all="ignore"):
        return f(x)


#: the reference model of the ``aw`` namespace the generated kernels use
MOCK = SimpleNamespace(
    kernel=lambda f: f, func=lambda f: f, Buffer=_Sub(), In=_Sub(), Out=_Sub(),
    i32=_to_i32, u32=_to_u32, f32=_to_f32, global_id=_global_id,
    sqrt=lambda x: F32(_quiet(np.sqrt, F32._o(x))), floor=lambda x: F32(np.floor(F32._o(x))),
)


# ----------------------------------------------------------------------------- generator

class Chooser:
    """Source of decisions: ``draw(lo, hi)`` returns an int in [lo, hi]. Smaller numbers
    mean simpler programs (hypothesis shrinks toward them)."""

    def __init__(self, draw: Callable[[int, int], int]) -> None:
        self.draw = draw

    @classmethod
    def from_seed(cls, seed: int) -> Chooser:
        rng = random.Random(seed)
        return cls(rng.randint)

    def pick(self, seq: list[Any] | tuple[Any, ...]) -> Any:
        return seq[self.draw(0, len(seq) - 1)]

    def chance(self, percent: int) -> bool:
        return self.draw(0, 99) < percent


INT_LITS = [0, 1, 2, 3, 5, 7, 8, 31, 100, -1, -3, -8, 255, 65535, 2147483647, -2147483648]
UINT_LITS = [0, 1, 2, 3, 7, 8, 16, 31, 32, 100, 255, 65535, 2147483648, 4294967295]
FLT_LITS = ["0.0", "1.0", "0.5", "-1.25", "3.0", "2", "-0.0", "1e30", "1e-40", "0.1", "100.0"]

HELPERS = '''
@aw.func
def h_ne(p, q):
    return p != q


@aw.func
def h_sel(c, x, y):
    if c:
        return x
    return y


@aw.func
def h_clamp(x, lo, hi):
    return min(max(x, lo), hi)


@aw.func
def h_pos(x):
    return x > 0
'''


@dataclass
class Program:
    """A generated kernel: source text (module body without imports) and its geometry."""

    source: str
    n_int: int
    n_uint: int
    n_flt: int
    n_bool: int
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def out_i(self) -> int:
        return self.n_int + self.n_bool


class Gen:
    """Random kernel source with if/elif/else, for/while loops, break/continue, early return,
    augmented assignment, loads/stores, casts, min/max/abs, conditional expressions,
    short-circuit and/or, bool variables, @aw.func calls."""

    MAX_DEPTH = 4

    def __init__(self, ch: Chooser, n_int: int = 4, n_uint: int = 2, n_flt: int = 3, n_bool: int = 2,
                 n_stmts: int = 8) -> None:
        self.ch = ch
        self.n_int, self.n_uint, self.n_flt, self.n_bool = n_int, n_uint, n_flt, n_bool
        self.n_stmts = n_stmts
        self.lines: list[str] = []
        self.loop_depth = 0

    # -- expressions ---------------------------------------------------------------
    def var(self, t: str) -> str:
        c = self.ch
        if t == "i32":
            pool = [f"a{k}" for k in range(self.n_int)] + [f"i{k}" for k in range(self.MAX_DEPTH)] \
                + [f"w{k}" for k in range(self.MAX_DEPTH)] + ["t"]
            return c.pick(pool)
        if t == "u32":
            return f"u{c.draw(0, self.n_uint - 1)}"
        if t == "f32":
            return f"f{c.draw(0, self.n_flt - 1)}"
        return f"b{c.draw(0, self.n_bool - 1)}"

    def lit(self, t: str) -> str:
        c = self.ch
        if t == "i32":
            v = c.pick(INT_LITS)
            return f"({v})" if v < 0 else str(v)
        if t == "u32":
            return str(c.pick(UINT_LITS))
        v = c.pick(FLT_LITS)
        return f"({v})" if v.startswith("-") else v

    def index(self, depth: int) -> str:
        return f"base + ({self.expr('i32', depth)} & {SLOTS - 1})"

    def load(self, t: str, depth: int) -> str:
        buf = {"i32": "ib", "u32": "ub", "f32": "fb"}[t]
        return f"{buf}[{self.index(max(0, depth - 1))}]"

    def expr(self, t: str, depth: int) -> str:
        """A typed expression of type ``t`` (never a bare literal)."""
        c = self.ch
        if t == "bool":
            return self.bexpr(depth)
        if depth <= 0 or c.chance(25):
            return self.var(t) if c.chance(85) else self.load(t, depth)
        d = depth - 1
        k = c.draw(0, 11)
        if k <= 3:
            ops = ["+", "-", "*", "//"] + (["/"] if t == "f32" else ["%", "&", "|", "^", "<<", ">>"])
            op = c.pick(ops)
            a = self.expr(t, d)
            if op in ("<<", ">>"):
                cnt = str(c.draw(0, 40)) if c.chance(60) else self.expr(c.pick(["i32", "u32"]), d)
                return f"({a} {op} {cnt})"
            b = self.lit(t) if c.chance(35) else self.expr(t, d)
            if c.chance(20):
                a, b = b, a  # sometimes the literal (or the other operand) on the left
            return f"({a} {op} {b})"
        if k == 4:
            return f"(-{self.expr(t, d)})" if (t == "f32" or c.chance(50)) else f"(~{self.expr(t, d)})"
        if k == 5 and t != "u32":
            return f"abs({self.expr(t, d)})"
        if k == 6:
            other = self.lit(t) if c.chance(30) else self.expr(t, d)
            return f"{c.pick(['min', 'max'])}({self.expr(t, d)}, {other})"
        if k == 7:
            src = c.pick([x for x in ("i32", "u32", "f32", "bool") if x != t])
            return f"aw.{t}({self.expr(src, d)})"
        if k == 8:
            return f"({self.expr(t, d)} if {self.bexpr(d)} else {self.expr(t, d)})"
        if k == 9:
            if t == "f32" and c.chance(50):
                return f"aw.{c.pick(['sqrt', 'floor'])}({self.expr(t, d)})"
            if c.chance(50):
                return f"h_sel({self.bexpr(d)}, {self.expr(t, d)}, {self.expr(t, d)})"
            return f"h_clamp({self.expr(t, d)}, {self.expr(t, d)}, {self.expr(t, d)})"
        if k in (5, 10):
            return self.load(t, depth)
        return self.var(t)

    def cmp(self, depth: int) -> str:
        c = self.ch
        t = c.pick(["i32", "u32", "f32"])
        op = c.pick(["<", "<=", ">", ">=", "==", "!="])
        b = self.lit(t) if c.chance(40) else self.expr(t, depth)
        if c.chance(10):
            return f"({self.expr(t, depth)} {op} {b} {c.pick(['<', '<='])} {self.expr(t, depth)})"
        return f"({self.expr(t, depth)} {op} {b})"

    def bexpr(self, depth: int) -> str:
        c = self.ch
        if depth <= 0:
            return self.var("bool") if c.chance(40) else self.cmp(0)
        d = depth - 1
        k = c.draw(0, 8)
        if k <= 2:
            return self.cmp(d)
        if k == 3:
            return self.var("bool")
        if k == 4:
            return f"(not {self.bexpr(d)})"
        if k == 5:
            return f"({self.bexpr(d)} {c.pick(['and', 'or'])} {self.bexpr(d)})"
        if k == 6:
            return f"({self.bexpr(d)} {c.pick(['==', '!=', '^', '&', '|'])} {self.bexpr(d)})"
        if k == 7:
            return f"h_ne({self.bexpr(d)}, {self.bexpr(d)})" if c.chance(50) else \
                f"h_pos({self.expr(c.pick(['i32', 'f32']), d)})"
        return f"({self.bexpr(d)} and {self.load('i32', d)} > {self.lit('i32')})"

    def cond(self, depth: int) -> str:
        c = self.ch
        if c.chance(10):
            return self.expr(c.pick(["i32", "u32", "f32"]), depth)  # truthiness
        return self.bexpr(depth)

    # -- statements ------------------------------------------------------------------
    def emit(self, indent: int, text: str) -> None:
        self.lines.append("    " * indent + text)

    def assignable(self, t: str) -> str:
        c = self.ch
        if t == "i32":
            return f"a{c.draw(0, self.n_int - 1)}"
        return self.var(t)

    def block(self, indent: int, depth: int, n: int) -> None:
        for _ in range(n):
            self.stmt(indent, depth)

    def stmt(self, indent: int, depth: int) -> None:
        c = self.ch
        ed = c.draw(1, 3)
        k = c.draw(0, 13 if depth < self.MAX_DEPTH else 5)
        if k <= 1:
            t = c.pick(["i32", "i32", "u32", "f32", "bool"])
            self.emit(indent, f"{self.assignable(t)} = {self.expr(t, ed)}")
        elif k == 2:
            t = c.pick(["i32", "u32", "f32"])
            ops = ["+", "-", "*", "//"] + (["/"] if t == "f32" else ["%", "&", "|", "^", "<<", ">>"])
            op = c.pick(ops)
            rhs = (str(c.draw(0, 35)) if op in ("<<", ">>") else
                   self.lit(t) if c.chance(40) else self.expr(t, ed))
            self.emit(indent, f"{self.assignable(t)} {op}= {rhs}")
        elif k == 3:
            t = c.pick(["i32", "u32", "f32"])
            buf = {"i32": "ib", "u32": "ub", "f32": "fb"}[t]
            self.emit(indent, f"{buf}[{self.index(1)}] = {self.expr(t, ed)}")
        elif k == 4:
            t = c.pick(["i32", "u32", "f32"])
            self.emit(indent, f"{self.assignable(t)} = {self.expr(t, 1)} if {self.bexpr(1)} else "
                              f"{self.expr(t, 1)}")
        elif k == 5:
            if self.loop_depth and c.chance(50):
                self.emit(indent, f"if {self.cond(1)}:")
                self.stmt(indent + 1, self.MAX_DEPTH)
                self.emit(indent + 1, c.pick(["break", "continue"]))
            elif c.chance(30):
                self.emit(indent, f"if {self.cond(1)}:")
                self.emit(indent + 1, "return")
            else:
                t = c.pick(["i32", "f32"])
                self.emit(indent, f"{self.assignable(t)} = {self.expr(t, 2)}")
        elif k <= 8:
            self.emit(indent, f"if {self.cond(2)}:")
            self.block(indent + 1, depth + 1, c.draw(1, 3))
            for _ in range(c.draw(0, 2)):
                self.emit(indent, f"elif {self.cond(2)}:")
                self.block(indent + 1, depth + 1, c.draw(1, 2))
            if c.chance(50):
                self.emit(indent, "else:")
                self.block(indent + 1, depth + 1, c.draw(1, 2))
        elif k <= 11:
            iv = f"i{depth}"
            form = c.draw(0, 5)
            if form == 0:
                rng = f"range({c.draw(0, 4)})"
            elif form == 1:
                rng = f"range({c.draw(-2, 2)}, {c.draw(-1, 4)})"
            elif form == 2:
                rng = f"range({c.draw(2, 4)}, {c.draw(-2, 1)}, -1)"
            elif form == 3:
                rng = f"range(({self.expr('i32', 1)} & 3) + {c.draw(0, 1)})"
            elif form == 4:
                rng = f"range({c.draw(0, 1)}, 7, {c.draw(2, 3)})"
            else:
                rng = f"range(0, 6, ({self.expr('i32', 1)} & 1) + 1)"
            self.emit(indent, f"for {iv} in {rng}:")
            self.loop_depth += 1
            self.block(indent + 1, depth + 1, c.draw(1, 3))
            self.loop_depth -= 1
        else:
            wv = f"w{depth}"
            self.emit(indent, f"{wv} = aw.i32(0)")
            self.emit(indent, f"while {wv} < {c.draw(1, 4)} and {self.cond(1)}:")
            self.emit(indent + 1, f"{wv} += 1")
            self.loop_depth += 1
            self.block(indent + 1, depth + 1, c.draw(1, 3))
            self.loop_depth -= 1

    # -- whole program -----------------------------------------------------------------
    def program(self) -> Program:
        hdr = ("@aw.kernel\n"
               "def k(ib: aw.Buffer[aw.i32], ub: aw.Buffer[aw.u32], fb: aw.Buffer[aw.f32],\n"
               "      oi: aw.Out[aw.i32], ou: aw.Out[aw.u32], of: aw.Out[aw.f32]):")
        self.lines = [hdr]
        e = self.emit
        e(1, "t = aw.global_id(0)")
        e(1, f"base = t * {SLOTS}")
        for k in range(self.n_int):
            e(1, f"a{k} = ib[base + {k % SLOTS}]")
        for k in range(self.n_uint):
            e(1, f"u{k} = ub[base + {k % SLOTS}]")
        for k in range(self.n_flt):
            e(1, f"f{k} = fb[base + {k % SLOTS}]")
        for k in range(self.MAX_DEPTH + 1):
            e(1, f"i{k} = aw.i32({k})")
            e(1, f"w{k} = aw.i32(0)")
        for k in range(self.n_bool):
            e(1, f"b{k} = t > 1000000")
        for k in range(self.n_bool):
            e(1, f"b{k} = {self.cmp(1)}")
        self.block(1, 0, self.n_stmts)
        self._epilogue()
        return Program("\n".join(self.lines) + "\n" + HELPERS, self.n_int, self.n_uint, self.n_flt, self.n_bool)

    def _epilogue(self) -> None:
        e = self.emit
        no = self.n_int + self.n_bool
        for k in range(self.n_int):
            e(1, f"oi[t * {no} + {k}] = a{k}")
        for k in range(self.n_bool):
            e(1, f"oi[t * {no} + {self.n_int + k}] = aw.i32(b{k})")
        for k in range(self.n_uint):
            e(1, f"ou[t * {self.n_uint} + {k}] = u{k}")
        for k in range(self.n_flt):
            e(1, f"of[t * {self.n_flt} + {k}] = f{k}")


def pressure_program(ch: Chooser, n_live: int = 110) -> Program:
    """A kernel keeping ``n_live`` i32 values live at once (all stored at the end), with a
    nested loop that updates a random subset of them across its back edges."""
    g = Gen(ch, n_int=n_live, n_uint=1, n_flt=1, n_bool=1, n_stmts=0)
    hdr = ("@aw.kernel\n"
           "def k(ib: aw.Buffer[aw.i32], ub: aw.Buffer[aw.u32], fb: aw.Buffer[aw.f32],\n"
           "      oi: aw.Out[aw.i32], ou: aw.Out[aw.u32], of: aw.Out[aw.f32]):")
    g.lines = [hdr]
    e = g.emit
    e(1, "t = aw.global_id(0)")
    e(1, f"base = t * {SLOTS}")
    e(1, "u0 = ub[base]")
    e(1, "f0 = fb[base]")
    e(1, "b0 = u0 > 7")
    for k in range(n_live):
        src = f"ib[base + {k % SLOTS}]"
        prev = f" + a{k - 1}" if k and ch.chance(50) else ""
        e(1, f"a{k} = {src} * {ch.draw(2, 1000)}{prev}")
    outer, inner = ch.draw(1, 3), ch.draw(1, 3)
    e(1, f"for i0 in range({outer}):")
    for _ in range(ch.draw(2, 6)):
        x, y = ch.draw(0, n_live - 1), ch.draw(0, n_live - 1)
        e(2, f"a{x} = a{x} {ch.pick(['+', '^', '-'])} (a{y} >> i0)")
    e(2, f"for i1 in range({inner}):")
    for _ in range(ch.draw(2, 6)):
        x, y = ch.draw(0, n_live - 1), ch.draw(0, n_live - 1)
        e(3, f"a{x} += a{y} * (i1 + i0)")
    x = ch.draw(0, n_live - 1)
    e(3, f"if a{x} > {ch.draw(0, 100)}:")
    e(4, "continue")
    y = ch.draw(0, n_live - 1)
    e(3, f"a{y} ^= i1")
    g._epilogue()
    return Program("\n".join(g.lines) + "\n" + HELPERS, n_live, 1, 1, 1, {"pressure": n_live})


# ----------------------------------------------------------------------------- running

_INT_SPECIAL = [0, 1, -1, 2, 7, -8, 100, 2**31 - 1, -2**31, 65536, -65537]
_UINT_SPECIAL = [0, 1, 2, 7, 100, 2**31, 2**32 - 1, 65535]
_FLT_SPECIAL = [0.0, -0.0, 1.0, -1.0, 0.5, 3.0, float("nan"), float("inf"), float("-inf"), 1e-40,
                3.4e38, -2.5, 1e9, 2.5e-3]


def make_inputs(seed: int, threads: int) -> dict[str, np.ndarray]:
    """Input buffers (``SLOTS`` elements per thread), a mix of special and random values."""
    rng = np.random.default_rng(seed)
    n = threads * SLOTS

    def mix(special: list[Any], rnd: np.ndarray, dtype: Any) -> np.ndarray:
        pick = rng.random(n) < 0.4
        sp = np.array(special, dtype=np.float64 if dtype == np.float64 else np.int64)[rng.integers(0, len(special), n)]
        out = np.where(pick, sp, rnd)
        return out.astype(dtype)

    small = rng.integers(-20, 20, n)
    ints = np.where(rng.random(n) < 0.5, small, rng.integers(-2**31, 2**31, n))
    return {
        "ib": mix(_INT_SPECIAL, ints, np.int64).astype(np.int32),
        "ub": mix(_UINT_SPECIAL, np.where(rng.random(n) < 0.5, np.abs(small),
                                          rng.integers(0, 2**32, n)), np.int64).astype(np.uint32),
        "fb": mix(_FLT_SPECIAL, (rng.standard_normal(n) * 10.0 ** rng.integers(-3, 4, n)), np.float64)
        .astype(np.float32),
    }


def reference(prog: Program, inputs: dict[str, np.ndarray], threads: int) -> dict[str, np.ndarray]:
    """Run the program's source per thread on the plain-Python model."""
    bufs = {k: v.copy() for k, v in inputs.items()}
    bufs["oi"] = np.zeros(threads * prog.out_i, np.int32)
    bufs["ou"] = np.zeros(threads * prog.n_uint, np.uint32)
    bufs["of"] = np.zeros(threads * prog.n_flt, np.float32)
    ns: dict[str, Any] = {"aw": MOCK, "min": lambda a, b: _minmax(a, b, True),
                          "max": lambda a, b: _minmax(a, b, False), "range": _range}
    exec(compile(prog.source, "<fuzz-reference>", "exec"), ns)  # noqa: S102 - our own generated text
    fn = ns["k"]
    cls = {"ib": I32, "ub": U32, "fb": F32, "oi": I32, "ou": U32, "of": F32}
    mocks = {k: _MockBuffer(v, cls[k]) for k, v in bufs.items()}
    for tid in range(threads):
        _ThreadState.tid = tid
        fn(mocks["ib"], mocks["ub"], mocks["fb"], mocks["oi"], mocks["ou"], mocks["of"])
    return bufs


def same_bits(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Element-wise bit equality; for floats two NaNs are equal (class exact-nan)."""
    if a.dtype == np.float32:
        return (a.view(np.uint32) == b.view(np.uint32)) | (np.isnan(a) & np.isnan(b))
    return a == b


# ----------------------------------------------------------------------------- tests

EXAMPLES = int(os.environ.get("ANYWAVE_FUZZ_EXAMPLES", "40"))
_counter = itertools.count()
_tmp = tempfile.mkdtemp(prefix="aw_fuzz_")
os.environ.setdefault("ANYWAVE_CACHE_DIR", os.path.join(_tmp, "cache"))
GRID, WG = 2, 20  # 40 threads: partial waves at every W


def load_kernel(source: str):
    """Write ``source`` to a file and import it with ``aw`` bound to the real package."""
    name = f"aw_fuzz_{os.getpid()}_{next(_counter)}"
    path = os.path.join(_tmp, name + ".py")
    with open(path, "w") as f:
        f.write(source)
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    mod.__dict__["aw"] = aw
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod.k


def check_program(prog: Program, seed: int, widths: tuple[int, ...]) -> None:
    """Compile ``prog``, run it at every W and compare with the reference (AssertionError
    with the source and the first differing element)."""
    threads = GRID * WG
    inputs = make_inputs(seed, threads)
    ref = reference(prog, inputs, threads)
    k = load_kernel(prog.source)
    for w in widths:
        bufs = {n: v.copy() for n, v in inputs.items()}
        bufs["oi"] = np.zeros(threads * prog.out_i, np.int32)
        bufs["ou"] = np.zeros(threads * prog.n_uint, np.uint32)
        bufs["of"] = np.zeros(threads * prog.n_flt, np.float32)
        k(bufs["ib"], bufs["ub"], bufs["fb"], bufs["oi"], bufs["ou"], bufs["of"], grid=GRID, workgroup=WG,
          wave_width=w)
        for n in ("ib", "ub", "fb", "oi", "ou", "of"):
            ok = same_bits(bufs[n], ref[n])
            if not ok.all():
                j = int(np.flatnonzero(~ok)[0])
                raise AssertionError(f"W={w} buffer {n}[{j}]: kernel {bufs[n][j]!r}, reference {ref[n][j]!r} "
                                     f"(thread {j // (len(ok) // threads)})\n--- program (seed {seed}) ---\n"
                                     + prog.source)


def _chooser(data: st.DataObject) -> Chooser:
    return Chooser(lambda lo, hi: data.draw(st.integers(lo, hi)))


_SETTINGS = dict(deadline=None, suppress_health_check=list(HealthCheck), derandomize=False)


@settings(max_examples=EXAMPLES, **_SETTINGS)
@given(data=st.data(), seed=st.integers(0, 2**31))
def test_random_kernels(data, seed):
    prog = Gen(_chooser(data), n_stmts=data.draw(st.integers(2, 10))).program()
    check_program(prog, seed, (8, 32))


@settings(max_examples=max(4, EXAMPLES // 10), **_SETTINGS)
@given(data=st.data(), seed=st.integers(0, 2**31))
def test_register_pressure_kernels(data, seed):
    prog = pressure_program(_chooser(data), n_live=data.draw(st.integers(100, 140)))
    check_program(prog, seed, (8, 32))


def test_pressure_beyond_register_file_spills():
    """More than 255 live values: the compiler spills to local memory (compiler/spill.py) and
    the result is still the reference's (never a miscompile)."""
    prog = pressure_program(Chooser.from_seed(7), n_live=300)
    assert load_kernel(prog.source).resources()["spilled"] > 0
    check_program(prog, 7, (8, 32))


@pytest.mark.slow
@settings(max_examples=EXAMPLES * 5, **_SETTINGS)
@given(data=st.data(), seed=st.integers(0, 2**31))
def test_random_kernels_all_widths(data, seed):
    prog = Gen(_chooser(data), n_stmts=data.draw(st.integers(2, 14))).program()
    check_program(prog, seed, (8, 16, 32, 64))


def campaign(start: int, count: int, widths: tuple[int, ...] = (8, 32)) -> int:
    """Check seeds ``start .. start+count-1`` (every 25th a register-pressure program);
    prints each failure with its program; returns the number of failures."""
    import time
    import traceback

    fails = 0
    t0 = time.time()
    for s in range(start, start + count):
        ch = Chooser.from_seed(s)
        prog = pressure_program(ch) if s % 25 == 0 else Gen(ch, n_stmts=ch.draw(2, 12)).program()
        try:
            check_program(prog, s, widths)
        except Exception as e:  # noqa: BLE001 - reported
            fails += 1
            print(f"=== seed {s}: {type(e).__name__}: {str(e)[:3000]}")
            if not isinstance(e, AssertionError):
                traceback.print_exc(limit=-3)
            print(prog.source)
    print(f"done {count} programs, {fails} failures, {time.time() - t0:.1f}s")
    return fails


if __name__ == "__main__":
    _w = tuple(int(x) for x in sys.argv[3].split(",")) if len(sys.argv) > 3 else (8, 32)
    sys.exit(1 if campaign(int(sys.argv[1]), int(sys.argv[2]), _w) else 0)
