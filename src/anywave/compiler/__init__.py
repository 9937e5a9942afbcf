"""The anywave kernel compiler: Python functions → WAVE modules.

See :mod:`anywave.compiler.frontend` for the language semantics and docs in the package
``__init__`` of :mod:`anywave` for the public API. The compiler knows no runtime: launching a
kernel (``@aw.kernel``, targets, autotuning) is :mod:`anywave.jit`.
"""

from __future__ import annotations

from . import language
from .errors import CompileError
from .kernel import COMPILER_VERSION, CacheWarning, Func, KernelDef, LaunchError, LaunchValueError, func
from .types import (
    Buffer,
    BufferType,
    Const,
    Constant,
    ConstType,
    DType,
    In,
    Out,
    bf16,
    bool_,
    constexpr,
    dynamic,
    f16,
    f32,
    f64,
    i8,
    i16,
    i32,
    i64,
    u8,
    u16,
    u32,
    u64,
)

__all__ = [
    "COMPILER_VERSION", "Buffer", "BufferType", "CacheWarning", "CompileError", "Const", "Constant", "ConstType",
    "DType",
    "Func", "In", "KernelDef", "LaunchError", "LaunchValueError", "Out", "bf16", "bool_", "constexpr", "dynamic",
    "f16", "f32",
    "f64",
    "func", "i8", "i16", "i32", "i64", "language", "u8", "u16", "u32", "u64",
]
