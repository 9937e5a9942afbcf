"""Fragment MMA in the kernel language (docs/spec.md §8.14): ``aw.fragment`` and the
``aw.mma_*`` intrinsics (their lowering, registered on the markers in
:mod:`anywave.compiler.language`; each ``lower_*`` is called as ``lower(frontend, call_node,
discard)``).

A fragment is a compile-time object bound to one fragment slot (f0..f31) for the whole
kernel; the intrinsics act on it in place, like CUDA's ``wmma`` fragments::

    acc = aw.fragment("acc")                 # m16n16k16 f32 accumulator, +0.0
    fa = aw.fragment("a", aw.bf16); fb = aw.fragment("b", aw.bf16)
    aw.mma_load(fa, tile_a, row, col)        # local 2-D array: the 16x16 block at (row, col)
    aw.mma_load(fb, b, offset, ld)           # device buffer: element offset, row stride ld
    aw.mma_sync(acc, fa, fb, acc)            # acc = fa @ fb + acc (tensor cores where present)
    aw.mma_scale(acc, alpha); aw.mma_bias(acc, bias, col0)
    aw.mma_group(accs, fa, tile, offset, panel_stride)  # 4 waves: a 16xN strip each, B in local
                                                        # memory in the swizzled panel layout
    aw.mma_store(c, acc, offset, ld)         # or (local 2-D array, row, col)

All are wave operations (every lane of a complete wave, uniform arguments). Errors name the
source line.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Any

import numpy as np

from anywave.isa import mnemonic
from anywave.isa.mma import GROUP_ALIGN, GROUP_N, GROUP_PANEL, MAX_FRAGMENTS, ROW_N

from . import types as ty
from .bindings import BufferArg, LocalArray
from .bindings import describe as _describe
from .builder import Builder
from .ir import DevAddr, LocAddr
from .types import DType


@dataclass(frozen=True)
class Fragment:
    """A fragment slot of the kernel: role ``a``/``b``/``acc`` and element type."""

    slot: int
    role: str
    elem: DType

    def __repr__(self) -> str:
        return f"aw.fragment({self.role!r}, aw.{self.elem.name}) in f{self.slot}"


def _frag_arg(bld: Builder, node: ast.Call, x: Any, role: str | None, what: str) -> Fragment:
    if not isinstance(x, Fragment) or (role is not None and x.role != role):
        want = f"an aw.fragment({role!r}, ...)" if role else "an aw.fragment"
        raise bld.err(node, f"{what}: expected {want}, got {x!r}")
    return x


def lower_fragment(bld: Builder, node: ast.Call, discard: bool) -> Fragment:
    args = [bld.static_eval(a) for a in node.args]
    if node.keywords or not 1 <= len(args) <= 2:
        raise bld.err(node, "aw.fragment(role, dtype=aw.bf16) takes a role and an optional dtype")
    role = args[0]
    elem = args[1] if len(args) > 1 else (ty.f32 if role == "acc" else ty.bf16)
    if role not in ("a", "b", "acc"):
        raise bld.err(node, f"aw.fragment role must be 'a', 'b' or 'acc', got {role!r}")
    if role == "acc" and elem is not ty.f32 or role != "acc" and elem not in (ty.f16, ty.bf16):
        raise bld.err(node, f"aw.fragment({role!r}): element type {elem!r} is not supported (A and B: "
                      "aw.f16 or aw.bf16; acc: aw.f32)")
    n = bld.nfrag
    if n >= MAX_FRAGMENTS:
        raise bld.err(node, f"a kernel has at most {MAX_FRAGMENTS} fragments (f0..f{MAX_FRAGMENTS - 1})")
    bld.nfrag = n + 1
    frag = Fragment(n, role, elem)
    if role == "acc":
        bld.emit("mma.fill.m16n16k16.f32", n, bld.const(0, ty.u32))
    return frag


def lower_fragments(bld: Builder, node: ast.Call, discard: bool) -> tuple[Fragment, ...]:
    """aw.fragments(count, role, dtype): a tuple of ``count`` fragments (index it with
    compile-time ints, e.g. inside ``aw.static_range``)."""
    if not node.args:
        raise bld.err(node, "aw.fragments(count, role, dtype=...) needs a count")
    count = bld.static_eval(node.args[0])
    if not isinstance(count, int) or isinstance(count, bool) or count < 1:
        raise bld.err(node, f"aw.fragments: count must be a positive compile-time int, got {count!r}")
    one = ast.Call(func=node.func, args=node.args[1:], keywords=node.keywords)
    ast.copy_location(one, node)
    return tuple(lower_fragment(bld, one, False) for _ in range(count))


def _u32(bld: Builder, node: ast.Call, x: Any, what: str) -> Any:
    if isinstance(x, bool) or not (isinstance(x, int) or getattr(getattr(x, "type", None), "is_int", False)):
        raise bld.err(node, f"{what} must be an integer, got {x!r}")
    return bld.coerce(x, ty.u32, node)


def _sum_parts(bld: Builder, node: ast.AST) -> tuple[Any, int]:
    """(run-time part or 0, compile-time int part) of an index written as a sum, e.g.
    ``s * BM + wr + 16 * i`` with ``wr`` a run-time value: ``(wr, s * BM + 16 * i)``."""
    terms: list[ast.AST] = []

    def flat(e: ast.AST) -> None:
        if isinstance(e, ast.BinOp) and isinstance(e.op, ast.Add):
            flat(e.left)
            flat(e.right)
        else:
            terms.append(e)

    flat(node)
    dyn: Any = 0
    const = 0
    for t in terms:
        v = bld.visit(t)
        if isinstance(v, int) and not isinstance(v, bool):
            const += v
        else:
            dyn = v if isinstance(dyn, int) else bld.binop(ast.Add, dyn, v, t)
    return dyn, const


def _tile_args(bld: Builder, node: ast.Call, what: str) -> list[Any]:
    """The four arguments of aw.mma_load/mma_store; for a local array the (row, col) indices as
    (run-time part, compile-time part) pairs, so that the constant part becomes the address's
    immediate and fragments at fixed distances share one address register (ldmatrix [R+imm])."""
    if node.keywords or len(node.args) != 4:
        raise bld.err(node, f"{what} takes 4 positional arguments, got {len(node.args)}")
    first = [bld.visit(a) for a in node.args[:2]]
    if isinstance(first[0], LocalArray) or isinstance(first[1], LocalArray):
        rest = [_sum_parts(bld, a) for a in node.args[2:]]
    else:
        rest = [bld.visit(a) for a in node.args[2:]]
    bld.node = node
    return first + rest


def _tile_addr(bld: Builder, node: ast.Call, src: Any, i: Any, j: Any, esz: int, what: str) -> tuple[Any, Any, str]:
    """(address operand, row stride register, space) of a 16x16 block: a local 2-D array at
    element (row i, col j) (each a (run-time, compile-time) pair from :func:`_tile_args`), or a
    device buffer at element offset i with row stride j."""
    mul = bld.binop
    if isinstance(src, LocalArray):
        # a tile of esz-byte elements; a 32-bit array may hold 16-bit elements in pairs
        # (then the column j counts 16-bit elements)
        nb = src.elem.scalar.nbytes
        if len(src.shape) != 2 or nb not in (esz, 4, 8):
            raise bld.err(node, f"{what}: the local array must be 2-D of {esz}-byte (or packed 4/8-byte) "
                          f"elements, got shape {src.shape} of {src.elem.name}")
        rowbytes = src.shape[1] * nb
        if rowbytes % 16:
            raise bld.err(node, f"{what}: a row of the local array must be a multiple of 16 bytes, got "
                          f"{rowbytes}")
        (di, ci), (dj, cj) = i, j
        for x in (di, dj):
            if not isinstance(x, int):
                _u32(bld, node, x, f"{what} index")
        off: Any = 0
        if not isinstance(di, int):
            off = mul(ast.Mult, di, rowbytes, node)
        if not isinstance(dj, int):
            dj = mul(ast.Mult, dj, esz, node)
            off = dj if isinstance(off, int) else mul(ast.Add, off, dj, node)
        imm = src.base + ci * rowbytes + cj * esz
        if imm < 0:
            raise bld.err(node, f"{what}: the tile starts before the local array (byte offset {imm})")
        return LocAddr(_u32(bld, node, off, f"{what} offset"), imm), bld.const(rowbytes, ty.u32), "local"
    if isinstance(src, BufferArg):
        if src.elem.scalar.nbytes != esz:
            raise bld.err(node, f"{what}: buffer {src.name!r} holds {src.elem.name}, expected {esz}-byte "
                          "elements")
        off = _u32(bld, node, mul(ast.Mult, i, esz, node), f"{what} offset")
        ld = _u32(bld, node, mul(ast.Mult, j, esz, node), f"{what} row stride")
        return DevAddr(src.index, off), ld, "device"
    raise bld.err(node, f"{what}: expected a local 2-D array or a buffer, got {src!r}")


def lower_mma_load(bld: Builder, node: ast.Call, discard: bool) -> None:
    frag, src, i, j = _tile_args(bld, node, "aw.mma_load(frag, src, row_or_offset, col_or_ld)")
    f = _frag_arg(bld, node, frag, None, "aw.mma_load")
    # raw 16-bit buffers (u16/i16) or packed 32-bit local arrays may hold the elements
    if f.role != "acc" and getattr(src, "elem", f.elem) not in (f.elem, ty.u16, ty.i16, ty.u32, ty.i32, ty.u64):
        raise bld.err(node, f"aw.mma_load: a {f.elem.name} fragment cannot load {src.elem.name} data")
    esz = f.elem.scalar.nbytes
    addr, ld, space = _tile_addr(bld, node, src, i, j, esz, "aw.mma_load")
    role = "c" if f.role == "acc" else f.role
    bld.emit(mnemonic("fload", f"{role}.{space}.m16n16k16", f.elem), f.slot, addr, ld)


def lower_mma_store(bld: Builder, node: ast.Call, discard: bool) -> None:
    dst, frag, i, j = _tile_args(bld, node, "aw.mma_store(dst, acc, row_or_offset, col_or_ld)")
    f = _frag_arg(bld, node, frag, "acc", "aw.mma_store")
    if getattr(dst, "elem", ty.f32) is not ty.f32:
        raise bld.err(node, f"aw.mma_store: the destination must hold f32, got {dst.elem.name}")
    addr, ld, space = _tile_addr(bld, node, dst, i, j, 4, "aw.mma_store")
    bld.emit(mnemonic("fstore", f"{space}.m16n16k16", ty.f32), addr, f.slot, ld)


def lower_mma_sync(bld: Builder, node: ast.Call, discard: bool) -> None:
    d, a, b, c = bld.call_args(node, 4, 4, "aw.mma_sync(d, a, b, c)")
    fd = _frag_arg(bld, node, d, "acc", "aw.mma_sync d")
    fa = _frag_arg(bld, node, a, "a", "aw.mma_sync a")
    fb = _frag_arg(bld, node, b, "b", "aw.mma_sync b")
    fc = _frag_arg(bld, node, c, "acc", "aw.mma_sync c")
    if fa.elem is not fb.elem:
        raise bld.err(node, f"aw.mma_sync: a is {fa.elem.name} but b is {fb.elem.name}")
    bld.emit(mnemonic("fmma", "m16n16k16", ty.f32, src_type=fa.elem), fd.slot, fa.slot, fb.slot, fc.slot)


def lower_mma_group_async(bld: Builder, node: ast.Call, discard: bool) -> None:
    """aw.mma_group_async(acc, a, tile, offset, panel_stride): as :func:`lower_mma_group`, but the
    product stays in flight (``mma.group.async``) until an ``aw.mma_group_wait(n)`` of the wave
    leaves at most n of its products incomplete: until then no instruction may use ``acc``
    (except another mma_group_async into the same strip) or write ``a``, and no thread may write
    the B bytes it reads (spec §8.14; the emulator checks all three)."""
    lower_mma_group(bld, node, discard, asynchronous=True)


def lower_mma_group_wait(bld: Builder, node: ast.Call, discard: bool) -> None:
    from anywave.isa.table import MAX_ASYNC_WAIT

    if node.keywords or len(node.args) != 1:
        raise bld.err(node, "aw.mma_group_wait(n) takes one compile-time int")
    n = bld.static_eval(node.args[0])
    bld.node = node
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or not 0 <= n <= MAX_ASYNC_WAIT:
        raise bld.err(node, f"aw.mma_group_wait(n): n must be a compile-time int in 0..{MAX_ASYNC_WAIT} (the "
                      f"number of this wave's most recent aw.mma_group_async left in flight), got {n!r}")
    bld.emit("mma.wait", int(n))


def lower_mma_group(bld: Builder, node: ast.Call, discard: bool, asynchronous: bool = False) -> None:
    """aw.mma_group(acc, a, tile, offset, panel_stride): the wave-group MMA (spec §8.14,
    ``mma.group``). ``acc`` is a tuple of N/16 accumulators in consecutive slots (N = 64, 128
    or 256: one 16 x N strip, e.g. from ``aw.fragments(16, "acc")``), ``a`` an A fragment,
    ``tile`` a local array holding B (16 x N of a's type) in the swizzled panel layout at
    ``offset`` bytes from its start, panels ``panel_stride`` bytes apart. The four waves of a
    group (wave ids 4g..4g+3) execute it together with the same offset and stride."""
    what = f"aw.mma_group{'_async' if asynchronous else ''}(acc, a, tile, offset, panel_stride)"
    if node.keywords or len(node.args) != 5:
        raise bld.err(node, f"{what} takes 5 positional arguments")
    strip = bld.visit(node.args[0])
    fa = _frag_arg(bld, node, bld.visit(node.args[1]), "a", "aw.mma_group a")
    tile = bld.visit(node.args[2])
    dyn, const = _sum_parts(bld, node.args[3])
    stride = bld.visit(node.args[4])
    bld.node = node
    if isinstance(strip, Fragment):
        strip = (strip,)
    if not isinstance(strip, tuple) or not strip:
        raise bld.err(node, f"{what}: acc must be a tuple of accumulator fragments, got {strip!r}")
    for f in strip:
        _frag_arg(bld, node, f, "acc", "aw.mma_group acc")
    n = 16 * len(strip)
    if n not in GROUP_N:
        raise bld.err(node, f"{what}: acc has {len(strip)} fragments (N = {n}); N must be one of "
                      f"{', '.join(map(str, GROUP_N))} (4, 8 or 16 fragments)")
    if [f.slot for f in strip] != list(range(strip[0].slot, strip[0].slot + len(strip))):
        raise bld.err(node, f"{what}: the accumulators must be consecutive fragments (one aw.fragments(...) "
                      f"call), got slots {[f.slot for f in strip]}")
    if not isinstance(tile, LocalArray):
        raise bld.err(node, f"{what}: tile must be a local array (aw.local_array), got {_describe(tile)}")
    imm = tile.base + const
    if imm % GROUP_ALIGN:
        raise bld.err(node, f"{what}: the B tile starts at local byte {imm}, not a multiple of {GROUP_ALIGN} "
                      f"(declare the array with aw.local_array(..., align={GROUP_ALIGN}) and keep the offset's "
                      f"compile-time part a multiple of {GROUP_ALIGN})")
    static_stride = isinstance(stride, int) and not isinstance(stride, bool)
    if static_stride and (stride % GROUP_ALIGN or (n > 64 and stride < GROUP_PANEL)):
        raise bld.err(node, f"{what}: panel_stride {stride} must be a multiple of {GROUP_ALIGN} bytes and at "
                      f"least {GROUP_PANEL} (16 rows of 128 bytes)")
    # the bytes read: panels 0 .. N/64 - 1 of 16 rows of 128 bytes (checked here as far as the
    # compile-time parts go; the run-time part is checked by the emulator, spec §8.14)
    end = const + ((n // 64 - 1) * stride if static_stride else 0) + GROUP_PANEL
    if const < 0 or end > tile.nbytes:
        raise bld.err(node, f"{what}: the B tile at byte {const} of the local array (its compile-time part) reads "
                      f"bytes up to {end}, but the array has {tile.nbytes} bytes (16 rows of 128 bytes per panel, "
                      f"{n // 64} panel(s))")
    off = 0 if isinstance(dyn, int) else dyn
    addr = LocAddr(_u32(bld, node, off, f"{what} offset"), imm)
    bld.emit(f"mma.group.{'async.' if asynchronous else ''}m16n{n}k16.f32.{fa.elem.name}", strip[0].slot, fa.slot, addr,
             _u32(bld, node, stride, f"{what} panel_stride"))


def lower_mma_group_bt(bld: Builder, node: ast.Call, discard: bool) -> None:
    """aw.mma_group_bt(acc, a, tile, offset): the wave-group MMA with B given transposed (spec
    §8.14, ``mma.group.bt``): the local array ``tile`` holds B's transpose from byte ``offset``
    as N rows of 128 bytes (row n = column n of B), 16-byte chunks permuted by ``xor (n mod 8)``;
    the 16 k of this step are the 16 elements from byte ``offset mod 1024`` (0, 32, 64 or 96) of
    each row. The four waves of a group execute it together."""
    what = "aw.mma_group_bt(acc, a, tile, offset)"
    if node.keywords or len(node.args) != 4:
        raise bld.err(node, f"{what} takes 4 positional arguments")
    strip = _strip(bld, node, bld.visit(node.args[0]), GROUP_N, what)
    fa = _frag_arg(bld, node, bld.visit(node.args[1]), "a", "aw.mma_group_bt a")
    tile = bld.visit(node.args[2])
    dyn, const = _sum_parts(bld, node.args[3])
    bld.node = node
    n = 16 * len(strip)
    if not isinstance(tile, LocalArray):
        raise bld.err(node, f"{what}: tile must be a local array (aw.local_array), got {_describe(tile)}")
    imm = tile.base + const
    if imm % 32 or imm % GROUP_ALIGN >= 128:
        raise bld.err(node, f"{what}: the B tile starts at local byte {imm}, which is not 0, 32, 64 or 96 modulo "
                      f"{GROUP_ALIGN} (declare the array with aw.local_array(..., align={GROUP_ALIGN}) and keep the "
                      "offset's compile-time part so)")
    end = const - const % GROUP_ALIGN + 128 * n
    if const < 0 or end > tile.nbytes:
        raise bld.err(node, f"{what}: the B tile at byte {const} of the local array reads {n} rows of 128 bytes, up "
                      f"to byte {end}, but the array has {tile.nbytes} bytes")
    off = 0 if isinstance(dyn, int) else dyn
    addr = LocAddr(_u32(bld, node, off, f"{what} offset"), imm)
    bld.emit(f"mma.group.bt.m16n{n}k16.f32.{fa.elem.name}", strip[0].slot, fa.slot, addr, bld.const(0, ty.u32))


def _strip(bld: Builder, node: ast.Call, strip: Any, sizes: tuple[int, ...], what: str) -> tuple[Fragment, ...]:
    """A tuple of consecutive accumulator fragments whose 16 x N (N in ``sizes``) is checked."""
    if isinstance(strip, Fragment):
        strip = (strip,)
    if not isinstance(strip, tuple) or not strip:
        raise bld.err(node, f"{what}: expected a tuple of accumulator fragments, got {strip!r}")
    for f in strip:
        _frag_arg(bld, node, f, "acc", what)
    n = 16 * len(strip)
    if n not in sizes:
        raise bld.err(node, f"{what}: the strip has {len(strip)} fragments (N = {n}); N must be one of "
                      f"{', '.join(map(str, sizes))}")
    if [f.slot for f in strip] != list(range(strip[0].slot, strip[0].slot + len(strip))):
        raise bld.err(node, f"{what}: the strip's fragments must be consecutive (one aw.fragments(...) call), got "
                      f"slots {[f.slot for f in strip]}")
    return strip


def _lower_row(bld: Builder, node: ast.Call, op: str) -> None:
    what = f"aw.mma_row{op}(d, strip, c)"
    if node.keywords or len(node.args) != 3:
        raise bld.err(node, f"{what} takes 3 positional arguments")
    d = _frag_arg(bld, node, bld.visit(node.args[0]), "acc", f"{what} d")
    strip = _strip(bld, node, bld.visit(node.args[1]), ROW_N, what)
    c = _frag_arg(bld, node, bld.visit(node.args[2]), "acc", f"{what} c")
    bld.node = node
    bld.emit(f"mma.row{op}.n{16 * len(strip)}.m16n16k16.f32", d.slot, strip[0].slot, c.slot)


def lower_mma_rowmax(bld: Builder, node: ast.Call, discard: bool) -> None:
    """aw.mma_rowmax(d, strip, c): ``d[i][j] = max(c[i][j], max of row i of the strip)`` (spec §8.14)."""
    _lower_row(bld, node, "max")


def lower_mma_rowsum(bld: Builder, node: ast.Call, discard: bool) -> None:
    """aw.mma_rowsum(d, strip, c): ``d[i][j] = c[i][j] + the sum of row i of the strip`` (spec §8.14)."""
    _lower_row(bld, node, "sum")


def lower_mma_exp2(bld: Builder, node: ast.Call, discard: bool) -> None:
    """aw.mma_exp2(d, a, b, s): ``d = 2^(fma(a, s, -b))`` element-wise (spec §8.14)."""
    d, a, b, v = bld.call_args(node, 4, 4, "aw.mma_exp2(d, a, b, s)")
    fd, fa, fb = (_frag_arg(bld, node, x, "acc", f"aw.mma_exp2 {n}") for x, n in ((d, "d"), (a, "a"), (b, "b")))
    bld.emit("mma.exp2.m16n16k16.f32", fd.slot, fa.slot, fb.slot, bld.coerce(v, ty.f32, node))


def _lower_binary(bld: Builder, node: ast.Call, op: str) -> None:
    d, a, b = bld.call_args(node, 3, 3, f"aw.mma_{op}(d, a, b)")
    fd, fa, fb = (_frag_arg(bld, node, x, "acc", f"aw.mma_{op} {n}") for x, n in ((d, "d"), (a, "a"), (b, "b")))
    bld.emit(f"mma.{op}.m16n16k16.f32", fd.slot, fa.slot, fb.slot)


def lower_mma_mul(bld: Builder, node: ast.Call, discard: bool) -> None:
    """aw.mma_mul(d, a, b): ``d = a * b`` element-wise on accumulators (spec §8.14)."""
    _lower_binary(bld, node, "mul")


def lower_mma_div(bld: Builder, node: ast.Call, discard: bool) -> None:
    """aw.mma_div(d, a, b): ``d = a / b`` element-wise on accumulators (spec §8.14)."""
    _lower_binary(bld, node, "div")


def lower_mma_mask(bld: Builder, node: ast.Call, discard: bool) -> None:
    """aw.mma_mask(d, a, diag, cols): ``d[i][j] = a[i][j]`` where ``j - i <= diag`` and ``j < cols``,
    else ``-inf`` (i32 limits; spec §8.14)."""
    d, a, lim, cols = bld.call_args(node, 4, 4, "aw.mma_mask(d, a, diag, cols)")
    fd = _frag_arg(bld, node, d, "acc", "aw.mma_mask d")
    fa = _frag_arg(bld, node, a, "acc", "aw.mma_mask a")
    bld.emit("mma.mask.m16n16k16.f32", fd.slot, fa.slot, bld.coerce(lim, ty.i32, node), bld.coerce(cols, ty.i32, node))


def lower_mma_cvt(bld: Builder, node: ast.Call, discard: bool) -> None:
    """aw.mma_cvt(fa, acc): the A fragment ``fa`` = ``acc`` rounded to fa's type, element (i, j) of
    the accumulator to (row i, k = j) of A (spec §8.14)."""
    a, c = bld.call_args(node, 2, 2, "aw.mma_cvt(a, acc)")
    fa = _frag_arg(bld, node, a, "a", "aw.mma_cvt a")
    fc = _frag_arg(bld, node, c, "acc", "aw.mma_cvt acc")
    bld.emit(f"mma.cvt.a.m16n16k16.{fa.elem.name}", fa.slot, fc.slot)


def lower_mma_scale(bld: Builder, node: ast.Call, discard: bool) -> None:
    args = bld.call_args(node, 2, 3, "aw.mma_scale(acc, s) or aw.mma_scale(d, a, s)")
    f = _frag_arg(bld, node, args[0], "acc", "aw.mma_scale")
    src = _frag_arg(bld, node, args[1], "acc", "aw.mma_scale a") if len(args) == 3 else f
    v = bld.coerce(args[-1], ty.f32, node)
    bld.emit("mma.scale.m16n16k16.f32", f.slot, src.slot, v)


def lower_mma_fill(bld: Builder, node: ast.Call, discard: bool) -> None:
    d, s = bld.call_args(node, 2, 2, "aw.mma_fill(acc, value)")
    f = _frag_arg(bld, node, d, "acc", "aw.mma_fill")
    bld.emit("mma.fill.m16n16k16.f32", f.slot, bld.coerce(s, ty.f32, node))


def lower_mma_bias(bld: Builder, node: ast.Call, discard: bool) -> None:
    d, buf, off = bld.call_args(node, 3, 3, "aw.mma_bias(acc, bias, offset)")
    f = _frag_arg(bld, node, d, "acc", "aw.mma_bias")
    if not isinstance(buf, BufferArg) or buf.elem is not ty.f32:
        raise bld.err(node, f"aw.mma_bias: bias must be an f32 buffer, got {buf!r}")
    o = _u32(bld, node, bld.binop(ast.Mult, off, 4, node), "aw.mma_bias offset")
    bld.emit("mma.bias.device.m16n16k16.f32", f.slot, f.slot, DevAddr(buf.index, o))


def lower_mma(bld: Builder, node: ast.Call, discard: bool) -> None:
    tiles = bld.call_args(node, 4, 4, "aw.mma(D, A, B, C)")
    names = "DABC"
    for nm, t in zip(names, tiles, strict=True):
        if not isinstance(t, LocalArray) or int(np.prod(t.shape)) != 256:
            raise bld.err(node, f"aw.mma operand {nm} must be a 16x16 local array, got {_describe(t)}")
    d, a, b, c = tiles
    if d.elem is not ty.f32 or c.elem is not ty.f32:
        raise bld.err(node, "aw.mma: D and C must be f32 tiles")
    if a.elem is not b.elem or a.elem not in (ty.f16, ty.bf16):
        raise bld.err(node, "aw.mma: A and B must both be f16 or both bf16 tiles")
    offs = [bld.const(t.base, ty.u32) for t in tiles]
    bld.emit(mnemonic("mma", type=ty.f32, src_type=a.elem), *offs)
