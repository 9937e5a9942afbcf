"""The IR builder of the kernel language (:class:`IRBuilder`), composed by
:class:`~anywave.compiler.frontend.Frontend` and handed to every intrinsic's lowering as a
:class:`~anywave.compiler.builder.Builder`: emission, constants, predicates and bools,
conversions, the arithmetic, bit, shift and comparison operators (the rules they apply are in
:mod:`anywave.compiler.typerules`; the semantics chosen where Python and the hardware differ
are in :mod:`anywave.compiler.frontend`'s docstring), addressing, loads and stores, errors.
"""

from __future__ import annotations

import ast
import operator
import weakref
from collections.abc import Sequence
from typing import Any

import numpy as np

from anywave.binary.module import PRINT_ARG
from anywave.errors import SourceLoc
from anywave.isa import mnemonic
from anywave.isa.table import BY_MNEMONIC

from . import debugprint, ir
from . import typerules as tr
from . import types as ty
from .bindings import BufferView, LocalArray
from .bindings import describe as _describe
from .builder import ArgReader
from .constants import LiteralError, literal_bits
from .errors import CompileError
from .ir import LocAddr, Op, PredUse, Value
from .source import FuncSource
from .types import DType

_PY_CMP = {"lt": operator.lt, "le": operator.le, "gt": operator.gt, "ge": operator.ge, "eq": operator.eq,
           "ne": operator.ne}
_PY_BINOP = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
             ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow,
             ast.LShift: operator.lshift, ast.RShift: operator.rshift, ast.BitOr: operator.or_,
             ast.BitXor: operator.xor, ast.BitAnd: operator.and_}
BINOP_NAMES = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//",
               ast.Mod: "%", ast.Pow: "**", ast.LShift: "<<", ast.RShift: ">>", ast.BitOr: "|",
               ast.BitXor: "^", ast.BitAnd: "&", ast.MatMult: "@"}


