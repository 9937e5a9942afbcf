"""The anywave kernel compiler: Python functions → WAVE modules.

See :mod:`anywave.compiler.frontend` for the language semantics and docs in the package
``__init__`` of :mod:`anywave` for the public API.
"""

from __future__ import annotations

from . import language
from .errors import CompileError
from .kernel import COMPILER_VERSION, CacheWarning, Func, KernelFunction, LaunchError, LaunchValueError, func, kernel
from .targets import Target, TargetError, available_targets, get_target, register_target
from .types import (
    Buffer,
    BufferType,
    Const,
    ConstType,
    DType,
    In,
    Out,
    bf16,
    bool_,
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
    "COMPILER_VERSION", "Buffer", "BufferType", "CacheWarning", "CompileError", "Const", "ConstType", "DType",
    "Func", "In", "KernelFunction", "LaunchError", "LaunchValueError", "Out", "Target", "TargetError",
    "available_targets", "bf16", "bool_", "f16", "f32", "f64", "func", "get_target", "i8", "i16", "i32", "i64",
    "kernel", "language", "register_target", "u8", "u16", "u32", "u64",
]
