"""Device functions (``@aw.func``), mixed into :class:`~anywave.compiler.frontend.Frontend`:
a call is inlined at its call site, its body visited with its own names (:class:`FuncCtx`).

Parameters bind as Python does (positional, keyword, defaults); a parameter the body
assigns, or a bool, becomes a variable, others compile-time bindings. A function with an
early ``return`` is wrapped in a one-trip loop (each return is a break); constant returns
whose type is known only at the end are patched then. Recursion and nesting deeper than 16
calls are errors.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any

from anywave.isa.table import BY_MNEMONIC

from . import ir
from . import types as ty
from .astscan import assigned_names, fn_has_early_return
from .ir import Op, PredUse, Value
from .source import FuncSource
from .types import DType


@dataclass
class FuncCtx:
    """State of one inlined function body (the kernel itself is the outermost)."""

    src: FuncSource
    consts: dict[str, Any]
    var_values: dict[str, Value] = field(default_factory=dict)
    defined: set[str] = field(default_factory=set)
    assigned_where: dict[str, ast.AST] = field(default_factory=dict)
    #: the run-time loops being translated, innermost last (bindings.LoopFrame)
    loop_frames: list[Any] = field(default_factory=list)
    const_names: set[str] = field(default_factory=set)
    is_kernel: bool = True
    ret_var: Value | None = None
    ret_const: Any = None
    ret_wrapped: bool = False
    loop_depth: int = 0
    ret_type_node: ast.AST | None = None
    #: constant returns seen before the return type was known: (placeholder op, value, node)
    pending: list[tuple[Op, Any, ast.AST]] = field(default_factory=list)


#: the most ``@aw.func`` calls one kernel may inline in all (each call site expands its callee's
#: body again, so calls that call several others grow exponentially: 9 functions each calling the
#: next 4 times are 4^8 = 65536 expansions, tens of seconds and hundreds of MB). Counted, so
#: the compile fails at once, at the call that goes over, instead of running for minutes
#: (issue 31, item 12). The library's largest kernels inline a few hundred calls.
MAX_INLINED_CALLS = 4096


class InlineOps:
    """Inlining of :class:`Frontend` (``inline``)."""

    # ------------------------------------------------------------------ device functions
    def inline(self, fn: Any, node: ast.Call) -> Any:
        if fn in self._inline_stack:
            raise self.err(node, f"@aw.func {fn.name!r} calls itself (recursion is not supported)")
        if len(self._inline_stack) >= 16:
            raise self.err(node, "device functions nested deeper than 16 calls")
        self._inlined_calls += 1
        if self._inlined_calls > MAX_INLINED_CALLS:
            chain = " -> ".join([getattr(f, "name", "?") for f in self._inline_stack] + [fn.name])
            raise self.err(node, f"inlining budget exceeded: this kernel would inline more than {MAX_INLINED_CALLS} "
                           f"@aw.func calls (each call expands its function's body again; here through {chain}). "
                           "Call fewer functions per function, or loop (a run-time loop calls its body's "
                           "functions once) instead of unrolling")
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
        has_early = fn_has_early_return(fd)
        ctx = FuncCtx(fsrc, {}, is_kernel=False, ret_wrapped=has_early)
        outer = self.ctx
        self.ctx = ctx
        self._inline_stack.append(fn)
        saved_node = self.node
        inv = bool(getattr(fn, "w_invariant", False))
        self._w_invariant_depth += inv
        self._outer_ctxs.append(outer)
        try:
            ann = fn.annotations()
            self._prescan(fd)
            for p, v in bound.items():
                if isinstance(v, PredUse):
                    v = self.pred_value(v)
                want = ann.get(p)
                if isinstance(v, Value) or p in assigned_names(fd):
                    if want is not None and isinstance(want, DType):
                        if isinstance(v, Value) and v.type is not want and not (v.type is ty.pred and want is ty.bool_):
                            raise self.err(node, f"{fn.name}(): argument {p!r} is declared {want.name}, got "
                                           f"{v.type.name}")
                        if not isinstance(v, Value):
                            v = self.const(v, want, node)
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
            self._outer_ctxs.pop()
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
                ctx.ret_var = Value(self.default_type(vals[0], ctx.pending[0][2]), "ret", is_var=True)
            rv = ctx.ret_var
            for ph, v, rnode in ctx.pending:
                self.ctx, saved_ctx = ctx, self.ctx
                try:
                    bits = self.const_bits(v, rv.type, rnode)
                finally:
                    self.ctx = saved_ctx
                ph.defn = BY_MNEMONIC["movi.b64" if rv.type.bits == 64 else "movi.b32"]
                ph.operands = [rv, bits]
        if ctx.ret_var is not None:
            return ctx.ret_var
        if ctx.ret_const is not None:
            return ctx.ret_const[1]
        return None
