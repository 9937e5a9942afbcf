"""Compile-time bindings of the kernel language: intrinsic markers, buffer parameters and
local arrays, and how any binding is named in messages (:func:`describe`)."""

from __future__ import annotations

from dataclasses import dataclass
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
    ``lower(frontend, call_node, discard)`` (``discard``: the call's value is unused)."""

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


@dataclass(frozen=True)
class LocalArray:
    """A local-memory array: byte offset in the kernel's local memory, element type, shape."""

    base: int
    elem: DType
    shape: tuple[int, ...]

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape)) * self.elem.scalar.nbytes



def describe(x: Any) -> str:
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

