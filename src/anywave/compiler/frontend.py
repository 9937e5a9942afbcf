"""Frontend: Python AST of a kernel → typed structured IR (:mod:`anywave.compiler.ir`).

One ``visit_*`` method per Python construct (Triton's ``code_generator.py`` is the model);
every error is a :class:`CompileError` pointing at the user's own line with a caret.

Semantics chosen where Python and the hardware differ (documented in
:mod:`anywave.compiler`): integers wrap (two's complement, 32 or 64 bits); ``//`` and ``%``
on signed integers follow Python (floor division, remainder with the divisor's sign) by
emitting a correction after ``div``/``rem``; integer division by zero does not trap: ``x // 0``
is -1 (all ones: the largest value for unsigned types) and ``x % 0`` is ``x``, for every x
and type (the ISA's results, spec §8.1; no floor correction on top); ``/`` on integers is an error (cast to a float
type first); ``>>`` is arithmetic on signed, logical on unsigned; shift counts >= the width
give 0 (or -1 for ``>>`` of a negative signed value), as Python would after wrapping;
``and``/``or``/``not`` work on booleans and short-circuit: when the right operand loads,
stores or calls an atomic it runs only in the lanes that need it.
"""

from __future__ import annotations

import ast
import builtins
import math
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from anywave.binary.module import PRINT_ARG
from anywave.errors import SourceLoc
from anywave.isa.table import BY_MNEMONIC
from anywave.isa.types import Access, MemoryOrder, Scope, SpecialRegister

from . import ir
from . import language as L
from . import types as ty
from .constants import LiteralError, literal_bits
from .errors import CompileError
from .fingerprint import UNDEFINED as _UNDEFINED
from .fingerprint import resolve as resolve_free_name
from .frontend_perf import BufferView, PerfOps, RegisterArray
from .ir import DevAddr, LocAddr, Op, PredUse, Value
from .mma_lang import FragmentIntrinsics
from .types import DType
from .wdep import W_DEPENDENT_INTRINSICS

SR = SpecialRegister
_DIM_SR = {
    "global_id": (SR.GLOBAL_ID_X, SR.GLOBAL_ID_Y, SR.GLOBAL_ID_Z),
    "local_id": (SR.THREAD_ID_X, SR.THREAD_ID_Y, SR.THREAD_ID_Z),
    "thread_id": (SR.THREAD_ID_X, SR.THREAD_ID_Y, SR.THREAD_ID_Z),
    "workgroup_id": (SR.WORKGROUP_ID_X, SR.WORKGROUP_ID_Y, SR.WORKGROUP_ID_Z),
    "workgroup_size": (SR.WORKGROUP_SIZE_X, SR.WORKGROUP_SIZE_Y, SR.WORKGROUP_SIZE_Z),
    "num_workgroups": (SR.GRID_SIZE_X, SR.GRID_SIZE_Y, SR.GRID_SIZE_Z),
}
_NODIM_SR = {"lane_id": SR.LANE_ID, "wave_id": SR.WAVE_ID, "wave_width": SR.WAVE_WIDTH,
             "num_waves": SR.NUM_WAVES, "thread_linear_id": SR.THREAD_LINEAR_ID}
_SCOPES = {s.name.lower(): s for s in Scope}
_ORDERS = {o.name.lower(): o for o in MemoryOrder}
_CMP = {ast.Lt: "lt", ast.LtE: "le", ast.Gt: "gt", ast.GtE: "ge", ast.Eq: "eq", ast.NotEq: "ne"}
_PY_CMP = {"lt": lambda a, b: a < b, "le": lambda a, b: a <= b, "gt": lambda a, b: a > b,
           "ge": lambda a, b: a >= b, "eq": lambda a, b: a == b, "ne": lambda a, b: a != b}
_BINOP_NAMES = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//",
                ast.Mod: "%", ast.Pow: "**", ast.LShift: "<<", ast.RShift: ">>", ast.BitOr: "|",
                ast.BitXor: "^", ast.BitAnd: "&", ast.MatMult: "@"}
_INT_RANGE = {"i32": (-(1 << 31), (1 << 31) - 1), "u32": (0, (1 << 32) - 1),
              "i64": (-(1 << 63), (1 << 63) - 1), "u64": (0, (1 << 64) - 1)}
_F64_MAX_REPR = float("inf")
#: most copies of one loop body that unrolling (aw.range(unroll=k), aw.static_range, nested:
#: the product) may make; beyond it compilation would take minutes and megabytes
MAX_UNROLLED_COPIES = 4096


# ----------------------------------------------------------------------------- bindings

@dataclass(frozen=True)
class BufferArg:
    """A buffer parameter: ABI index, element type and access."""

    name: str
    index: int
    elem: DType
    access: Access


@dataclass(frozen=True)
class LocalArray:
    """A local-memory array: byte offset in the kernel's local memory, element type, shape."""

    base: int
    elem: DType
    shape: tuple[int, ...]

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape)) * self.elem.scalar.nbytes


@dataclass
class FuncSource:
    """A parsed Python function: AST, file, first line and source lines (for messages)."""

    fn: Callable[..., Any]
    tree: ast.FunctionDef
    file: str
    first_line: int
    lines: list[str]
    col_offset: int = 0
    #: (line, col) -> SourceLoc: every instruction of a statement carries the same
    #: (immutable) location object instead of a new one each
    _locs: dict[tuple[int, int], SourceLoc] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def of(cls, fn: Callable[..., Any]) -> FuncSource:
        import inspect
        import textwrap

        try:
            src_lines, first = inspect.getsourcelines(fn)
            file = inspect.getsourcefile(fn) or "<unknown>"
        except (OSError, TypeError) as e:
            raise CompileError(f"cannot read the source of {getattr(fn, '__name__', fn)!r}: {e}; kernels "
                               "must be defined in a file (not typed at an interactive prompt)") from None
        text = "".join(src_lines)
        dedented = textwrap.dedent(text)
        indent = len(src_lines[0]) - len(src_lines[0].lstrip())
        module = ast.parse(dedented)
        tree = next((n for n in module.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))), None)
        if not isinstance(tree, ast.FunctionDef):
            raise CompileError(f"{fn.__name__!r} is not a plain function definition")
        return cls(fn, tree, file, first, text.splitlines(), indent)

    def loc(self, node: ast.AST) -> SourceLoc:
        line = getattr(node, "lineno", 1)
        col = getattr(node, "col_offset", 0)
        r = self._locs.get((line, col))
        if r is None:
            r = self._locs[(line, col)] = SourceLoc(self.file, self.first_line + line - 1,
                                                    col + 1 + self.col_offset)
        return r

    def error(self, node: ast.AST | None, message: str) -> CompileError:
        if node is None or not hasattr(node, "lineno"):
            return CompileError(message, SourceLoc(self.file, self.first_line))
        loc = self.loc(node)
        idx = node.lineno - 1  # type: ignore[attr-defined]
        line = self.lines[idx] if 0 <= idx < len(self.lines) else None
        end = getattr(node, "end_col_offset", None)
        length = 1
        if end is not None and getattr(node, "end_lineno", node.lineno) == node.lineno:  # type: ignore[attr-defined]
            length = max(1, end - node.col_offset)  # type: ignore[attr-defined]
        return CompileError(message, loc, line, length)


@dataclass
class _FuncCtx:
    """State of one inlined function body (the kernel itself is the outermost)."""

    src: FuncSource
    consts: dict[str, Any]
    var_values: dict[str, Value] = field(default_factory=dict)
    defined: set[str] = field(default_factory=set)
    assigned_where: dict[str, ast.AST] = field(default_factory=dict)
    const_names: set[str] = field(default_factory=set)
    is_kernel: bool = True
    ret_var: Value | None = None
    ret_const: Any = None
    ret_wrapped: bool = False
    loop_depth: int = 0
    ret_type_node: ast.AST | None = None
    #: constant returns seen before the return type was known: (placeholder op, value, node)
    pending: list[tuple[Op, Any, ast.AST]] = field(default_factory=list)


class _Terminated(Exception):
    """Internal: the rest of a block is unreachable (after break/continue/return)."""


# ----------------------------------------------------------------------------- the visitor

#: node class -> the ``Frontend.visit_<Class>`` function (None: unsupported), filled on demand
_VISITORS: dict[type, Any] = {}


