"""Frontend constructs for fast kernels: vector loads/stores, register arrays, buffer views.

The ``lower_*`` functions are the intrinsics' lowering (registered on their markers in
:mod:`anywave.compiler.language`; called as ``lower(builder, call_node, discard)``, the builder a
:class:`~anywave.compiler.builder.Builder`); the visitor indexes register arrays and views
(:class:`~anywave.compiler.bindings.RegisterArray`, :class:`~anywave.compiler.bindings.BufferView`).
Semantics (docs/spec.md §4.4 for the alignment rule; docs in :mod:`anywave.compiler`):

* ``aw.load2(buf, i)`` / ``aw.load4(buf, i)`` → a tuple of 2 / 4 values: elements ``i .. i+n-1``
  of a device buffer, buffer view or local array of 32-bit elements (f32, i32, u32), read by
  one ``ld.*.b64`` / ``ld.*.b128`` (64-/128-bit access). The byte offset must be a multiple of
  ``4 n``: a compile-time index that is not is a :class:`CompileError`; a run-time one is
  checked by the emulator (misaligned access) and undefined on hardware (spec §4.4).
* ``aw.store2(buf, i, (v0, v1))`` / ``aw.store4(buf, i, (v0, v1, v2, v3))`` (the values may
  also be passed as separate arguments): the matching ``st.*.b64`` / ``st.*.b128``.
* ``aw.register_array(dtype, shape, fill=0)`` → per-thread array of registers of compile-time
  shape (at most 256 elements, 1-3 dimensions). Indexed only by compile-time ints (literals,
  ``aw.static_range`` loop variables, constant parameters); a run-time index is a
  CompileError at its line. Each element is a variable of the kernel.
* ``aw.view(buf, shape)`` → the buffer seen as a row-major array of ``shape`` (each entry a
  compile-time int or an integer value, e.g. a kernel argument): ``v[i, j]`` reads element
  ``i * shape[1] + j``; ``strides=`` gives other element strides. Loads, stores and
  ``aw.load4(v, (i, j))`` work on views as on buffers; bounds are the buffer's.
* ``aw.async_copy(dst, i, src, j, n=1)`` → ``cp.async.b{32,64,128}`` (spec §4.5): starts copying
  ``n`` elements from element ``j`` of a buffer (or view) to element ``i`` of a local array of the
  same dtype (``n`` × element size = 4, 8 or 16 bytes; both byte offsets multiples of it).
  ``aw.async_commit()`` closes the thread's copies since its previous commit into a group;
  ``aw.async_wait(pending=0)`` waits until at most ``pending`` (compile-time, 0..7) of the
  thread's most recent groups are still in flight. Read the destination only after the wait,
  and in other threads only after an ``aw.barrier()`` that follows it.
"""

from __future__ import annotations

import ast
import itertools
from typing import Any

import numpy as np

from anywave.isa import mnemonic
from anywave.isa.types import Access

from . import ir
from . import types as ty
from .bindings import BufferArg, BufferView, LocalArray, RegisterArray
from .bindings import describe as _describe
from .builder import Builder
from .ir import DevAddr, LocAddr, PredUse, Value
from .types import DType

#: "no binding" / "not a static element" for lookups whose result may be None (the frontend's too)
_UNSET: Any = object()

#: most elements of one register array (a WAVE kernel has at most 255 registers)
MAX_REGISTER_ARRAY = 256
_VEC = {2: (ty.vec2, "b64"), 4: (ty.vec4, "b128")}
_VEC_ELEMS = (ty.f32, ty.i32, ty.u32)


