"""Compile-time bindings of the kernel language: intrinsic markers, buffer parameters, local
arrays, register arrays and buffer views, the bases of device functions and kernels, how any
binding is named in messages (:func:`describe`), and how bindings meet after run-time control
flow (:func:`join_bindings`, :class:`Divergent`)."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from anywave.isa.types import Access

from . import types as ty
from .errors import CompileError
from .ir import PredUse, Value
from .types import DType


class Intrinsic:
    """A language primitive (the markers of :mod:`anywave.compiler.language`): ``name`` as the
    user spells it after ``aw.``, ``lower`` the function that emits its IR, called as
    ``lower(builder, call_node, discard)`` (``builder``: a :class:`~anywave.compiler.builder.Builder`;
    ``discard``: the call's value is unused)."""

    def __init__(self, name: str, doc: str, lower: Any = None) -> None:
        self.name = name
        self.__doc__ = doc
        self.__name__ = name
        self.lower = lower

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise CompileError(f"aw.{self.name}() can only be used inside an @aw.kernel or @aw.func body")

    def __repr__(self) -> str:
        return f"<anywave intrinsic {self.name}>"


@dataclass(frozen=True)
class BufferArg:
    """A buffer parameter: ABI index, element type and access."""

    name: str
    index: int
    elem: DType
    access: Access
    #: an ``aw.Constant`` buffer (read only, with the ABI's constant hint)
    constant: bool = False

    @property
    def spelling(self) -> str:
        """The annotation's head as the user wrote it (``aw.In``, ``aw.Constant`` ...)."""
        return "aw.Constant" if self.constant else {Access.READ: "aw.In", Access.WRITE: "aw.Out",
                                                      Access.READWRITE: "aw.Buffer"}[self.access]


@dataclass(frozen=True)
class LocalArray:
    """A local-memory array: byte offset in the kernel's local memory, element type, shape."""

    base: int
    elem: DType
    shape: tuple[int, ...]

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape)) * self.elem.scalar.nbytes



@dataclass(eq=False)
class RegisterArray:
    """A per-thread register array: element type, shape, one variable per element."""

    elem: DType
    shape: tuple[int, ...]
    vars: dict[tuple[int, ...], Value] = field(default_factory=dict)

    def __repr__(self) -> str:
        return f"register array {self.elem.name}{list(self.shape)}"


@dataclass(frozen=True, eq=False)
class BufferView:
    """A buffer argument seen as an n-D row-major (or strided) array."""

    buffer: BufferArg
    shape: tuple[Any, ...]
    strides: tuple[Any, ...]

    @property
    def name(self) -> str:
        return self.buffer.name

    def __repr__(self) -> str:
        return f"view of buffer {self.buffer.name!r} with {len(self.shape)} dimensions"



class DeviceFunction:
    """Base of ``@aw.func`` device functions (:class:`anywave.compiler.kernel.Func`): what the
    frontend inlines at a call (``name``, ``source``, ``defaults()``, ``annotations()``), named
    here so that the frontend and the cache key recognise one without importing the module
    that compiles kernels."""

    __slots__ = ()


class KernelDefinition:
    """Base of kernel definitions (:class:`anywave.compiler.kernel.KernelDef`): a kernel is
    launched from the host, never called from a kernel; named here for the same reason as
    :class:`DeviceFunction`."""

    __slots__ = ()


def describe(x: Any) -> str:
    """How ``x`` (a value, binding or Python constant) is named in messages: "an i32 value",
    "buffer 'x'", "int 5" ..."""
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
    if isinstance(x, Intrinsic):
        return f"aw.{x.name}"
    if isinstance(x, tuple):
        return "a tuple (" + ", ".join(describe(e) for e in x) + ")"
    if isinstance(x, (bool, int, float, str)) or x is None:
        return f"{type(x).__name__} {x!r}"
    if isinstance(x, np.generic):
        return f"{x.dtype} {x.item()!r}"
    return f"{type(x).__name__} {getattr(x, '__name__', '')}".strip()


#: a name with no binding on a path (see join_bindings)
UNBOUND: Any = object()


@dataclass(frozen=True, eq=False)
class Divergent:
    """The binding of a name whose compile-time value differs between the paths through a
    run-time ``if`` or loop (or exists on only one): reading it is an error, never one
    path's value."""

    line: int
    values: tuple[Any, ...]
    construct: str = "if"

    def message(self, name: str) -> str:
        got = " / ".join("unbound" if v is UNBOUND else "path-dependent" if isinstance(v, Divergent)
                         else describe(v) for v in self.values)
        paths = ("on the paths through the run-time if" if self.construct == "if"
                 else "before and after iterations of the run-time loop")
        return (f"{name!r} is bound to different compile-time values {paths} at line {self.line} ({got}); a "
                "compile-time value (a string, tuple, dtype, array ...) cannot depend on a run-time condition: "
                "bind it before the if or loop, or use typed variables (aw.where, one name per element)")


@dataclass
class LoopFrame:
    """A run-time loop being translated: its line, the compile-time bindings before it, the
    names of those the body read (first read) and rebound so far."""

    line: int
    before: dict[str, Any]
    read: dict[str, ast.AST] = field(default_factory=dict)
    rebound: set[str] = field(default_factory=set)


def same_binding(a: Any, b: Any) -> bool:
    """Two compile-time bindings are the same value (identity; equal scalars and strings;
    tuples element by element)."""
    if a is b:
        return True
    if type(a) is not type(b):
        return False
    if isinstance(a, tuple):
        return len(a) == len(b) and all(same_binding(x, y) for x, y in zip(a, b, strict=True))
    return isinstance(a, (str, bytes, bool, int, float)) and a == b


def join_bindings(paths: list[dict[str, Any]], line: int) -> dict[str, Any]:
    """The compile-time bindings after the run-time if at ``line``: those equal on every
    live path (one or two), the others :class:`Divergent`."""
    out = dict(paths[0])
    if len(paths) == 1:
        return out
    other = paths[1]
    for name in set(out) | set(other):
        a, b = out.get(name, UNBOUND), other.get(name, UNBOUND)
        if not same_binding(a, b):
            out[name] = Divergent(line, (a, b))
    return out
