"""Lowering of the thread-identity, synchronisation, local-memory and atomic intrinsics
(registered on their markers in :mod:`anywave.compiler.language`): ids and special
registers (spec §3.3), ``barrier``/``fence`` (§8.7), ``local_array`` and the
``atomic_*`` operations (§8.6; the ``red`` form when the old value is unused).

Each ``lower_*`` function is called as ``lower(frontend, call_node, discard)``.
"""

from __future__ import annotations

import ast
from typing import Any

from anywave.isa import InstructionLookupError, mnemonic
from anywave.isa.types import Access, MemoryOrder, Scope, SpecialRegister

from . import types as ty
from .bindings import BufferArg, LocalArray
from .bindings import describe as _describe
from .builder import Builder
from .ir import DevAddr, Value
from .types import DType

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


def special_register(bld: Builder, sr: SpecialRegister) -> Value:
    r = bld.new(ty.i32)  # the register is untyped; ids fit in 31 bits
    bld.emit("mov.sr", r, sr)
    return r


def lower_dim_id(bld: Builder, node: ast.Call, discard: bool, name: str) -> Value:
    """``aw.<name>(d=0)``: an id or size along dimension d (``name`` bound at registration)."""
    args = bld.call_args(node, 0, 1, f"aw.{name}()")
    d = 0
    if args:
        d = args[0]
        if isinstance(d, Value) or d not in (0, 1, 2):
            raise bld.err(node, f"aw.{name}(d): d must be a compile-time 0, 1 or 2, got {_describe(d)}")
    return special_register(bld, _DIM_SR[name][d])


def lower_barrier(bld: Builder, node: ast.Call, discard: bool) -> None:
    bld.call_args(node, 0, 0, "aw.barrier()")
    bld.emit("barrier")


def lower_wave_barrier(bld: Builder, node: ast.Call, discard: bool) -> None:
    """``aw.wave_barrier()``: ``barrier.wave`` (spec §7.10), the barrier of the lanes of the wave
    that execute it: their memory accesses before it happen before their accesses after it."""
    bld.call_args(node, 0, 0, "aw.wave_barrier()")
    bld.emit("barrier.wave")


def lower_fence(bld: Builder, node: ast.Call, discard: bool) -> None:
    bld.call_args(node, 0, 2, "aw.fence()", ("scope", "order"))
    scope, order = _scope_order(bld, node, "device", "acq_rel", positional=True)
    bld.emit("fence", scope, order)


def _scope_order(bld: Builder, node: ast.Call, dscope: str, dorder: str,
                 positional: bool = False) -> tuple[Scope, MemoryOrder]:
    pos = [bld.static_eval(a) for a in node.args] if positional else []
    scope = bld.keyword_arg(node, "scope", pos[0] if len(pos) > 0 else dscope)
    order = bld.keyword_arg(node, "order", pos[1] if len(pos) > 1 else dorder)
    if scope not in _SCOPES:
        raise bld.err(node, f"scope {scope!r} is not valid; valid: {', '.join(_SCOPES)}")
    if order not in _ORDERS:
        raise bld.err(node, f"order {order!r} is not valid; valid: {', '.join(_ORDERS)}")
    return _SCOPES[scope], _ORDERS[order]