def lower_register_array(bld: Builder, node: ast.Call, discard: bool) -> RegisterArray:
    if not 2 <= len(node.args) <= 3:
        raise bld.err(node, "aw.register_array(dtype, shape, fill=0) takes a dtype, a shape and an "
                      "optional fill value")
    dt = bld.static_eval(node.args[0])
    shape = bld.static_eval(node.args[1])
    fill = bld.visit(node.args[2]) if len(node.args) == 3 else 0
    for kw in node.keywords:
        if kw.arg != "fill":
            raise bld.err(node, f"aw.register_array() got an unexpected keyword {kw.arg!r}; valid: fill")
        fill = bld.visit(kw.value)
    bld.node = node
    if not isinstance(dt, DType) or dt not in ty.VALUE_TYPES or dt is ty.bool_:
        raise bld.err(node.args[0], f"register_array element type must be a value dtype such as aw.f32, "
                      f"got {dt!r}")
    if isinstance(shape, int) and not isinstance(shape, bool):
        shape = (shape,)
    if (not isinstance(shape, tuple) or not 1 <= len(shape) <= 3
            or not all(isinstance(s, int) and not isinstance(s, bool) and s > 0 for s in shape)):
        raise bld.err(node.args[1], f"register_array shape must be a positive compile-time int or a tuple "
                      f"of 1-3 of them, got {shape!r}")
    size = int(np.prod(shape))
    if size > MAX_REGISTER_ARRAY:
        raise bld.err(node.args[1], f"register_array of shape {shape} has {size} elements; the limit is "
                      f"{MAX_REGISTER_ARRAY} (a kernel has at most 255 registers); use a local array")
    arr = RegisterArray(dt, tuple(shape))
    init = bld.coerce(fill.value if isinstance(fill, PredUse) else fill, dt, node)
    line = bld.src.loc(node).line
    for idx in itertools.product(*(range(s) for s in shape)):
        v = Value(dt, f"reg{line}_{'_'.join(map(str, idx))}", is_var=True)
        arr.vars[idx] = v
        bld.emit("mov.b64" if dt.bits == 64 else "mov.b32", v, init)
    return arr



def lower_view(bld: Builder, node: ast.Call, discard: bool) -> BufferView:
    if len(node.args) != 2:
        raise bld.err(node, "aw.view(buf, shape, strides=None) takes a buffer and a shape")
    buf = bld.visit(node.args[0])
    shape = bld.visit(node.args[1])
    strides = None
    for kw in node.keywords:
        if kw.arg != "strides":
            raise bld.err(node, f"aw.view() got an unexpected keyword {kw.arg!r}; valid: strides")
        strides = bld.visit(kw.value)
    bld.node = node
    if not isinstance(buf, BufferArg):
        raise bld.err(node.args[0], f"aw.view() needs a buffer argument, got {_describe(buf)}")
    shape = shape if isinstance(shape, tuple) else (shape,)
    if not 1 <= len(shape) <= 3:
        raise bld.err(node.args[1], f"aw.view() shape must have 1-3 dimensions, got {len(shape)}")
    for s in shape:
        _check_extent(bld, s, node.args[1], "shape")
    if strides is None:
        st: list[Any] = [1]
        for s in reversed(shape[1:]):
            st.insert(0, bld.binop(ast.Mult, st[0], s, node))
        strides = tuple(st)
    else:
        strides = strides if isinstance(strides, tuple) else (strides,)
        if len(strides) != len(shape):
            raise bld.err(node, f"aw.view(): {len(shape)} dimensions but {len(strides)} strides")
        for s in strides:
            _check_extent(bld, s, kw.value, "strides")
    return BufferView(buf, tuple(shape), tuple(strides))


def _check_extent(bld: Builder, s: Any, node: ast.AST, what: str) -> None:
    if isinstance(s, Value):
        if not s.type.is_int:
            raise bld.err(node, f"aw.view() {what} must be integers, got a {s.type.name} value")
    elif isinstance(s, bool) or not isinstance(s, (int, np.integer)) or s < 0:
        raise bld.err(node, f"aw.view() {what} must be non-negative integers, got {s!r}")