class Frontend(PerfOps, FragmentIntrinsics, ast.NodeVisitor):
    """Translates one kernel (and the ``@aw.func`` functions it calls, inlined) to IR.

    After :meth:`build`: ``body`` (IR), ``args`` (ABI list of (name, BufferArg | DType)),
    ``local_memory`` (bytes), ``capabilities_hint`` nothing — capabilities come from the
    emitted instructions.
    """

    def __init__(self, src: FuncSource, constants: dict[str, Any], kernel_name: str) -> None:
        self.kernel_name = kernel_name
        self.body: list[ir.Node] = []
        self.args: list[tuple[str, Any]] = []
        self.local_memory = 0
        self.ctx = _FuncCtx(src, dict(constants))
        self.node: ast.AST | None = None
        #: the statement being translated (errors about its literals point into it)
        self._stmt: ast.stmt | None = None
        self._inline_stack: list[Any] = []
        self._discard = False
        self._const_cache: dict[tuple[str, int], Value] = {}
        #: aw.print call sites (PrintFormat) and the index of the hidden print buffer argument
        self.prints: list[Any] = []
        self._print_buffer: int | None = None
        #: copies of the current loop body made by enclosing unrolled loops (aw.range(unroll=),
        #: aw.static_range); bounded by MAX_UNROLLED_COPIES
        self._unroll_copies = 1
        #: the and/or expression being visited as a condition (see visit_cond)
        self._cond_boolop: ast.AST | None = None
        #: uses of W-dependent intrinsics outside W-invariant library functions (compiler/wdep.py)
        self.w_uses: list[str] = []
        self._w_invariant_depth = 0

    # ------------------------------------------------------------------ helpers
    @property
    def src(self) -> FuncSource:
        return self.ctx.src

    def err(self, node: ast.AST | None, message: str) -> CompileError:
        e = self.src.error(node if node is not None else self.node, message)
        e.kernel = self.kernel_name
        e.args = (str(e),)
        return e

    def loc(self) -> SourceLoc | None:
        return self.src.loc(self.node) if self.node is not None else None

    def emit(self, mnemonic: str, *operands: Any) -> Op:
        op = Op(BY_MNEMONIC[mnemonic], list(operands), self.loc())
        self.body.append(op)
        return op

    def new(self, t: DType, name: str = "") -> Value:
        return Value(t, name)

    def mn(self, op: str, t: DType, what: str | None = None) -> str:
        """The table mnemonic for operation ``op`` on type ``t`` (CompileError if none)."""
        s = "u32" if t is ty.bool_ else t.scalar.spelling
        b = 64 if t.bits == 64 else 32
        if t.is_float:
            cands = [f"{op}.{s}"]
        elif op in ("add", "sub", "mul", "neg", "mad"):
            cands = [f"{op}.i{b}"]
        elif op in ("and", "or", "xor", "not", "shl", "popc", "clz", "ctz", "brev"):
            cands = [f"{op}.b{b}"]
        else:
            cands = [f"{op}.{s}"]
        for c in cands:
            if c in BY_MNEMONIC:
                return c
        raise self.err(None, f"{what or op!r} is not supported for type {t.name}"
                       + _valid_types_hint(op))

    # ------------------------------------------------------------------ constants
    def const(self, value: Any, t: DType) -> Value:
        """A register holding the Python constant ``value`` converted to ``t`` (range-checked)."""
        if t is ty.pred:
            p = self.new(ty.pred)
            self.emit("setp.true" if value else "setp.false", p)
            return p
        bits = self.const_bits(value, t)
        v = self.new(t, "c")
        if t.bits == 64:
            self.emit(f"movi.{t.scalar.spelling}", v, bits)
        elif t is ty.bool_:
            self.emit("movi.u32", v, bits)
        else:
            self.emit(f"movi.{t.scalar.spelling}", v, bits)
        return v

    def const_bits(self, value: Any, t: DType) -> int:
        """Bits of Python constant ``value`` as type ``t``, rounded once from the exact value
        (:func:`~anywave.compiler.constants.literal_bits`); errors point at the literal."""
        if not isinstance(value, (bool, int, float, np.generic)):
            raise self.err(None, f"cannot use {_describe(value)} as {t.name}")
        try:
            return literal_bits(value, t)
        except LiteralError as e:
            raise self.err(self.literal_node(value), str(e)) from None

    def literal_node(self, value: Any) -> ast.AST | None:
        """The literal in the current expression (else statement) whose value is ``value``,
        so that an error about a constant points at it rather than at the whole statement;
        None when the constant was computed (the caller then points at the expression)."""
        if isinstance(value, np.generic):
            value = value.item()
        for root in (self.node, self._stmt):
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

    def default_type(self, value: Any) -> DType:
        if isinstance(value, bool):
            return ty.bool_
        if isinstance(value, int):
            lo, hi = _INT_RANGE["i32"]
            if lo <= value <= hi:
                return ty.i32
            raise self.err(self.literal_node(value), f"integer literal {value} does not fit in i32; write "
                           f"aw.i64({value}) for a 64-bit value")
        if isinstance(value, float):
            return ty.f32
        raise self.err(None, f"{_describe(value)} is not a kernel value; "
                       "valid: numbers, booleans and typed values")

    def materialize(self, x: Any, t: DType | None = None) -> Value:
        """A Value from a Value or Python constant (typed by ``t`` or by default rules)."""
        if isinstance(x, Value):
            if t is not None and x.type is not t:
                if t is ty.bool_ and x.type is ty.pred:
                    return self.pred_to_bool(x)
                raise self.err(None, f"expected a {t.name} value, got {x.type.name}; cast explicitly with "
                               f"aw.{t.name}(...)")
            return x
        if isinstance(x, (bool, int, float, np.generic)):
            return self.const(x, t or self.default_type(x))
        raise self.err(None, f"{_describe(x)} cannot be used as a value here")

    # ------------------------------------------------------------------ predicates / bools
    def pred_to_bool(self, p: Value) -> Value:
        one, zero = self.const(1, ty.u32), self.const(0, ty.u32)
        r = self.new(ty.bool_)
        self.emit("selp.b32", r, one, zero, PredUse(p))
        return r

    def as_pred(self, x: Any, node: ast.AST | None = None) -> PredUse:
        """A predicate operand for a condition: bools, comparisons, or Python truthiness of
        numbers (``x != 0``)."""
        if isinstance(x, PredUse):
            return x
        if isinstance(x, Value):
            if x.type is ty.pred:
                return PredUse(x)
            p = self.new(ty.pred)
            zero = self.const(0, x.type if x.type is not ty.bool_ else ty.u32)
            self.emit(self.cmp_mn("ne", x.type), p, x, zero)
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

    def cmp_mn(self, cmp: str, t: DType) -> str:
        s = "u32" if t is ty.bool_ else t.scalar.spelling
        m = f"setp.{cmp}.{s}"
        if m not in BY_MNEMONIC:
            raise self.err(None, f"comparison {cmp} is not supported for {t.name}")
        return m

    # ------------------------------------------------------------------ typing
    def unify(self, a: Any, b: Any, what: str) -> DType:
        """The common type of two operands (Python constants take the other side's type)."""
        ta = a.type if isinstance(a, Value) else None
        tb = b.type if isinstance(b, Value) else None
        if ta is ty.pred:
            ta = ty.bool_
        if tb is ty.pred:
            tb = ty.bool_
        if ta is None and tb is None:
            return self.default_type(a if not isinstance(a, float) else a) if not isinstance(b, float) \
                else ty.f32
        if ta is None:
            return self._literal_fits(a, tb)
        if tb is None:
            return self._literal_fits(b, ta)
        if ta is tb:
            return ta
        if ta.is_float and tb.is_float:
            if {ta, tb} == {ty.f16, ty.bf16}:
                return ty.f32
            return ta if ta.bits >= tb.bits else tb
        if ta.is_int and tb.is_int and ta.is_signed == tb.is_signed:
            return ta if ta.bits >= tb.bits else tb
        hint = ("cast one side, e.g. aw.f32(x)" if ta.is_float != tb.is_float
                else "cast one side, e.g. aw.i32(x) or aw.u32(x)")
        raise self.err(None, f"operands of {what} have different types {ta.name} and {tb.name}; {hint} "
                       "(the language never converts silently between signedness or int/float)")

    def _literal_fits(self, lit: Any, t: DType) -> DType:
        if isinstance(lit, float) and not t.is_float:
            raise self.err(None, f"float literal {lit!r} used with an {t.name} value; cast the value with "
                           f"aw.f32(...) or write an integer literal")
        return t

    def coerce(self, x: Any, t: DType) -> Value:
        """``x`` as a value of type ``t``: constants are converted, typed values widened when
        exact (i32→i64, f16→f32 ...)."""
        if not isinstance(x, Value):
            return self.const(x, t)
        if x.type is t:
            return x
        if x.type is ty.pred:
            return self.cast(self.pred_to_bool(x), t) if t is not ty.bool_ else self.pred_to_bool(x)
        return self.cast(x, t)

    def cast(self, x: Value, t: DType) -> Value:
        """Value conversion (``cvt``): int↔float round to nearest even / truncate with
        saturation, int↔int wrap or extend, bool → 0/1, x → bool is ``x != 0``."""
        if x.type is t:
            return x
        if x.type is ty.pred:
            x = self.pred_to_bool(x)
            if t is ty.bool_:
                return x
        if t is ty.bool_:
            return self.pred_to_bool(self.as_pred(x).value)
        src = ty.u32 if x.type is ty.bool_ else x.type
        if src is t:
            r = self.new(t)
            self.emit("mov.b32", r, x)
            return r
        r = self.new(t)
        m = f"cvt.{t.scalar.spelling}.{src.scalar.spelling}"
        if m not in BY_MNEMONIC:
            raise self.err(None, f"no conversion from {x.type.name} to {t.name}")
        self.emit(m, r, x)
        return r

    def bitcast(self, x: Value, t: DType) -> Value:
        src = ty.u32 if x.type in (ty.bool_, ty.pred) else x.type
        if x.type is ty.pred:
            x = self.pred_to_bool(x)
        if src.scalar.bits != t.scalar.bits or t is ty.bool_:
            raise self.err(None, f"bitcast needs types of the same width: {x.type.name} is "
                           f"{src.scalar.bits} bits, {t.name} is {t.scalar.bits}")
        r = self.new(t)
        self.emit("mov.b64" if t.bits == 64 else "mov.b32", r, x)
        return r

    # ------------------------------------------------------------------ entry
    def build(self, params: Sequence[tuple[str, Any]]) -> list[ir.Node]:
        """Translate the kernel body. ``params``: (name, annotation) of runtime parameters."""
        fd = self.src.tree
        for name, ann in params:
            if name == PRINT_ARG:
                raise self.err(fd, f"parameter name {PRINT_ARG!r} is reserved for aw.print's buffer")
            if isinstance(ann, ty.BufferType):
                self.ctx.consts[name] = BufferArg(name, len(self.args), ann.elem, ann.access)
                self.args.append((name, ann))
            else:
                self.args.append((name, ann))
                idx = len(self.args) - 1
                self.node = fd
                var = self._declare_var(name, ann, fd)
                self.emit("ldarg.b64" if ann.bits == 64 else "ldarg.b32", var, idx)
                self.ctx.defined.add(name)
        self._prescan(fd)
        self.visit_block(fd.body)
        return self.body

    def _prescan(self, fd: ast.FunctionDef) -> None:
        """Names assigned exactly once, at the function's top level, from a Python constant
        expression become compile-time constants; everything else assigned is a variable."""
        counts = _assign_counts(fd)
        for stmt in fd.body:
            if (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1
                    and isinstance(stmt.targets[0], ast.Name) and counts.get(stmt.targets[0].id) == 1):
                self.ctx.const_names.add(stmt.targets[0].id)
        for a in fd.args.args + fd.args.kwonlyargs:
            if counts.get(a.arg, 0) > 0:
                self.ctx.const_names.discard(a.arg)

    # ------------------------------------------------------------------ statements
    def visit_block(self, stmts: list[ast.stmt]) -> bool:
        """Visit statements; returns True when the block ends in break/continue/return."""
        for s in stmts:
            try:
                self.visit(s)
            except _Terminated:
                return True
        return False

    def visit(self, node: ast.AST) -> Any:
        prev, prev_stmt = self.node, self._stmt
        if isinstance(node, (ast.stmt, ast.expr)):
            self.node = node
            if isinstance(node, ast.stmt):
                self._stmt = node
        try:
            t = type(node)
            method = _VISITORS.get(t, _VISITORS)
            if method is _VISITORS:  # not looked up yet for this node class
                method = _VISITORS[t] = getattr(Frontend, "visit_" + t.__name__, None)
            if method is None:
                raise self.err(node, f"{_construct(node)} is not supported in a kernel"
                               + _supported_hint(node))
            return method(self, node)
        finally:
            self.node, self._stmt = prev, prev_stmt

    def visit_Pass(self, node: ast.Pass) -> None:
        return None

    def visit_Expr(self, node: ast.Expr) -> None:
        if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            return None  # docstring
        if isinstance(node.value, (ast.Yield, ast.YieldFrom, ast.Await)):
            self.visit(node.value)  # reported as the unsupported construct it is
        if not isinstance(node.value, ast.Call):
            raise self.err(node, "an expression statement has no effect; only calls (barrier(), atomics, "
                           "stores through functions) may stand alone")
        self._discard = True
        try:
            self.visit(node.value)
        finally:
            self._discard = False
        return None

    def _declare_var(self, name: str, t: DType, node: ast.AST) -> Value:
        ctx = self.ctx
        v = ctx.var_values.get(name)
        if v is None:
            if t is ty.pred:
                t = ty.bool_
            v = Value(t, name, is_var=True)
            ctx.var_values[name] = v
            ctx.assigned_where[name] = node
        return v

    def assign_name(self, name: str, value: Any, node: ast.AST, ann: DType | None = None) -> None:
        ctx = self.ctx
        if isinstance(value, PredUse):
            value = self.pred_value(value)
        if name in ctx.const_names and not isinstance(value, Value) and ann is None:
            ctx.consts[name] = value
            return
        if not isinstance(value, Value):
            if isinstance(value, (bool, int, float, np.generic)):
                existing = ctx.var_values.get(name)
                t = ann or (existing.type if existing is not None else self.default_type(value))
                try:
                    value = self.const(value, t)
                except CompileError as e:
                    if existing is None:
                        raise
                    where = ctx.assigned_where.get(name)
                    line = self.src.loc(where).line if where is not None else "?"
                    raise self.err(node, f"variable {name!r} has type {t.name} (first assigned at line {line}); "
                                   f"it cannot be assigned {_describe(value)}: {e.message}") from None
            else:
                if name in ctx.var_values:
                    raise self.err(node, f"{name!r} is a runtime variable; it cannot be rebound to "
                                   f"{_describe(value)}")
                ctx.consts[name] = value  # arrays, buffers, dtypes: compile-time bindings
                return
        t = ann or value.type
        if value.type is ty.pred:
            value = self.pred_to_bool(value)
        existing = ctx.var_values.get(name)
        if existing is not None and existing.type is not (value.type if ann is None else ann):
            where = ctx.assigned_where.get(name)
            line = self.src.loc(where).line if where is not None else "?"
            raise self.err(node, f"variable {name!r} has type {existing.type.name} (first assigned at line "
                           f"{line}); it cannot be assigned a {value.type.name} value — cast explicitly, "
                           f"e.g. aw.{existing.type.name}(...)")
        if ann is not None and value.type is not ann:
            value = self.coerce(value, ann)
        var = self._declare_var(name, t if t is not ty.pred else ty.bool_, node)
        if value is not var:
            last = self.body[-1] if self.body else None
            if (isinstance(last, Op) and not value.is_var and last.defs() == [value]
                    and not any(value is u for u in last.uses())):
                # retarget the defining instruction instead of copying
                last.operands = [var if o is value else o for o in last.operands]
            else:
                self.emit("mov.b64" if var.type.bits == 64 else "mov.b32", var, value)
        ctx.defined.add(name)

    def visit_Assign(self, node: ast.Assign) -> None:
        value = self.visit(node.value)
        for target in node.targets:
            self.assign_target(target, value, node)

    def assign_target(self, target: ast.AST, value: Any, node: ast.AST) -> None:
        if isinstance(target, ast.Name):
            self.assign_name(target.id, value, target)
        elif isinstance(target, ast.Subscript):
            self.store_subscript(target, value)
        elif isinstance(target, (ast.Tuple, ast.List)):
            if not isinstance(value, tuple) or len(value) != len(target.elts):
                raise self.err(target, f"cannot unpack {_describe(value)} into {len(target.elts)} names")
            for t, v in zip(target.elts, value, strict=True):
                self.assign_target(t, v, node)
        else:
            raise self.err(target, f"cannot assign to {_construct(target)}; valid targets: a name, "
                           "buf[i], tile[i, j], or a tuple of those")

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        if not isinstance(node.target, ast.Name):
            raise self.err(node.target, "annotated assignment needs a plain name")
        ann = self.static_eval(node.annotation)
        if not isinstance(ann, DType) or ann not in ty.VALUE_TYPES:
            raise self.err(node.annotation, f"annotation must be a value type (aw.i32, aw.f32, ...), got "
                           f"{_describe(ann)}")
        if node.value is None:
            raise self.err(node, "a variable declaration needs a value: x: aw.f32 = 0.0")
        value = self.visit(node.value)
        self.ctx.const_names.discard(node.target.id)
        if isinstance(value, Value) and value.type is not ann:
            raise self.err(node.value, f"value of type {value.type.name} assigned to a variable declared "
                           f"{ann.name}; cast explicitly with aw.{ann.name}(...)")
        self.assign_name(node.target.id, value, node.target, ann)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        if isinstance(node.target, ast.Name):
            cur = self.load_name(node.target.id, node.target)
            self.node = node
            res = self.binop(type(node.op), cur, self.visit(node.value), node)
            if isinstance(cur, Value) and isinstance(res, Value) and res.type is not cur.type:
                raise self.err(node, f"'{node.target.id} {_BINOP_NAMES[type(node.op)]}= ...' would change "
                               f"{node.target.id!r} from {cur.type.name} to {res.type.name}; cast explicitly")
            self.assign_name(node.target.id, res, node.target)
        elif isinstance(node.target, ast.Subscript):
            cur = self.visit_Subscript(node.target)
            self.node = node
            res = self.binop(type(node.op), cur, self.visit(node.value), node)
            self.store_subscript(node.target, res)
        else:
            raise self.err(node.target, f"cannot assign to {_construct(node.target)}")

    # --- control flow
    def visit_If(self, node: ast.If) -> None:
        cond = self.visit_cond(node.test)
        if not isinstance(cond, Value) and not isinstance(cond, PredUse):
            if isinstance(cond, (bool, int, float, np.generic)) or cond is None:
                # static if: compile-time condition, only the taken branch is compiled
                taken = node.body if cond else node.orelse
                if self.visit_block(taken):
                    raise _Terminated
                return
            raise self.err(node.test, f"{_describe(cond)} cannot be used as a condition")
        self.node = node
        pu = self.as_pred(cond, node.test)
        ctx = self.ctx
        before = set(ctx.defined)
        saved = self.body
        n = ir.If(pu, loc=self.src.loc(node))
        self.body = n.then
        term_then = self.visit_block(node.body)
        def_then = set(ctx.defined)
        ctx.defined = set(before)
        self.body = n.orelse
        term_else = self.visit_block(node.orelse)
        def_else = set(ctx.defined)
        self.body = saved
        self.body.append(n)
        if term_then and term_else:
            ctx.defined = def_then | def_else
            raise _Terminated
        if term_then:
            ctx.defined = def_else
        elif term_else:
            ctx.defined = def_then
        else:
            ctx.defined = def_then & def_else

    def _loop(self, build: Callable[[], None], node: ast.AST) -> None:
        ctx = self.ctx
        before = set(ctx.defined)
        saved = self.body
        lp = ir.Loop(loc=self.src.loc(node))
        self.body = lp.body
        ctx.loop_depth += 1
        try:
            build()
        except _Terminated:
            pass
        finally:
            ctx.loop_depth -= 1
            self.body = saved
        self.body.append(lp)
        ctx.defined = before

    def visit_While(self, node: ast.While) -> None:
        if node.orelse:
            raise self.err(node.orelse[0], "'while ... else' is not supported in a kernel")

        def build() -> None:
            cond = self.visit_cond(node.test)
            self.node = node
            if isinstance(cond, (bool, int, float)) and cond:
                pass  # while True: leave only through break/return
            else:
                pu = self.as_pred(cond, node.test)
                self.body.append(ir.Break(PredUse(pu.value, not pu.negated), self.src.loc(node)))
            self.visit_block(node.body)

        self._loop(build, node)

    def visit_For(self, node: ast.For) -> None:
        if node.orelse:
            raise self.err(node.orelse[0], "'for ... else' is not supported in a kernel")
        it = node.iter
        if not isinstance(it, ast.Call):
            raise self.err(it, "a kernel loop iterates over range(...), aw.range(...) or aw.static_range(...); "
                           f"got {_construct(it)}")
        fn = self.static_eval(it.func)
        if not isinstance(node.target, ast.Name):
            raise self.err(node.target, "the loop variable must be a plain name")
        name = node.target.id
        if fn is L.INTRINSICS["static_range"]:
            return self._static_for(node, it, name)
        if fn is not builtins.range and fn is not L.INTRINSICS["range"]:
            raise self.err(it.func, f"cannot iterate over {_describe(fn)} in a kernel; valid: range(...), "
                           "aw.range(..., unroll=k), aw.static_range(...)")
        unroll = 1
        for kw in it.keywords:
            if kw.arg == "unroll" and fn is L.INTRINSICS["range"]:
                unroll = self.static_eval(kw.value)
                if not isinstance(unroll, int) or isinstance(unroll, bool) or unroll < 1:
                    raise self.err(kw.value, f"unroll must be a positive compile-time int, got {_describe(unroll)}")
            else:
                raise self.err(it, f"unexpected keyword {kw.arg!r} for range(); valid: unroll= (aw.range only)")
        args = [self.visit(a) for a in it.args]
        self.node = it
        if not 1 <= len(args) <= 3:
            raise self.err(it, f"range() takes 1 to 3 arguments, got {len(args)}")
        start, stop, step = (0, args[0], 1) if len(args) == 1 else (args[0], args[1], args[2] if len(args) == 3 else 1)
        if isinstance(step, (int, np.integer)) and step == 0:
            raise self.err(it.args[2], "range() step must not be zero")
        typed = [v for v in (start, stop, step) if isinstance(v, Value)]
        t = typed[0].type if typed else self.default_type(stop if isinstance(stop, int) else 0)
        for v in (start, stop, step):
            t = self.unify(Value(t), v, "range()") if isinstance(v, Value) else t
            if not isinstance(v, Value) and not isinstance(v, (int, np.integer)):
                raise self.err(it, f"range() bounds must be integers, got {_describe(v)}")
        if not t.is_int:
            raise self.err(it, f"range() bounds must be integers, got {t.name}")
        copies = self._unroll_copies * unroll
        if unroll > 1 and copies > MAX_UNROLLED_COPIES:
            raise self.err(it, f"aw.range(..., unroll={unroll}) makes {copies} copies of the loop body"
                           + (f" (with the enclosing unrolled loops' {self._unroll_copies})"
                              if self._unroll_copies > 1 else "")
                           + f"; the limit is {MAX_UNROLLED_COPIES} in all; use a smaller unroll factor")
        if unroll > 1 and any(isinstance(n, ast.Continue) for n in ast.walk(node)):
            raise self.err(node, "continue is not supported in a loop with unroll > 1; use an if instead")
        counter = Value(t, f"{name}_next", is_var=True)
        self.emit("mov.b64" if t.bits == 64 else "mov.b32", counter, self.coerce(start, t))
        stop_v = self.coerce(stop, t)
        if not isinstance(stop, Value) or stop.is_var:
            s2 = Value(t, "stop", is_var=True)
            self.emit("mov.b64" if t.bits == 64 else "mov.b32", s2, stop_v)
            stop_v = s2
        step_v = self.coerce(step, t)
        if isinstance(step, Value) and step.is_var:
            s3 = Value(t, "step", is_var=True)
            self.emit("mov.b64" if t.bits == 64 else "mov.b32", s3, step_v)
            step_v = s3

        def one_iteration() -> None:
            self.node = it
            if isinstance(step, Value):
                # runtime step: continue while (step > 0 and i < stop) or (step < 0 and i > stop)
                zero = self.const(0, t)
                pos, lt, gt, a, b, go = (self.new(ty.pred) for _ in range(6))
                self.emit(self.cmp_mn("gt", t), pos, step_v, zero)
                self.emit(self.cmp_mn("lt", t), lt, counter, stop_v)
                self.emit(self.cmp_mn("gt", t), gt, counter, stop_v)
                self.emit("and.pred", a, PredUse(pos), PredUse(lt))
                self.emit("and.pred", b, PredUse(pos, True), PredUse(gt))
                self.emit("or.pred", go, PredUse(a), PredUse(b))
                self.body.append(ir.Break(PredUse(go, True), self.src.loc(node)))
            else:
                p = self.new(ty.pred)
                self.emit(self.cmp_mn("lt" if step > 0 else "gt", t), p, counter, stop_v)
                self.body.append(ir.Break(PredUse(p, True), self.src.loc(node)))
            self.node = node.target
            self.assign_name(name, counter, node.target)
            self.node = it
            nxt = self.new(t)
            self.emit(self.mn("add", t), nxt, counter, step_v)
            self.emit("mov.b64" if t.bits == 64 else "mov.b32", counter, nxt)
            self.node = node
            self.ctx.const_names.discard(name)
            if self.visit_block(node.body):
                raise _Terminated

        def build() -> None:
            for _ in range(unroll):
                one_iteration()

        self.ctx.const_names.discard(name)
        outer_copies = self._unroll_copies
        self._unroll_copies = copies
        try:
            self._loop(build, node)
        finally:
            self._unroll_copies = outer_copies

    def _static_for(self, node: ast.For, it: ast.Call, name: str) -> None:
        args = [self.static_eval(a) for a in it.args]
        if not all(isinstance(a, int) and not isinstance(a, bool) for a in args) or not 1 <= len(args) <= 3:
            raise self.err(it, "aw.static_range() takes 1 to 3 compile-time ints, got "
                           + ", ".join(_describe(a) for a in args))
        jumps = getattr(node, "_aw_jumps", None)  # memoised: nested static loops revisit this node
        if jumps is None:
            jumps = node._aw_jumps = any(isinstance(n, (ast.Break, ast.Continue)) for n in ast.walk(node))  # type: ignore[attr-defined]
        if jumps:
            raise self.err(node, "break/continue are not supported inside aw.static_range (the loop is "
                           "unrolled at compile time); use range() or an if")
        values = range(*args)
        copies = self._unroll_copies * len(values)
        if copies > MAX_UNROLLED_COPIES:
            raise self.err(it, f"aw.static_range unrolls {len(values)} iterations"
                           + (f" inside unrolled loops making {self._unroll_copies} copies, {copies} in all"
                              if self._unroll_copies > 1 else "")
                           + f"; the limit is {MAX_UNROLLED_COPIES} copies of a loop body in all")
        ctx = self.ctx
        had = name in ctx.consts
        old = ctx.consts.get(name)
        ctx.const_names.add(name)
        outer_copies = self._unroll_copies
        self._unroll_copies = max(1, copies)
        try:
            for v in values:
                ctx.consts[name] = v
                if self.visit_block(node.body):
                    raise _Terminated
        finally:
            self._unroll_copies = outer_copies
        if had:
            ctx.consts[name] = old

    def visit_Break(self, node: ast.Break) -> None:
        if self.ctx.loop_depth == 0:
            raise self.err(node, "'break' outside a loop")
        self.body.append(ir.Break(None, self.src.loc(node)))
        raise _Terminated

    def visit_Continue(self, node: ast.Continue) -> None:
        if self.ctx.loop_depth == 0:
            raise self.err(node, "'continue' outside a loop")
        self.body.append(ir.Continue(None, self.src.loc(node)))
        raise _Terminated

    def visit_Return(self, node: ast.Return) -> None:
        ctx = self.ctx
        if ctx.is_kernel:
            if node.value is not None:
                v = self.visit(node.value)
                if v is not None:
                    raise self.err(node.value, "a kernel cannot return a value; write results to an output "
                                   "buffer (aw.Out[...])")
            self.body.append(ir.Halt(None, self.src.loc(node)))
            raise _Terminated
        value = self.visit(node.value) if node.value is not None else None
        self.node = node
        if ctx.loop_depth > 0:
            raise self.err(node, "return inside a loop of an @aw.func is not supported; use break and "
                           "return after the loop")
        if value is None:
            pass
        elif isinstance(value, (Value, PredUse)) or ctx.ret_var is not None:
            if isinstance(value, PredUse):
                value = self.pred_value(value)
            if ctx.ret_var is None:
                t = value.type if isinstance(value, Value) else self.default_type(value)
                ctx.ret_var = Value(ty.bool_ if t is ty.pred else t, "ret", is_var=True)
            elif isinstance(value, Value) and value.type not in (ctx.ret_var.type,) and not (
                    value.type is ty.pred and ctx.ret_var.type is ty.bool_):
                raise self.err(node.value, f"this return gives {value.type.name}, an earlier one "
                               f"{ctx.ret_var.type.name}; cast explicitly")
            v = self.coerce(value, ctx.ret_var.type)
            self.emit("mov.b64" if v.type.bits == 64 else "mov.b32", ctx.ret_var, v)
        elif ctx.ret_wrapped and isinstance(value, (bool, int, float, np.generic)):
            ph = self.emit("nop")
            ctx.pending.append((ph, value, node))
        else:
            ctx.ret_const = ("const", value)
        if ctx.ret_wrapped:
            self.body.append(ir.Break(None, self.src.loc(node)))
        raise _Terminated

    def visit_Assert(self, node: ast.Assert) -> None:
        v = self.visit_cond(node.test)
        if isinstance(v, Value):
            raise self.err(node, "assert needs a compile-time condition (runtime asserts are not supported)")
        if not v:
            msg = self.static_eval(node.msg) if node.msg is not None else "assertion failed"
            raise self.err(node, f"static assertion failed: {msg}")

    # ------------------------------------------------------------------ expressions
    def visit_Constant(self, node: ast.Constant) -> Any:
        if isinstance(node.value, (bool, int, float, str)) or node.value is None:
            return node.value
        raise self.err(node, f"constant {node.value!r} is not supported")

    def load_name(self, name: str, node: ast.AST) -> Any:
        ctx = self.ctx
        if name in ctx.var_values:
            if name not in ctx.defined:
                where = ctx.assigned_where.get(name)
                wline = f" (it is assigned at line {self.src.loc(where).line})" if where is not None else ""
                raise self.err(node, f"variable {name!r} may be undefined here{wline}: it is assigned only in "
                               "some branches or inside a loop that may not run; assign it before the if/loop")
            return ctx.var_values[name]
        if name in ctx.consts:
            return ctx.consts[name]
        return self.resolve_global(name, node)

    def resolve_global(self, name: str, node: ast.AST) -> Any:
        """A free name of the function body, as Python resolves it: closure cell, module
        global, builtin (the same lookup the cache key is built from)."""
        v = resolve_free_name(self.src.fn, name)
        if v is _UNDEFINED:
            raise self.err(node, f"name {name!r} is not defined")
        return v

    def visit_Name(self, node: ast.Name) -> Any:
        return self.load_name(node.id, node)

    def visit_Attribute(self, node: ast.Attribute) -> Any:
        base = self.visit(node.value)
        if isinstance(base, (Value, PredUse)):
            raise self.err(node, f"{base.type.name if isinstance(base, Value) else 'bool'} values have no "
                           f"attribute {node.attr!r}")
        if isinstance(base, LocalArray) and node.attr == "shape":
            return base.shape
        try:
            return getattr(base, node.attr)
        except AttributeError:
            raise self.err(node, f"{_describe(base)} has no attribute {node.attr!r}") from None

    def static_eval(self, node: ast.AST) -> Any:
        """Evaluate an expression that must be known at compile time."""
        mark = len(self.body)
        v = self.visit(node)
        if isinstance(v, (Value, PredUse)):
            raise self.err(node, "this must be a compile-time constant, but it is a runtime value")
        del self.body[mark:]
        return v

    def visit_Tuple(self, node: ast.Tuple) -> tuple[Any, ...]:
        return tuple(self.visit(e) for e in node.elts)

    def visit_List(self, node: ast.List) -> tuple[Any, ...]:
        return tuple(self.visit(e) for e in node.elts)

    def visit_UnaryOp(self, node: ast.UnaryOp) -> Any:
        x = self.visit_cond(node.operand) if isinstance(node.op, ast.Not) else self.visit(node.operand)
        self.node = node
        if isinstance(node.op, ast.Not):
            if not isinstance(x, (Value, PredUse)):
                return not x
            pu = self.as_pred(x, node.operand)
            p = self.new(ty.pred)
            self.emit("mov.pred", p, PredUse(pu.value, not pu.negated))
            return p
        if isinstance(x, PredUse):
            x = self.pred_value(x)
        if not isinstance(x, Value):
            if isinstance(node.op, ast.USub):
                return -x
            if isinstance(node.op, ast.UAdd):
                return +x
            if isinstance(node.op, ast.Invert):
                return ~x
        if x.type.is_bool:
            raise self.err(node, f"unary {type(node.op).__name__} is not supported on bool; cast with aw.i32(...)")
        if isinstance(node.op, ast.UAdd):
            return x
        r = self.new(x.type)
        if isinstance(node.op, ast.USub):
            self.emit(self.mn("neg", x.type, "unary -"), r, x)
        elif isinstance(node.op, ast.Invert):
            if x.type.is_float:
                raise self.err(node, f"~ is not defined for {x.type.name}; use aw.bitcast to an integer first")
            self.emit(self.mn("not", x.type, "~"), r, x)
        return r

    def visit_BinOp(self, node: ast.BinOp) -> Any:
        a = self.visit(node.left)
        b = self.visit(node.right)
        self.node = node
        return self.binop(type(node.op), a, b, node)

    def binop(self, op: type, a: Any, b: Any, node: ast.AST) -> Any:
        sym = _BINOP_NAMES.get(op, "?")
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
                return _py_binop(op, a, b)
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
        t = self.unify(a, b, f"'{sym}'")
        if t is ty.bool_ and op in (ast.BitAnd, ast.BitOr, ast.BitXor):
            pa, pb = self.as_pred(self.coerce(a, t)), self.as_pred(self.coerce(b, t))
            p = self.new(ty.pred)
            self.emit({ast.BitAnd: "and.pred", ast.BitOr: "or.pred", ast.BitXor: "xor.pred"}[op], p, pa, pb)
            return p
        if t is ty.bool_:
            raise self.err(node, f"operator {sym} is not defined for bool values; cast with aw.i32(...)")
        av, bv = self.coerce(a, t), self.coerce(b, t)
        if op is ast.Div:
            if not t.is_float:
                raise self.err(node, f"'/' on {t.name} values: true division of integers is not supported; "
                               "use '//' for floor division or cast to a float type first (aw.f32(x) / y)")
            return self._alu("div", t, av, bv)
        if op is ast.FloorDiv:
            return self._floordiv(t, av, bv, b)
        if op is ast.Mod:
            return self._mod(t, av, bv, b)
        name = {ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.BitAnd: "and", ast.BitOr: "or",
                ast.BitXor: "xor"}.get(op)
        if name is None:
            raise self.err(node, f"operator {sym} is not supported in a kernel")
        if name in ("and", "or", "xor") and t.is_float:
            raise self.err(node, f"operator {sym} is not defined for {t.name}; use aw.bitcast to an integer first")
        return self._alu(name, t, av, bv, what=sym)

    def _alu(self, name: str, t: DType, *srcs: Value, what: str | None = None) -> Value:
        r = self.new(t)
        self.emit(self.mn(name, t, what), r, *srcs)
        return r

    def _pow(self, a: Any, b: Any, node: ast.AST) -> Value:
        if isinstance(b, Value) or not isinstance(b, int) or isinstance(b, bool) or not 0 <= b <= 8:
            raise self.err(node, "** needs a compile-time integer exponent 0..8 (computed by repeated "
                           "multiplication, left to right); use aw.exp/aw.log for other powers")
        if not isinstance(a, Value):
            raise self.err(node, "** with a constant base and runtime exponent is not supported")
        if b == 0:
            return self.const(1, a.type)
        r = a
        for _ in range(b - 1):
            r = self._alu("mul", a.type, r, a)
        return r

    def _shift(self, op: type, a: Any, b: Any, node: ast.AST) -> Value:
        if not isinstance(a, Value):
            a = self.const(a, self.default_type(a) if not isinstance(b, Value) or b.type.bits == 32 else b.type)
        if not a.type.is_int:
            raise self.err(node, f"shifts need an integer left operand, got {a.type.name}")
        if isinstance(b, Value):
            if not b.type.is_int:
                raise self.err(node, f"shift count must be an integer, got {b.type.name}")
            if b.type.bits == 64:
                # the ISA reads one unsigned 32-bit count (spec §8.3): saturate, never truncate, so
                # counts 2^32, 2^32 + 1, 2^63 ... stay ">= the width" (0 / the sign fill)
                if b.type is not ty.u64:
                    b = self.bitcast(b, ty.u64)
                b = self.cast(self._alu("min", ty.u64, b, self.const(0xFFFFFFFF, ty.u64)), ty.u32)
        else:
            if not isinstance(b, int) or b < 0:
                raise self.err(node, f"shift count must be a non-negative integer, got {_describe(b)}")
            b = self.const(min(b, 255), ty.u32)
        r = self.new(a.type)
        if op is ast.LShift:
            self.emit(self.mn("shl", a.type), r, a, b)
        else:
            self.emit(self.mn("shr", a.type), r, a, b)
        return r

    def _floordiv(self, t: DType, a: Value, b: Value, b_raw: Any) -> Value:
        if t.is_float:
            q = self._alu("div", t, a, b)
            return self._alu("floor", t, q)
        if t.is_signed and isinstance(b_raw, int) and b_raw > 0 and b_raw & (b_raw - 1) == 0:
            # floor division by 2^k is an arithmetic shift (exactly Python's semantics)
            k = self.const(b_raw.bit_length() - 1, ty.u32)
            return self._alu("shr", t, a, k)
        q = self._alu("div", t, a, b)
        if not t.is_signed:
            return q
        # Python floors: q -= 1 when the remainder is non-zero and its sign differs from b's
        r = self._alu("rem", t, a, b)
        fix = self._sign_fix(t, r, b)
        one = self.const(1, t)
        qm = self._alu("sub", t, q, one)
        out = self.new(t)
        self.emit("selp.b64" if t.bits == 64 else "selp.b32", out, qm, q, PredUse(fix))
        return out

    def _mod(self, t: DType, a: Value, b: Value, b_raw: Any) -> Value:
        if t.is_float:
            raise self.err(None, f"'%' on {t.name} is not supported; write a - b * aw.floor(a / b)")
        if isinstance(b_raw, int) and b_raw > 0 and b_raw & (b_raw - 1) == 0:
            # x % 2^k == x & (2^k - 1) for both signednesses under floor semantics
            return self._alu("and", t, a, self.const(b_raw - 1, t))
        r = self._alu("rem", t, a, b)
        if not t.is_signed:
            return r
        fix = self._sign_fix(t, r, b)
        rb = self._alu("add", t, r, b)
        out = self.new(t)
        self.emit("selp.b64" if t.bits == 64 else "selp.b32", out, rb, r, PredUse(fix))
        return out

    def _sign_fix(self, t: DType, r: Value, b: Value) -> Value:
        """Predicate: Python's floor correction applies (remainder non-zero with the sign
        opposite to the divisor's). Never for ``b == 0``: division by zero keeps the ISA's
        results (``x // 0 == -1``, ``x % 0 == x`` for every x, spec §8.1), so ``//`` and ``%``
        still satisfy ``x == (x // 0) * 0 + x % 0``."""
        zero = self.const(0, t)
        nz, neg, fix, bnz, fix2 = (self.new(ty.pred) for _ in range(5))
        self.emit(self.cmp_mn("ne", t), nz, r, zero)
        x = self._alu("xor", t, r, b)
        self.emit(self.cmp_mn("lt", t), neg, x, zero)
        self.emit("and.pred", fix, PredUse(nz), PredUse(neg))
        self.emit(self.cmp_mn("ne", t), bnz, b, zero)
        self.emit("and.pred", fix2, PredUse(fix), PredUse(bnz))
        return fix2

    def visit_Compare(self, node: ast.Compare) -> Any:
        left = self.visit(node.left)
        result: Any = None
        pieces: list[Any] = []
        for op, comp in zip(node.ops, node.comparators, strict=True):
            right = self.visit(comp)
            self.node = node
            cmp = _CMP.get(type(op))
            if cmp is None:
                raise self.err(node, f"comparison {type(op).__name__} ('is', 'in' ...) is not supported; "
                               "valid: < <= > >= == !=")
            pieces.append(self.compare(cmp, left, right, node))
            left = right
        for p in pieces:
            if result is None:
                result = p
            elif not isinstance(p, (Value, PredUse)) and not isinstance(result, (Value, PredUse)):
                result = result and p
            else:
                a, b = self.as_pred(result), self.as_pred(p)
                r = self.new(ty.pred)
                self.emit("and.pred", r, a, b)
                result = r
        return result

    def compare(self, cmp: str, a: Any, b: Any, node: ast.AST) -> Any:
        if isinstance(a, PredUse):
            a = self.pred_value(a)
        if isinstance(b, PredUse):
            b = self.pred_value(b)
        if not isinstance(a, Value) and not isinstance(b, Value):
            return _PY_CMP[cmp](a, b)
        t = self.unify(a, b, f"comparison {cmp}")
        if t is ty.bool_:
            if cmp not in ("eq", "ne"):
                raise self.err(node, "bool values only support == and !=")
            pa, pb = self.as_pred(self.coerce(a, t)), self.as_pred(self.coerce(b, t))
            x = self.new(ty.pred)
            self.emit("xor.pred", x, pa, pb)
            if cmp == "ne":
                return x
            r = self.new(ty.pred)
            self.emit("mov.pred", r, PredUse(x, True))
            return r
        av, bv = self.coerce(a, t), self.coerce(b, t)
        r = self.new(ty.pred)
        self.emit(self.cmp_mn(cmp, t), r, av, bv)
        return r

    def _scratch(self, node: ast.AST) -> tuple[Any, list[ir.Node]]:
        """Visit ``node`` into a separate block: (result, the nodes it generated)."""
        saved = self.body
        self.body = []
        try:
            v = self.visit(node)
            return v, self.body
        finally:
            self.body = saved

    @staticmethod
    def _pure(nodes: list[ir.Node]) -> bool:
        return all(isinstance(n, Op) and n.is_pure for n in nodes)

    def visit_cond(self, node: ast.AST) -> Any:
        """Visit an expression whose value is used only for its truthiness (an ``if``/``while``
        test, the operand of ``not``): there ``and``/``or`` may mix bools and numbers, since
        only ``bool(x and y) == (bool(x) and bool(y))`` matters."""
        if isinstance(node, ast.BoolOp):
            self._cond_boolop = node
        return self.visit(node)

    def visit_BoolOp(self, node: ast.BoolOp) -> Any:
        """``and``/``or`` with Python's value: ``x and y`` is ``y if x else x``, ``x or y`` is
        ``x if x else y`` (truthiness: ``!= 0``; NaN is true). Bool operands give a bool;
        number operands of one type (literals take the other side's type) give that type;
        a bool mixed with a number is refused (Python would give either type). The right
        operand short-circuits: when it loads, stores or calls an atomic it runs only in the
        lanes that need it."""
        is_and = isinstance(node.op, ast.And)
        word = "and" if is_and else "or"
        cond_only = self._cond_boolop is node
        self._cond_boolop = None
        result = self.visit_cond(node.values[0]) if cond_only else self.visit(node.values[0])
        left_node: ast.AST = node.values[0]
        for vnode in node.values[1:]:
            if not isinstance(result, (Value, PredUse)):
                # compile-time left side decides statically (Python short-circuit)
                if (not result) if is_and else result:
                    return result
                result = self.visit_cond(vnode) if cond_only else self.visit(vnode)
                left_node = vnode
                continue
            if cond_only and isinstance(vnode, ast.BoolOp):
                self._cond_boolop = vnode
            right, nodes = self._scratch(vnode)
            self.node = node
            lb, rb = _is_boolish(result), _is_boolish(right)
            if cond_only:
                lb = rb = True  # only the truthiness of the result is used
            if lb != rb:
                bad = vnode if lb else left_node
                other = right if lb else result
                raise self.err(bad, f"operands of '{word}' are a bool and {_describe(other)}: Python's result "
                               f"would be either type; compare explicitly (x != 0) or cast both sides to one type")
            if lb:
                result = self._bool_op(is_and, result, right, nodes, node, vnode)
            else:
                result = self._value_op(is_and, result, right, nodes, node, vnode)
            left_node = vnode
        # an expression's value is a Value (a pred register), never a bare PredUse: callers
        # bind it to names, pass it to functions and store it
        return self.pred_value(result) if isinstance(result, PredUse) else result

    def _bool_op(self, is_and: bool, result: Any, right: Any, nodes: list[ir.Node], node: ast.AST,
                 vnode: ast.AST) -> Any:
        left = self.as_pred(result, node)
        if self._pure(nodes):
            self.body.extend(nodes)
            rp = self.as_pred(right, vnode)
            r = self.new(ty.pred)
            self.emit("and.pred" if is_and else "or.pred", r, left, rp)
            return r
        # the right side has effects (loads, atomics ...): run it only where needed
        acc = Value(ty.bool_, "sc", is_var=True)
        lv = self.pred_to_bool(self.pred_value(left))
        self.emit("mov.b32", acc, lv)
        cond = left if is_and else PredUse(left.value, not left.negated)
        n = ir.If(cond, loc=self.src.loc(node))
        saved = self.body
        self.body = n.then
        self.body.extend(nodes)
        self.node = vnode
        rv = self.pred_to_bool(self.pred_value(self.as_pred(right, vnode)))
        self.emit("mov.b32", acc, rv)
        self.body = saved
        self.body.append(n)
        self.node = node
        return self.as_pred(acc)

    def _value_op(self, is_and: bool, result: Any, right: Any, nodes: list[ir.Node], node: ast.AST,
                  vnode: ast.AST) -> Value:
        t = self.unify(result, right, f"'{'and' if is_and else 'or'}'")
        lv = self.coerce(result, t)
        truthy = self.as_pred(lv, node)
        if self._pure(nodes):
            self.body.extend(nodes)
            rv = self.coerce(right, t)
            return self.select(truthy, rv, lv) if is_and else self.select(truthy, lv, rv)
        res = Value(t, "sc", is_var=True)
        self.emit("mov.b64" if t.bits == 64 else "mov.b32", res, lv)
        n = ir.If(truthy if is_and else PredUse(truthy.value, not truthy.negated), loc=self.src.loc(node))
        saved = self.body
        self.body = n.then
        self.body.extend(nodes)
        self.node = vnode
        rv = self.coerce(right, t)
        self.emit("mov.b64" if t.bits == 64 else "mov.b32", res, rv)
        self.body = saved
        self.body.append(n)
        self.node = node
        return res

    def visit_IfExp(self, node: ast.IfExp) -> Any:
        cond = self.visit_cond(node.test)
        if not isinstance(cond, (Value, PredUse)):
            return self.visit(node.body if cond else node.orelse)
        pu = self.as_pred(cond, node.test)
        a, na = self._scratch(node.body)
        b, nb = self._scratch(node.orelse)
        self.node = node
        t = self.unify(a, b, "a conditional expression")
        if self._pure(na) and self._pure(nb):
            self.body.extend(na)
            self.body.extend(nb)
            return self.select(pu, self.coerce(a, t), self.coerce(b, t))
        res = Value(t, "sel", is_var=True)
        n = ir.If(pu, loc=self.src.loc(node))
        saved = self.body
        self.body = n.then
        self.body.extend(na)
        self.emit("mov.b64" if t.bits == 64 else "mov.b32", res, self.coerce(a, t))
        self.body = n.orelse
        self.body.extend(nb)
        self.emit("mov.b64" if t.bits == 64 else "mov.b32", res, self.coerce(b, t))
        self.body = saved
        self.body.append(n)
        return res

    def select(self, p: PredUse, a: Value, b: Value) -> Value:
        r = self.new(a.type)
        self.emit("selp.b64" if a.type.bits == 64 else "selp.b32", r, a, b, p)
        return r

    # ------------------------------------------------------------------ memory
    def _index_offset(self, idx: Any, esize: int, node: ast.AST) -> tuple[Value, bool]:
        """Byte offset register for element index ``idx`` (value, is_64bit)."""
        if isinstance(idx, (bool, float)) or (not isinstance(idx, (int, Value, np.integer))):
            raise self.err(node, f"an index must be an integer, got {_describe(idx)}")
        if not isinstance(idx, Value):
            if idx < 0:
                raise self.err(node, f"negative index {idx}: kernels do not index from the end")
            return self.const(int(idx) * esize, ty.u32 if idx * esize < 1 << 32 else ty.u64), \
                idx * esize >= 1 << 32
        if not idx.type.is_int:
            raise self.err(node, f"an index must be an integer, got a {idx.type.name} value; cast with aw.i32(...)")
        if esize == 1:
            return idx, idx.type.bits == 64
        k = self.const(esize.bit_length() - 1, ty.u32)
        return self._alu("shl", idx.type, idx, k), idx.type.bits == 64

    def visit_Subscript(self, node: ast.Subscript) -> Any:
        base = self.visit(node.value)
        sl = node.slice
        if isinstance(base, tuple):
            i = self.static_eval(sl)
            try:
                return base[i]
            except (IndexError, TypeError) as e:
                raise self.err(node, f"tuple index {_describe(i)}: {e}") from None
        if isinstance(base, BufferArg):
            if base.access is Access.WRITE:
                raise self.err(node, f"buffer {base.name!r} is declared aw.Out[{base.elem.name}] (write only) "
                               f"and cannot be read; declare it aw.Buffer[{base.elem.name}] to read and write")
            idx = self.visit(sl)
            self.node = node
            off, wide = self._index_offset(idx, base.elem.scalar.nbytes, sl)
            return self._load("device", base.elem, DevAddr(base.index, off), wide)
        if isinstance(base, LocalArray):
            addr = self._local_addr(base, sl, node)
            return self._load("local", base.elem, addr, False)
        if isinstance(base, RegisterArray):
            return self._register_index(base, sl, node)
        if isinstance(base, BufferView):
            return self._view_load(base, sl, node)
        if isinstance(base, (Value, PredUse)):
            raise self.err(node, "only buffers, local arrays and tuples can be indexed; this is a scalar value")
        raise self.err(node, f"{_describe(base)} cannot be indexed")

    def _local_addr(self, arr: LocalArray, sl: ast.AST, node: ast.AST) -> LocAddr:
        idx = self.visit(sl)
        self.node = node
        return self._local_addr_of(arr, idx, node)

    def _local_addr_of(self, arr: LocalArray, idx: Any, node: ast.AST) -> LocAddr:
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
                term = i if stride == 1 else self._alu("mul", i.type, i, self.const(stride, i.type))
                if dyn is not None and dyn.type is not term.type:
                    term = self.cast(term, dyn.type)
                dyn = term if dyn is None else self._alu("add", dyn.type, dyn, term)
            else:
                if not 0 <= int(i) < dim:
                    raise self.err(node, f"index {int(i)} is out of range for a dimension of size {dim}")
                const_part += int(i) * stride
            stride *= dim
        imm = arr.base + const_part * esize
        if dyn is None:
            return LocAddr(self.const(0, ty.u32), imm)
        off, _ = self._index_offset(dyn, esize, node)
        return LocAddr(off, imm)

    def _load(self, space: str, elem: DType, addr: Any, wide: bool) -> Value:
        vt = ty.value_type_of_element(elem)
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
        self.emit(f"ld.{space}.{kind}" + (".o64" if wide else ""), r, addr)
        return r

    def store_subscript(self, target: ast.Subscript, value: Any) -> None:
        base = self.visit(target.value)
        self.node = target
        if isinstance(base, BufferArg):
            if base.access is Access.READ:
                raise self.err(target, f"buffer {base.name!r} is declared aw.In[{base.elem.name}] (read only) "
                               f"and cannot be written; declare it aw.Buffer[{base.elem.name}] or "
                               f"aw.Out[{base.elem.name}]")
            idx = self.visit(target.slice)
            self.node = target
            off, wide = self._index_offset(idx, base.elem.scalar.nbytes, target.slice)
            v = self._store_value(value, base.elem, target)
            self._store("device", base.elem, DevAddr(base.index, off), v, wide)
        elif isinstance(base, LocalArray):
            addr = self._local_addr(base, target.slice, target)
            v = self._store_value(value, base.elem, target)
            self._store("local", base.elem, addr, v, False)
        elif isinstance(base, RegisterArray):
            self._register_store(base, target, value)
        elif isinstance(base, BufferView):
            self._view_store(base, target, value)
        else:
            raise self.err(target.value, f"cannot store into {_describe(base)}; valid: buffers, buffer views, "
                           "local arrays and register arrays")

    def _store_value(self, value: Any, elem: DType, node: ast.AST) -> Value:
        vt = ty.value_type_of_element(elem)
        if isinstance(value, PredUse):
            value = self.pred_value(value)
        if isinstance(value, Value) and value.type is not vt:
            if value.type is ty.pred and vt.is_int:
                return self.cast(value, vt)
            raise self.err(node, f"cannot store a {value.type.name} value into {elem.name} elements; cast "
                           f"explicitly with aw.{vt.name}(...)")
        if not isinstance(value, Value):
            if elem in ty.NARROW_TYPES:
                lo, hi = _INT_RANGE["i32" if elem.is_signed else "u32"]
                bits = elem.scalar.bits
                lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if elem.is_signed else (0, (1 << bits) - 1)
                if isinstance(value, int) and not lo <= value <= hi:
                    raise self.err(node, f"{value} does not fit in {elem.name} ({lo}..{hi})")
            return self.const(value, vt)
        return value

    def _store(self, space: str, elem: DType, addr: Any, v: Value, wide: bool) -> None:
        nb = elem.scalar.nbytes
        self.emit(f"st.{space}.b{nb * 8}" + (".o64" if wide else ""), addr, v)

    # ------------------------------------------------------------------ calls
    def visit_Call(self, node: ast.Call) -> Any:
        discard = self._discard
        self._discard = False
        fn = self.visit(node.func)
        self.node = node
        from .kernel import Func, KernelFunction

        if isinstance(fn, L.Intrinsic):
            if fn.name in W_DEPENDENT_INTRINSICS and not self._w_invariant_depth:
                loc = self.loc()
                self.w_uses.append(f"aw.{fn.name}()" + (f" at {loc}" if loc is not None else ""))
            handler = getattr(self, "_i_" + fn.name, None)
            if handler is None:
                raise self.err(node, f"aw.{fn.name}() cannot be called like this")
            return handler(node, discard)
        if isinstance(fn, DType):
            args = self._plain_args(node, 1, 1, f"aw.{fn.name}()")
            x = args[0]
            self.node = node
            if not isinstance(x, (Value, PredUse)):
                if fn not in ty.VALUE_TYPES:
                    raise self.err(node, f"aw.{fn.name} is a storage type only (buffers, local arrays)")
                return self.const(x, fn)
            if fn not in ty.VALUE_TYPES:
                raise self.err(node, f"cannot convert to {fn.name}: it is a storage-only type; valid: "
                               + ", ".join(t.name for t in ty.VALUE_TYPES))
            return self.cast(self.pred_value(x) if isinstance(x, PredUse) else x, fn)
        if isinstance(fn, Func):
            return self.inline(fn, node)
        if isinstance(fn, KernelFunction):
            raise self.err(node, f"cannot call kernel {fn.name!r} from a kernel; make it an @aw.func")
        if fn in (builtins.min, builtins.max):
            return self._minmax("min" if fn is builtins.min else "max", node)
        if fn is builtins.abs:
            (x,) = self._plain_args(node, 1, 1, "abs()")
            if not isinstance(x, Value):
                return abs(x)
            if x.type.is_int and not x.type.is_signed:
                return x
            return self._alu("abs", x.type, x)
        if fn in (builtins.int, builtins.float, builtins.bool):
            (x,) = self._plain_args(node, 1, 1, f"{fn.__name__}()")
            if isinstance(x, (Value, PredUse)):
                target = {builtins.int: ty.i32, builtins.float: ty.f32, builtins.bool: ty.bool_}[fn]
                return self.cast(self.pred_value(x) if isinstance(x, PredUse) else x, target)
            return fn(x)
        if fn is builtins.len:
            (x,) = self._plain_args(node, 1, 1, "len()")
            if isinstance(x, LocalArray):
                return x.shape[0]
            if isinstance(x, tuple):
                return len(x)
            raise self.err(node, f"len() of {_describe(x)} is not known at compile time")
        if fn is builtins.range:
            raise self.err(node, "range() can only be used as a for-loop iterable")
        if fn is builtins.print:
            raise self.err(node, "print() is a host function; in a kernel use aw.print(fmt, *values), e.g. "
                           "aw.print(\"i={} x={}\", i, x[i])")
        if isinstance(fn, type(math.sqrt)) and getattr(fn, "__module__", None) == "math":
            raise self.err(node, f"math.{fn.__name__} is a host function; use aw.{fn.__name__} in kernels")
        raise self.err(node.func, f"cannot call {_describe(fn)} in a kernel; valid: aw intrinsics, @aw.func "
                       "functions, min/max/abs, dtype casts such as aw.f32(x)")

    def _plain_args(self, node: ast.Call, lo: int, hi: int, what: str,
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

    def _kw(self, node: ast.Call, name: str, default: Any) -> Any:
        for kw in node.keywords:
            if kw.arg == name:
                return self.static_eval(kw.value)
        return default

    def _minmax(self, op: str, node: ast.Call) -> Any:
        args = self._plain_args(node, 2, 8, f"{op}()")
        if all(not isinstance(a, (Value, PredUse)) for a in args):
            return (min if op == "min" else max)(args)
        acc = args[0]
        for b in args[1:]:
            t = self.unify(acc, b, f"{op}()")
            if t.is_bool:
                raise self.err(node, f"{op}() of bool values is not supported")
            acc = self._alu(op, t, self.coerce(acc, t), self.coerce(b, t))
        return acc

    # --- ids
    def _sreg(self, sr: SpecialRegister) -> Value:
        r = self.new(ty.i32)  # the register is untyped; ids fit in 31 bits
        self.emit("mov.sr", r, sr)
        return r

    def _id(self, name: str, node: ast.Call) -> Value:
        args = self._plain_args(node, 0, 1, f"aw.{name}()")
        d = 0
        if args:
            d = args[0]
            if isinstance(d, Value) or d not in (0, 1, 2):
                raise self.err(node, f"aw.{name}(d): d must be a compile-time 0, 1 or 2, got {_describe(d)}")
        return self._sreg(_DIM_SR[name][d])

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_i_"):
            iname = name[3:]
            if iname in _DIM_SR:
                return lambda node, discard: self._id(iname, node)
            if iname in _NODIM_SR:
                def h(node: ast.Call, discard: bool) -> Value:
                    self._plain_args(node, 0, 0, f"aw.{iname}()")
                    return self._sreg(_NODIM_SR[iname])
                return h
            if iname.startswith("atomic_"):
                return lambda node, discard: self._atomic(iname[7:], node, discard)
            if iname in ("sqrt", "floor", "ceil", "trunc", "rint"):
                return lambda node, discard: self._float_unary(iname, node)
            if iname.startswith("fast_"):
                return lambda node, discard: self._fast(iname[5:], node)
            if iname in ("wave_sum", "wave_min", "wave_max", "wave_and", "wave_or", "wave_xor"):
                return lambda node, discard: self._wave_reduce(iname[5:], node)
            if iname in ("wave_shfl", "wave_shfl_up", "wave_shfl_down", "wave_shfl_xor", "wave_broadcast"):
                return lambda node, discard: self._shuffle(iname, node)
            if iname in ("popc", "clz", "ctz", "brev"):
                return lambda node, discard: self._bits(iname, node)
        raise AttributeError(name)

    # --- debugging
    def _i_print(self, node: ast.Call, discard: bool) -> None:
        from . import debugprint

        debugprint.lower(self, node)

    def add_print(self, pf: Any) -> int:
        """Record an aw.print call site; returns its index."""
        self.prints.append(pf)
        return len(self.prints) - 1

    def print_buffer_index(self) -> int:
        """ABI index of the hidden aw.print buffer (added as the last argument on first use)."""
        if self._print_buffer is None:
            from .debugprint import PRINT_BUFFER_TYPE

            self._print_buffer = len(self.args)
            self.args.append((PRINT_ARG, PRINT_BUFFER_TYPE))
        return self._print_buffer

    # --- sync / memory
    def _i_barrier(self, node: ast.Call, discard: bool) -> None:
        self._plain_args(node, 0, 0, "aw.barrier()")
        self.emit("barrier")

    def _i_fence(self, node: ast.Call, discard: bool) -> None:
        self._plain_args(node, 0, 2, "aw.fence()", ("scope", "order"))
        scope, order = self._scope_order(node, "device", "acq_rel", positional=True)
        self.emit("fence", scope, order)

    def _scope_order(self, node: ast.Call, dscope: str, dorder: str,
                     positional: bool = False) -> tuple[Scope, MemoryOrder]:
        pos = [self.static_eval(a) for a in node.args] if positional else []
        scope = self._kw(node, "scope", pos[0] if len(pos) > 0 else dscope)
        order = self._kw(node, "order", pos[1] if len(pos) > 1 else dorder)
        if scope not in _SCOPES:
            raise self.err(node, f"scope {scope!r} is not valid; valid: {', '.join(_SCOPES)}")
        if order not in _ORDERS:
            raise self.err(node, f"order {order!r} is not valid; valid: {', '.join(_ORDERS)}")
        return _SCOPES[scope], _ORDERS[order]

    def _i_local_array(self, node: ast.Call, discard: bool) -> LocalArray:
        if len(node.args) != 2 or node.keywords:
            raise self.err(node, "aw.local_array(dtype, shape) takes exactly a dtype and a shape")
        dt = self.static_eval(node.args[0])
        shape = self.static_eval(node.args[1])
        self.node = node
        if not isinstance(dt, DType) or dt in (ty.bool_, ty.pred):
            raise self.err(node.args[0], "local_array element type must be a dtype such as aw.f32, got "
                           + _describe(dt))
        if isinstance(shape, int):
            shape = (shape,)
        if (not isinstance(shape, tuple) or not 1 <= len(shape) <= 2
                or not all(isinstance(s, int) and not isinstance(s, bool) and s > 0 for s in shape)):
            raise self.err(node.args[1], f"local_array shape must be a positive compile-time int or a tuple of 1-2 "
                           f"of them, got {_describe(shape)}")
        align = 16
        base = -(-self.local_memory // align) * align
        arr = LocalArray(base, dt, tuple(shape))
        self.local_memory = base + arr.nbytes
        return arr

    # --- atomics
    def _atomic(self, op: str, node: ast.Call, discard: bool) -> Any:
        nval = 2 if op == "cas" else 1
        if len(node.args) != 2 + nval:
            sig = "(target, index, cmp, value)" if op == "cas" else "(target, index, value)"
            raise self.err(node, f"aw.atomic_{op}{sig} takes {2 + nval} positional arguments, got {len(node.args)}")
        for kw in node.keywords:
            if kw.arg not in ("scope", "order"):
                raise self.err(node, f"aw.atomic_{op}() got an unexpected keyword {kw.arg!r}; valid: scope, order")
        target = self.visit(node.args[0])
        self.node = node
        if isinstance(target, BufferArg):
            if target.access is not Access.READWRITE:
                raise self.err(node.args[0], f"atomics need a read-write buffer; {target.name!r} is declared "
                               f"{ty.BufferType(target.elem, target.access)!r}, use aw.Buffer[{target.elem.name}]")
            idx = self.visit(node.args[1])
            self.node = node
            off, wide = self._index_offset(idx, target.elem.scalar.nbytes, node.args[1])
            if wide:
                raise self.err(node.args[1], "atomics take a 32-bit index")
            addr: Any = DevAddr(target.index, off)
            space, elem = "device", target.elem
        elif isinstance(target, LocalArray):
            addr = self._local_addr(target, node.args[1], node)
            space, elem = "local", target.elem
        else:
            raise self.err(node.args[0], f"atomic target must be a buffer or local array, got {_describe(target)}")
        vals = [self.visit(a) for a in node.args[2:]]
        self.node = node
        if elem.bits != 32 or elem not in (ty.i32, ty.u32, ty.f32):
            raise self.err(node.args[0], f"atomics work on i32, u32 and f32 elements; this one is {elem.name}")
        t = elem
        if op in ("add", "sub"):
            tname = "f32" if t is ty.f32 else "u32"
            if op == "sub" and t is ty.f32:
                raise self.err(node, "atomic_sub is not defined for f32; add the negated value")
        elif op in ("min", "max"):
            if t is ty.f32:
                raise self.err(node, f"atomic_{op} is not defined for f32 (valid: i32, u32)")
            tname = t.name
        elif op in ("and", "or", "xor"):
            if t is ty.f32:
                raise self.err(node, f"atomic_{op} is not defined for f32")
            tname = "b32"
        elif op in ("exch", "cas"):
            tname = "b32"
        else:
            raise self.err(node, f"unknown atomic operation {op!r}")
        vv = [self._store_value(v, t, node) for v in vals]
        scope_order: tuple[Any, ...] = ()
        if space == "device":
            scope_order = self._scope_order(node, "device", "relaxed")
        red = f"red.{space}.{op}.{tname}"
        if discard and red in BY_MNEMONIC:
            self.emit(red, addr, *vv, *scope_order)
            return None
        r = self.new(t)
        self.emit(f"atom.{space}.{op}.{tname}", r, addr, *vv, *scope_order)
        return r

    # --- math
    def _float_arg(self, node: ast.Call, what: str, n: int = 1) -> list[Value]:
        args = self._plain_args(node, n, n, what)
        typed = [a for a in args if isinstance(a, Value)]
        t = typed[0].type if typed else ty.f32
        out: list[Value] = []
        for a in args:
            if isinstance(a, Value):
                if not a.type.is_float:
                    raise self.err(node, f"{what} needs a float argument, got {a.type.name}; cast with aw.f32(...)")
                if a.type is not t:
                    raise self.err(node, f"{what}: arguments have different types {t.name} and {a.type.name}")
                out.append(a)
            else:
                out.append(self.const(a, t))
        return out

    def _float_unary(self, name: str, node: ast.Call) -> Value:
        (x,) = self._float_arg(node, f"aw.{name}()")
        return self._alu(name, x.type, x)

    def _i_fma(self, node: ast.Call, discard: bool) -> Value:
        a, b, c = self._float_arg(node, "aw.fma()", 3)
        return self._alu("fma", a.type, a, b, c)

    def _fast(self, name: str, node: ast.Call) -> Value:
        (x,) = self._float_arg(node, f"aw.fast_{name}()")
        if x.type is not ty.f32:
            raise self.err(node, f"aw.fast_{name} is defined for f32 only, got {x.type.name}")
        if name == "exp":
            x = self._alu("mul", ty.f32, x, self.const(1.4426950408889634, ty.f32))
            name = "exp2"
        if name == "log":
            r = self._alu("lg2", ty.f32, x, what="fast_log")
            return self._alu("mul", ty.f32, r, self.const(0.6931471805599453, ty.f32))
        mnem = {"exp2": "ex2", "log2": "lg2"}.get(name, name)
        r = self.new(ty.f32)
        m = f"{mnem}.approx.f32"
        if m not in BY_MNEMONIC:
            raise self.err(node, f"aw.fast_{name} has no approximate instruction")
        self.emit(m, r, x)
        return r

    def _bits(self, name: str, node: ast.Call) -> Value:
        (x,) = self._plain_args(node, 1, 1, f"aw.{name}()")
        x = self.materialize(x, None if isinstance(x, Value) else ty.u32)
        if not x.type.is_int or x.type.bits != 32:
            raise self.err(node, f"aw.{name} needs a 32-bit integer, got {x.type.name}")
        r = self.new(ty.i32 if name != "brev" else x.type)
        self.emit(f"{name}.b32", r, x)
        return r

    def _i_mulhi(self, node: ast.Call, discard: bool) -> Value:
        a, b = self._plain_args(node, 2, 2, "aw.mulhi()")
        t = self.unify(a, b, "aw.mulhi()")
        if not t.is_int or t.bits != 32:
            raise self.err(node, f"aw.mulhi needs 32-bit integers, got {t.name}")
        return self._alu("mulhi", t, self.coerce(a, t), self.coerce(b, t))

    def _i_cast(self, node: ast.Call, discard: bool) -> Value:
        x, t = self._plain_args(node, 2, 2, "aw.cast()")
        if not isinstance(t, DType) or t not in ty.VALUE_TYPES:
            raise self.err(node, f"aw.cast(x, dtype): dtype must be a value type, got {_describe(t)}")
        if not isinstance(x, (Value, PredUse)):
            return self.const(x, t)
        return self.cast(self.pred_value(x) if isinstance(x, PredUse) else x, t)

    def _i_bitcast(self, node: ast.Call, discard: bool) -> Value:
        x, t = self._plain_args(node, 2, 2, "aw.bitcast()")
        if not isinstance(t, DType) or t not in ty.VALUE_TYPES:
            raise self.err(node, f"aw.bitcast(x, dtype): dtype must be a value type, got {_describe(t)}")
        if not isinstance(x, Value):
            raise self.err(node, "aw.bitcast needs a typed value (write aw.u32(...) for constants)")
        return self.bitcast(x, t)

    def _i_where(self, node: ast.Call, discard: bool) -> Any:
        c, a, b = self._plain_args(node, 3, 3, "aw.where()")
        if not isinstance(c, (Value, PredUse)):
            return a if c else b
        t = self.unify(a, b, "aw.where()")
        return self.select(self.as_pred(c, node), self.coerce(a, t), self.coerce(b, t))

    def _i_dtype_of(self, node: ast.Call, discard: bool) -> DType:
        (x,) = self._plain_args(node, 1, 1, "aw.dtype_of()")
        if isinstance(x, PredUse):
            return ty.bool_
        if isinstance(x, Value):
            return ty.bool_ if x.type is ty.pred else x.type
        return self.default_type(x)

    def _i_static_range(self, node: ast.Call, discard: bool) -> None:
        raise self.err(node, "aw.static_range() can only be used as a for-loop iterable")

    _i_range = _i_static_range

    # --- wave ops
    def _wave_reduce(self, op: str, node: ast.Call) -> Value:
        (x,) = self._plain_args(node, 1, 1, f"aw.wave_{op}()")
        x = self.materialize(x)
        t = x.type
        if t.bits != 32 or t.is_bool or t not in (ty.i32, ty.u32, ty.f32):
            raise self.err(node, f"aw.wave_{op} works on i32, u32 and f32, got {t.name}")
        name = {"sum": "add"}.get(op, op)
        if name in ("and", "or", "xor"):
            if t is ty.f32:
                raise self.err(node, f"aw.wave_{op} is not defined for f32")
            m = f"wred.{name}.b32"
        else:
            m = f"wred.{name}.{t.name}"
        r = self.new(t)
        self.emit(m, r, x)
        return r

    def _i_wave_prefix_sum(self, node: ast.Call, discard: bool) -> Value:
        (x,) = self._plain_args(node, 1, 1, "aw.wave_prefix_sum()", ("exclusive",))
        excl = self._kw(node, "exclusive", False)
        x = self.materialize(x)
        if x.type not in (ty.i32, ty.u32, ty.f32):
            raise self.err(node, f"aw.wave_prefix_sum works on i32, u32 and f32, got {x.type.name}")
        r = self.new(x.type)
        self.emit(f"wscan.{'excl' if excl else 'incl'}.add.{x.type.name}", r, x)
        return r

    def _shuffle(self, name: str, node: ast.Call) -> Value:
        x, lane = self._plain_args(node, 2, 2, f"aw.{name}()")
        x = self.materialize(x)
        if x.type.bits != 32 and x.type not in (ty.f16, ty.bf16):
            raise self.err(node, f"aw.{name} moves 32-bit values; {x.type.name} is not supported")
        if isinstance(lane, Value):
            if not lane.type.is_int or lane.type.bits != 32:
                raise self.err(node, f"the lane operand must be a 32-bit integer, got {lane.type.name}")
        else:
            if not isinstance(lane, int) or lane < 0:
                raise self.err(node, f"the lane operand must be a non-negative integer, got {_describe(lane)}")
            lane = self.const(lane, ty.u32)
        m = {"wave_shfl": "shfl.idx.b32", "wave_shfl_up": "shfl.up.b32", "wave_shfl_down": "shfl.down.b32",
             "wave_shfl_xor": "shfl.xor.b32", "wave_broadcast": "bcast.b32"}[name]
        r = self.new(x.type)
        self.emit(m, r, x, lane)
        return r

    def _i_wave_ballot(self, node: ast.Call, discard: bool) -> Value:
        (c,) = self._plain_args(node, 1, 1, "aw.wave_ballot()")
        r = self.new(ty.u64)
        self.emit("ballot.b64", r, self.as_pred(c, node))
        return r

    def _i_wave_any(self, node: ast.Call, discard: bool) -> Value:
        (c,) = self._plain_args(node, 1, 1, "aw.wave_any()")
        r = self.new(ty.pred)
        self.emit("any.pred", r, self.as_pred(c, node))
        return r

    def _i_wave_all(self, node: ast.Call, discard: bool) -> Value:
        (c,) = self._plain_args(node, 1, 1, "aw.wave_all()")
        r = self.new(ty.pred)
        self.emit("all.pred", r, self.as_pred(c, node))
        return r

    def _i_mma(self, node: ast.Call, discard: bool) -> None:
        tiles = self._plain_args(node, 4, 4, "aw.mma(D, A, B, C)")
        names = "DABC"
        for nm, t in zip(names, tiles, strict=True):
            if not isinstance(t, LocalArray) or int(np.prod(t.shape)) != 256:
                raise self.err(node, f"aw.mma operand {nm} must be a 16x16 local array, got {_describe(t)}")
        d, a, b, c = tiles
        if d.elem is not ty.f32 or c.elem is not ty.f32:
            raise self.err(node, "aw.mma: D and C must be f32 tiles")
        if a.elem is not b.elem or a.elem not in (ty.f16, ty.bf16):
            raise self.err(node, "aw.mma: A and B must both be f16 or both bf16 tiles")
        offs = [self.const(t.base, ty.u32) for t in tiles]
        self.emit(f"mma.m16n16k16.f32.{a.elem.name}", *offs)

    # ------------------------------------------------------------------ device functions
    def inline(self, fn: Any, node: ast.Call) -> Any:
        if fn in self._inline_stack:
            raise self.err(node, f"@aw.func {fn.name!r} calls itself (recursion is not supported)")
        if len(self._inline_stack) >= 16:
            raise self.err(node, "device functions nested deeper than 16 calls")
        fsrc = fn.source
        fd = fsrc.tree
        params = [a.arg for a in fd.args.args]
        kwonly = [a.arg for a in fd.args.kwonlyargs]
        args = [self.visit(a) for a in node.args]
        kwargs = {kw.arg: self.visit(kw.value) for kw in node.keywords if kw.arg}
        self.node = node
        if len(args) > len(params):
            raise self.err(node, f"{fn.name}() takes {len(params)} positional arguments, got {len(args)}")
        bound: dict[str, Any] = dict(zip(params, args, strict=False))
        for k, v in kwargs.items():
            if k not in params and k not in kwonly:
                raise self.err(node, f"{fn.name}() got an unexpected keyword argument {k!r}")
            if k in bound:
                raise self.err(node, f"{fn.name}() got multiple values for argument {k!r}")
            bound[k] = v
        defaults = fn.defaults()
        for p in params + kwonly:
            if p not in bound:
                if p in defaults:
                    bound[p] = defaults[p]
                else:
                    raise self.err(node, f"{fn.name}() missing argument {p!r}")
        has_early = _fn_has_early_return(fd)
        ctx = _FuncCtx(fsrc, {}, is_kernel=False, ret_wrapped=has_early)
        outer = self.ctx
        self.ctx = ctx
        self._inline_stack.append(fn)
        saved_node = self.node
        inv = bool(getattr(fn, "w_invariant", False))
        self._w_invariant_depth += inv
        try:
            ann = fn.annotations()
            self._prescan(fd)
            for p, v in bound.items():
                if isinstance(v, PredUse):
                    v = self.pred_value(v)
                want = ann.get(p)
                if isinstance(v, Value) or p in _assigned_names(fd):
                    if want is not None and isinstance(want, DType):
                        if isinstance(v, Value) and v.type is not want and not (v.type is ty.pred and want is ty.bool_):
                            raise self.err(node, f"{fn.name}(): argument {p!r} is declared {want.name}, got "
                                           f"{v.type.name}")
                        if not isinstance(v, Value):
                            v = self.const(v, want)
                    if isinstance(v, Value) and (p in _assigned_names(fd) or v.type is ty.pred):
                        self.ctx.const_names.discard(p)
                        self.assign_name(p, v, fd)
                    elif isinstance(v, Value):
                        ctx.var_values[p] = v
                        ctx.defined.add(p)
                    else:
                        ctx.consts[p] = v
                else:
                    ctx.consts[p] = v
            self.node = fd
            if has_early:
                lp = ir.Loop(loc=fsrc.loc(fd))
                saved = self.body
                self.body = lp.body
                ctx.loop_depth = 0
                if not self.visit_block(fd.body):
                    self.body.append(ir.Break(None, fsrc.loc(fd)))
                self.body = saved
                self.body.append(lp)
            else:
                self.visit_block(fd.body)
        finally:
            self._w_invariant_depth -= inv
            self._inline_stack.pop()
            self.ctx = outer
            self.node = saved_node
        if ctx.pending:
            vals = [v for _, v, _ in ctx.pending]
            if ctx.ret_var is None and all(type(v) is type(vals[0]) and v == vals[0] for v in vals):
                for ph, _, _ in ctx.pending:
                    ph.defn, ph.operands = BY_MNEMONIC["nop"], []
                return vals[0]
            if ctx.ret_var is None:
                ctx.ret_var = Value(self.default_type(vals[0]), "ret", is_var=True)
            rv = ctx.ret_var
            for ph, v, rnode in ctx.pending:
                self.ctx, saved_ctx = ctx, self.ctx
                self.node = rnode
                try:
                    bits = self.const_bits(v, rv.type)
                finally:
                    self.ctx = saved_ctx
                ph.defn = BY_MNEMONIC["movi.b64" if rv.type.bits == 64 else "movi.b32"]
                ph.operands = [rv, bits]
        if ctx.ret_var is not None:
            return ctx.ret_var
        if ctx.ret_const is not None:
            return ctx.ret_const[1]
        return None


# ----------------------------------------------------------------------------- utilities

def _has_early_return(body: list[ast.stmt]) -> bool:
    """True when a return appears anywhere except as the last top-level statement."""
    for i, s in enumerate(body):
        for n in ast.walk(s):
            if isinstance(n, ast.Return) and not (i == len(body) - 1 and n is s):
                return True
    return False


def _memo_by_tree(fn: Callable[[ast.FunctionDef], Any]) -> Callable[[ast.FunctionDef], Any]:
    """Cache ``fn(fd)`` per function AST (device functions are inlined at every call site;
    their syntax-only analyses need not be redone). The AST is kept alive by the entry, so
    its id cannot be reused while cached."""
    cache: dict[int, tuple[ast.FunctionDef, Any]] = {}

    def wrapper(fd: ast.FunctionDef) -> Any:
        hit = cache.get(id(fd))
        if hit is not None and hit[0] is fd:
            return hit[1]
        if len(cache) > 1024:
            cache.clear()
        r = fn(fd)
        cache[id(fd)] = (fd, r)
        return r

    return wrapper


@_memo_by_tree
def _fn_has_early_return(fd: ast.FunctionDef) -> bool:
    """:func:`_has_early_return` of a function's body, cached per function AST."""
    return _has_early_return(fd.body)


@_memo_by_tree
def _assign_counts(fd: ast.FunctionDef) -> dict[str, int]:
    """How many times each name is assigned in ``fd`` (augmented assignments and loop
    targets count twice). Callers must not mutate the result (it is cached)."""
    counts: dict[str, int] = {}
    for n in ast.walk(fd):
        targets: list[ast.AST] = []
        if isinstance(n, ast.Assign):
            targets = list(n.targets)
        elif isinstance(n, (ast.AugAssign, ast.AnnAssign)):
            targets = [n.target]
            counts_inc = 2 if isinstance(n, ast.AugAssign) else 1
            for t in targets:
                if isinstance(t, ast.Name):
                    counts[t.id] = counts.get(t.id, 0) + counts_inc
            continue
        elif isinstance(n, ast.For):
            targets = [n.target]
            for t in ast.walk(n.target):
                if isinstance(t, ast.Name):
                    counts[t.id] = counts.get(t.id, 0) + 2
            continue
        for t in targets:
            for x in _bound_names(t):
                counts[x] = counts.get(x, 0) + 1
    return counts


def _bound_names(t: ast.AST) -> list[str]:
    """Names an assignment target binds (``x``, ``x, y``); ``buf[i, j] = v`` binds none (the
    names inside its index are read, not assigned)."""
    if isinstance(t, ast.Name):
        return [t.id]
    if isinstance(t, (ast.Tuple, ast.List)):
        return [n for e in t.elts for n in _bound_names(e)]
    if isinstance(t, ast.Starred):
        return _bound_names(t.value)
    return []


@_memo_by_tree
def _assigned_names(fd: ast.FunctionDef) -> frozenset[str]:
    out: set[str] = set()
    for n in ast.walk(fd):
        if isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.For)):
            targets = n.targets if isinstance(n, ast.Assign) else [n.target]
            for t in targets:
                for x in ast.walk(t):
                    if isinstance(x, ast.Name):
                        out.add(x.id)
    return frozenset(out)