def lower_local_array(bld: Builder, node: ast.Call, discard: bool) -> LocalArray:
    align = 16
    for kw in node.keywords:
        if kw.arg != "align":
            raise bld.err(node, f"aw.local_array() got an unexpected keyword {kw.arg!r}; valid: align")
        align = bld.static_eval(kw.value)
        if isinstance(align, bool) or not isinstance(align, int) or not 16 <= align <= 4096 or align & (align - 1):
            raise bld.err(node, f"aw.local_array: align must be a power of two from 16 to 4096 (bytes), got {align!r}")
    if len(node.args) != 2:
        raise bld.err(node, "aw.local_array(dtype, shape, align=16) takes a dtype and a shape")
    dt = bld.static_eval(node.args[0])
    shape = bld.static_eval(node.args[1])
    bld.node = node
    if not isinstance(dt, DType) or dt in (ty.bool_, ty.pred):
        raise bld.err(node.args[0], "local_array element type must be a dtype such as aw.f32, got "
                      + _describe(dt))
    if shape is ty.dynamic:
        return _dynamic_array(bld, node, dt)
    if isinstance(shape, int):
        shape = (shape,)
    if (not isinstance(shape, tuple) or not 1 <= len(shape) <= 2
            or not all(isinstance(s, int) and not isinstance(s, bool) and s > 0 for s in shape)):
        raise bld.err(node.args[1], f"local_array shape must be a positive compile-time int or a tuple of 1-2 "
                      f"of them, got {_describe(shape)}")
    base = -(-bld.local_memory // align) * align
    arr = LocalArray(base, dt, tuple(shape))
    if base + arr.nbytes > LOCAL_MEMORY_MAX:
        raise bld.err(node, f"aw.local_array{tuple(shape)} of {dt.name} needs {arr.nbytes} bytes (the kernel's local "
                      f"memory would be {base + arr.nbytes} bytes); a kernel's local memory is at most "
                      f"{LOCAL_MEMORY_MAX} bytes (spec: a u32 size), and devices offer far less (48-228 KiB)")
    bld.local_memory = base + arr.nbytes
    return arr


#: the most local memory a WAVE kernel can declare (its size is a u32 in the binary)
LOCAL_MEMORY_MAX = 2**32 - 1


def _dynamic_array(bld: Builder, node: ast.Call, dt: DType) -> LocalArray:
    """``aw.local_array(dtype, aw.dynamic)``: the launch's ``local_bytes`` at offset 0 (the frontend
    reserves them before any other local array, :meth:`~anywave.compiler.frontend.Frontend.build`)."""
    n = bld.dynamic_local
    if n is None:
        raise bld.err(node.args[1], "aw.local_array(dtype, aw.dynamic) is declared in the kernel's own body (not "
                      "in an @aw.func), so that the kernel gets its launch keyword local_bytes=")
    if n < dt.scalar.nbytes:
        raise bld.err(node.args[1], f"aw.local_array({dt!r}, aw.dynamic) is sized at launch: give the bytes with "
                      f"local_bytes=N (CUDA's extern __shared__ size), at least {dt.scalar.nbytes}; got {n}")
    return LocalArray(0, dt, (n // dt.scalar.nbytes,))


def lower_special_register(bld: Builder, node: ast.Call, discard: bool, name: str) -> Value:
    """``aw.<name>()``: lane_id, wave_id, wave_width, num_waves, thread_linear_id."""
    bld.call_args(node, 0, 0, f"aw.{name}()")
    return special_register(bld, _NODIM_SR[name])


def lower_atomic(bld: Builder, node: ast.Call, discard: bool, op: str) -> Any:
    """``aw.atomic_<op>(target, index, [cmp,] value, scope=, order=)`` (``op`` bound at
    registration); the ``red`` form when the old value is unused."""
    nval = 2 if op == "cas" else 1
    if len(node.args) != 2 + nval:
        sig = "(target, index, cmp, value)" if op == "cas" else "(target, index, value)"
        raise bld.err(node, f"aw.atomic_{op}{sig} takes {2 + nval} positional arguments, got {len(node.args)}")
    for kw in node.keywords:
        if kw.arg not in ("scope", "order"):
            raise bld.err(node, f"aw.atomic_{op}() got an unexpected keyword {kw.arg!r}; valid: scope, order")
    target = bld.visit(node.args[0])
    bld.node = node
    if isinstance(target, BufferArg):
        if target.access is not Access.READWRITE:
            raise bld.err(node.args[0], f"atomics need a read-write buffer; {target.name!r} is declared "
                          f"{ty.BufferType(target.elem, target.access)!r}, use aw.Buffer[{target.elem.name}]")
        idx = bld.visit(node.args[1])
        bld.node = node
        off, wide = bld.index_offset(idx, target.elem.scalar.nbytes, node.args[1])
        if wide:
            raise bld.err(node.args[1], "atomics take a 32-bit index")
        addr: Any = DevAddr(target.index, off)
        space, elem = "device", target.elem
    elif isinstance(target, LocalArray):
        addr = bld.local_addr(target, node.args[1], node)
        space, elem = "local", target.elem
    else:
        raise bld.err(node.args[0], f"atomic target must be a buffer or local array, got {_describe(target)}")
    vals = [bld.visit(a) for a in node.args[2:]]
    bld.node = node
    if elem.bits != 32 or elem not in (ty.i32, ty.u32, ty.f32):
        raise bld.err(node.args[0], f"atomics work on i32, u32 and f32 elements; this one is {elem.name}")
    t = elem
    if op in ("add", "sub"):
        tname = "f32" if t is ty.f32 else "u32"
        if op == "sub" and t is ty.f32:
            raise bld.err(node, "atomic_sub is not defined for f32; add the negated value")
    elif op in ("min", "max"):
        if t is ty.f32:
            raise bld.err(node, f"atomic_{op} is not defined for f32 (valid: i32, u32)")
        tname = t.name
    elif op in ("and", "or", "xor"):
        if t is ty.f32:
            raise bld.err(node, f"atomic_{op} is not defined for f32")
        tname = "b32"
    elif op in ("exch", "cas"):
        tname = "b32"
    else:
        raise bld.err(node, f"unknown atomic operation {op!r}")
    vv = [bld.store_value(v, t, node) for v in vals]
    scope_order: tuple[Any, ...] = ()
    if space == "device":
        scope_order = _scope_order(bld, node, "device", "relaxed")
    if discard:
        try:
            red = mnemonic("red", f"{space}.{op}", tname)
        except InstructionLookupError:
            red = None  # no red form (exch, cas): the atom, its result unused
        if red is not None:
            bld.emit(red, addr, *vv, *scope_order)
            return None
    r = bld.new(t)
    bld.emit(mnemonic("atom", f"{space}.{op}", tname), r, addr, *vv, *scope_order)
    return r