class IRBuilder:
    """The builder of one kernel's IR, which :class:`~anywave.compiler.frontend.Frontend` (the
    AST visitor) composes and every intrinsic's lowering receives (it implements
    :class:`~anywave.compiler.builder.Builder`): emission into ``body``, constants,
    predicates, conversions, the arithmetic, bit, shift and comparison operators (by the type
    rules of ``rules``, :class:`~anywave.compiler.typerules.TypeRules`), addressing, loads and
    stores (narrow element types widen on load and keep their low bits on store; docs/spec.md
    §4 for the address forms), errors at the user's source, and the kernel's resources under
    construction (``args``, ``local_memory``, ``nfrag``, ``prints``). A call's arguments are read
    through the visitor, held weakly (:class:`~anywave.compiler.builder.ArgReader`).

    Every method that can refuse its operands takes ``node``, the expression they come from:
    its error points there (or at the literal at fault inside it). ``const`` alone accepts
    ``node=None``, for the compiler's own constants (0, 1, masks, strides).
    """

    def __init__(self, src: FuncSource, kernel_name: str, reader: ArgReader,
                 rules: tr.TypeRules = tr.RULES) -> None:
        # weakly: the visitor holds this builder, and a cycle would leave every compile's
        # visitor and IR to the cyclic collector, which compilation pauses
        self._reader = weakref.ref(reader)
        self.rules = rules
        #: typerules.alu_mnemonic's cache, read inline by alu() (only for the language's own rules)
        self._alu_hits = tr._ALU if rules is tr.RULES else {}
        self.kernel_name = kernel_name
        #: the function whose source is being translated (the visitor sets it when it inlines)
        self.src = src
        #: the block being emitted into (a region's body while the region is built)
        self.body: list[ir.Node] = []
        #: the construct being translated: the source location of the instructions emitted
        #: (debug info); errors never use it, each is raised with its own node
        self.node: ast.AST | None = None
        #: the statement being translated (an error about a constant looks for its literal there)
        self.stmt: ast.stmt | None = None
        #: (id(FuncSource), id(AST node)) -> the node's SourceLoc (loc())
        self._locs: dict[tuple[int, int], SourceLoc] = {}
        #: the kernel's ABI: (name, BufferType | DType) per argument
        self.args: list[tuple[str, Any]] = []
        #: bytes of local memory laid out so far
        self.local_memory = 0
        #: the launch's bytes of local memory sized at launch (aw.dynamic), or None when the
        #: kernel has none
        self.dynamic_local: int | None = None
        #: fragment slots taken (aw.fragment; compiler/mma_lang.py)
        self.nfrag = 0
        #: aw.print call sites (PrintFormat) and the index of the hidden print buffer argument
        self.prints: list[Any] = []
        self._print_buffer: int | None = None

    # ------------------------------------------------------------------ emission and errors
    def err(self, node: ast.AST | None, message: str) -> CompileError:
        """The CompileError ``message`` at ``node``, the construct at fault (its whole extent
        is underlined); None only for errors about the kernel as a whole (its def line)."""
        e = self.src.error(node, message)
        e.kernel = self.kernel_name
        e.args = (str(e),)
        return e

    def loc(self) -> SourceLoc | None:
        node = self.node
        if node is None:
            return None
        src = self.src
        key = (id(src), id(node))  # (both live as long as this translation)
        r = self._locs.get(key)
        if r is None:
            r = self._locs[key] = src.loc(node)
        return r

    def emit(self, mnemonic: str, *operands: Any) -> Op:
        op = Op(BY_MNEMONIC[mnemonic], list(operands), self.loc())
        self.body.append(op)
        return op

    def new(self, t: DType, name: str = "") -> Value:
        return Value(t, name)

    # ------------------------------------------------------------------ reading a call
    def visit(self, node: ast.AST) -> Any:
        """The value of kernel expression ``node`` (evaluated by the visitor)."""
        return self._reader().visit(node)  # type: ignore[union-attr]

    def static_eval(self, node: ast.AST) -> Any:
        """The value of ``node``, which must be known at compile time (CompileError otherwise)."""
        return self._reader().static_eval(node)  # type: ignore[union-attr]

    def call_args(self, node: ast.Call, lo: int, hi: int, what: str,
                    keywords: Sequence[str] = ()) -> list[Any]:
        for kw in node.keywords:
            if kw.arg not in keywords:
                valid = ", ".join(keywords) or "none"
                raise self.err(node, f"{what} got an unexpected keyword argument {kw.arg!r}; valid: {valid}")
        if not lo <= len(node.args) <= hi:
            n = f"{lo}" if lo == hi else f"{lo} to {hi}"
            raise self.err(node, f"{what} takes {n} positional arguments, got {len(node.args)}")
        out = [self.visit(a) for a in node.args]
        self.node = node
        return out

    def keyword_arg(self, node: ast.Call, name: str, default: Any) -> Any:
        for kw in node.keywords:
            if kw.arg == name:
                return self.static_eval(kw.value)
        return default

    def type_error(self, e: tr.TypeRuleError, node: ast.AST | None) -> CompileError:
        """The CompileError of a refused type rule: at the literal at fault when there is one
        in ``node`` (else in the statement), else at ``node``."""
        if e.literal is not tr.NO_LITERAL:
            lit = self.literal_node(e.literal, node)
            if lit is not None:
                node = lit
        return self.err(node, e.message)

    def mn(self, op: str, t: DType, node: ast.AST, what: str | None = None) -> str:
        """The table mnemonic for operation ``op`` on type ``t`` (CompileError at ``node`` if none)."""
        try:
            return self.rules.alu_mnemonic(op, t, what)
        except tr.TypeRuleError as e:
            raise self.type_error(e, node) from None

    # ------------------------------------------------------------------ constants
    def const(self, value: Any, t: DType, node: ast.AST | None = None) -> Value:
        """A register holding the Python constant ``value`` converted to ``t`` (range-checked;
        errors point at the literal inside ``node``, else at ``node``). ``node`` None: a
        constant the compiler makes itself, which always fits."""
        if t is ty.pred:
            p = self.new(ty.pred)
            self.emit("setp.true" if value else "setp.false", p)
            return p
        bits = self.const_bits(value, t, node)
        v = self.new(t, "c")
        self.emit(mnemonic("movi", type=ty.u32 if t is ty.bool_ else t), v, bits)
        return v

    def const_bits(self, value: Any, t: DType, node: ast.AST | None) -> int:
        """Bits of Python constant ``value`` as type ``t``, rounded once from the exact value
        (:func:`~anywave.compiler.constants.literal_bits`); errors point at the literal (in
        ``node``, else in the statement), else at ``node``."""
        if not isinstance(value, (bool, int, float, np.generic)):
            raise self.err(node, f"cannot use {_describe(value)} as {t.name}")
        try:
            return literal_bits(value, t)
        except LiteralError as e:
            raise self.err(self.literal_node(value, node) or node, str(e)) from None

    def literal_node(self, value: Any, node: ast.AST | None) -> ast.AST | None:
        """The literal in expression ``node`` (else in the statement being translated) whose
        value is ``value``, so that an error about a constant points at it rather than at the
        whole expression; None when the constant was computed (the caller then points at
        the expression)."""
        if isinstance(value, np.generic):
            value = value.item()
        for root in (node, self.stmt):
            if root is None:
                continue
            for n in ast.walk(root):
                if isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.USub) and isinstance(n.operand, ast.Constant):
                    lit = n.operand.value
                    if type(lit) is type(value) and not isinstance(lit, (str, bool)) and -lit == value:
                        return n
                if (isinstance(n, ast.Constant) and type(n.value) is type(value) and n.value == value
                        and not (isinstance(value, (int, float)) and value < 0)):
                    return n
        return None

    def default_type(self, value: Any, node: ast.AST) -> DType:
        """The type of Python constant ``value`` on its own (:func:`typerules.literal_type`;
        errors at the literal in ``node``, else at ``node``)."""
        try:
            return self.rules.literal_type(value)
        except tr.TypeRuleError as e:
            raise self.type_error(e, node) from None

    def materialize(self, x: Any, node: ast.AST, t: DType | None = None) -> Value:
        """A Value from a Value or Python constant (typed by ``t`` or by default rules);
        errors point at ``node``, the expression ``x`` comes from."""
        if isinstance(x, Value):
            if t is not None and x.type is not t:
                if t is ty.bool_ and x.type is ty.pred:
                    return self.pred_to_bool(x)
                raise self.err(node, f"expected a {t.name} value, got {x.type.name}; cast explicitly with "
                               f"aw.{t.name}(...)")
            return x
        if isinstance(x, (bool, int, float, np.generic)):
            return self.const(x, t or self.default_type(x, node), node)
        raise self.err(node, f"{_describe(x)} cannot be used as a value here")

    # ------------------------------------------------------------------ predicates / bools
    def pred_to_bool(self, p: Value) -> Value:
        one, zero = self.const(1, ty.u32), self.const(0, ty.u32)
        r = self.new(ty.bool_)
        self.emit("selp.b32", r, one, zero, PredUse(p))
        return r

    def as_pred(self, x: Any, node: ast.AST) -> PredUse:
        """A predicate operand for a condition: bools, comparisons, or Python truthiness of
        numbers (``x != 0``); errors point at ``node``, the condition's expression."""
        if isinstance(x, PredUse):
            return x
        if isinstance(x, Value):
            if x.type is ty.pred:
                return PredUse(x)
            p = self.new(ty.pred)
            zero = self.const(0, x.type if x.type is not ty.bool_ else ty.u32)
            self.emit(self.cmp_mn("ne", x.type, node), p, x, zero)
            return PredUse(p)
        if isinstance(x, (bool, int, float, np.generic)):
            p = self.new(ty.pred)
            self.emit("setp.true" if x else "setp.false", p)
            return PredUse(p)
        raise self.err(node, f"{_describe(x)} cannot be used as a condition")

    def pred_value(self, pu: PredUse) -> Value:
        if not pu.negated:
            return pu.value
        p = self.new(ty.pred)
        self.emit("mov.pred", p, pu)
        return p

    def cmp_mn(self, cmp: str, t: DType, node: ast.AST) -> str:
        """``setp.<cmp>.<t>`` (CompileError at ``node`` when the table has none)."""
        try:
            return self.rules.compare_mnemonic(cmp, t)
        except tr.TypeRuleError as e:
            raise self.type_error(e, node) from None

    # ------------------------------------------------------------------ typing
    def unify(self, a: Any, b: Any, what: str, node: ast.AST) -> DType:
        """The common type of two operands (Python constants take the other side's type;
        :func:`typerules.common_type`); errors point at ``node``, the operation (or at the
        literal at fault inside it)."""
        ta = a.type if isinstance(a, Value) else None
        tb = b.type if isinstance(b, Value) else None
        try:
            return self.rules.common_type(ta, a, tb, b, what)
        except tr.TypeRuleError as e:
            raise self.type_error(e, node) from None

    def coerce(self, x: Any, t: DType, node: ast.AST) -> Value:
        """``x`` as a value of type ``t``: constants are converted, typed values widened when
        exact (i32→i64, f16→f32 ...); errors point at ``node``, the expression ``x`` comes from."""
        if not isinstance(x, Value):
            return self.const(x, t, node)
        if x.type is t:
            return x
        if x.type is ty.pred:
            return self.cast(self.pred_to_bool(x), t, node) if t is not ty.bool_ else self.pred_to_bool(x)
        return self.cast(x, t, node)

    def cast(self, x: Value, t: DType, node: ast.AST) -> Value:
        """Value conversion (``cvt``): int↔float round to nearest even / truncate with
        saturation, int↔int wrap or extend, bool → 0/1, x → bool is ``x != 0`` (CompileError
        at ``node`` when there is no conversion)."""
        if x.type is t:
            return x
        if x.type is ty.pred:
            x = self.pred_to_bool(x)
            if t is ty.bool_:
                return x
        if t is ty.bool_:
            return self.pred_to_bool(self.as_pred(x, node).value)
        src = ty.u32 if x.type is ty.bool_ else x.type
        if src is t:
            r = self.new(t)
            self.emit("mov.b32", r, x)
            return r
        r = self.new(t)
        try:
            m = self.rules.conversion_mnemonic(src, t, x.type.name)
        except tr.TypeRuleError as e:
            raise self.type_error(e, node) from None
        self.emit(m, r, x)
        return r

    def bitcast(self, x: Value, t: DType, node: ast.AST) -> Value:
        """The bits of ``x`` as type ``t`` (same width; CompileError at ``node`` otherwise)."""
        src = ty.u32 if x.type in (ty.bool_, ty.pred) else x.type
        if x.type is ty.pred:
            x = self.pred_to_bool(x)
        try:
            self.rules.check_bitcast(src, t, x.type.name)
        except tr.TypeRuleError as e:
            raise self.type_error(e, node) from None
        r = self.new(t)
        self.emit("mov.b64" if t.bits == 64 else "mov.b32", r, x)
        return r


    def binop(self, op: type, a: Any, b: Any, node: ast.AST) -> Any:
        sym = BINOP_NAMES.get(op, "?")
        if isinstance(a, PredUse):
            a = self.pred_value(a)
        if isinstance(b, PredUse):
            b = self.pred_value(b)
        if not isinstance(a, Value) and not isinstance(b, Value):
            if isinstance(a, tuple) and isinstance(b, tuple) and op is ast.Add:
                return a + b  # compile-time concatenation (e.g. two aw.load4 results)
            if isinstance(a, tuple) or isinstance(b, tuple):
                raise self.err(node, f"operator {sym} on tuples is not supported in a kernel (only tuple + tuple)")
            try:
                return _PY_BINOP[op](a, b)
            except TypeError:
                raise self.err(node, f"operator {sym} is not defined for {_describe(a)} and {_describe(b)}") from None
            except Exception as e:  # noqa: BLE001 - reported with the user's line
                raise self.err(node, f"compile-time {sym} failed: {e}") from None
        if op is ast.Pow:
            return self._pow(a, b, node)
        if op is ast.MatMult:
            raise self.err(node, "the @ operator is not supported; use aw.mma on local tiles")
        if op in (ast.LShift, ast.RShift):
            return self._shift(op, a, b, node)
        t = self.unify(a, b, f"'{sym}'", node)
        if t is ty.bool_ and op in (ast.BitAnd, ast.BitOr, ast.BitXor):
            pa, pb = self.as_pred(self.coerce(a, t, node), node), self.as_pred(self.coerce(b, t, node), node)
            p = self.new(ty.pred)
            self.emit({ast.BitAnd: "and.pred", ast.BitOr: "or.pred", ast.BitXor: "xor.pred"}[op], p, pa, pb)
            return p
        if t is ty.bool_:
            raise self.err(node, f"operator {sym} is not defined for bool values; cast with aw.i32(...)")
        av, bv = self.coerce(a, t, node), self.coerce(b, t, node)
        if op is ast.Div:
            if not t.is_float:
                raise self.err(node, f"'/' on {t.name} values: true division of integers is not supported; "
                               "use '//' for floor division or cast to a float type first (aw.f32(x) / y)")
            return self.alu("div", t, av, bv, node=node)
        if op is ast.FloorDiv:
            return self._floordiv(t, av, bv, b, node)
        if op is ast.Mod:
            return self._mod(t, av, bv, b, node)
        name = {ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.BitAnd: "and", ast.BitOr: "or",
                ast.BitXor: "xor"}.get(op)
        if name is None:
            raise self.err(node, f"operator {sym} is not supported in a kernel")
        if name in ("and", "or", "xor") and t.is_float:
            raise self.err(node, f"operator {sym} is not defined for {t.name}; use aw.bitcast to an integer first")
        return self.alu(name, t, av, bv, node=node, what=sym)

    def alu(self, name: str, t: DType, *srcs: Value, node: ast.AST, what: str | None = None) -> Value:
        """A new ``t`` register = operation ``name`` of ``srcs`` (:meth:`mn`; errors at ``node``)."""
        r = Value(t)
        hit = self._alu_hits.get((name, id(t)))  # the rules' mnemonic cache, inline (the commonest call)
        self.emit(hit[1] if hit is not None and hit[0] is t else self.mn(name, t, node, what), r, *srcs)
        return r

    def _pow(self, a: Any, b: Any, node: ast.AST) -> Value:
        if isinstance(b, Value) or not isinstance(b, int) or isinstance(b, bool) or not 0 <= b <= 8:
            raise self.err(node, "** needs a compile-time integer exponent 0..8 (computed by repeated "
                           "multiplication, left to right); use aw.pow(x, y) for other powers")
        if not isinstance(a, Value):
            raise self.err(node, "** with a constant base and runtime exponent is not supported")
        if b == 0:
            return self.const(1, a.type)
        r = a
        for _ in range(b - 1):
            r = self.alu("mul", a.type, r, a, node=node)
        return r

    def _shift(self, op: type, a: Any, b: Any, node: ast.AST) -> Value:
        if not isinstance(a, Value):
            a = self.const(a, self.default_type(a, node) if not isinstance(b, Value) or b.type.bits == 32 else b.type,
                           node)
        if not a.type.is_int:
            raise self.err(node, f"shifts need an integer left operand, got {a.type.name}")
        if isinstance(b, Value):
            if not b.type.is_int:
                raise self.err(node, f"shift count must be an integer, got {b.type.name}")
            if b.type.bits == 64:
                # the ISA reads one unsigned 32-bit count (spec §8.3): saturate, never truncate, so
                # counts 2^32, 2^32 + 1, 2^63 ... stay ">= the width" (0 / the sign fill)
                if b.type is not ty.u64:
                    b = self.bitcast(b, ty.u64, node)
                b = self.cast(self.alu("min", ty.u64, b, self.const(0xFFFFFFFF, ty.u64), node=node), ty.u32, node)
        else:
            if not isinstance(b, int) or b < 0:
                raise self.err(node, f"shift count must be a non-negative integer, got {_describe(b)}")
            b = self.const(min(b, 255), ty.u32)
        r = self.new(a.type)
        if op is ast.LShift:
            self.emit(self.mn("shl", a.type, node), r, a, b)
        else:
            self.emit(self.mn("shr", a.type, node), r, a, b)
        return r

    def _floordiv(self, t: DType, a: Value, b: Value, b_raw: Any, node: ast.AST) -> Value:
        if t.is_float:
            q = self.alu("div", t, a, b, node=node)
            return self.alu("floor", t, q, node=node)
        if t.is_signed and isinstance(b_raw, int) and b_raw > 0 and b_raw & (b_raw - 1) == 0:
            # floor division by 2^k is an arithmetic shift (exactly Python's semantics)
            k = self.const(b_raw.bit_length() - 1, ty.u32)
            return self.alu("shr", t, a, k, node=node)
        q = self.alu("div", t, a, b, node=node)
        if not t.is_signed:
            return q
        # Python floors: q -= 1 when the remainder is non-zero and its sign differs from b's
        r = self.alu("rem", t, a, b, node=node)
        fix = self._sign_fix(t, r, b, node)
        one = self.const(1, t)
        qm = self.alu("sub", t, q, one, node=node)
        out = self.new(t)
        self.emit("selp.b64" if t.bits == 64 else "selp.b32", out, qm, q, PredUse(fix))
        return out

    def _mod(self, t: DType, a: Value, b: Value, b_raw: Any, node: ast.AST) -> Value:
        if t.is_float:
            raise self.err(node, f"'%' on {t.name} is not supported; write a - b * aw.floor(a / b)")
        if isinstance(b_raw, int) and b_raw > 0 and b_raw & (b_raw - 1) == 0:
            # x % 2^k == x & (2^k - 1) for both signednesses under floor semantics
            return self.alu("and", t, a, self.const(b_raw - 1, t), node=node)
        r = self.alu("rem", t, a, b, node=node)
        if not t.is_signed:
            return r
        fix = self._sign_fix(t, r, b, node)
        rb = self.alu("add", t, r, b, node=node)
        out = self.new(t)
        self.emit("selp.b64" if t.bits == 64 else "selp.b32", out, rb, r, PredUse(fix))
        return out

    def _sign_fix(self, t: DType, r: Value, b: Value, node: ast.AST) -> Value:
        """Predicate: Python's floor correction applies (remainder non-zero with the sign
        opposite to the divisor's). Never for ``b == 0``: division by zero keeps the ISA's
        results (``x // 0 == -1``, ``x % 0 == x`` for every x, spec §8.1), so ``//`` and ``%``
        still satisfy ``x == (x // 0) * 0 + x % 0``."""
        zero = self.const(0, t)
        nz, neg, fix, bnz, fix2 = (self.new(ty.pred) for _ in range(5))
        self.emit(self.cmp_mn("ne", t, node), nz, r, zero)
        x = self.alu("xor", t, r, b, node=node)
        self.emit(self.cmp_mn("lt", t, node), neg, x, zero)
        self.emit("and.pred", fix, PredUse(nz), PredUse(neg))
        self.emit(self.cmp_mn("ne", t, node), bnz, b, zero)
        self.emit("and.pred", fix2, PredUse(fix), PredUse(bnz))
        return fix2

    def compare(self, cmp: str, a: Any, b: Any, node: ast.AST) -> Any:
        if isinstance(a, PredUse):
            a = self.pred_value(a)
        if isinstance(b, PredUse):
            b = self.pred_value(b)
        if not isinstance(a, Value) and not isinstance(b, Value):
            return _PY_CMP[cmp](a, b)
        t = self.unify(a, b, f"comparison {cmp}", node)
        if t is ty.bool_:
            if cmp not in ("eq", "ne"):
                raise self.err(node, "bool values only support == and !=")
            pa, pb = self.as_pred(self.coerce(a, t, node), node), self.as_pred(self.coerce(b, t, node), node)
            x = self.new(ty.pred)
            self.emit("xor.pred", x, pa, pb)
            if cmp == "ne":
                return x
            r = self.new(ty.pred)
            self.emit("mov.pred", r, PredUse(x, True))
            return r
        av, bv = self.coerce(a, t, node), self.coerce(b, t, node)
        r = self.new(ty.pred)
        self.emit(self.cmp_mn(cmp, t, node), r, av, bv)
        return r

    def select(self, p: PredUse, a: Value, b: Value) -> Value:
        r = self.new(a.type)
        self.emit("selp.b64" if a.type.bits == 64 else "selp.b32", r, a, b, p)
        return r

    # ------------------------------------------------------------------ addressing, loads and stores
    def index_offset(self, idx: Any, esize: int, node: ast.AST) -> tuple[Value, bool]:
        """Byte offset register for element index ``idx`` (value, is_64bit)."""
        if isinstance(idx, (bool, float)) or (not isinstance(idx, (int, Value, np.integer))):
            raise self.err(node, f"an index must be an integer, got {_describe(idx)}")
        if not isinstance(idx, Value):
            if idx < 0:
                raise self.err(node, f"negative index {idx}: kernels do not index from the end")
            return self.const(int(idx) * esize, ty.u32 if idx * esize < 1 << 32 else ty.u64, node), \
                idx * esize >= 1 << 32
        if not idx.type.is_int:
            raise self.err(node, f"an index must be an integer, got a {idx.type.name} value; cast with aw.i32(...)")
        if esize == 1:
            return idx, idx.type.bits == 64
        k = self.const(esize.bit_length() - 1, ty.u32)
        return self.alu("shl", idx.type, idx, k, node=node), idx.type.bits == 64

    def local_addr(self, arr: LocalArray, sl: ast.AST, node: ast.AST) -> LocAddr:
        idx = self.visit(sl)
        self.node = node
        return self.local_addr_of(arr, idx, node)

    def local_addr_of(self, arr: LocalArray, idx: Any, node: ast.AST) -> LocAddr:
        idxs = idx if isinstance(idx, tuple) else (idx,)
        if len(idxs) != len(arr.shape):
            raise self.err(node, f"local array of shape {arr.shape} needs {len(arr.shape)} indices, got {len(idxs)}")
        esize = arr.elem.scalar.nbytes
        const_part = 0
        dyn: Value | None = None
        stride = 1
        for i, dim in reversed(list(zip(idxs, arr.shape, strict=True))):
            if isinstance(i, PredUse) or isinstance(i, (bool, float)):
                raise self.err(node, f"a local-array index must be an integer, got {_describe(i)}")
            if isinstance(i, Value):
                if not i.type.is_int or i.type.bits != 32:
                    raise self.err(node, f"a local-array index must be i32 or u32, got {i.type.name}")
                term = i if stride == 1 else self.alu("mul", i.type, i, self.const(stride, i.type), node=node)
                if dyn is not None and dyn.type is not term.type:
                    term = self.cast(term, dyn.type, node)
                dyn = term if dyn is None else self.alu("add", dyn.type, dyn, term, node=node)
            else:
                if not 0 <= int(i) < dim:
                    raise self.err(node, f"index {int(i)} is out of range for a dimension of size {dim}")
                const_part += int(i) * stride
            stride *= dim
        imm = arr.base + const_part * esize
        if dyn is None:
            return LocAddr(self.const(0, ty.u32), imm)
        off, _ = self.index_offset(dyn, esize, node)
        return LocAddr(off, imm)

    def load(self, space: str, elem: DType, addr: Any, wide: bool) -> Value:
        vt = ty.value_type_of_element(elem)
        if elem is ty.bool8:  # a byte; true where it is not 0 (NumPy's, C's bool in memory)
            b = self.new(ty.u32)
            self.emit(mnemonic("ld", space, "u8", addr64=wide), b, addr)
            p = self.new(ty.pred)
            self.emit("setp.ne.u32", p, b, self.const(0, ty.u32))
            return self.pred_to_bool(p)
        r = self.new(vt)
        nb = elem.scalar.nbytes
        if nb == 8:
            kind = "b64"
        elif nb == 4:
            kind = "b32"
        elif nb == 2:
            kind = "i16" if elem is ty.i16 else "u16"
        else:
            kind = "i8" if elem is ty.i8 else "u8"
        self.emit(mnemonic("ld", space, kind, addr64=wide), r, addr)
        return r

    def store_value(self, value: Any, elem: DType, node: ast.AST) -> Value:
        vt = ty.value_type_of_element(elem)
        if isinstance(value, PredUse):
            value = self.pred_value(value)
        if isinstance(value, Value) and value.type is not vt:
            if value.type is ty.pred and (vt.is_int or vt is ty.bool_):
                return self.cast(value, vt, node)
            what = "bool" if elem is ty.bool8 else elem.name
            raise self.err(node, f"cannot store a {value.type.name} value into {what} elements; cast "
                           f"explicitly with aw.{'bool_' if vt is ty.bool_ else vt.name}(...)")
        if elem is ty.bool8 and not isinstance(value, (Value, bool, np.bool_)):
            raise self.err(node, f"cannot store {_describe(value)} into bool elements; store True/False or a "
                           "bool value (aw.bool_(x) is x != 0)")
        if not isinstance(value, Value):
            if elem in ty.NARROW_TYPES:
                bits = elem.scalar.bits
                lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if elem.is_signed else (0, (1 << bits) - 1)
                if isinstance(value, int) and not lo <= value <= hi:
                    raise self.err(node, f"{value} does not fit in {elem.name} ({lo}..{hi})")
            return self.const(value, vt, node)
        return value

    def store(self, space: str, elem: DType, addr: Any, v: Value, wide: bool) -> None:
        nb = elem.scalar.nbytes
        self.emit(mnemonic("st", space, f"b{nb * 8}", addr64=wide), addr, v)

    def view_index(self, view: BufferView, idx: Any, node: ast.AST) -> Any:
        idxs = idx if isinstance(idx, tuple) else (idx,)
        if len(idxs) != len(view.shape):
            raise self.err(node, f"{view!r} needs {len(view.shape)} indices, got {len(idxs)}")
        lin: Any = 0
        for i, s in zip(idxs, view.strides, strict=True):
            if isinstance(i, PredUse) or isinstance(i, (bool, float)):
                raise self.err(node, f"an index must be an integer, got {_describe(i)}")
            term = self.binop(ast.Mult, i, s, node) if not (isinstance(s, int) and s == 1) else i
            lin = term if (isinstance(lin, int) and lin == 0) else self.binop(ast.Add, lin, term, node)
        return lin

    # ------------------------------------------------------------------ aw.print
    def add_print(self, pf: Any) -> int:
        """Record an aw.print call site; returns its index."""
        self.prints.append(pf)
        return len(self.prints) - 1

    def print_buffer_index(self) -> int:
        """ABI index of the hidden aw.print buffer (added as the last argument on first use)."""
        if self._print_buffer is None:
            self._print_buffer = len(self.args)
            self.args.append((PRINT_ARG, debugprint.PRINT_BUFFER_TYPE))
        return self._print_buffer
