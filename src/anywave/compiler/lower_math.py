"""Lowering of the math, bit, conversion and selection intrinsics (registered on their
markers in :mod:`anywave.compiler.language`): exact float operations (``sqrt``, ``floor`` ...
``fma``: spec §8.2, correctly rounded), the ``fast_*`` approximations (``*.approx.f32``,
ulp bounds in docs/spec.md), ``popc``/``clz``/``ctz``/``brev``/``mulhi``, ``cast``,
``bitcast``, ``where``, ``dtype_of`` and the loop markers used outside a ``for``.

Each ``lower_*`` function is called as ``lower(frontend, call_node, discard)``.
"""

from __future__ import annotations

import ast
from typing import Any

from anywave.isa import InstructionLookupError, mnemonic

from . import types as ty
from .bindings import describe as _describe
from .builder import Builder
from .ir import PredUse, Value
from .types import DType


def _float_arg(bld: Builder, node: ast.Call, what: str, n: int = 1) -> list[Value]:
    return _float_values(bld, node, what, bld.call_args(node, n, n, what))


def _float_values(bld: Builder, node: ast.Call, what: str, args: list[Any]) -> list[Value]:
    """The arguments ``args`` of ``node`` (visited) as values of one float type (constants
    converted to it); CompileError otherwise."""
    a0 = args[0]
    if type(a0) is Value and a0.type.is_float:  # the usual case: values of one float type
        t = a0.type
        for a in args:
            if type(a) is not Value or a.type is not t:
                break
        else:
            return args
    typed = [a for a in args if isinstance(a, Value)]
    t = typed[0].type if typed else ty.f32
    out: list[Value] = []
    for a in args:
        if isinstance(a, Value):
            if not a.type.is_float:
                raise bld.err(node, f"{what} needs a float argument, got {a.type.name}; cast with aw.f32(...)")
            if a.type is not t:
                raise bld.err(node, f"{what}: arguments have different types {t.name} and {a.type.name}")
            out.append(a)
        else:
            out.append(bld.const(a, t, node))
    return out


def lower_float_unary(bld: Builder, node: ast.Call, discard: bool, name: str) -> Value:
    """``aw.sqrt/floor/ceil/trunc/rint(x)`` (``name`` bound at registration)."""
    (x,) = _float_arg(bld, node, f"aw.{name}()")
    return bld.alu(name, x.type, x, node=node)


def lower_fma(bld: Builder, node: ast.Call, discard: bool) -> Value:
    if not node.keywords and len(node.args) == 3:  # bld.call_args, inline (the GEMM's inner statement)
        args = [bld.visit(x) for x in node.args]
        bld.node = node
        a, b, c = _float_values(bld, node, "aw.fma()", args)
    else:
        a, b, c = _float_arg(bld, node, "aw.fma()", 3)
    return bld.alu("fma", a.type, a, b, c, node=node)


def lower_fast(bld: Builder, node: ast.Call, discard: bool, name: str) -> Value:
    """``aw.fast_<name>(x)``: the ``*.approx.f32`` instructions (``name`` bound at registration)."""
    (x,) = _float_arg(bld, node, f"aw.fast_{name}()")
    if x.type is not ty.f32:
        raise bld.err(node, f"aw.fast_{name} is defined for f32 only, got {x.type.name}")
    if name == "exp":
        x = bld.alu("mul", ty.f32, x, bld.const(1.4426950408889634, ty.f32), node=node)
        name = "exp2"
    if name == "log":
        r = bld.alu("lg2", ty.f32, x, node=node, what="fast_log")
        return bld.alu("mul", ty.f32, r, bld.const(0.6931471805599453, ty.f32), node=node)
    mnem = {"exp2": "ex2", "log2": "lg2"}.get(name, name)
    r = bld.new(ty.f32)
    try:
        m = mnemonic(mnem, type=ty.f32)
    except InstructionLookupError:
        raise bld.err(node, f"aw.fast_{name} has no approximate instruction") from None
    bld.emit(m, r, x)
    return r


def lower_bits(bld: Builder, node: ast.Call, discard: bool, name: str) -> Value:
    """``aw.popc/clz/ctz/brev(x)`` on 32-bit integers (``name`` bound at registration)."""
    (x,) = bld.call_args(node, 1, 1, f"aw.{name}()")
    x = bld.materialize(x, node, None if isinstance(x, Value) else ty.u32)
    if not x.type.is_int or x.type.bits != 32:
        raise bld.err(node, f"aw.{name} needs a 32-bit integer, got {x.type.name}")
    r = bld.new(ty.i32 if name != "brev" else x.type)
    bld.emit(mnemonic(name, type="b32"), r, x)
    return r


def lower_mulhi(bld: Builder, node: ast.Call, discard: bool) -> Value:
    a, b = bld.call_args(node, 2, 2, "aw.mulhi()")
    t = bld.unify(a, b, "aw.mulhi()", node)
    if not t.is_int or t.bits != 32:
        raise bld.err(node, f"aw.mulhi needs 32-bit integers, got {t.name}")
    return bld.alu("mulhi", t, bld.coerce(a, t, node), bld.coerce(b, t, node), node=node)


def lower_cast(bld: Builder, node: ast.Call, discard: bool) -> Value:
    x, t = bld.call_args(node, 2, 2, "aw.cast()")
    if not isinstance(t, DType) or t not in ty.VALUE_TYPES:
        raise bld.err(node, f"aw.cast(x, dtype): dtype must be a value type, got {_describe(t)}")
    if not isinstance(x, (Value, PredUse)):
        return bld.const(x, t, node.args[0])
    return bld.cast(bld.pred_value(x) if isinstance(x, PredUse) else x, t, node)


def lower_bitcast(bld: Builder, node: ast.Call, discard: bool) -> Value:
    x, t = bld.call_args(node, 2, 2, "aw.bitcast()")
    if not isinstance(t, DType) or t not in ty.VALUE_TYPES:
        raise bld.err(node, f"aw.bitcast(x, dtype): dtype must be a value type, got {_describe(t)}")
    if not isinstance(x, Value):
        raise bld.err(node, "aw.bitcast needs a typed value (write aw.u32(...) for constants)")
    return bld.bitcast(x, t, node)


def lower_where(bld: Builder, node: ast.Call, discard: bool) -> Any:
    c, a, b = bld.call_args(node, 3, 3, "aw.where()")
    if not isinstance(c, (Value, PredUse)):
        return a if c else b
    t = bld.unify(a, b, "aw.where()", node)
    return bld.select(bld.as_pred(c, node), bld.coerce(a, t, node.args[1]), bld.coerce(b, t, node.args[2]))


def lower_dtype_of(bld: Builder, node: ast.Call, discard: bool) -> DType:
    (x,) = bld.call_args(node, 1, 1, "aw.dtype_of()")
    if isinstance(x, PredUse):
        return ty.bool_
    if isinstance(x, Value):
        return ty.bool_ if x.type is ty.pred else x.type
    return bld.default_type(x, node.args[0])


def lower_loop_marker(bld: Builder, node: ast.Call, discard: bool) -> None:
    """``aw.static_range`` / ``aw.range`` anywhere but a for loop's iterable (there the
    visitor reads them itself): an error."""
    raise bld.err(node, "aw.static_range() can only be used as a for-loop iterable")
