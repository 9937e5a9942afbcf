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
stores or calls an atomic it runs only in the lanes that need it. A compile-time value (a
string, tuple, dtype, array ...) is one value for every lane: bound differently on the paths
of a run-time ``if``, or rebound in a run-time loop after the body read it, it is an error
where it is read (the body of a branch or loop is translated once); a tuple of values and
numbers bound on both paths of an ``if`` becomes a tuple of variables instead.
"""

from __future__ import annotations

import ast
import builtins
import math
import types
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from anywave.binary.module import PRINT_ARG
from anywave.isa.table import BY_MNEMONIC
from anywave.isa.types import Access

from . import frontend_inline as _inline
from . import ir
from . import language as L
from . import types as ty
from .astscan import assign_counts, assigned_names, construct_name, fn_has_early_return, supported_hint, unrolled_names
from .bindings import (
    UNBOUND,
    BufferArg,
    BufferView,
    DeviceFunction,
    Divergent,
    Intrinsic,
    KernelDefinition,
    LocalArray,
    LoopFrame,
    RegisterArray,
    join_bindings,
    same_binding,
)
from .bindings import describe as _describe
from .errors import CompileError
from .fingerprint import UNDEFINED as _UNDEFINED
from .fingerprint import resolve as resolve_free_name
from .frontend_inline import FuncCtx
from .frontend_ops import BINOP_NAMES, IRBuilder
from .frontend_perf import _UNSET
from .ir import DevAddr, Op, PredUse, Value
from .source import FuncSource
from .types import DType
from .wdep import W_DEPENDENT_INTRINSICS

_CMP = {ast.Lt: "lt", ast.LtE: "le", ast.Gt: "gt", ast.GtE: "ge", ast.Eq: "eq", ast.NotEq: "ne"}
#: most copies of one loop body that unrolling (aw.range(unroll=k), aw.static_range, nested:
#: the product) may make; beyond it compilation would take minutes and megabytes
MAX_UNROLLED_COPIES = 4096

__all__ = ["BufferArg", "DemoteName", "Frontend", "FuncSource", "LocalArray", "MAX_UNROLLED_COPIES"]


# ----------------------------------------------------------------------------- per-function state

class _Terminated(Exception):
    """Internal: the rest of a block is unreachable (after break/continue/return)."""


class DemoteName(Exception):
    """Internal: the name ``name`` of the function ``fd``, translated as a compile-time int (an
    ``aw.static_range`` name, :func:`~anywave.compiler.astscan.unrolled_names`' ``nested``), is
    read where its paths disagree, or is assigned a run-time value after an int: the kernel is
    translated again with it a variable throughout (as such names were before they were
    compile-time ints), by :meth:`anywave.compiler.kernel.KernelDefinition` 's compile.
    ``reason`` says why, for a note on an error the second translation may raise."""

    def __init__(self, fd: ast.AST, name: str, reason: str) -> None:
        super().__init__(name)
        self.key = (fd, name)
        self.name = name
        self.reason = reason


# ----------------------------------------------------------------------------- the visitor

#: node class -> (the ``Frontend.visit_<Class>`` function (None: unsupported), 2 for a statement,
#: 1 for an expression, 0 otherwise), filled on demand
_VISITORS: dict[type, tuple[Any, int]] = {}


class Frontend(ast.NodeVisitor):
    """Translates one kernel (and the ``@aw.func`` functions it calls, inlined) to IR: one
    ``visit_*`` method per Python construct. It is composed, not mixed: the IR is built
    through ``b``, an :class:`~anywave.compiler.frontend_ops.IRBuilder` (emission, constants,
    coercion, operators, casts, addressing, errors; the type rules it applies are its ``rules``,
    :class:`~anywave.compiler.typerules.TypeRules`), and an intrinsic call is lowered by the
    function registered on its marker (:mod:`anywave.compiler.language`), which receives the
    builder -- never this visitor -- as a :class:`~anywave.compiler.builder.Builder`.

    After :meth:`build`: ``b.body`` (IR), ``b.args`` (ABI list of (name, BufferType | DType)),
    ``b.local_memory`` (bytes), ``b.prints`` (aw.print call sites), ``w_uses``; capabilities
    come from the emitted instructions.
    """

    def __init__(self, src: FuncSource, constants: dict[str, Any], kernel_name: str,
                 demoted: frozenset[tuple[ast.AST, str]] = frozenset()) -> None:
        self.kernel_name = kernel_name
        #: (function AST, name): static_range names translated as variables (see DemoteName)
        self._demoted = demoted
        #: the builder: the IR emitted so far, the kernel's ABI, local memory and prints
        self.b = IRBuilder(src, kernel_name, self)
        #: the names of the function being translated (set with _enter)
        self.ctx = FuncCtx(src, dict(constants))
        self._inline_stack: list[Any] = []
        #: temporaries (non-variable Values) that a pending target still holds (the value of a
        #: chained assignment ``a = b = e``); with the names of the contexts (_holds) they are
        #: the holders assign_name checks before retargeting a temporary's defining instruction
        self._held: list[Value] = []
        #: the contexts of the callers of the function being inlined, outermost first
        self._outer_ctxs: list[Any] = []

        self._inlined_calls = 0  # @aw.func calls inlined so far (frontend_inline.MAX_INLINED_CALLS)
        self._discard = False
        #: (id(function), free name) -> what resolve_global found (the functions live as long as this)
        self._globals: dict[tuple[int, str], Any] = {}
        #: id(ast.Attribute node) -> the object ``global_name.attr`` of a call's function (visit_Call)
        self._calls: dict[int, Any] = {}
        #: copies of the current loop body made by enclosing unrolled loops (aw.range(unroll=),
        #: aw.static_range); bounded by MAX_UNROLLED_COPIES
        self._unroll_copies = 1
        #: the and/or expression being visited as a condition (see visit_cond)
        self._cond_boolop: ast.AST | None = None
        #: uses of W-dependent intrinsics outside W-invariant library functions (compiler/wdep.py)
        self.w_uses: list[str] = []
        self._w_invariant_depth = 0

    def _enter(self, ctx: FuncCtx) -> None:
        """Translate the function of ``ctx`` from here on (the kernel's, or an inlined @aw.func's):
        its names, and the builder's source for errors and locations."""
        self.ctx = ctx
        self.b.src = ctx.src

    # ------------------------------------------------------------------ helpers
    @property
    def src(self) -> FuncSource:
        return self.ctx.src

    # ------------------------------------------------------------------ entry
    def build(self, params: Sequence[tuple[str, Any]]) -> list[ir.Node]:
        """Translate the kernel body. ``params``: (name, annotation) of runtime parameters."""
        fd = self.src.tree
        dyn = self.ctx.consts.get(ty.DYNAMIC_LOCAL)
        if isinstance(dyn, int) and not isinstance(dyn, bool):
            # local memory sized at launch (aw.dynamic): its bytes first, at offset 0
            self.b.dynamic_local = dyn
            self.b.local_memory = -(-dyn // 16) * 16
        for name, ann in params:
            if name == PRINT_ARG:
                raise self.b.err(fd, f"parameter name {PRINT_ARG!r} is reserved for aw.print's buffer")
            if isinstance(ann, ty.BufferType):
                self.ctx.consts[name] = BufferArg(name, len(self.b.args), ann.elem, ann.access, ann.constant)
                self.b.args.append((name, ann))
            else:
                self.b.args.append((name, ann))
                idx = len(self.b.args) - 1
                self.b.node = fd
                var = self._declare_var(name, ann, fd)
                self.b.emit("ldarg.b64" if ann.bits == 64 else "ldarg.b32", var, idx)
                self.ctx.defined.add(name)
        self._prescan(fd)
        self.visit_block(fd.body)
        return self.b.body

    def _prescan(self, fd: ast.FunctionDef) -> None:
        """Names assigned exactly once, at the function's top level, from a Python constant
        expression become compile-time constants, and so do names assigned only in straight-line
        code and unrolled loops (``off = 1 << k`` in an ``aw.static_range`` body:
        :func:`~anywave.compiler.astscan.unrolled_names`' ``straight``) while what they are
        assigned is known at compile time: like a literal, such an int takes the type of the
        operand it meets (a ``u32`` with ``t < off``). Names assigned only directly in
        ``aw.static_range`` bodies elsewhere (in run-time ifs and loops: ``nested``) are
        compile-time ints while assigned ints (``ctx.ct_ints``; see :class:`DemoteName` for
        where they become variables). Everything else assigned is a variable."""
        counts = assign_counts(fd)
        for stmt in fd.body:
            if (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1
                    and isinstance(stmt.targets[0], ast.Name) and counts.get(stmt.targets[0].id) == 1):
                self.ctx.const_names.add(stmt.targets[0].id)
        if any(isinstance(n, ast.For) for n in ast.walk(fd)):
            straight, nested = unrolled_names(fd, self._is_static_range)
            self.ctx.const_names.update(straight)
            self.ctx.ct_ints.update(n for n in nested if (fd, n) not in self._demoted)
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
        t = type(node)
        # names and constants emit nothing and read neither the builder's node nor its stmt (their
        # errors name the node itself): no state to set and restore (the commonest visits)
        if t is ast.Name:
            return self.load_name(node.id, node)  # type: ignore[attr-defined]
        if t is ast.Constant:
            return self.visit_Constant(node)  # type: ignore[arg-type]
        if t is ast.Subscript and type(node.value) is ast.Name:  # type: ignore[attr-defined]
            # av[i], acc[i, j] in unrolled code: a tuple or register-array element, without
            # the state below (nothing is emitted)
            bn = node.value  # type: ignore[attr-defined]
            base = self.load_name(bn.id, bn)
            if type(base) is tuple or type(base) is RegisterArray:
                r = self._static_subscript(node, base)  # type: ignore[arg-type]
                if r is not _UNSET:
                    return r
            b = self.b
            prev, prev_stmt = b.node, b.stmt
            b.node = node
            try:
                return self._subscript(node, base)  # type: ignore[arg-type]
            finally:
                b.node, b.stmt = prev, prev_stmt
        entry = _VISITORS.get(t)
        if entry is None:  # not looked up yet for this node class
            entry = _VISITORS[t] = (getattr(Frontend, "visit_" + t.__name__, None),
                                    2 if isinstance(node, ast.stmt) else 1 if isinstance(node, ast.expr) else 0)
        method, kind = entry
        b = self.b
        prev, prev_stmt = b.node, b.stmt
        if kind:
            b.node = node
            if kind == 2:
                b.stmt = node
        try:
            if method is None:
                raise b.err(node, f"{construct_name(node)} is not supported in a kernel" + supported_hint(node))
            return method(self, node)
        finally:
            b.node, b.stmt = prev, prev_stmt

    def visit_Pass(self, node: ast.Pass) -> None:
        return None

    def visit_Expr(self, node: ast.Expr) -> None:
        if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            return None  # docstring
        if isinstance(node.value, ast.Constant) and node.value.value is Ellipsis:
            return None  # `...` as a placeholder body, as `pass`
        if isinstance(node.value, (ast.Yield, ast.YieldFrom, ast.Await)):
            self.visit(node.value)  # reported as the unsupported construct it is
        if not isinstance(node.value, ast.Call):
            raise self.b.err(node, "an expression statement has no effect; only calls (barrier(), atomics, "
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
            value = self.b.pred_value(value)
        if name in ctx.ct_ints and ann is None and name not in ctx.var_values:
            if type(value) is int:  # a compile-time int: bound like a literal
                if ctx.loop_frames:
                    self._rebind_ct_int(name, value, node)
                ctx.consts[name] = value
                ctx.ct_bound.add(name)
                return
            if name in ctx.ct_bound:
                raise DemoteName(ctx.src.tree, name, f"it is assigned {_describe(value)} at line "
                                 f"{self.src.loc(node).line} after a compile-time int")
            ctx.ct_ints.discard(name)  # its first value is no int: a variable, as any other
        if name in ctx.const_names and not isinstance(value, Value) and ann is None and name not in ctx.var_values:
            ctx.consts[name] = value
            return
        if not isinstance(value, Value):
            if isinstance(value, (bool, int, float, np.generic)):
                existing = ctx.var_values.get(name)
                t = ann or (existing.type if existing is not None else self.b.default_type(value, node))
                try:
                    value = self.b.const(value, t, node)
                except CompileError as e:
                    if existing is None:
                        raise
                    where = ctx.assigned_where.get(name)
                    line = self.src.loc(where).line if where is not None else "?"
                    raise self.b.err(node, f"variable {name!r} has type {t.name} (first assigned at line {line}); "
                                     f"it cannot be assigned {_describe(value)}: {e.message}") from None
            else:
                if name in ctx.var_values:
                    raise self.b.err(node, f"{name!r} is a runtime variable; it cannot be rebound to "
                                     f"{_describe(value)}")
                if ctx.loop_frames:
                    self._rebind_in_loops(name, value, node)
                ctx.consts[name] = value  # arrays, buffers, dtypes: compile-time bindings
                return
        t = ann or value.type
        if value.type is ty.pred:
            value = self.b.pred_to_bool(value)
        existing = ctx.var_values.get(name)
        if existing is not None and existing.type is not (value.type if ann is None else ann):
            where = ctx.assigned_where.get(name)
            line = self.src.loc(where).line if where is not None else "?"
            raise self.b.err(node, f"variable {name!r} has type {existing.type.name} (first assigned at line "
                             f"{line}); it cannot be assigned a {value.type.name} value — cast explicitly, "
                             f"e.g. aw.{existing.type.name}(...)")
        if ann is not None and value.type is not ann:
            value = self.b.coerce(value, ann, node)
        var = self._declare_var(name, t if t is not ty.pred else ty.bool_, node)
        if value is not var:
            last = self.b.body[-1] if self.b.body else None
            if (isinstance(last, Op) and not value.is_var and last.defs_uses()[0] == [value]
                    and value not in last.uses() and not self._holds(value)):
                # retarget the defining instruction instead of copying (Values compare by
                # identity); a temporary something else holds keeps its register: the holder
                # (a parameter bound to f(x[i])'s argument, a tuple t = (x[i], 1)) reads it later
                last.retarget(value, var)
            else:
                self.b.emit("mov.b64" if var.type.bits == 64 else "mov.b32", var, value)
        ctx.defined.add(name)

    def _holds(self, value: Value) -> bool:
        """Whether a name of this or a calling context, or a pending chained-assignment
        target, holds the temporary ``value`` (directly, or inside a tuple, list or dict
        bound as a compile-time value)."""
        if any(h is value for h in self._held):
            return True

        def has(obj: Any, depth: int) -> bool:
            if obj is value:
                return True
            if depth and isinstance(obj, (tuple, list)):
                return any(has(o, depth - 1) for o in obj)
            if depth and isinstance(obj, dict):
                return any(has(o, depth - 1) for o in obj.values())
            return False

        for ctx in (*self._outer_ctxs, self.ctx):
            if any(v is value for v in ctx.var_values.values()):
                return True
            if any(has(c, 8) for c in ctx.consts.values()):
                return True
        return False

    def visit_Assign(self, node: ast.Assign) -> None:
        value = self.visit(node.value)
        held = isinstance(value, Value) and len(node.targets) > 1
        if held:  # a = b = e: every target reads e's register
            self._held.append(value)
        try:
            for target in node.targets:
                self.assign_target(target, value, node)
        finally:
            if held:
                self._held.pop()

    def assign_target(self, target: ast.AST, value: Any, node: ast.AST) -> None:
        if isinstance(target, ast.Name):
            self.assign_name(target.id, value, target)
        elif isinstance(target, ast.Subscript):
            self.store_subscript(target, value)
        elif isinstance(target, (ast.Tuple, ast.List)):
            if not isinstance(value, tuple) or len(value) != len(target.elts):
                raise self.b.err(target, f"cannot unpack {_describe(value)} into {len(target.elts)} names")
            for t, v in zip(target.elts, value, strict=True):
                self.assign_target(t, v, node)
        else:
            raise self.b.err(target, f"cannot assign to {construct_name(target)}; valid targets: a name, "
                             "buf[i], tile[i, j], or a tuple of those")

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        if not isinstance(node.target, ast.Name):
            raise self.b.err(node.target, "annotated assignment needs a plain name")
        ann = self.static_eval(node.annotation)
        if not isinstance(ann, DType) or ann not in ty.VALUE_TYPES:
            raise self.b.err(node.annotation, f"annotation must be a value type (aw.i32, aw.f32, ...), got "
                             f"{_describe(ann)}")
        if node.value is None:
            raise self.b.err(node, "a variable declaration needs a value: x: aw.f32 = 0.0")
        value = self.visit(node.value)
        self.ctx.const_names.discard(node.target.id)
        if isinstance(value, Value) and value.type is not ann:
            raise self.b.err(node.value, f"value of type {value.type.name} assigned to a variable declared "
                             f"{ann.name}; cast explicitly with aw.{ann.name}(...)")
        self.assign_name(node.target.id, value, node.target, ann)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        if isinstance(node.target, ast.Name):
            cur = self.load_name(node.target.id, node.target)
            self.b.node = node
            res = self.b.binop(type(node.op), cur, self.visit(node.value), node)
            if isinstance(cur, Value) and isinstance(res, Value) and res.type is not cur.type:
                raise self.b.err(node, f"'{node.target.id} {BINOP_NAMES[type(node.op)]}= ...' would change "
                                 f"{node.target.id!r} from {cur.type.name} to {res.type.name}; cast explicitly")
            self.assign_name(node.target.id, res, node.target)
        elif isinstance(node.target, ast.Subscript):
            cur = self.visit_Subscript(node.target)
            self.b.node = node
            res = self.b.binop(type(node.op), cur, self.visit(node.value), node)
            self.store_subscript(node.target, res)
        else:
            raise self.b.err(node.target, f"cannot assign to {construct_name(node.target)}")

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
            raise self.b.err(node.test, f"{_describe(cond)} cannot be used as a condition")
        self.b.node = node
        pu = self.b.as_pred(cond, node.test)
        ctx = self.ctx
        before = set(ctx.defined)
        consts_before = dict(ctx.consts)
        saved = self.b.body
        n = ir.If(pu, loc=self.src.loc(node))
        self.b.body = n.then
        term_then = self.visit_block(node.body)
        def_then = set(ctx.defined)
        consts_then, ctx.consts = ctx.consts, dict(consts_before)
        ctx.defined = set(before)
        self.b.body = n.orelse
        term_else = self.visit_block(node.orelse)
        def_else = set(ctx.defined)
        self.b.body = saved
        self.b.body.append(n)
        if not term_then and not term_else:
            self._merge_tuples(consts_then, ctx.consts, n, node)
        live = [c for c, term in ((consts_then, term_then), (ctx.consts, term_else)) if not term]
        ctx.consts = join_bindings(live, self.src.loc(node).line) if live else consts_before
        if term_then and term_else:
            ctx.defined = def_then | def_else
            raise _Terminated
        if term_then:
            ctx.defined = def_else
        elif term_else:
            ctx.defined = def_then
        else:
            ctx.defined = def_then & def_else

    def _merge_tuples(self, then: dict[str, Any], orelse: dict[str, Any], n: ir.If, node: ast.If) -> None:
        """A name bound to a tuple on both paths of the run-time if ``n`` (same length, elements
        values or numbers of types that meet) gets one tuple of variables, each assigned at the
        end of both branches, in both binding maps; others are left to :func:`join_bindings`."""
        for name in set(then) & set(orelse):
            a, b = then[name], orelse[name]
            if isinstance(a, tuple) and isinstance(b, tuple) and not same_binding(a, b):
                try:
                    then[name] = orelse[name] = self._merge_element(name, a, b, n, node)
                except (_NoMerge, CompileError):
                    pass  # stays divergent: an error where it is read

    def _merge_element(self, name: str, a: Any, b: Any, n: ir.If, node: ast.If) -> Any:
        if same_binding(a, b):
            return a
        if isinstance(a, tuple) and isinstance(b, tuple) and len(a) == len(b):
            return tuple(self._merge_element(name, x, y, n, node) for x, y in zip(a, b, strict=True))
        scalar = (Value, PredUse, bool, int, float, np.generic)
        if not isinstance(a, scalar) or not isinstance(b, scalar):
            raise _NoMerge
        a = self.b.pred_value(a) if isinstance(a, PredUse) else a
        b = self.b.pred_value(b) if isinstance(b, PredUse) else b
        t = self.b.unify(a, b, f"the elements of {name!r}", node)
        var = Value(t, name, is_var=True)
        saved, saved_node = self.b.body, self.b.node
        self.b.node = node
        try:
            for body, x in ((n.then, a), (n.orelse, b)):
                self.b.body = body
                self.b.emit("mov.b64" if t.bits == 64 else "mov.b32", var, self.b.coerce(x, t, node))
        finally:
            self.b.body, self.b.node = saved, saved_node
        return var

    def _loop(self, build: Callable[[], None], node: ast.AST) -> None:
        ctx = self.ctx
        before = set(ctx.defined)
        frame = LoopFrame(self.src.loc(node).line, dict(ctx.consts))
        ctx.loop_frames.append(frame)
        saved = self.b.body
        lp = ir.Loop(loc=self.src.loc(node))
        self.b.body = lp.body
        ctx.loop_depth += 1
        try:
            build()
        except _Terminated:
            pass
        finally:
            ctx.loop_depth -= 1
            ctx.loop_frames.pop()
            self.b.body = saved
        self.b.body.append(lp)
        ctx.defined = before
        # a compile-time binding the body changed is the loop's last one, or the one before the
        # loop when it runs no iteration: reading it after the loop is an error
        for name, v in list(ctx.consts.items()):
            old = frame.before.get(name, UNBOUND)
            if not same_binding(old, v) and not isinstance(v, Divergent):
                ctx.consts[name] = Divergent(frame.line, (old, v), "loop")

    def _rebind_in_loops(self, name: str, value: Any, node: ast.AST) -> None:
        """``name``, a compile-time binding, gets ``value`` inside run-time loops: refused
        where the loop body read the binding from before the loop earlier (the body is
        translated once, so later iterations would read the first binding, not this one)."""
        for frame in self.ctx.loop_frames:
            old = frame.before.get(name, UNBOUND)
            if old is UNBOUND or name in frame.rebound or same_binding(old, value):
                continue
            frame.rebound.add(name)
            read = frame.read.get(name)
            if read is not None:
                raise self.b.err(node, f"{name!r} holds a compile-time value ({_describe(old)}) bound before the "
                                 f"run-time loop at line {frame.line}; the loop body reads it at line "
                                 f"{self.src.loc(read).line} and rebinds it here to {_describe(value)}, so every "
                                 "iteration after the first would read the wrong binding: rebind it before its first "
                                 "use in the loop, or use typed variables")

    def _rebind_ct_int(self, name: str, value: int, node: ast.AST) -> None:
        """:meth:`_rebind_in_loops` for a compile-time int of ``ctx.ct_ints``: where the loop
        body read the binding from before the loop, the name must be a variable instead."""
        try:
            self._rebind_in_loops(name, value, node)
        except CompileError:
            raise DemoteName(self.ctx.src.tree, name, f"a run-time loop reads it before rebinding it at line "
                             f"{self.src.loc(node).line}, so each iteration reads the previous one's value") from None

    def _divergent_ct_int(self, name: str, v: Divergent, node: ast.AST) -> None:
        """Reading a compile-time int of ``ctx.ct_ints`` whose paths disagree: a variable
        instead where every path binds an int (raise DemoteName), else an error."""
        leaves: list[Any] = []

        def flat(x: Any) -> None:
            if isinstance(x, Divergent):
                for y in x.values:
                    flat(y)
            else:
                leaves.append(x)
        flat(v)
        got = " / ".join("unbound" if x is UNBOUND else str(x) if type(x) is int else _describe(x) for x in leaves)
        where = ("the run-time if" if v.construct == "if" else "the run-time loop") + f" at line {v.line}"
        if all(type(x) is int for x in leaves):
            raise DemoteName(self.ctx.src.tree, name, f"it is read at line {self.src.loc(node).line} after {where}, "
                             f"whose paths leave it different compile-time ints ({got})")
        raise self.b.err(node, f"{name!r} is a compile-time int (a name assigned only inside aw.static_range "
                         f"loops) and is unbound on some paths through {where} ({got}), so it cannot be read "
                         "after it: read it inside the loop, or make it a variable assigned before the "
                         f"{'if' if v.construct == 'if' else 'loop'} ({name}: aw.u32 = 0, say)")

    def visit_While(self, node: ast.While) -> None:
        if node.orelse:
            raise self.b.err(node.orelse[0], "'while ... else' is not supported in a kernel")

        def build() -> None:
            cond = self.visit_cond(node.test)
            self.b.node = node
            if isinstance(cond, (bool, int, float)) and cond:
                pass  # while True: leave only through break/return
            else:
                pu = self.b.as_pred(cond, node.test)
                self.b.body.append(ir.Break(PredUse(pu.value, not pu.negated), self.src.loc(node)))
            self.visit_block(node.body)

        self._loop(build, node)

    def visit_For(self, node: ast.For) -> None:
        if node.orelse:
            raise self.b.err(node.orelse[0], "'for ... else' is not supported in a kernel")
        it = node.iter
        if not isinstance(it, ast.Call):
            raise self.b.err(it, "a kernel loop iterates over range(...), aw.range(...) or aw.static_range(...); "
                             f"got {construct_name(it)}")
        fn = self.static_eval(it.func)
        if not isinstance(node.target, ast.Name):
            raise self.b.err(node.target, "the loop variable must be a plain name")
        name = node.target.id
        if fn is L.INTRINSICS["static_range"]:
            return self._static_for(node, it, name)
        if fn is not builtins.range and fn is not L.INTRINSICS["range"]:
            raise self.b.err(it.func, f"cannot iterate over {_describe(fn)} in a kernel; valid: range(...), "
                             "aw.range(..., unroll=k), aw.static_range(...)")
        unroll = 1
        for kw in it.keywords:
            if kw.arg == "unroll" and fn is L.INTRINSICS["range"]:
                unroll = self.static_eval(kw.value)
                if not isinstance(unroll, int) or isinstance(unroll, bool) or unroll < 1:
                    raise self.b.err(kw.value, f"unroll must be a positive compile-time int, got {_describe(unroll)}")
            else:
                raise self.b.err(it, f"unexpected keyword {kw.arg!r} for range(); valid: unroll= (aw.range only)")
        args = [self.visit(a) for a in it.args]
        self.b.node = it
        if not 1 <= len(args) <= 3:
            raise self.b.err(it, f"range() takes 1 to 3 arguments, got {len(args)}")
        start, stop, step = (0, args[0], 1) if len(args) == 1 else (args[0], args[1], args[2] if len(args) == 3 else 1)
        if isinstance(step, (int, np.integer)) and step == 0:
            raise self.b.err(it.args[2], "range() step must not be zero")
        typed = [v for v in (start, stop, step) if isinstance(v, Value)]
        t = typed[0].type if typed else self.b.default_type(stop if isinstance(stop, int) else 0, it)
        for v in (start, stop, step):
            t = self.b.unify(Value(t), v, "range()", it) if isinstance(v, Value) else t
            if not isinstance(v, Value) and not isinstance(v, (int, np.integer)):
                raise self.b.err(it, f"range() bounds must be integers, got {_describe(v)}")
        if not t.is_int:
            raise self.b.err(it, f"range() bounds must be integers, got {t.name}")
        copies = self._unroll_copies * unroll
        if unroll > 1 and copies > MAX_UNROLLED_COPIES:
            raise self.b.err(it, f"aw.range(..., unroll={unroll}) makes {copies} copies of the loop body"
                             + (f" (with the enclosing unrolled loops' {self._unroll_copies})"
                              if self._unroll_copies > 1 else "")
                             + f"; the limit is {MAX_UNROLLED_COPIES} in all; use a smaller unroll factor")
        if unroll > 1 and any(isinstance(n, ast.Continue) for n in ast.walk(node)):
            raise self.b.err(node, "continue is not supported in a loop with unroll > 1; use an if instead")
        counter = Value(t, f"{name}_next", is_var=True)
        self.b.emit("mov.b64" if t.bits == 64 else "mov.b32", counter, self.b.coerce(start, t, it))
        stop_v = self.b.coerce(stop, t, it)
        if not isinstance(stop, Value) or stop.is_var:
            s2 = Value(t, "stop", is_var=True)
            self.b.emit("mov.b64" if t.bits == 64 else "mov.b32", s2, stop_v)
            stop_v = s2
        step_v = self.b.coerce(step, t, it)
        if isinstance(step, Value) and step.is_var:
            s3 = Value(t, "step", is_var=True)
            self.b.emit("mov.b64" if t.bits == 64 else "mov.b32", s3, step_v)
            step_v = s3

        def one_iteration() -> None:
            self.b.node = it
            if isinstance(step, Value):
                # runtime step: continue while (step > 0 and i < stop) or (step < 0 and i > stop)
                zero = self.b.const(0, t)
                pos, lt, gt, a, b, go = (self.b.new(ty.pred) for _ in range(6))
                self.b.emit(self.b.cmp_mn("gt", t, it), pos, step_v, zero)
                self.b.emit(self.b.cmp_mn("lt", t, it), lt, counter, stop_v)
                self.b.emit(self.b.cmp_mn("gt", t, it), gt, counter, stop_v)
                self.b.emit("and.pred", a, PredUse(pos), PredUse(lt))
                self.b.emit("and.pred", b, PredUse(pos, True), PredUse(gt))
                self.b.emit("or.pred", go, PredUse(a), PredUse(b))
                self.b.body.append(ir.Break(PredUse(go, True), self.src.loc(node)))
            else:
                p = self.b.new(ty.pred)
                self.b.emit(self.b.cmp_mn("lt" if step > 0 else "gt", t, it), p, counter, stop_v)
                self.b.body.append(ir.Break(PredUse(p, True), self.src.loc(node)))
            self.b.node = node.target
            self.assign_name(name, counter, node.target)
            self.b.node = it
            nxt = self.b.new(t)
            self.b.emit(self.b.mn("add", t, it), nxt, counter, step_v)
            self.b.emit("mov.b64" if t.bits == 64 else "mov.b32", counter, nxt)
            self.b.node = node
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

    def _is_static_range(self, it: ast.expr) -> bool:
        """Whether a loop's iterable is a call of ``aw.static_range`` (resolved like any callee;
        anything that cannot be resolved at compile time is not)."""
        if not isinstance(it, ast.Call):
            return False
        try:
            return self.static_eval(it.func) is L.INTRINSICS["static_range"]
        except CompileError:
            return False

    def _static_for(self, node: ast.For, it: ast.Call, name: str) -> None:
        args = [self.static_eval(a) for a in it.args]
        if not all(isinstance(a, int) and not isinstance(a, bool) for a in args) or not 1 <= len(args) <= 3:
            raise self.b.err(it, "aw.static_range() takes 1 to 3 compile-time ints, got "
                             + ", ".join(_describe(a) for a in args))
        jumps = getattr(node, "_aw_jumps", None)  # memoised: nested static loops revisit this node
        if jumps is None:
            jumps = node._aw_jumps = any(isinstance(n, (ast.Break, ast.Continue)) for n in ast.walk(node))  # type: ignore[attr-defined]
        if jumps:
            raise self.b.err(node, "break/continue are not supported inside aw.static_range (the loop is "
                             "unrolled at compile time); use range() or an if")
        values = range(*args)
        copies = self._unroll_copies * len(values)
        if copies > MAX_UNROLLED_COPIES:
            raise self.b.err(it, f"aw.static_range unrolls {len(values)} iterations"
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
            raise self.b.err(node, "'break' outside a loop")
        self.b.body.append(ir.Break(None, self.src.loc(node)))
        raise _Terminated

    def visit_Continue(self, node: ast.Continue) -> None:
        if self.ctx.loop_depth == 0:
            raise self.b.err(node, "'continue' outside a loop")
        self.b.body.append(ir.Continue(None, self.src.loc(node)))
        raise _Terminated

    def visit_Return(self, node: ast.Return) -> None:
        ctx = self.ctx
        if ctx.is_kernel:
            if node.value is not None:
                v = self.visit(node.value)
                if v is not None:
                    raise self.b.err(node.value, "a kernel cannot return a value; write results to an output "
                                     "buffer (aw.Out[...])")
            self.b.body.append(ir.Halt(None, self.src.loc(node)))
            raise _Terminated
        value = self.visit(node.value) if node.value is not None else None
        self.b.node = node
        if ctx.loop_depth > 0:
            raise self.b.err(node, "return inside a loop of an @aw.func is not supported; use break and "
                             "return after the loop")
        if value is None:
            pass
        elif isinstance(value, (Value, PredUse)) or ctx.ret_var is not None:
            if isinstance(value, PredUse):
                value = self.b.pred_value(value)
            if ctx.ret_var is None:
                t = value.type if isinstance(value, Value) else self.b.default_type(value, node.value)
                ctx.ret_var = Value(ty.bool_ if t is ty.pred else t, "ret", is_var=True)
            elif isinstance(value, Value) and value.type not in (ctx.ret_var.type,) and not (
                    value.type is ty.pred and ctx.ret_var.type is ty.bool_):
                raise self.b.err(node.value, f"this return gives {value.type.name}, an earlier one "
                                 f"{ctx.ret_var.type.name}; cast explicitly")
            v = self.b.coerce(value, ctx.ret_var.type, node.value)
            self.b.emit("mov.b64" if v.type.bits == 64 else "mov.b32", ctx.ret_var, v)
        elif ctx.ret_wrapped and isinstance(value, (bool, int, float, np.generic)):
            ph = self.b.emit("nop")
            ctx.pending.append((ph, value, node))
        else:
            ctx.ret_const = ("const", value)
        if ctx.ret_wrapped:
            self.b.body.append(ir.Break(None, self.src.loc(node)))
        raise _Terminated

    def visit_Assert(self, node: ast.Assert) -> None:
        v = self.visit_cond(node.test)
        if isinstance(v, Value):
            raise self.b.err(node, "assert needs a compile-time condition (runtime asserts are not supported)")
        if not v:
            msg = self.static_eval(node.msg) if node.msg is not None else "assertion failed"
            raise self.b.err(node, f"static assertion failed: {msg}")

    # ------------------------------------------------------------------ expressions
    def visit_Constant(self, node: ast.Constant) -> Any:
        if isinstance(node.value, (bool, int, float, str)) or node.value is None:
            return node.value
        raise self.b.err(node, f"constant {node.value!r} is not supported")

    def load_name(self, name: str, node: ast.AST) -> Any:
        ctx = self.ctx
        v = ctx.var_values.get(name)
        if v is not None:
            if name not in ctx.defined:
                where = ctx.assigned_where.get(name)
                wline = f" (it is assigned at line {self.src.loc(where).line})" if where is not None else ""
                raise self.b.err(node, f"variable {name!r} may be undefined here{wline}: it is assigned only in "
                                 "some branches or inside a loop that may not run; assign it before the if/loop")
            return v
        v = ctx.consts.get(name, _UNSET)
        if v is not _UNSET:
            if type(v) is Divergent:  # (it has no subclasses)
                if name in ctx.ct_ints:
                    self._divergent_ct_int(name, v, node)
                raise self.b.err(node, v.message(name))
            for frame in ctx.loop_frames:  # the first read of the name in each loop being translated
                if name not in frame.read and name not in frame.rebound:
                    frame.read[name] = node
            return v
        return self.resolve_global(name, node)

    def resolve_global(self, name: str, node: ast.AST) -> Any:
        """A free name of the function body, as Python resolves it: closure cell, module
        global, builtin (the same lookup the cache key is built from; looked up once per
        function and name in one translation)."""
        fn = self.src.fn
        key = (id(fn), name)
        v = self._globals.get(key, _UNSET)
        if v is _UNSET:
            v = self._globals[key] = resolve_free_name(fn, name)
        if v is _UNDEFINED:
            raise self.b.err(node, f"name {name!r} is not defined")
        return v

    def visit_Name(self, node: ast.Name) -> Any:
        return self.load_name(node.id, node)

    def visit_Attribute(self, node: ast.Attribute) -> Any:
        base = self.visit(node.value)
        if isinstance(base, (Value, PredUse)):
            raise self.b.err(node, f"{base.type.name if isinstance(base, Value) else 'bool'} values have no "
                             f"attribute {node.attr!r}")
        if isinstance(base, LocalArray) and node.attr == "shape":
            return base.shape
        try:
            return getattr(base, node.attr)
        except AttributeError:
            raise self.b.err(node, f"{_describe(base)} has no attribute {node.attr!r}") from None

    def static_eval(self, node: ast.AST) -> Any:
        """Evaluate an expression that must be known at compile time."""
        if type(node) is ast.Name or type(node) is ast.Constant:  # emits nothing
            v = self.visit(node)
            if isinstance(v, (Value, PredUse)):
                raise self.b.err(node, "this must be a compile-time constant, but it is a runtime value")
            return v
        mark = len(self.b.body)
        v = self.visit(node)
        if isinstance(v, (Value, PredUse)):
            raise self.b.err(node, "this must be a compile-time constant, but it is a runtime value")
        del self.b.body[mark:]
        return v

    def visit_Tuple(self, node: ast.Tuple) -> tuple[Any, ...]:
        return tuple(self.visit(e) for e in node.elts)

    def visit_List(self, node: ast.List) -> tuple[Any, ...]:
        return tuple(self.visit(e) for e in node.elts)

    def visit_UnaryOp(self, node: ast.UnaryOp) -> Any:
        x = self.visit_cond(node.operand) if isinstance(node.op, ast.Not) else self.visit(node.operand)
        self.b.node = node
        if isinstance(node.op, ast.Not):
            if not isinstance(x, (Value, PredUse)):
                return not x
            pu = self.b.as_pred(x, node.operand)
            p = self.b.new(ty.pred)
            self.b.emit("mov.pred", p, PredUse(pu.value, not pu.negated))
            return p
        if isinstance(x, PredUse):
            x = self.b.pred_value(x)
        if not isinstance(x, Value):
            if isinstance(node.op, ast.USub):
                return -x
            if isinstance(node.op, ast.UAdd):
                return +x
            if isinstance(node.op, ast.Invert):
                return ~x
        if x.type.is_bool:
            raise self.b.err(node, f"unary {type(node.op).__name__} is not supported on bool; cast with aw.i32(...)")
        if isinstance(node.op, ast.UAdd):
            return x
        r = self.b.new(x.type)
        if isinstance(node.op, ast.USub):
            self.b.emit(self.b.mn("neg", x.type, node, "unary -"), r, x)
        elif isinstance(node.op, ast.Invert):
            if x.type.is_float:
                raise self.b.err(node, f"~ is not defined for {x.type.name}; use aw.bitcast to an integer first")
            self.b.emit(self.b.mn("not", x.type, node, "~"), r, x)
        return r

    def visit_BinOp(self, node: ast.BinOp) -> Any:
        a = self.visit(node.left)
        b = self.visit(node.right)
        self.b.node = node
        return self.b.binop(type(node.op), a, b, node)


    def visit_Compare(self, node: ast.Compare) -> Any:
        left = self.visit(node.left)
        result: Any = None
        pieces: list[Any] = []
        for op, comp in zip(node.ops, node.comparators, strict=True):
            right = self.visit(comp)
            self.b.node = node
            cmp = _CMP.get(type(op))
            if cmp is None:
                raise self.b.err(node, f"comparison {type(op).__name__} ('is', 'in' ...) is not supported; "
                                 "valid: < <= > >= == !=")
            pieces.append(self.b.compare(cmp, left, right, node))
            left = right
        for p in pieces:
            if result is None:
                result = p
            elif not isinstance(p, (Value, PredUse)) and not isinstance(result, (Value, PredUse)):
                result = result and p
            else:
                a, b = self.b.as_pred(result, node), self.b.as_pred(p, node)
                r = self.b.new(ty.pred)
                self.b.emit("and.pred", r, a, b)
                result = r
        return result


    def _scratch(self, node: ast.AST) -> tuple[Any, list[ir.Node]]:
        """Visit ``node`` into a separate block: (result, the nodes it generated)."""
        saved = self.b.body
        self.b.body = []
        try:
            v = self.visit(node)
            return v, self.b.body
        finally:
            self.b.body = saved

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
            self.b.node = node
            lb, rb = _is_boolish(result), _is_boolish(right)
            if cond_only:
                lb = rb = True  # only the truthiness of the result is used
            if lb != rb:
                bad = vnode if lb else left_node
                other = right if lb else result
                raise self.b.err(bad, f"operands of '{word}' are a bool and {_describe(other)}: Python's result "
                                 f"would be either type; compare explicitly (x != 0) or cast both sides to one type")
            if lb:
                result = self._bool_op(is_and, result, right, nodes, node, vnode)
            else:
                result = self._value_op(is_and, result, right, nodes, node, vnode)
            left_node = vnode
        # an expression's value is a Value (a pred register), never a bare PredUse: callers
        # bind it to names, pass it to functions and store it
        return self.b.pred_value(result) if isinstance(result, PredUse) else result

    def visit_IfExp(self, node: ast.IfExp) -> Any:
        cond = self.visit_cond(node.test)
        if not isinstance(cond, (Value, PredUse)):
            return self.visit(node.body if cond else node.orelse)
        pu = self.b.as_pred(cond, node.test)
        a, na = self._scratch(node.body)
        b, nb = self._scratch(node.orelse)
        self.b.node = node
        t = self.b.unify(a, b, "a conditional expression", node)
        if self._pure(na) and self._pure(nb):
            self.b.body.extend(na)
            self.b.body.extend(nb)
            return self.b.select(pu, self.b.coerce(a, t, node.body), self.b.coerce(b, t, node.orelse))
        res = Value(t, "sel", is_var=True)
        n = ir.If(pu, loc=self.src.loc(node))
        saved = self.b.body
        self.b.body = n.then
        self.b.body.extend(na)
        self.b.emit("mov.b64" if t.bits == 64 else "mov.b32", res, self.b.coerce(a, t, node.body))
        self.b.body = n.orelse
        self.b.body.extend(nb)
        self.b.emit("mov.b64" if t.bits == 64 else "mov.b32", res, self.b.coerce(b, t, node.orelse))
        self.b.body = saved
        self.b.body.append(n)
        return res


    def visit_Subscript(self, node: ast.Subscript) -> Any:
        bn = node.value
        return self._subscript(node, self.load_name(bn.id, bn) if type(bn) is ast.Name else self.visit(bn))

    def _static_subscript(self, node: ast.Subscript, base: Any) -> Any:
        """``t[i]`` of a tuple or register array by compile-time ints (names or literals), which
        emits nothing: the element, else _UNSET (then :meth:`_subscript` does it, errors and all;
        what this read, names only, it reads again to the same effect)."""
        sl = node.slice
        if type(base) is tuple:
            if type(sl) is ast.Name:
                i = self._static_int(sl)
                if i is not None and -len(base) <= i < len(base):
                    return base[i]
            return _UNSET
        elts = sl.elts if type(sl) is ast.Tuple else (sl,)
        key = []
        for e in elts:
            te = type(e)
            if te is ast.Name:
                x = self._static_int(e)
                if x is None:
                    return _UNSET
            elif te is ast.Constant and type(e.value) is int:
                x = e.value
            else:
                return _UNSET
            key.append(x)
        v = base.vars.get(tuple(key))
        return _UNSET if v is None else v

    def _static_int(self, e: ast.Name) -> int | None:
        """:meth:`load_name` of a name bound to a compile-time int (its value), else None with
        nothing done (the caller then loads it, reporting what load_name reports)."""
        ctx = self.ctx
        name = e.id
        if name in ctx.var_values:
            return None
        x = ctx.consts.get(name)
        if type(x) is not int:
            return None
        for frame in ctx.loop_frames:  # as load_name
            if name not in frame.read and name not in frame.rebound:
                frame.read[name] = e
        return x

    def _subscript(self, node: ast.Subscript, base: Any) -> Any:
        """``base[node.slice]`` (``base``: the value of ``node.value``)."""
        sl = node.slice
        if isinstance(base, tuple):
            if type(sl) is ast.Name:  # static_eval of a name, inline (av[i] in unrolled code)
                i = self.load_name(sl.id, sl)
                if isinstance(i, (Value, PredUse)):
                    raise self.b.err(sl, "this must be a compile-time constant, but it is a runtime value")
            else:
                i = self.static_eval(sl)
            try:
                return base[i]
            except (IndexError, TypeError) as e:
                raise self.b.err(node, f"tuple index {_describe(i)}: {e}") from None
        if isinstance(base, BufferArg):
            if base.access is Access.WRITE:
                raise self.b.err(node, f"buffer {base.name!r} is declared aw.Out[{base.elem.name}] (write only) "
                                 f"and cannot be read; declare it aw.Buffer[{base.elem.name}] to read and write")
            idx = self.visit(sl)
            self.b.node = node
            off, wide = self.b.index_offset(idx, base.elem.scalar.nbytes, sl)
            return self.b.load("device", base.elem, DevAddr(base.index, off), wide)
        if isinstance(base, LocalArray):
            addr = self.b.local_addr(base, sl, node)
            return self.b.load("local", base.elem, addr, False)
        if isinstance(base, RegisterArray):
            return self._register_index(base, sl, node)
        if isinstance(base, BufferView):
            return self._view_load(base, sl, node)
        if isinstance(base, (Value, PredUse)):
            raise self.b.err(node, "only buffers, local arrays and tuples can be indexed; this is a scalar value")
        raise self.b.err(node, f"{_describe(base)} cannot be indexed")


    # ------------------------------------------------------------------ calls
    def visit_Call(self, node: ast.Call) -> Any:
        discard = self._discard
        self._discard = False
        f = node.func
        if type(f) is ast.Attribute and type(f.value) is ast.Name:
            # aw.fma(...): an attribute of a module the name resolves to (resolve_global: it is
            # not bound in the function) is the same object at every visit: looked up once
            name = f.value.id
            ctx = self.ctx
            if name not in ctx.var_values and name not in ctx.consts:
                fn = self._calls.get(id(f), _UNSET)
                if fn is _UNSET:
                    fn = self.visit(f)
                    mod = self._globals.get((id(self.src.fn), name))
                    if isinstance(mod, types.ModuleType) and vars(mod).get(f.attr, _UNSET) is fn:
                        self._calls[id(f)] = fn
            else:
                fn = self.visit(f)
        else:
            fn = self.visit(f)
        self.b.node = node
        if isinstance(fn, Intrinsic):
            if fn.name in W_DEPENDENT_INTRINSICS and not self._w_invariant_depth:
                loc = self.b.loc()
                self.w_uses.append(f"aw.{fn.name}()" + (f" at {loc}" if loc is not None else ""))
            if fn.lower is None:
                raise self.b.err(node, f"aw.{fn.name}() has no lowering: an intrinsic marker must be declared with "
                                 "its lowering function in anywave.compiler.language")
            return fn.lower(self.b, node, discard)
        if isinstance(fn, DType):
            args = self.b.call_args(node, 1, 1, f"aw.{fn.name}()")
            x = args[0]
            self.b.node = node
            if not isinstance(x, (Value, PredUse)):
                if fn not in ty.VALUE_TYPES:
                    raise self.b.err(node, f"aw.{fn.name} is a storage type only (buffers, local arrays)")
                return self.b.const(x, fn, node.args[0])
            if fn not in ty.VALUE_TYPES:
                raise self.b.err(node, f"cannot convert to {fn.name}: it is a storage-only type; valid: "
                                 + ", ".join(t.name for t in ty.VALUE_TYPES))
            return self.b.cast(self.b.pred_value(x) if isinstance(x, PredUse) else x, fn, node)
        if isinstance(fn, DeviceFunction):
            return self.inline(fn, node)
        if isinstance(fn, KernelDefinition):
            raise self.b.err(node, f"cannot call kernel {fn.name!r} from a kernel; make it an @aw.func")
        if fn in (builtins.min, builtins.max):
            return self._minmax("min" if fn is builtins.min else "max", node)
        if fn is builtins.abs:
            (x,) = self.b.call_args(node, 1, 1, "abs()")
            if not isinstance(x, Value):
                return abs(x)
            if x.type.is_int and not x.type.is_signed:
                return x
            return self.b.alu("abs", x.type, x, node=node)
        if fn in (builtins.int, builtins.float, builtins.bool):
            (x,) = self.b.call_args(node, 1, 1, f"{fn.__name__}()")
            if isinstance(x, (Value, PredUse)):
                target = {builtins.int: ty.i32, builtins.float: ty.f32, builtins.bool: ty.bool_}[fn]
                return self.b.cast(self.b.pred_value(x) if isinstance(x, PredUse) else x, target, node)
            return fn(x)
        if fn is builtins.len:
            (x,) = self.b.call_args(node, 1, 1, "len()")
            if isinstance(x, LocalArray):
                return x.shape[0]
            if isinstance(x, tuple):
                return len(x)
            raise self.b.err(node, f"len() of {_describe(x)} is not known at compile time")
        if fn is builtins.range:
            raise self.b.err(node, "range() can only be used as a for-loop iterable")
        if fn is builtins.print:
            raise self.b.err(node, "print() is a host function; in a kernel use aw.print(fmt, *values), e.g. "
                             "aw.print(\"i={} x={}\", i, x[i])")
        if isinstance(fn, type(math.sqrt)) and getattr(fn, "__module__", None) == "math":
            raise self.b.err(node, f"math.{fn.__name__} is a host function; use aw.{fn.__name__} in kernels")
        raise self.b.err(node.func, f"cannot call {_describe(fn)} in a kernel; valid: aw intrinsics, @aw.func "
                         "functions, min/max/abs, dtype casts such as aw.f32(x)")

    def _minmax(self, op: str, node: ast.Call) -> Any:
        args = self.b.call_args(node, 2, 8, f"{op}()")
        if all(not isinstance(a, (Value, PredUse)) for a in args):
            return (min if op == "min" else max)(args)
        acc = args[0]
        for b in args[1:]:
            t = self.b.unify(acc, b, f"{op}()", node)
            if t.is_bool:
                raise self.b.err(node, f"{op}() of bool values is not supported")
            acc = self.b.alu(op, t, self.b.coerce(acc, t, node), self.b.coerce(b, t, node), node=node)
        return acc

    # ------------------------------------------------------------------ stores, register arrays, views
    def store_subscript(self, target: ast.Subscript, value: Any) -> None:
        bn = target.value
        base = self.load_name(bn.id, bn) if type(bn) is ast.Name else self.visit(bn)
        self.b.node = target
        if type(base) is RegisterArray:  # the commonest in unrolled code (the classes are disjoint)
            self._register_store(base, target, value)
        elif isinstance(base, BufferArg):
            if base.access is Access.READ:
                raise self.b.err(target, f"buffer {base.name!r} is declared {base.spelling}[{base.elem.name}] (read "
                                 f"only) and cannot be written; declare it aw.Buffer[{base.elem.name}] or "
                                 f"aw.Out[{base.elem.name}]")
            idx = self.visit(target.slice)
            self.b.node = target
            off, wide = self.b.index_offset(idx, base.elem.scalar.nbytes, target.slice)
            v = self.b.store_value(value, base.elem, target)
            self.b.store("device", base.elem, DevAddr(base.index, off), v, wide)
        elif isinstance(base, LocalArray):
            addr = self.b.local_addr(base, target.slice, target)
            v = self.b.store_value(value, base.elem, target)
            self.b.store("local", base.elem, addr, v, False)
        elif isinstance(base, RegisterArray):
            self._register_store(base, target, value)
        elif isinstance(base, BufferView):
            self._view_store(base, target, value)
        else:
            raise self.b.err(target.value, f"cannot store into {_describe(base)}; valid: buffers, buffer views, "
                             "local arrays and register arrays")

    def _register_index(self, arr: RegisterArray, sl: ast.AST, node: ast.AST) -> Value:
        if type(sl) is ast.Tuple:  # tile[i, j]: the elements one by one (what visit_Tuple does)
            idx = tuple([self.load_name(e.id, e) if type(e) is ast.Name else self.visit(e) for e in sl.elts])
        else:
            idx = self.visit(sl)
        self.b.node = node
        idxs = idx if isinstance(idx, tuple) else (idx,)
        for i in idxs:  # ints (not bools, floats ...) in range: the element, without the checks below
            if type(i) is not int:
                break
        else:
            v = arr.vars.get(idxs)
            if v is not None:
                return v
        if len(idxs) != len(arr.shape):
            raise self.b.err(node, f"{arr!r} needs {len(arr.shape)} indices, got {len(idxs)}")
        out = []
        for i, dim in zip(idxs, arr.shape, strict=True):
            if isinstance(i, (Value, PredUse)):
                raise self.b.err(sl, f"a register array is indexed only by compile-time ints (literals, "
                                 f"aw.static_range loop variables, constant parameters); this index is a run-time "
                                 f"{i.type.name if isinstance(i, Value) else 'bool'} value. Use aw.static_range for "
                                 "the loop, or a local array for run-time indexing")
            if isinstance(i, bool) or not isinstance(i, (int, np.integer)):
                raise self.b.err(sl, f"a register-array index must be an int, got {i!r}")
            if not 0 <= int(i) < dim:
                raise self.b.err(sl, f"index {int(i)} is out of range for a register-array dimension of size {dim}")
            out.append(int(i))
        return arr.vars[tuple(out)]

    def _register_store(self, arr: RegisterArray, target: ast.Subscript, value: Any) -> None:
        var = self._static_subscript(target, arr)
        if var is _UNSET:
            var = self._register_index(arr, target.slice, target)
        if isinstance(value, PredUse):
            value = self.b.pred_value(value)
        if isinstance(value, Value):
            if value.type is not var.type:
                raise self.b.err(target, f"{arr!r} holds {var.type.name}; it cannot be assigned a "
                                 f"{value.type.name} value — cast explicitly, e.g. aw.{var.type.name}(...)")
        else:
            value = self.b.coerce(value, var.type, target)
        last = self.b.body[-1] if self.b.body else None
        if (isinstance(last, ir.Op) and not value.is_var and last.defs_uses()[0] == [value]
                and value not in last.uses()):  # (Values compare by identity)
            last.retarget(value, var)  # no copy needed
        else:
            self.b.emit("mov.b64" if var.type.bits == 64 else "mov.b32", var, value)

    def _view_load(self, view: BufferView, sl: ast.AST, node: ast.AST) -> Value:
        buf = view.buffer
        if buf.access is Access.WRITE:
            raise self.b.err(node, f"buffer {buf.name!r} is declared aw.Out[{buf.elem.name}] (write only) and cannot "
                             "be read")
        lin = self.b.view_index(view, self.visit(sl), node)
        self.b.node = node
        off, wide = self.b.index_offset(lin, buf.elem.scalar.nbytes, sl)
        return self.b.load("device", buf.elem, DevAddr(buf.index, off), wide)

    def _view_store(self, view: BufferView, target: ast.Subscript, value: Any) -> None:
        buf = view.buffer
        if buf.access is Access.READ:
            raise self.b.err(target, f"buffer {buf.name!r} is declared {buf.spelling}[{buf.elem.name}] (read only) and "
                             "cannot be written")
        lin = self.b.view_index(view, self.visit(target.slice), target)
        self.b.node = target
        off, wide = self.b.index_offset(lin, buf.elem.scalar.nbytes, target.slice)
        v = self.b.store_value(value, buf.elem, target)
        self.b.store("device", buf.elem, DevAddr(buf.index, off), v, wide)

    # ------------------------------------------------------------------ and / or
    def _bool_op(self, is_and: bool, result: Any, right: Any, nodes: list[ir.Node], node: ast.AST,
                 vnode: ast.AST) -> Any:
        left = self.b.as_pred(result, node)
        if self._pure(nodes):
            self.b.body.extend(nodes)
            rp = self.b.as_pred(right, vnode)
            r = self.b.new(ty.pred)
            self.b.emit("and.pred" if is_and else "or.pred", r, left, rp)
            return r
        # the right side has effects (loads, atomics ...): run it only where needed
        acc = Value(ty.bool_, "sc", is_var=True)
        lv = self.b.pred_to_bool(self.b.pred_value(left))
        self.b.emit("mov.b32", acc, lv)
        cond = left if is_and else PredUse(left.value, not left.negated)
        n = ir.If(cond, loc=self.src.loc(node))
        saved = self.b.body
        self.b.body = n.then
        self.b.body.extend(nodes)
        self.b.node = vnode
        rv = self.b.pred_to_bool(self.b.pred_value(self.b.as_pred(right, vnode)))
        self.b.emit("mov.b32", acc, rv)
        self.b.body = saved
        self.b.body.append(n)
        self.b.node = node
        return self.b.as_pred(acc, node)

    def _value_op(self, is_and: bool, result: Any, right: Any, nodes: list[ir.Node], node: ast.AST,
                  vnode: ast.AST) -> Value:
        t = self.b.unify(result, right, f"'{'and' if is_and else 'or'}'", node)
        lv = self.b.coerce(result, t, node)
        truthy = self.b.as_pred(lv, node)
        if self._pure(nodes):
            self.b.body.extend(nodes)
            rv = self.b.coerce(right, t, vnode)
            return self.b.select(truthy, rv, lv) if is_and else self.b.select(truthy, lv, rv)
        res = Value(t, "sc", is_var=True)
        self.b.emit("mov.b64" if t.bits == 64 else "mov.b32", res, lv)
        n = ir.If(truthy if is_and else PredUse(truthy.value, not truthy.negated), loc=self.src.loc(node))
        saved = self.b.body
        self.b.body = n.then
        self.b.body.extend(nodes)
        self.b.node = vnode
        rv = self.b.coerce(right, t, vnode)
        self.b.emit("mov.b64" if t.bits == 64 else "mov.b32", res, rv)
        self.b.body = saved
        self.b.body.append(n)
        self.b.node = node
        return res

    # ------------------------------------------------------------------ device functions
    def inline(self, fn: Any, node: ast.Call) -> Any:
        if fn in self._inline_stack:
            raise self.b.err(node, f"@aw.func {fn.name!r} calls itself (recursion is not supported)")
        if len(self._inline_stack) >= 16:
            raise self.b.err(node, "device functions nested deeper than 16 calls")
        self._inlined_calls += 1
        limit = _inline.MAX_INLINED_CALLS
        if self._inlined_calls > limit:
            chain = " -> ".join([getattr(f, "name", "?") for f in self._inline_stack] + [fn.name])
            raise self.b.err(node, f"inlining budget exceeded: this kernel would inline more than {limit} "
                             f"@aw.func calls (each call expands its function's body again; here through {chain}). "
                             "Call fewer functions per function, or loop (a run-time loop calls its body's "
                             "functions once) instead of unrolling")
        fsrc = fn.source
        fd = fsrc.tree
        params = [a.arg for a in fd.args.args]
        kwonly = [a.arg for a in fd.args.kwonlyargs]
        args = [self.visit(a) for a in node.args]
        kwargs = {kw.arg: self.visit(kw.value) for kw in node.keywords if kw.arg}
        self.b.node = node
        if len(args) > len(params):
            raise self.b.err(node, f"{fn.name}() takes {len(params)} positional arguments, got {len(args)}")
        bound: dict[str, Any] = dict(zip(params, args, strict=False))
        for k, v in kwargs.items():
            if k not in params and k not in kwonly:
                raise self.b.err(node, f"{fn.name}() got an unexpected keyword argument {k!r}")
            if k in bound:
                raise self.b.err(node, f"{fn.name}() got multiple values for argument {k!r}")
            bound[k] = v
        defaults = fn.defaults()
        for p in params + kwonly:
            if p not in bound:
                if p in defaults:
                    bound[p] = defaults[p]
                else:
                    raise self.b.err(node, f"{fn.name}() missing argument {p!r}")
        has_early = fn_has_early_return(fd)
        ctx = FuncCtx(fsrc, {}, is_kernel=False, ret_wrapped=has_early)
        outer = self.ctx
        self._enter(ctx)
        self._inline_stack.append(fn)
        saved_node = self.b.node
        inv = bool(getattr(fn, "w_invariant", False))
        self._w_invariant_depth += inv
        self._outer_ctxs.append(outer)
        try:
            ann = fn.annotations()
            self._prescan(fd)
            for p, v in bound.items():
                if isinstance(v, PredUse):
                    v = self.b.pred_value(v)
                want = ann.get(p)
                if isinstance(v, Value) or p in assigned_names(fd):
                    if want is not None and isinstance(want, DType):
                        if isinstance(v, Value) and v.type is not want and not (v.type is ty.pred and want is ty.bool_):
                            raise self.b.err(node, f"{fn.name}(): argument {p!r} is declared {want.name}, got "
                                             f"{v.type.name}")
                        if not isinstance(v, Value):
                            v = self.b.const(v, want, node)
                    if isinstance(v, Value) and (p in assigned_names(fd) or v.type is ty.pred):
                        self.ctx.const_names.discard(p)
                        self.assign_name(p, v, fd)
                    elif isinstance(v, Value):
                        ctx.var_values[p] = v
                        ctx.defined.add(p)
                    else:
                        ctx.consts[p] = v
                else:
                    ctx.consts[p] = v
            self.b.node = fd
            if has_early:
                lp = ir.Loop(loc=fsrc.loc(fd))
                saved = self.b.body
                self.b.body = lp.body
                ctx.loop_depth = 0
                if not self.visit_block(fd.body):
                    self.b.body.append(ir.Break(None, fsrc.loc(fd)))
                self.b.body = saved
                self.b.body.append(lp)
            else:
                self.visit_block(fd.body)
        finally:
            self._outer_ctxs.pop()
            self._w_invariant_depth -= inv
            self._inline_stack.pop()
            self._enter(outer)
            self.b.node = saved_node
        if ctx.pending:
            vals = [v for _, v, _ in ctx.pending]
            if ctx.ret_var is None and all(type(v) is type(vals[0]) and v == vals[0] for v in vals):
                for ph, _, _ in ctx.pending:
                    ph.defn, ph.operands = BY_MNEMONIC["nop"], []
                return vals[0]
            if ctx.ret_var is None:
                ctx.ret_var = Value(self.b.default_type(vals[0], ctx.pending[0][2]), "ret", is_var=True)
            rv = ctx.ret_var
            for ph, v, rnode in ctx.pending:
                saved_ctx = self.ctx
                self._enter(ctx)
                try:
                    bits = self.b.const_bits(v, rv.type, rnode)
                finally:
                    self._enter(saved_ctx)
                ph.defn = BY_MNEMONIC["movi.b64" if rv.type.bits == 64 else "movi.b32"]
                ph.operands = [rv, bits]
        if ctx.ret_var is not None:
            return ctx.ret_var
        if ctx.ret_const is not None:
            return ctx.ret_const[1]
        return None


# ----------------------------------------------------------------------------- utilities

def _is_boolish(x: Any) -> bool:
    """A bool operand: a predicate, a bool value or a Python bool constant."""
    if isinstance(x, PredUse):
        return True
    if isinstance(x, Value):
        return x.type.is_bool
    return isinstance(x, (bool, np.bool_))


class _NoMerge(Exception):
    """Internal: two bindings cannot become one tuple of variables (see Frontend._merge_tuples)."""
