"""Fragment MMA in the kernel language (docs/spec.md §8.14): ``aw.fragment`` and the
``aw.mma_*`` intrinsics, mixed into the frontend.

A fragment is a compile-time object bound to one fragment slot (f0..f31) for the whole
kernel; the intrinsics act on it in place, like CUDA's ``wmma`` fragments::

    acc = aw.fragment("acc")                 # m16n16k16 f32 accumulator, +0.0
    fa = aw.fragment("a", aw.bf16); fb = aw.fragment("b", aw.bf16)
    aw.mma_load(fa, tile_a, row, col)        # local 2-D array: the 16x16 block at (row, col)
    aw.mma_load(fb, b, offset, ld)           # device buffer: element offset, row stride ld
    aw.mma_sync(acc, fa, fb, acc)            # acc = fa @ fb + acc (tensor cores where present)
    aw.mma_scale(acc, alpha); aw.mma_bias(acc, bias, col0)
    aw.mma_store(c, acc, offset, ld)         # or (local 2-D array, row, col)

All are wave operations (every lane of a complete wave, uniform arguments). Errors name the
source line.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Any

from anywave.isa.mma import MAX_FRAGMENTS

from . import types as ty
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


class FragmentIntrinsics:
    """The ``_i_fragment`` / ``_i_mma_*`` handlers of :class:`Frontend`."""

    _nfrag: int = 0

    def _frag_arg(self, node: ast.Call, x: Any, role: str | None, what: str) -> Fragment:
        if not isinstance(x, Fragment) or (role is not None and x.role != role):
            want = f"an aw.fragment({role!r}, ...)" if role else "an aw.fragment"
            raise self.err(node, f"{what}: expected {want}, got {x!r}")  # type: ignore[attr-defined]
        return x

    def _i_fragment(self, node: ast.Call, discard: bool) -> Fragment:
        args = [self.static_eval(a) for a in node.args]  # type: ignore[attr-defined]
        if node.keywords or not 1 <= len(args) <= 2:
            raise self.err(node, "aw.fragment(role, dtype=aw.bf16) takes a role and an optional dtype")  # type: ignore[attr-defined]
        role = args[0]
        elem = args[1] if len(args) > 1 else (ty.f32 if role == "acc" else ty.bf16)
        if role not in ("a", "b", "acc"):
            raise self.err(node, f"aw.fragment role must be 'a', 'b' or 'acc', got {role!r}")  # type: ignore[attr-defined]
        if role == "acc" and elem is not ty.f32 or role != "acc" and elem not in (ty.f16, ty.bf16):
            raise self.err(node, f"aw.fragment({role!r}): element type {elem!r} is not supported (A and B: "  # type: ignore[attr-defined]
                           "aw.f16 or aw.bf16; acc: aw.f32)")
        n = self._nfrag
        if n >= MAX_FRAGMENTS:
            raise self.err(node, f"a kernel has at most {MAX_FRAGMENTS} fragments (f0..f{MAX_FRAGMENTS - 1})")  # type: ignore[attr-defined]
        self._nfrag = n + 1
        frag = Fragment(n, role, elem)
        if role == "acc":
            self.emit("mma.fill.m16n16k16.f32", n, self.const(0, ty.u32))  # type: ignore[attr-defined]
        return frag

    def _i_fragments(self, node: ast.Call, discard: bool) -> tuple[Fragment, ...]:
        """aw.fragments(count, role, dtype): a tuple of ``count`` fragments (index it with
        compile-time ints, e.g. inside ``aw.static_range``)."""
        if not node.args:
            raise self.err(node, "aw.fragments(count, role, dtype=...) needs a count")  # type: ignore[attr-defined]
        count = self.static_eval(node.args[0])  # type: ignore[attr-defined]
        if not isinstance(count, int) or isinstance(count, bool) or count < 1:
            raise self.err(node, f"aw.fragments: count must be a positive compile-time int, got {count!r}")  # type: ignore[attr-defined]
        one = ast.Call(func=node.func, args=node.args[1:], keywords=node.keywords)
        ast.copy_location(one, node)
        return tuple(self._i_fragment(one, False) for _ in range(count))

    def _u32(self, node: ast.Call, x: Any, what: str) -> Any:
        if isinstance(x, bool) or not (isinstance(x, int) or getattr(getattr(x, "type", None), "is_int", False)):
            raise self.err(node, f"{what} must be an integer, got {x!r}")  # type: ignore[attr-defined]
        return self.coerce(x, ty.u32)  # type: ignore[attr-defined]

    def _sum_parts(self, node: ast.AST) -> tuple[Any, int]:
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
            v = self.visit(t)  # type: ignore[attr-defined]
            if isinstance(v, int) and not isinstance(v, bool):
                const += v
            else:
                dyn = v if isinstance(dyn, int) else self.binop(ast.Add, dyn, v, t)  # type: ignore[attr-defined]
        return dyn, const

    def _tile_args(self, node: ast.Call, n: int, what: str) -> list[Any]:
        """The arguments of aw.mma_load/mma_store; for a local array the (row, col) indices as
        (run-time part, compile-time part) pairs, so the constant part becomes the address's
        immediate and fragments at fixed distances share one address register."""
        from .frontend import LocalArray

        if node.keywords or len(node.args) != n:
            raise self.err(node, f"{what} takes {n} positional arguments, got {len(node.args)}")  # type: ignore[attr-defined]
        first = [self.visit(a) for a in node.args[:2]]  # type: ignore[attr-defined]
        src = first[1] if n == 4 and isinstance(first[1], LocalArray) else first[0]
        if isinstance(src, LocalArray):
            rest = [self._sum_parts(a) for a in node.args[2:]]
        else:
            rest = [self.visit(a) for a in node.args[2:]]  # type: ignore[attr-defined]
        self.node = node  # type: ignore[attr-defined]
        return first + rest

    def _tile_addr(self, node: ast.Call, src: Any, i: Any, j: Any, esz: int, what: str) -> tuple[Any, Any, str]:
        """(address operand, row stride register, space) of a 16x16 block: a local 2-D array at
        element (row i, col j) (each a (run-time, compile-time) pair from :meth:`_tile_args`),
        or a device buffer at element offset i with row stride j."""
        from .frontend import BufferArg, LocalArray

        mul = self.binop  # type: ignore[attr-defined]
        if isinstance(src, LocalArray):
            # a tile of esz-byte elements; a 32-bit array may hold 16-bit elements in pairs
            # (then the column j counts 16-bit elements)
            nb = src.elem.scalar.nbytes
            if len(src.shape) != 2 or nb not in (esz, 4, 8):
                raise self.err(node, f"{what}: the local array must be 2-D of {esz}-byte (or packed 4/8-byte) "  # type: ignore[attr-defined]
                               f"elements, got shape {src.shape} of {src.elem.name}")
            rowbytes = src.shape[1] * nb
            if rowbytes % 16:
                raise self.err(node, f"{what}: a row of the local array must be a multiple of 16 bytes, got "  # type: ignore[attr-defined]
                               f"{rowbytes}")
            (di, ci), (dj, cj) = i, j
            for x in (di, dj):
                if not isinstance(x, int):
                    self._u32(node, x, f"{what} index")
            off: Any = 0
            if not isinstance(di, int):
                off = mul(ast.Mult, di, rowbytes, node)
            if not isinstance(dj, int):
                dj = mul(ast.Mult, dj, esz, node)
                off = dj if isinstance(off, int) else mul(ast.Add, off, dj, node)
            imm = src.base + ci * rowbytes + cj * esz
            if imm < 0:
                raise self.err(node, f"{what}: the tile starts before the local array (byte offset {imm})")  # type: ignore[attr-defined]
            return (LocAddr(self._u32(node, off, f"{what} offset"), imm), self.const(rowbytes, ty.u32),  # type: ignore[attr-defined]
                    "local")
        if isinstance(src, BufferArg):
            if src.elem.scalar.nbytes != esz:
                raise self.err(node, f"{what}: buffer {src.name!r} holds {src.elem.name}, expected {esz}-byte "  # type: ignore[attr-defined]
                               "elements")
            off = self._u32(node, mul(ast.Mult, i, esz, node), f"{what} offset")
            ld = self._u32(node, mul(ast.Mult, j, esz, node), f"{what} row stride")
            return DevAddr(src.index, off), ld, "device"
        raise self.err(node, f"{what}: expected a local 2-D array or a buffer, got {src!r}")  # type: ignore[attr-defined]

    def _i_mma_load(self, node: ast.Call, discard: bool) -> None:
        frag, src, i, j = self._tile_args(node, 4, "aw.mma_load(frag, src, row_or_offset, col_or_ld)")
        f = self._frag_arg(node, frag, None, "aw.mma_load")
        # raw 16-bit buffers (u16/i16) or packed 32-bit local arrays may hold the elements
        if f.role != "acc" and getattr(src, "elem", f.elem) not in (f.elem, ty.u16, ty.i16, ty.u32, ty.i32, ty.u64):
            raise self.err(node, f"aw.mma_load: a {f.elem.name} fragment cannot load {src.elem.name} data")  # type: ignore[attr-defined]
        esz = f.elem.scalar.nbytes
        addr, ld, space = self._tile_addr(node, src, i, j, esz, "aw.mma_load")
        role = "c" if f.role == "acc" else f.role
        self.emit(f"mma.load.{role}.{space}.m16n16k16.{f.elem.name}", f.slot, addr, ld)  # type: ignore[attr-defined]

    def _i_mma_store(self, node: ast.Call, discard: bool) -> None:
        dst, frag, i, j = self._tile_args(node, 4, "aw.mma_store(dst, acc, row_or_offset, col_or_ld)")
        f = self._frag_arg(node, frag, "acc", "aw.mma_store")
        if getattr(dst, "elem", ty.f32) is not ty.f32:
            raise self.err(node, f"aw.mma_store: the destination must hold f32, got {dst.elem.name}")  # type: ignore[attr-defined]
        addr, ld, space = self._tile_addr(node, dst, i, j, 4, "aw.mma_store")
        self.emit(f"mma.store.{space}.m16n16k16.f32", addr, f.slot, ld)  # type: ignore[attr-defined]

    def _i_mma_sync(self, node: ast.Call, discard: bool) -> None:
        d, a, b, c = self._plain_args(node, 4, 4, "aw.mma_sync(d, a, b, c)")  # type: ignore[attr-defined]
        fd = self._frag_arg(node, d, "acc", "aw.mma_sync d")
        fa = self._frag_arg(node, a, "a", "aw.mma_sync a")
        fb = self._frag_arg(node, b, "b", "aw.mma_sync b")
        fc = self._frag_arg(node, c, "acc", "aw.mma_sync c")
        if fa.elem is not fb.elem:
            raise self.err(node, f"aw.mma_sync: a is {fa.elem.name} but b is {fb.elem.name}")  # type: ignore[attr-defined]
        self.emit(f"mma.mma.m16n16k16.f32.{fa.elem.name}", fd.slot, fa.slot, fb.slot, fc.slot)  # type: ignore[attr-defined]

    def _i_mma_scale(self, node: ast.Call, discard: bool) -> None:
        d, s = self._plain_args(node, 2, 2, "aw.mma_scale(acc, s)")  # type: ignore[attr-defined]
        f = self._frag_arg(node, d, "acc", "aw.mma_scale")
        v = self.coerce(s, ty.f32)  # type: ignore[attr-defined]
        self.emit("mma.scale.m16n16k16.f32", f.slot, f.slot, v)  # type: ignore[attr-defined]

    def _i_mma_fill(self, node: ast.Call, discard: bool) -> None:
        d, s = self._plain_args(node, 2, 2, "aw.mma_fill(acc, value)")  # type: ignore[attr-defined]
        f = self._frag_arg(node, d, "acc", "aw.mma_fill")
        self.emit("mma.fill.m16n16k16.f32", f.slot, self.coerce(s, ty.f32))  # type: ignore[attr-defined]

    def _i_mma_bias(self, node: ast.Call, discard: bool) -> None:
        d, buf, off = self._plain_args(node, 3, 3, "aw.mma_bias(acc, bias, offset)")  # type: ignore[attr-defined]
        f = self._frag_arg(node, d, "acc", "aw.mma_bias")
        from .frontend import BufferArg

        if not isinstance(buf, BufferArg) or buf.elem is not ty.f32:
            raise self.err(node, f"aw.mma_bias: bias must be an f32 buffer, got {buf!r}")  # type: ignore[attr-defined]
        o = self._u32(node, self.binop(ast.Mult, off, 4, node), "aw.mma_bias offset")  # type: ignore[attr-defined]
        self.emit("mma.bias.device.m16n16k16.f32", f.slot, f.slot, DevAddr(buf.index, o))  # type: ignore[attr-defined]


DOCS = {
    "fragment": "fragment(role, dtype): an MMA fragment ('a'/'b': f16/bf16 16x16; 'acc': f32 16x16, +0.0)",
    "mma_load": "mma_load(frag, src, i, j): load a 16x16 block (local 2-D array at (i, j), or buffer offset i, ld j)",
    "mma_store": "mma_store(dst, acc, i, j): store an accumulator (local 2-D array at (i, j), or offset i, ld j)",
    "mma_sync": "mma_sync(d, a, b, c): d = a @ b + c on fragments (tensor cores where the target has them)",
    "mma_scale": "mma_scale(acc, s): acc *= s element-wise", "mma_fill": "mma_fill(acc, v): every element = v",
    "mma_bias": "mma_bias(acc, bias, j0): acc[i][j] += bias[j0 + j]",
    "fragments": "fragments(count, role, dtype): a tuple of count fragments",
}
