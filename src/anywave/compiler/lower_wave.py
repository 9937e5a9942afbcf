"""Lowering of the wave intrinsics (registered on their markers in
:mod:`anywave.compiler.language`): reductions and the prefix sum (spec §8.8, f32 in the
spec's butterfly / Kogge–Stone order), shuffles and broadcast, ``wave_ballot``,
``wave_any``, ``wave_all``. They read the lanes that execute them (see the language
module's note on wave operations under control flow).

Each ``lower_*`` function is called as ``lower(frontend, call_node, discard)``.
"""

from __future__ import annotations

import ast

from anywave.isa import mnemonic

from . import types as ty
from .bindings import describe as _describe
from .builder import Builder
from .ir import Value


def lower_wave_reduce(bld: Builder, node: ast.Call, discard: bool, op: str) -> Value:
    """``aw.wave_<op>(v)``, ``op`` in sum, min, max, and, or, xor (bound at registration)."""
    (x,) = bld.call_args(node, 1, 1, f"aw.wave_{op}()")
    x = bld.materialize(x, node.args[0])
    t = x.type
    if t.bits != 32 or t.is_bool or t not in (ty.i32, ty.u32, ty.f32):
        raise bld.err(node, f"aw.wave_{op} works on i32, u32 and f32, got {t.name}")
    name = {"sum": "add"}.get(op, op)
    if name in ("and", "or", "xor"):
        if t is ty.f32:
            raise bld.err(node, f"aw.wave_{op} is not defined for f32")
        m = mnemonic("wred", name, "b32")
    else:
        m = mnemonic("wred", name, t)
    r = bld.new(t)
    bld.emit(m, r, x)
    return r


def lower_wave_prefix_sum(bld: Builder, node: ast.Call, discard: bool) -> Value:
    (x,) = bld.call_args(node, 1, 1, "aw.wave_prefix_sum()", ("exclusive",))
    excl = bld.keyword_arg(node, "exclusive", False)
    x = bld.materialize(x, node.args[0])
    if x.type not in (ty.i32, ty.u32, ty.f32):
        raise bld.err(node, f"aw.wave_prefix_sum works on i32, u32 and f32, got {x.type.name}")
    r = bld.new(x.type)
    bld.emit(mnemonic("wscan", "excl" if excl else "incl", x.type), r, x)
    return r


def lower_shuffle(bld: Builder, node: ast.Call, discard: bool, name: str) -> Value:
    """``aw.wave_shfl*`` / ``aw.wave_broadcast`` (``name``: the intrinsic, bound at registration)."""
    x, lane = bld.call_args(node, 2, 2, f"aw.{name}()")
    x = bld.materialize(x, node.args[0])
    if x.type.bits != 32 and x.type not in (ty.f16, ty.bf16):
        raise bld.err(node, f"aw.{name} moves 32-bit values; {x.type.name} is not supported")
    if isinstance(lane, Value):
        if not lane.type.is_int or lane.type.bits != 32:
            raise bld.err(node, f"the lane operand must be a 32-bit integer, got {lane.type.name}")
    else:
        if not isinstance(lane, int) or lane < 0:
            raise bld.err(node, f"the lane operand must be a non-negative integer, got {_describe(lane)}")
        lane = bld.const(lane, ty.u32, node.args[1])
    m = {"wave_shfl": "shfl.idx.b32", "wave_shfl_up": "shfl.up.b32", "wave_shfl_down": "shfl.down.b32",
         "wave_shfl_xor": "shfl.xor.b32", "wave_broadcast": "bcast.b32"}[name]
    r = bld.new(x.type)
    bld.emit(m, r, x, lane)
    return r


def lower_wave_ballot(bld: Builder, node: ast.Call, discard: bool) -> Value:
    (c,) = bld.call_args(node, 1, 1, "aw.wave_ballot()")
    r = bld.new(ty.u64)
    bld.emit("ballot.b64", r, bld.as_pred(c, node))
    return r


def lower_wave_any(bld: Builder, node: ast.Call, discard: bool) -> Value:
    (c,) = bld.call_args(node, 1, 1, "aw.wave_any()")
    r = bld.new(ty.pred)
    bld.emit("any.pred", r, bld.as_pred(c, node))
    return r


def lower_wave_all(bld: Builder, node: ast.Call, discard: bool) -> Value:
    (c,) = bld.call_args(node, 1, 1, "aw.wave_all()")
    r = bld.new(ty.pred)
    bld.emit("all.pred", r, bld.as_pred(c, node))
    return r