def _vector_addr(bld: Builder, node: ast.Call, n: int, what: str, store: bool) -> tuple[str, DType, Any, bool]:
    base = bld.visit(node.args[0])
    idx = bld.visit(node.args[1])
    bld.node = node
    if isinstance(base, BufferView):
        idx = bld.view_index(base, idx, node.args[1])
        base = base.buffer
    if isinstance(base, BufferArg):
        bad = Access.READ if store else Access.WRITE
        if base.access is bad:
            kind = "aw.In (read only)" if store else "aw.Out (write only)"
            raise bld.err(node.args[0], f"{what}: buffer {base.name!r} is declared {kind}")
        elem = base.elem
    elif isinstance(base, LocalArray):
        elem = base.elem
    else:
        raise bld.err(node.args[0], f"{what} needs a buffer, a buffer view or a local array, got "
                      f"{_describe(base)}")
    if elem not in _VEC_ELEMS:
        raise bld.err(node.args[0], f"{what} needs 32-bit elements (f32, i32, u32); this "
                      f"{'buffer' if isinstance(base, BufferArg) else 'local array'} has {elem.name} elements")
    size = 4 * n
    if isinstance(base, LocalArray):
        addr = bld.local_addr_of(base, idx, node.args[1])
        if addr.imm % size and _is_zero_offset(bld, addr):
            raise bld.err(node.args[1], f"{what}: local-memory byte offset {addr.imm} is not a multiple of "
                          f"{size} (a {size * 8}-bit access must be aligned to {size} bytes)")
        return "local", elem, addr, False
    if isinstance(idx, (int, np.integer)) and not isinstance(idx, bool) and idx % n:
        raise bld.err(node.args[1], f"{what}: element index {int(idx)} is not a multiple of {n} (a "
                      f"{size * 8}-bit access must be aligned to {size} bytes)")
    off, wide = bld.index_offset(idx, 4, node.args[1])
    return "device", elem, DevAddr(base.index, off), wide


def _is_zero_offset(bld: Builder, addr: LocAddr) -> bool:
    """True if the address has no run-time part (its offset register is the constant 0)."""
    for op in reversed(bld.body):
        if isinstance(op, ir.Op) and op.defs() == [addr.offset]:
            return op.defn.op == "movi" and int(op.operands[1]) == 0
    return False


def lower_vector_load(bld: Builder, node: ast.Call, discard: bool, n: int) -> tuple[Value, ...]:
    what = f"aw.load{n}(buf, i)"
    if len(node.args) != 2 or node.keywords:
        raise bld.err(node, f"{what} takes a buffer (or local array) and an element index")
    space, elem, addr, wide = _vector_addr(bld, node, n, what, store=False)
    vt, kind = _VEC[n]
    vec = ir.vector(vt, ty.value_type_of_element(elem), n)
    bld.emit(mnemonic("ld", space, kind, addr64=wide), vec, addr)
    return vec.parts


def lower_vector_store(bld: Builder, node: ast.Call, discard: bool, n: int) -> None:
    what = f"aw.store{n}(buf, i, values)"
    if node.keywords or len(node.args) not in (3, 2 + n):
        raise bld.err(node, f"{what} takes a buffer (or local array), an element index and {n} values "
                      "(a tuple or separate arguments)")
    vals = [bld.visit(a) for a in node.args[2:]]
    if len(vals) == 1:
        vals = list(vals[0]) if isinstance(vals[0], tuple) else vals
    if len(vals) != n:
        raise bld.err(node, f"{what} needs {n} values, got {len(vals)}")
    space, elem, addr, wide = _vector_addr(bld, node, n, what, store=True)
    srcs = [bld.store_value(v, elem, node) for v in vals]
    vt, kind = _VEC[n]
    vec = ir.vector(vt, ty.value_type_of_element(elem), n, is_var=True)
    for part, s in zip(vec.parts, srcs, strict=True):
        bld.emit("mov.b32", part, s)
    bld.emit(mnemonic("st", space, kind, addr64=wide), addr, vec)


# ----------------------------------------------------------------------------- asynchronous copies (spec §4.5)