def _py_binop(op: type, a: Any, b: Any) -> Any:
    import operator as o

    f = {ast.Add: o.add, ast.Sub: o.sub, ast.Mult: o.mul, ast.Div: o.truediv, ast.FloorDiv: o.floordiv,
         ast.Mod: o.mod, ast.Pow: o.pow, ast.LShift: o.lshift, ast.RShift: o.rshift, ast.BitOr: o.or_,
         ast.BitXor: o.xor, ast.BitAnd: o.and_}[op]
    return f(a, b)


def _is_boolish(x: Any) -> bool:
    """A bool operand: a predicate, a bool value or a Python bool constant."""
    if isinstance(x, PredUse):
        return True
    if isinstance(x, Value):
        return x.type.is_bool
    return isinstance(x, (bool, np.bool_))


def _describe(x: Any) -> str:
    if isinstance(x, Value):
        name = "bool" if x.type is ty.pred else x.type.name
        return f"{'an' if name[0] in 'aefio' else 'a'} {name} value"
    if isinstance(x, PredUse):
        return "a bool value"
    if isinstance(x, BufferArg):
        return f"buffer {x.name!r}"
    if isinstance(x, LocalArray):
        return f"a local array of shape {x.shape}"
    if isinstance(x, DType):
        return f"type aw.{x.name}"
    if isinstance(x, L.Intrinsic):
        return f"aw.{x.name}"
    if isinstance(x, tuple):
        return "a tuple (" + ", ".join(_describe(e) for e in x) + ")"
    if isinstance(x, (bool, int, float, str)) or x is None:
        return f"{type(x).__name__} {x!r}"
    if isinstance(x, np.generic):
        return f"{x.dtype} {x.item()!r}"
    return f"{type(x).__name__} {getattr(x, '__name__', '')}".strip()


