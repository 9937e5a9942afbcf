"""The builder an intrinsic's lowering receives: the narrow interface between the kernel
language's intrinsics (:mod:`anywave.compiler.language` registers them; their lowerings live in
``lower_threads``, ``lower_wave``, ``lower_math``, ``frontend_perf``, ``mma_lang`` and
``debugprint``) and the frontend that translates a kernel.

A lowering is called as ``lower(builder, call_node, discard)`` (``discard``: the call's value is
unused) -- the way Triton's builtins receive ``_builder`` rather than the code generator. It
reads its call's arguments through the builder (they are evaluated lazily, by the visitor,
because a lowering decides which arguments must be compile-time constants and where an
error points), and emits IR through it. It never sees the AST visitor itself.

This module is declaration only (a :class:`typing.Protocol`), low in the compiler's import
graph: the lowerings import it, and nothing here imports a lowering or the frontend. The
implementation is :class:`anywave.compiler.frontend_ops.IRBuilder`, which the frontend composes.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence
from typing import Any, Protocol

from . import ir
from .bindings import BufferView, LocalArray
from .errors import CompileError
from .ir import LocAddr, Op, PredUse, Value
from .source import FuncSource
from .types import DType


class ArgReader(Protocol):
    """How the builder evaluates a call's arguments: the AST visitor's side of the builder
    (:class:`anywave.compiler.frontend.Frontend` provides it)."""

    def visit(self, node: ast.AST) -> Any: ...

    def static_eval(self, node: ast.AST) -> Any: ...


class Builder(Protocol):
    """What an intrinsic's lowering may use. Every method that can refuse its operands takes
    ``node``, the expression they come from: its :class:`CompileError` points there."""

    # ---------------------------------------------------------------- the code being built
    #: the instructions and regions emitted so far into the current block (a lowering that
    #: builds a region swaps it, and puts it back)
    body: list[ir.Node]
    #: the construct being translated: the source location of the instructions emitted
    node: ast.AST | None
    #: the function whose source is being translated (an inlined @aw.func's, inside one)
    src: FuncSource
    #: bytes of local memory the kernel has laid out so far
    local_memory: int
    dynamic_local: int | None
    #: fragment slots taken so far (aw.fragment, compiler/mma_lang.py)
    nfrag: int

    def emit(self, mnemonic: str, *operands: Any) -> Op:
        """Append the instruction ``mnemonic`` (a table record) with ``operands`` to ``body``."""
        ...

    def new(self, t: DType, name: str = "") -> Value:
        """A fresh virtual register of type ``t``."""
        ...

    def err(self, node: ast.AST | None, message: str) -> CompileError:
        """The CompileError ``message`` at ``node`` (raise it)."""
        ...

    # ---------------------------------------------------------------- reading the call
    def visit(self, node: ast.AST) -> Any:
        """The value of the kernel expression ``node`` (a Value, PredUse, or compile-time binding)."""
        ...

    def static_eval(self, node: ast.AST) -> Any:
        """The value of ``node``, which must be known at compile time (CompileError otherwise)."""
        ...

    def call_args(self, node: ast.Call, lo: int, hi: int, what: str, keywords: Sequence[str] = ()) -> list[Any]:
        """The values of the positional arguments of ``node`` (``lo`` to ``hi`` of them; only
        the ``keywords`` named are accepted, read with :meth:`keyword_arg`)."""
        ...

    def keyword_arg(self, node: ast.Call, name: str, default: Any) -> Any:
        """The compile-time value of keyword argument ``name`` of ``node``, else ``default``."""
        ...

    # ---------------------------------------------------------------- constants, types, coercion
    def const(self, value: Any, t: DType, node: ast.AST | None = None) -> Value:
        """A register holding Python constant ``value`` as ``t`` (range-checked; ``node`` None: the compiler's own)."""
        ...

    def default_type(self, value: Any, node: ast.AST) -> DType:
        """The type of Python constant ``value`` on its own (bool, i32, f32)."""
        ...

    def materialize(self, x: Any, node: ast.AST, t: DType | None = None) -> Value:
        """A Value from a Value or a Python constant (typed by ``t``, else by the literal rules)."""
        ...

    def unify(self, a: Any, b: Any, what: str, node: ast.AST) -> DType:
        """The common type of two operands (a constant takes the other side's type)."""
        ...

    def coerce(self, x: Any, t: DType, node: ast.AST) -> Value:
        """``x`` as a ``t`` value: constants converted, typed values widened when exact."""
        ...

    # ---------------------------------------------------------------- predicates
    def as_pred(self, x: Any, node: ast.AST) -> PredUse:
        """A predicate operand for a condition (bools, comparisons, ``x != 0`` for numbers)."""
        ...

    def pred_value(self, pu: PredUse) -> Value:
        """The predicate register of ``pu`` (negated into a new one when it is negated)."""
        ...

    def pred_to_bool(self, p: Value) -> Value:
        """A bool (0/1) register from predicate ``p``."""
        ...

    # ---------------------------------------------------------------- ALU and casts
    def alu(self, name: str, t: DType, *srcs: Value, node: ast.AST, what: str | None = None) -> Value:
        """A new ``t`` register = operation ``name`` (``add``, ``shl``, ``min`` ...) of ``srcs``."""
        ...

    def binop(self, op: type, a: Any, b: Any, node: ast.AST) -> Any:
        """Python's binary operator ``op`` (an ``ast.operator`` class) with the language's semantics."""
        ...

    def compare(self, cmp: str, a: Any, b: Any, node: ast.AST) -> Any:
        """Comparison ``cmp`` (``lt``, ``le``, ``gt``, ``ge``, ``eq``, ``ne``): a predicate register, or
        Python's result when both operands are constants."""
        ...

    def select(self, p: PredUse, a: Value, b: Value) -> Value:
        """``a`` where ``p`` holds, else ``b`` (one type)."""
        ...

    def cast(self, x: Value, t: DType, node: ast.AST) -> Value:
        """Value conversion of ``x`` to ``t`` (``cvt``; x -> bool is ``x != 0``)."""
        ...

    def bitcast(self, x: Value, t: DType, node: ast.AST) -> Value:
        """The bits of ``x`` as type ``t`` (same width)."""
        ...

    # ---------------------------------------------------------------- addressing
    def index_offset(self, idx: Any, esize: int, node: ast.AST) -> tuple[Value, bool]:
        """The byte offset of element index ``idx`` for elements of ``esize`` bytes, and whether it is 64-bit."""
        ...

    def local_addr(self, arr: LocalArray, sl: ast.AST, node: ast.AST) -> LocAddr:
        """The address of ``arr[sl]`` (``sl`` the subscript's expression, evaluated here)."""
        ...

    def local_addr_of(self, arr: LocalArray, idx: Any, node: ast.AST) -> LocAddr:
        """The address of ``arr[idx]`` (``idx`` an evaluated index or tuple of indices)."""
        ...

    def view_index(self, view: BufferView, idx: Any, node: ast.AST) -> Any:
        """The linear element index of ``view[idx]`` in its buffer."""
        ...

    def store_value(self, value: Any, elem: DType, node: ast.AST) -> Value:
        """``value`` checked and converted for a store into ``elem`` elements."""
        ...

    # ---------------------------------------------------------------- aw.print
    def add_print(self, pf: Any) -> int:
        """Record an aw.print call site (a ``PrintFormat``); its index."""
        ...

    def print_buffer_index(self) -> int:
        """The ABI index of the hidden aw.print buffer (added on first use)."""
        ...