def lower_async_copy(bld: Builder, node: ast.Call, discard: bool) -> None:
    what = "aw.async_copy(dst, dst_index, src, src_index, n=1)"
    n: Any = 1
    for kw in node.keywords:
        if kw.arg != "n":
            raise bld.err(node, f"{what} got an unexpected keyword {kw.arg!r}; valid: n")
        n = bld.static_eval(kw.value)
    if len(node.args) == 5 and not node.keywords:
        n = bld.static_eval(node.args[4])
    elif len(node.args) != 4:
        raise bld.err(node, f"{what} takes a local array, an index into it, a buffer (or buffer view), an "
                      "index into it and the compile-time element count n")
    dst = bld.visit(node.args[0])
    didx = bld.visit(node.args[1])
    src = bld.visit(node.args[2])
    sidx = bld.visit(node.args[3])
    bld.node = node
    if not isinstance(dst, LocalArray):
        raise bld.err(node.args[0], f"{what}: the destination must be a local array (aw.local_array), got "
                      f"{_describe(dst)}")
    if isinstance(src, BufferView):
        sidx = bld.view_index(src, sidx, node.args[3])
        src = src.buffer
    if not isinstance(src, BufferArg):
        raise bld.err(node.args[2], f"{what}: the source must be a buffer argument or a view of one, got "
                      f"{_describe(src)}")
    if src.access is Access.WRITE:
        raise bld.err(node.args[2], f"{what}: buffer {src.name!r} is declared aw.Out (write only); the copy "
                      "reads it")
    if src.elem is not dst.elem:
        raise bld.err(node, f"{what}: the local array holds {dst.elem.name} and buffer {src.name!r} "
                      f"{src.elem.name}; the copy moves bytes between arrays of one element type")
    esize = dst.elem.scalar.nbytes
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n * esize not in (4, 8, 16):
        ok = [k for k in (1, 2, 4, 8, 16) if k * esize in (4, 8, 16)]
        raise bld.err(node, f"{what}: n = {n!r} {dst.elem.name} elements; a copy moves 4, 8 or 16 bytes, so "
                      f"n must be one of {ok} for {esize}-byte elements")
    size = int(n) * esize
    addr = bld.local_addr_of(dst, didx, node.args[1])
    if addr.imm % size and _is_zero_offset(bld, addr):
        raise bld.err(node.args[1], f"{what}: local-memory byte offset {addr.imm} is not a multiple of "
                      f"{size} (a {size}-byte copy is aligned to {size} bytes)")
    if isinstance(sidx, (int, np.integer)) and not isinstance(sidx, bool) and sidx % n:
        raise bld.err(node.args[3], f"{what}: element index {int(sidx)} is not a multiple of n = {n} (a "
                      f"{size}-byte copy is aligned to {size} bytes)")
    off, wide = bld.index_offset(sidx, esize, node.args[3])
    if wide:
        raise bld.err(node.args[3], f"{what}: the source byte offset is 64-bit (an i64/u64 index or one of "
                      "2^32 bytes or more); asynchronous copies take 32-bit offsets — use an i32 index")
    bld.emit(mnemonic("cp_async", type=f"b{8 * size}"), addr, DevAddr(src.index, off))


def lower_async_commit(bld: Builder, node: ast.Call, discard: bool) -> None:
    if node.args or node.keywords:
        raise bld.err(node, "aw.async_commit() takes no arguments")
    bld.emit("cp.async.commit")


def lower_async_wait(bld: Builder, node: ast.Call, discard: bool) -> None:
    from anywave.isa.table import MAX_ASYNC_WAIT

    if len(node.args) > 1 or (node.keywords and (node.args or [k.arg for k in node.keywords] != ["pending"])):
        raise bld.err(node, "aw.async_wait(pending=0) takes one compile-time int")
    arg = node.args[0] if node.args else (node.keywords[0].value if node.keywords else None)
    pending = 0 if arg is None else bld.static_eval(arg)
    bld.node = node
    if isinstance(pending, bool) or not isinstance(pending, (int, np.integer)) or not 0 <= pending <= MAX_ASYNC_WAIT:
        raise bld.err(node, f"aw.async_wait(pending): pending must be a compile-time int in 0..{MAX_ASYNC_WAIT} "
                      f"(the number of most recent committed groups left in flight), got {pending!r}")
    bld.emit("cp.async.wait", int(pending))


__all__ = ["BufferView", "RegisterArray", "MAX_REGISTER_ARRAY", "LocAddr"]