def _construct(node: ast.AST) -> str:
    names = {
        "ListComp": "a list comprehension", "DictComp": "a dict comprehension", "SetComp": "a set comprehension",
        "GeneratorExp": "a generator expression", "Lambda": "a lambda", "With": "a with statement",
        "Try": "a try statement", "Raise": "a raise statement", "Global": "a global statement",
        "Nonlocal": "a nonlocal statement", "Delete": "a del statement", "Import": "an import",
        "ImportFrom": "an import", "ClassDef": "a class definition", "FunctionDef": "a nested function",
        "AsyncFunctionDef": "an async function", "Await": "await", "Yield": "yield", "YieldFrom": "yield from",
        "JoinedStr": "an f-string", "Dict": "a dict", "Set": "a set", "Starred": "a starred expression",
        "NamedExpr": "an assignment expression (:=)", "Slice": "a slice", "Match": "a match statement",
        "AsyncFor": "async for", "AsyncWith": "async with",
    }
    return names.get(type(node).__name__, f"'{type(node).__name__}'")


def _supported_hint(node: ast.AST) -> str:
    if isinstance(node, (ast.ListComp, ast.GeneratorExp)):
        return "; use a for loop over range() instead"
    if isinstance(node, ast.FunctionDef):
        return "; define it at module level with @aw.func"
    if isinstance(node, (ast.Raise, ast.Try)):
        return "; kernels cannot raise — write an error flag to an output buffer"
    if isinstance(node, ast.Slice):
        return "; index one element at a time"
    return ""


def _valid_types_hint(op: str) -> str:
    valid = sorted({m.split(".", 1)[1] for m in BY_MNEMONIC if m.split(".")[0] == op and m.count(".") == 1})
    return f" (the instruction set has {op} for: {', '.join(valid)})" if valid else ""


_ = struct  # kept for float bit helpers used by callers
