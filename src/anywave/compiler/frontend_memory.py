"""Memory access of the kernel language, mixed into :class:`~anywave.compiler.frontend.Frontend`:
element indices to byte offsets, local-array addressing, loads and stores of buffers and
local arrays (narrow element types widen on load and keep their low bits on store;
docs/spec.md §4 for the address forms). Views and register arrays are in
:mod:`anywave.compiler.frontend_perf`.
"""

from __future__ import annotations

import ast
from typing import Any

import numpy as np

from anywave.isa import mnemonic
from anywave.isa.types import Access

from . import types as ty
from .bindings import BufferArg, LocalArray
from .bindings import describe as _describe
from .frontend_perf import BufferView, RegisterArray
from .ir import DevAddr, LocAddr, PredUse, Value
from .types import DType


class MemoryOps:
    """Addressing, loads and stores of :class:`Frontend`."""

    def index_offset(self, idx: Any, esize: int, node: ast.AST) -> tuple[Value, bool]:
        """Byte offset register for element index ``idx`` (value, is_64bit)."""
        if isinstance(idx, (bool, float)) or (not isinstance(idx, (int, Value, np.integer))):
            raise self.err(node, f"an index must be an integer, got {_describe(idx)}")
        if not isinstance(idx, Value):
            if idx < 0:
                raise self.err(node, f"negative index {idx}: kernels do not index from the end")
            return self.const(int(idx) * esize, ty.u32 if idx * esize < 1 << 32 else ty.u64, node), \
                idx * esize >= 1 << 32
        if not idx.type.is_int:
            raise self.err(node, f"an index must be an integer, got a {idx.type.name} value; cast with aw.i32(...)")
        if esize == 1:
            return idx, idx.type.bits == 64
        k = self.const(esize.bit_length() - 1, ty.u32)
        return self.alu("shl", idx.type, idx, k, node=node), idx.type.bits == 64

    def local_addr(self, arr: LocalArray, sl: ast.AST, node: ast.AST) -> LocAddr:
        idx = self.visit(sl)
        self.node = node
        return self.local_addr_of(arr, idx, node)

    def local_addr_of(self, arr: LocalArray, idx: Any, node: ast.AST) -> LocAddr:
        idxs = idx if isinstance(idx, tuple) else (idx,)
        if len(idxs) != len(arr.shape):
            raise self.err(node, f"local array of shape {arr.shape} needs {len(arr.shape)} indices, got {len(idxs)}")
        esize = arr.elem.scalar.nbytes
        const_part = 0
        dyn: Value | None = None
        stride = 1
        for i, dim in reversed(list(zip(idxs, arr.shape, strict=True))):
            if isinstance(i, PredUse) or isinstance(i, (bool, float)):
                raise self.err(node, f"a local-array index must be an integer, got {_describe(i)}")
            if isinstance(i, Value):
                if not i.type.is_int or i.type.bits != 32:
                    raise self.err(node, f"a local-array index must be i32 or u32, got {i.type.name}")
                term = i if stride == 1 else self.alu("mul", i.type, i, self.const(stride, i.type), node=node)
                if dyn is not None and dyn.type is not term.type:
                    term = self.cast(term, dyn.type, node)
                dyn = term if dyn is None else self.alu("add", dyn.type, dyn, term, node=node)
            else:
                if not 0 <= int(i) < dim:
                    raise self.err(node, f"index {int(i)} is out of range for a dimension of size {dim}")
                const_part += int(i) * stride
            stride *= dim
        imm = arr.base + const_part * esize
        if dyn is None:
            return LocAddr(self.const(0, ty.u32), imm)
        off, _ = self.index_offset(dyn, esize, node)
        return LocAddr(off, imm)

    def _load(self, space: str, elem: DType, addr: Any, wide: bool) -> Value:
        vt = ty.value_type_of_element(elem)
        r = self.new(vt)
        nb = elem.scalar.nbytes
        if nb == 8:
            kind = "b64"
        elif nb == 4:
            kind = "b32"
        elif nb == 2:
            kind = "i16" if elem is ty.i16 else "u16"
        else:
            kind = "i8" if elem is ty.i8 else "u8"
        self.emit(mnemonic("ld", space, kind, addr64=wide), r, addr)
        return r

    def store_subscript(self, target: ast.Subscript, value: Any) -> None:
        bn = target.value
        base = self.load_name(bn.id, bn) if type(bn) is ast.Name else self.visit(bn)
        self.node = target
        if isinstance(base, BufferArg):
            if base.access is Access.READ:
                raise self.err(target, f"buffer {base.name!r} is declared aw.In[{base.elem.name}] (read only) "
                               f"and cannot be written; declare it aw.Buffer[{base.elem.name}] or "
                               f"aw.Out[{base.elem.name}]")
            idx = self.visit(target.slice)
            self.node = target
            off, wide = self.index_offset(idx, base.elem.scalar.nbytes, target.slice)
            v = self.store_value(value, base.elem, target)
            self._store("device", base.elem, DevAddr(base.index, off), v, wide)
        elif isinstance(base, LocalArray):
            addr = self.local_addr(base, target.slice, target)
            v = self.store_value(value, base.elem, target)
            self._store("local", base.elem, addr, v, False)
        elif isinstance(base, RegisterArray):
            self._register_store(base, target, value)
        elif isinstance(base, BufferView):
            self._view_store(base, target, value)
        else:
            raise self.err(target.value, f"cannot store into {_describe(base)}; valid: buffers, buffer views, "
                           "local arrays and register arrays")

    def store_value(self, value: Any, elem: DType, node: ast.AST) -> Value:
        vt = ty.value_type_of_element(elem)
        if isinstance(value, PredUse):
            value = self.pred_value(value)
        if isinstance(value, Value) and value.type is not vt:
            if value.type is ty.pred and vt.is_int:
                return self.cast(value, vt, node)
            raise self.err(node, f"cannot store a {value.type.name} value into {elem.name} elements; cast "
                           f"explicitly with aw.{vt.name}(...)")
        if not isinstance(value, Value):
            if elem in ty.NARROW_TYPES:
                bits = elem.scalar.bits
                lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if elem.is_signed else (0, (1 << bits) - 1)
                if isinstance(value, int) and not lo <= value <= hi:
                    raise self.err(node, f"{value} does not fit in {elem.name} ({lo}..{hi})")
            return self.const(value, vt, node)
        return value

    def _store(self, space: str, elem: DType, addr: Any, v: Value, wide: bool) -> None:
        nb = elem.scalar.nbytes
        self.emit(mnemonic("st", space, f"b{nb * 8}", addr64=wide), addr, v)
