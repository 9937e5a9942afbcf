"""CUDA C++ front end: ``__global__``/``__device__`` functions → the typed IR.

The source is parsed by clang (the ``libclang`` wheel, ``pip install 'anywave[cuda-frontend]'``)
in CUDA mode, host side only (``-x cuda --cuda-host-only -nocudainc -nocudalib -nostdinc``), with
a prelude of our own (:mod:`anywave.compiler.cuda_prelude`) declaring the built-in variables,
the numeric limits, the math library, the intrinsics, the vector and half types, since the CUDA
SDK headers are not needed (the usual system and CUDA headers exist as empty virtual files, and
``#include "x.h"`` is found in the source file's folder). The AST clang builds already holds C's
conversions (the usual arithmetic conversions, integer promotions, float→double promotion of
double literals) as implicit-cast nodes, so the lowering converts exactly where clang says and
computes each operation in the type clang gives it: ``2.0f * x`` is f32, ``2.0 * x`` is f64,
``u - 1u`` wraps modulo 2^32. No contraction: ``a*b+c`` is a ``mul`` and an ``add`` (two
roundings); ``fmaf`` is one ``fma``.

Lowered (docs/guide/cuda.md has the full list): scalar and pointer parameters (a pointer is a
buffer; a pointer to a struct a buffer of its bytes or of its one scalar type), the built-in
variables, locals (scalars, structs field by field, pointers into one buffer or shared array,
the address of a local as an out-parameter), static and ``extern __shared__`` memory (the
latter sized at compile time by ``shared_bytes``, at offset 0), ``__constant__`` variables
(read-only buffers after the parameters), structured control flow, every C operator, casts
(pointer casts between element types included), ``__device__`` functions and template
instances inlined (early returns, default arguments), template kernels instantiated from the
name (``reduce<float, 256>``), the 32-bit atomics, the warp built-ins
(:mod:`anywave.compiler.cuda_warp`), the math library, intrinsics, ``half``/``__nv_bfloat16``
and ``printf`` (:mod:`anywave.compiler.cuda_builtins`). Anything else raises
:class:`~anywave.compiler.errors.CompileError` naming the construct, file, line and column.

Results where C leaves them undefined take the WAVE instruction's defined result (integer
division by zero, shift counts >= the width, float→int out of range: spec §8.1).
"""

from __future__ import annotations

import ctypes
import inspect
import os
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from anywave.binary.module import KERNEL_FLAG_W_INVARIANT, PRINT_ARG, Arg, Kernel, Module, settle_version
from anywave.isa import mnemonic
from anywave.isa.table import BY_MNEMONIC
from anywave.isa.types import Access, ArgKind, MemoryOrder, Scope, SpecialRegister

from . import codegen, ir, passes, spill
from . import cuda_builtins as _builtins
from . import cuda_prelude as _prelude
from . import cuda_warp as _warp
from . import typerules as tr
from . import types as ty
from .constants import literal_bits
from .errors import CompileError
from .ir import DevAddr, LocAddr, Op, PredUse, Value
from .kernel import Param
from .types import DType

PRELUDE = _prelude.PRELUDE
PRELUDE_LINES = _prelude.PRELUDE_LINES
CLANG_ARGS = ("-x", "cuda", "--cuda-host-only", "-nocudainc", "-nocudalib", "-nostdinc", "-std=c++17",
              "-Wno-unknown-cuda-version", "-isystem", _prelude.INCLUDE_DIR)

_BITS = {"__popc": "popc", "__popcll": "popc", "__clz": "clz", "__clzll": "clz", "__ffs": "ffs",
         "__ffsll": "ffs", "__brev": "brev", "__brevll": "brev"}
_ATOMIC = {"atomicAdd": "add", "atomicSub": "sub", "atomicMin": "min", "atomicMax": "max", "atomicAnd": "and",
           "atomicOr": "or", "atomicXor": "xor", "atomicExch": "exch", "atomicCAS": "cas"}
_SR = {
    "threadIdx": (SpecialRegister.THREAD_ID_X, SpecialRegister.THREAD_ID_Y, SpecialRegister.THREAD_ID_Z),
    "blockIdx": (SpecialRegister.WORKGROUP_ID_X, SpecialRegister.WORKGROUP_ID_Y, SpecialRegister.WORKGROUP_ID_Z),
    "blockDim": (SpecialRegister.WORKGROUP_SIZE_X, SpecialRegister.WORKGROUP_SIZE_Y,
                 SpecialRegister.WORKGROUP_SIZE_Z),
    "gridDim": (SpecialRegister.GRID_SIZE_X, SpecialRegister.GRID_SIZE_Y, SpecialRegister.GRID_SIZE_Z),
}
# clang's CXBinaryOperatorKind / CXUnaryOperatorKind (clang-c/Index.h, LLVM 17+)
_BIN = {3: "*", 4: "/", 5: "%", 6: "+", 7: "-", 8: "<<", 9: ">>", 11: "<", 12: ">", 13: "<=", 14: ">=",
        15: "==", 16: "!=", 17: "&", 18: "^", 19: "|", 20: "&&", 21: "||", 22: "=", 23: "*=", 24: "/=",
        25: "%=", 26: "+=", 27: "-=", 28: "<<=", 29: ">>=", 30: "&=", 31: "^=", 32: "|=", 33: ","}
_UN = {1: "post++", 2: "post--", 3: "++", 4: "--", 5: "&", 6: "*", 7: "+", 8: "-", 9: "~", 10: "!"}
_ALU_OF = {"*": "mul", "/": "div", "%": "rem", "+": "add", "-": "sub", "&": "and", "^": "xor", "|": "or",
           "<<": "shl", ">>": "shr"}
_CMP_OF = {"<": "lt", ">": "gt", "<=": "le", ">=": "ge", "==": "eq", "!=": "ne"}

_cx: Any = None
_cx_lock = threading.Lock()


def _clang() -> Any:
    """The ``clang.cindex`` module with the operator-kind entry points registered; CompileError
    naming the extra to install when libclang is missing."""
    global _cx
    with _cx_lock:
        if _cx is None:
            try:
                import clang.cindex as cx
                lib = cx.conf.lib
                for fn, res in (("clang_getCursorBinaryOperatorKind", ctypes.c_int),
                                ("clang_getCursorUnaryOperatorKind", ctypes.c_int),
                                ("clang_Cursor_Evaluate", ctypes.c_void_p),
                                ("clang_Cursor_isAnonymousRecordDecl", ctypes.c_uint)):
                    f = getattr(lib, fn)
                    f.argtypes = [cx.Cursor]
                    f.restype = res
                for fn, res in (("clang_EvalResult_getAsDouble", ctypes.c_double),
                                ("clang_EvalResult_getAsLongLong", ctypes.c_longlong),
                                ("clang_EvalResult_getAsUnsigned", ctypes.c_ulonglong),
                                ("clang_EvalResult_dispose", None)):
                    f = getattr(lib, fn)
                    f.argtypes = [ctypes.c_void_p]
                    f.restype = res
            except (ImportError, AttributeError, OSError) as e:
                raise CompileError("aw.cuda_kernel needs libclang 17 or later: pip install 'anywave[cuda-frontend]' "
                                   f"(the libclang wheel); {e}") from None
            _cx = cx
            global _TYPE_DECLS
            K = cx.CursorKind
            _TYPE_DECLS = frozenset({K.TYPEDEF_DECL, K.TYPE_ALIAS_DECL, K.STRUCT_DECL, K.UNION_DECL, K.ENUM_DECL,
                                     K.STATIC_ASSERT, K.USING_DECLARATION, K.USING_DIRECTIVE})
        return _cx


# ----------------------------------------------------------------------------- C types

_SCALAR = {"int": ty.i32, "unsigned int": ty.u32, "long": ty.i64, "unsigned long": ty.u64,
           "long long": ty.i64, "unsigned long long": ty.u64, "float": ty.f32, "double": ty.f64,
           "char": ty.i8, "signed char": ty.i8, "unsigned char": ty.u8, "short": ty.i16,
           "unsigned short": ty.u16, "bool": ty.bool_}


#: the member types of a union that is a value (:attr:`_Struct.storage`): a bit cast between them
_UNION_SCALARS = (ty.i8, ty.u8, ty.i16, ty.u16, ty.i32, ty.u32, ty.i64, ty.u64, ty.f32, ty.f64)
#: the storage of such a union, by its size in bytes
_UNION_STORAGE = {1: ty.u8, 2: ty.u16, 4: ty.u32, 8: ty.u64}


@dataclass(frozen=True)
class _Struct:
    """A C struct (or ``union``) laid out by clang: ``fields`` (name, C type, byte offset; a
    union's members all at offset 0), ``size`` and ``align`` in bytes (clang's, the C ABI's; the
    same as nvcc's for these types); ``where`` the declaration's ``file:line:column``."""

    name: str
    size: int
    align: int
    fields: tuple[tuple[str, Any, int], ...]
    union: bool = False
    where: str = ""

    @property
    def storage(self) -> DType | None:
        """A union whose members are all integer or float scalars (not ``bool``, not ``half``) of
        the union's size: the unsigned integer type of that size, which a local or a value of the
        union holds; a member is read and written as a bit cast of it, so the members share
        their bytes as in C. None for any other union (its members can still be accessed in
        memory, ``p->f``) and for a struct."""
        if not self.union or any(t not in _UNION_SCALARS or _size(t) != self.size for _n, t, _o in self.fields):
            return None
        return _UNION_STORAGE.get(self.size)

    def field(self, name: str) -> tuple[Any, int]:
        for n, t, off in self.fields:
            if n == name:
                return t, off
        raise KeyError(name)

    def path(self, name: str) -> list[tuple[str, Any, int]] | None:
        """The fields (name, C type, byte offset in its struct) from this struct to its member
        ``name``: the member itself, or the anonymous struct or union members it is in first
        (``struct { int tag; union { float f; int i; }; }``: ``s.f``). None when there is none."""
        for n, t, off in self.fields:
            if n == name:
                return [(n, t, off)]
        for n, t, off in self.fields:
            if n.startswith("(anonymous") and isinstance(t, tuple) and t[0] == "struct":
                sub = t[1].path(name)
                if sub is not None:
                    return [(n, t, off), *sub]
        return None

    def scalars(self) -> list[tuple[DType, int]]:
        """(scalar type, byte offset) of every scalar in a value of the struct, nested ones
        flattened (a union's: its first member's, the one an initialiser sets)."""
        out: list[tuple[DType, int]] = []
        for _n, t, off in self.fields[:1] if self.union else self.fields:
            out.extend((st, off + o) for st, o in _flat(t))
        return out


@dataclass
class _SVal:
    """A struct value: its fields' values (Values, or _SVal for nested structs); a union's
    (:attr:`_Struct.storage`) holds one member's value, which has all its bytes."""

    st: _Struct
    vals: dict[str, Any]


#: the half-precision classes of the prelude: scalars of these WAVE types
_HALF_TYPES = {"__half": ty.f16, "__nv_bfloat16": ty.bf16}


def _ctype(t: Any) -> Any:
    """The canonical clang type ``t`` as a DType (scalars), ('ptr', T), ('arr', T, n) (n = 0: an
    array of unknown size) or ('struct', _Struct); None when not supported."""
    cx = _cx
    t = t.get_canonical()
    k = t.kind
    if k == cx.TypeKind.POINTER:
        e = _ctype(t.get_pointee())
        return ("ptr", e) if e is not None and not (isinstance(e, tuple) and e[0] == "ptr") else None
    if k in (cx.TypeKind.CONSTANTARRAY, cx.TypeKind.INCOMPLETEARRAY):
        e = _ctype(t.get_array_element_type())
        n = t.get_array_size() if k == cx.TypeKind.CONSTANTARRAY else 0
        return ("arr", e, n) if e is not None and not (isinstance(e, tuple) and e[0] == "ptr") else None
    if k == cx.TypeKind.ENUM:
        return _ctype(t.get_declaration().enum_type)
    if k == cx.TypeKind.RECORD:
        decl = t.get_declaration()
        if decl.spelling in _HALF_TYPES:
            return _HALF_TYPES[decl.spelling]
        fields = []
        for f in t.get_fields():
            ft = _ctype(f.type)
            if ft is None or f.is_bitfield() or (isinstance(ft, tuple) and ft[0] in ("ptr",)):
                return None
            if isinstance(ft, tuple) and ft[0] == "arr" and ft[2] == 0:
                return None
            if _anonymous_member(f) and isinstance(ft, tuple) and ft[0] == "struct":
                # an anonymous struct or union member: its members are named as the struct's own
                # (_Struct.path); the field itself gets a name no C field can have
                leaf = _named_leaf(f.type)
                if leaf is None:
                    return None
                off = (t.get_offset(leaf) - f.type.get_offset(leaf)) // 8
                fields.append((f"(anonymous member {len(fields)})", ft, off))
                continue
            fields.append((f.spelling, ft, t.get_offset(f.spelling) // 8))
        if not fields or decl.spelling == "__aw_dim3":
            return None
        union = decl.kind == cx.CursorKind.UNION_DECL
        name = decl.spelling
        if not name or name.startswith(("(unnamed", "(anonymous")):
            name = "(anonymous union)" if union else "(anonymous struct)"
        # WAVE's loads and stores are naturally aligned (spec §5): a packed layout
        # (__attribute__((packed)), #pragma pack) puts members, or the elements of an array of
        # the struct, where no load of theirs may go
        for fname, ft, off in fields:
            if off % _align(ft):
                raise CompileError(f"{_decl_where(decl)}: {name}: member {fname!r} at byte offset {off} is not "
                                   f"aligned to its {_align(ft)} bytes (a packed layout); WAVE's loads and stores "
                                   "are naturally aligned, so the CUDA front end takes naturally aligned members only")
        need = max(_align(ft) for _, ft, _ in fields)
        if t.get_align() < need:
            raise CompileError(f"{_decl_where(decl)}: {name}: aligned to {t.get_align()} bytes, less than its members' "
                               f"{need} (a packed layout: in an array of it, members land unaligned); WAVE's loads "
                               "and stores are naturally aligned, so the CUDA front end takes naturally aligned "
                               "structs only")
        return ("struct", _Struct(name, t.get_size(), t.get_align(), tuple(fields), union, _decl_where(decl)))
    name = t.spelling.replace("const ", "").replace("volatile ", "").strip()
    return _SCALAR.get(name)


def _walk(c: Any) -> Any:
    """Cursor ``c`` and everything under it in preorder (clang.cindex's ``walk_preorder``
    without its recursion: a generator a level, which a deep expression overflows)."""
    stack = [c]
    while stack:
        x = stack.pop()
        yield x
        stack.extend(reversed(list(x.get_children())))


def _anonymous_member(f: Any) -> bool:
    """Field ``f`` is an anonymous struct or union member (``union { float a; int b; };``, whose
    members are named as the enclosing struct's), not a named field of an unnamed type."""
    return bool(_cx.conf.lib.clang_Cursor_isAnonymousRecordDecl(f.type.get_declaration()))


def _named_leaf(t: Any) -> str | None:
    """The name of a named member of record type ``t``, looking through anonymous members (whose
    members clang's offset query finds by name)."""
    for f in t.get_fields():
        if not _anonymous_member(f):
            return f.spelling
        leaf = _named_leaf(f.type)
        if leaf is not None:
            return leaf
    return None


def _flat(t: Any) -> list[tuple[DType, int]]:
    if isinstance(t, DType):
        return [(t, 0)]
    if t[0] == "struct":
        return t[1].scalars()
    if t[0] == "arr":
        es = _size(t[1])
        return [(st, i * es + o) for i in range(t[2]) for st, o in _flat(t[1])]
    return []


def _all_scalars(t: Any) -> set[DType]:
    """The scalar types in C type ``t``, every member of a union included."""
    if isinstance(t, DType):
        return {t}
    if t[0] == "arr":
        return _all_scalars(t[1])
    return set().union(*(_all_scalars(ft) for _n, ft, _o in t[1].fields))


def _buffer_elem(t: Any) -> DType:
    """The ABI element type of a buffer of C type ``t``: a scalar's own type (bool: u8); a
    struct's (or union's) when all its scalars have one type and no padding (``float4``: f32),
    else u8."""
    if isinstance(t, DType):
        return ty.u8 if t is ty.bool_ else t
    flat = _flat(t)
    kinds = _all_scalars(t)
    if len(kinds) == 1:
        (st,) = kinds
        if st is not ty.bool_ and len(flat) * _size(st) == _size(t):
            return st
    return ty.u8


def _align(t: Any) -> int:
    if isinstance(t, DType):
        return _size(t)
    if t[0] == "arr":
        return _align(t[1])
    if t[0] == "struct":
        return t[1].align
    return 8


def _is_const(t: Any) -> bool:
    t = t.get_canonical()
    while t.kind in (_cx.TypeKind.CONSTANTARRAY, _cx.TypeKind.INCOMPLETEARRAY):
        t = t.get_array_element_type()
    return t.is_const_qualified()


def _vt(t: DType) -> DType:
    """Register type of a C scalar type (narrow integers live in 32-bit registers)."""
    if t is ty.bool_:
        return ty.pred
    return ty.value_type_of_element(t) if t in ty.NARROW_TYPES else t


def _size(t: Any) -> int:
    if isinstance(t, DType):
        return 1 if t is ty.bool_ else t.scalar.nbytes
    if t[0] == "arr":
        return _size(t[1]) * t[2]
    if t[0] == "struct":
        return t[1].size
    return 8


@dataclass
class _Ptr:
    """A pointer value: ``space`` 'device' (buffer ``buf``) or 'local' (shared memory); ``off``
    the byte offset (None: 0) plus ``imm``; ``pointee`` its C element type."""

    space: str
    buf: int
    off: Value | None
    imm: int
    pointee: Any


@dataclass
class _PtrVar:
    """A pointer local: fixed buffer, byte offset held in a u64 variable."""

    space: str
    buf: int
    var: Value
    pointee: Any


@dataclass
class _VarRef:
    """The address of a local variable (``&x``), as a pointer that is only dereferenced:
    ``place`` the variable's place, ``pointee`` its C type."""

    place: Any
    pointee: Any


class CudaLowering:
    """Lowers one ``__global__`` function (and the ``__device__`` functions it calls, inlined)."""

    def __init__(self, tu: Any, fn: Any, path: str, dynamic_shared: int = 0) -> None:
        self.tu, self.fn, self.path = tu, fn, path
        self.body: list[ir.Node] = []
        self.args: list[tuple[str, Any]] = []
        self.params: list[Param] = []
        self.local_memory = 0
        self.scopes: list[dict[str, Any]] = [{}]
        self.cur: Any = fn
        self.ret_stack: list[Any] = []
        self.loop_kinds: list[Value | None] = []  # per loop: the break flag of a continue body
        self._inline_depth = 0
        #: a warp built-in (or warpSize) was used: the kernel's results may depend on W
        self.wave_dependent = False
        #: the first ``volatile`` memory access (a cursor) and the number of ``__syncwarp`` calls:
        #: volatile accesses compile only in a kernel that calls ``__syncwarp`` (:meth:`_volatile`)
        self.volatile_at: Any = None
        self.syncwarps = 0
        #: the C element type of each buffer parameter (struct layouts for the launch's checks)
        self.buffer_ctypes: dict[str, Any] = {}
        #: file-scope variables by USR: the __constant__ buffers
        self.globals: dict[str, Any] = {}
        #: bytes of dynamic shared memory (``extern __shared__``, sized at launch): offset 0
        self.dynamic_shared = dynamic_shared
        self.uses_dynamic_shared = False
        self.local_memory = -(-dynamic_shared // 16) * 16
        #: ``warpSize`` as a compile-time constant (the body lowered for W = 32, see build), or None
        self.warp_const: int | None = None
        #: byte offset of each static __shared__ variable, by declaration
        self.shared_at: dict[tuple[Any, ...], int] = {}
        #: printf call sites (PrintFormat) and the print buffer's argument index
        self.prints: list[Any] = []
        self.print_arg: int | None = None
        #: the loop hint of the pragma before the statement being lowered (pragma_stmt): 1 keep
        #: the loop rolled, N > 1 unroll by N, "auto" the default, None no pragma
        self._loop_hint: Any = None
        #: the functions being lowered, outermost first (the kernel, then inlined __device__
        #: functions): assert's message names the innermost
        self.functions: list[Any] = [fn]

    # ------------------------------------------------------------------ helpers
    def err(self, c: Any, msg: str) -> CompileError:
        return CompileError(f"{_where(c.location, self.path)}: {msg}")

    def refuse(self, c: Any, what: str | None = None) -> CompileError:
        what = what or c.kind.name.lower().replace("_", " ")
        return self.err(c, f"not supported by the CUDA front end yet: {what} "
                        "(docs/guide/cuda.md lists what is)")

    def emit(self, mn: str, *ops: Any) -> Op:
        op = Op(BY_MNEMONIC[mn], list(ops), None)
        self.body.append(op)
        return op

    def const(self, value: Any, t: DType) -> Value:
        if t is ty.pred:
            p = Value(ty.pred)
            self.emit("setp.true" if value else "setp.false", p)
            return p
        v = Value(t, "c")
        self.emit(mnemonic("movi", type=t), v, literal_bits(value, t))
        return v

    def alu(self, op: str, t: DType, *srcs: Value) -> Value:
        r = Value(t)
        self.emit(tr.alu_mnemonic(op, t), r, *srcs)
        return r

    def mov(self, dst: Value, src: Value) -> None:
        if dst.type is ty.pred:
            self.emit("mov.pred", dst, PredUse(src))
        else:
            self.emit("mov.b64" if dst.type.bits == 64 else "mov.b32", dst, src)

    def as_pred(self, v: Value) -> PredUse:
        if v.type is ty.pred:
            return PredUse(v)
        p = Value(ty.pred)
        self.emit(tr.compare_mnemonic("ne", v.type), p, v, self.const(0, v.type))
        return PredUse(p)

    def convert(self, v: Value, src: DType, dst: DType, c: Any) -> Value:
        """C's value conversion of ``v`` (C type ``src``) to C type ``dst``."""
        if src is dst:
            return v
        if dst is ty.bool_:
            return self.as_pred(v).value
        if src is ty.bool_:
            r = Value(_vt(dst) if dst.is_int else ty.u32)
            self.emit("selp.b32", r, self.const(1, ty.u32), self.const(0, ty.u32), PredUse(v))
            if dst.is_float or dst.bits == 64:
                return self.convert(r, ty.u32, dst, c)
            return r
        vs, vd = _vt(src), _vt(dst)
        if vs is not vd:
            r = Value(vd)
            if vs.is_int and vd.is_int and vs.bits == vd.bits:
                self.mov(r, v)
            else:
                self.emit(tr.conversion_mnemonic(vs, vd), r, v)
            v = r
        if dst in ty.NARROW_TYPES:  # wrap to the narrow width (two's complement)
            bits = dst.scalar.bits
            if dst.is_signed:
                k = self.const(32 - bits, ty.u32)
                v = self.alu("shr", ty.i32, self.alu("shl", ty.i32, v, k), k)
            else:
                v = self.alu("and", ty.u32, v, self.const((1 << bits) - 1, ty.u32))
        return v

    def union_storage(self, st: _Struct, c: Any) -> DType:
        """The storage type of union ``st`` used as a value or a local (:attr:`_Struct.storage`);
        CompileError at ``c`` naming the union for one whose members are not all scalars of its
        size."""
        if st.storage is None:
            raise self.refuse(c, f"a value or local of union {st.name!r} ({st.where}): only a union whose "
                              f"members are all integer or float scalars of its size ({st.size} bytes) is a value; "
                              "the members of any union in memory are read and written through a pointer (p->f)")
        return st.storage

    def reinterpret(self, v: Value, src: DType, dst: DType) -> Value:
        """The bytes of C scalar ``v`` (type ``src``) as a value of C type ``dst`` of the same size
        (a union member read through another): a register copy, the narrow integers wrapped."""
        if src in ty.NARROW_TYPES or dst in ty.NARROW_TYPES:  # same size: a two's complement wrap
            r = self.convert(v, src, dst, None)
            if r is not v:
                return r
        r = Value(_vt(dst))
        self.mov(r, v)
        return r

    def lookup(self, name: str, c: Any) -> Any:
        """The binding of the name ``c`` refers to: the innermost scope's, by declaration first
        (the elements of a function parameter pack are declarations of one name, bound by
        declaration only, :meth:`_bind_params`), then by name."""
        ref = c.referenced if c is not None and c.kind == _cx.CursorKind.DECL_REF_EXPR else None
        key = ("decl", ref) if ref is not None and ref.kind == _cx.CursorKind.PARM_DECL else None
        for s in reversed(self.scopes):
            if key is not None and key in s:
                return s[key]
            if name in s:
                return s[name]
        what = f"reference to {name!r}" if name else "a reference to a template parameter or other entity"
        raise self.refuse(c, f"{what} (only parameters, locals and the built-in variables)")

    # ------------------------------------------------------------------ entry
    def build(self) -> None:
        cx = _cx
        cparams = list(self.fn.get_arguments())
        keys = _param_keys(cparams)
        names = _launch_names(cparams)
        body = next((ch for ch in self.fn.get_children() if ch.kind == cx.CursorKind.COMPOUND_STMT), None)
        written = _written(body) if body is not None else set()
        for i, p in enumerate(cparams):
            t = _ctype(p.type)
            name = names[i]
            if name is None:
                raise self.err(p, f"parameter {i} ({p.spelling!r}): its launch name is taken by another parameter "
                               "(the elements of a parameter pack 'a' are named a_0, a_1 ...)")
            key = keys[i] if keys[i] else name
            if isinstance(t, tuple) and t[0] == "ptr" and not (isinstance(t[1], tuple) and t[1][0] == "arr"):
                elem = t[1]
                const = p.type.get_canonical().get_pointee().is_const_qualified()
                acc = Access.READ if const else Access.READWRITE
                ann = ty.BufferType(_buffer_elem(elem), acc)
                self.params.append(Param(name, "buffer", ann))
                self.args.append((name, ann))
                self.buffer_ctypes[name] = elem
                if p in written:  # p++, p += n: a pointer variable into its buffer, from offset 0
                    var = Value(ty.u64, name, is_var=True)
                    self.mov(var, self.const(0, ty.u64))
                    self.scopes[0][key] = _PtrVar("device", len(self.args) - 1, var, elem)
                else:
                    self.scopes[0][key] = _Ptr("device", len(self.args) - 1, None, 0, elem)
            elif isinstance(t, DType) and t in (ty.i32, ty.u32, ty.i64, ty.u64, ty.f32, ty.f64):
                self.params.append(Param(name, "scalar", t))
                self.args.append((name, t))
                var = Value(t, name, is_var=True)
                self.emit("ldarg.b64" if t.bits == 64 else "ldarg.b32", var, len(self.args) - 1)
                self.scopes[0][key] = ("var", var, t)
            else:
                raise self.refuse(p, f"a parameter of type {p.type.spelling!r}")
        # the __constant__ variables the kernel reads: read-only buffers after the parameters
        for v in _constant_vars(self.fn, self.path):
            t = _ctype(v.type)
            if t is None:
                raise self.refuse(v, f"a __constant__ variable of type {v.type.spelling!r}")
            elem = t[1] if isinstance(t, tuple) and t[0] == "arr" else t
            if v.spelling in self.scopes[0]:
                raise self.refuse(v, f"__constant__ variable {v.spelling!r} named like a kernel parameter")
            ann = ty.BufferType(_buffer_elem(elem), Access.READ, constant=True)  # the ABI's constant hint
            init = _constant_init(v, t, ann.elem)
            self.params.append(Param(v.spelling, "buffer", ann, init if init is not None else inspect.Parameter.empty))
            self.args.append((v.spelling, ann))
            self.buffer_ctypes[v.spelling] = elem
            self.globals[v.get_usr()] = ("place", _Ptr("device", len(self.args) - 1, None, 0, t), t)
        if body is None:
            raise self.err(self.fn, f"kernel {self.fn.spelling!r} has no body")
        head = len(self.body)
        self.stmt(body)
        if self.wave_dependent and not self.prints:
            self._specialise_w32(body, head)

    def _specialise_w32(self, body: Any, head: int) -> None:
        """A kernel that uses the warp built-ins or ``warpSize``: its body once more for W = 32,
        where the CUDA warp is the whole wave (``warpSize`` the constant 32, shuffles WAVE's own,
        loops over ``warpSize`` unrolled), chosen at run time by ``if W == 32`` (one uniform branch
        at the start; a backend that knows W drops the other body, :mod:`anywave.backends.
        lowering.control`). Both bodies compute what CUDA defines (docs/guide/cuda.md, "Warps at
        every W"), so the results are the same at every W; the generic body stays for the others."""
        generic = self.body[head:]
        del self.body[head:]
        saved = self.body
        self.body = []
        self.warp_const = 32
        try:
            self.stmt(body)
        finally:
            self.warp_const = None
            special, self.body = self.body, saved
        w = Value(ty.u32)
        self.emit("mov.sr", w, SpecialRegister.WAVE_WIDTH)
        p = Value(ty.pred)
        self.emit("setp.eq.u32", p, w, self.const(32, ty.u32))
        self.body.append(ir.If(PredUse(p), special, generic))

    # ------------------------------------------------------------------ statements
    def block(self, c: Any) -> list[ir.Node]:
        saved = self.body
        self.body = []
        self.scopes.append({})
        try:
            self.stmt(c)
        finally:
            self.scopes.pop()
            out, self.body = self.body, saved
        return out

    def stmt(self, c: Any) -> None:
        K = _cx.CursorKind
        self.cur = c
        k = c.kind
        if k == K.COMPOUND_STMT:
            self.scopes.append({})
            try:
                for ch in c.get_children():
                    self.stmt(ch)
            finally:
                self.scopes.pop()
        elif k == K.DECL_STMT:
            for d in c.get_children():
                if d.kind in _TYPE_DECLS:  # a local type (typedef, using, struct ...): nothing to run
                    continue
                if d.kind != K.VAR_DECL:
                    raise self.refuse(d)
                self.var_decl(d)
        elif k == K.NULL_STMT:
            pass
        elif k == K.IF_STMT:
            ch = list(c.get_children())
            if any(x.kind in (K.DECL_STMT, K.VAR_DECL) for x in ch):
                raise self.refuse(c, "a declaration in an if condition")
            cond = self.cond(ch[0])
            node = ir.If(cond, self.block(ch[1]), self.block(ch[2]) if len(ch) > 2 else [])
            self.body.append(node)
        elif k in (K.FOR_STMT, K.WHILE_STMT, K.DO_STMT):
            self.loop(c)
        elif k == K.BREAK_STMT:
            if not self.loop_kinds:
                raise self.refuse(c, "break outside a loop (switch)")
            flag = self.loop_kinds[-1]
            if flag is not None:  # inside the one-pass body loop of a continue: leave both
                self.mov(flag, self.const(True, ty.pred))
            self.body.append(ir.Break())
        elif k == K.CONTINUE_STMT:
            if not self.loop_kinds:
                raise self.refuse(c, "continue outside a loop")
            flag = self.loop_kinds[-1]
            # the loop's body runs in a one-pass loop of its own (see _body): leaving it is
            # continuing (the increment of a for, the test of a do follow); a while has none
            self.body.append(ir.Break() if flag is not None else ir.Continue())
        elif k == K.RETURN_STMT:
            self.ret(c)
        elif k.is_expression() or k == K.UNEXPOSED_EXPR:
            self.expr(c, discard=True)
        elif k == K.UNEXPOSED_STMT and _pragma(c) is not None:
            self.pragma_stmt(c)
        elif k == K.UNEXPOSED_STMT and _attributes(c) is not None:
            names = _attributes(c)
            inner = [x for x in c.get_children() if not x.kind.is_attribute()]
            if len(inner) != 1 or not set(names) <= _HARMLESS_ATTRIBUTES:
                raise self.refuse(c, f"the statement attribute [[{', '.join(names)}]] (only "
                                  f"{', '.join(sorted(_HARMLESS_ATTRIBUTES))}, which change nothing)")
            self.stmt(inner[0])
        else:
            raise self.refuse(c)

    def pragma_stmt(self, c: Any) -> None:
        """A statement under a loop-hint pragma (clang's attributed statement): ``#pragma unroll``,
        ``#pragma unroll N``, ``#pragma nounroll``, ``#pragma clang loop unroll(...)`` before a
        loop. They never change what the loop computes: the hint chooses how a ``for`` loop is
        unrolled (:meth:`loop`: ``unroll 1``/``nounroll``/``unroll(disable)`` keep it rolled,
        ``unroll N`` runs N iterations per test where the loop has the counted shape, bare
        ``unroll`` the default); before another statement it is ignored. Any other pragma clang
        keeps in the AST is refused by name (pragmas clang does not know it drops, with a
        warning)."""
        words = _pragma(c)
        inner = [x for x in c.get_children() if not x.kind.is_attribute()]
        if len(inner) != 1:
            raise self.refuse(c, f"#pragma {' '.join(words)}")
        hint = _loop_hint(words)
        if hint is None:
            raise self.refuse(c, f"#pragma {' '.join(words)} (only the loop hints #pragma unroll [N], "
                              "#pragma nounroll and #pragma clang loop unroll(...) are taken)")
        self._loop_hint = hint if inner[0].kind == _cx.CursorKind.FOR_STMT else None
        try:
            self.stmt(inner[0])
        finally:
            self._loop_hint = None

    def ret(self, c: Any) -> None:
        ch = list(c.get_children())
        if not self.ret_stack:  # the kernel: this lane is done
            self.body.append(ir.Halt())
            return
        slot = self.ret_stack[-1]
        if slot["flag"] is None:  # the function's last statement: its value is the call's
            if ch:
                slot["value"] = self.rvalue(ch[0])
            return
        # an early return: the value to the result variable, then out of the function's one-pass
        # loop (every loop of the function is followed by a break on the flag, see _after_loop)
        if ch:
            v, t = self.rvalue(ch[0])
            if not isinstance(slot["t"], DType) or isinstance(v, (_Ptr, _SVal)):
                raise self.refuse(c, "an early return of a pointer or struct from a __device__ function")
            self.mov(slot["var"], self.convert(v, t, slot["t"], ch[0]))
        self.mov(slot["flag"], self.const(True, ty.pred))
        self.body.append(ir.Break())

    def _after_loop(self) -> None:
        """After a loop inside a ``__device__`` function with early returns: leave the enclosing
        loop too when a return was taken."""
        if self.ret_stack and self.ret_stack[-1]["flag"] is not None:
            self.body.append(ir.Break(PredUse(self.ret_stack[-1]["flag"])))

    def loop(self, c: Any) -> None:
        K = _cx.CursorKind
        ch = list(c.get_children())
        # the loop hint of a pragma just before this loop (pragma_stmt), not of loops inside it
        hint, self._loop_hint = self._loop_hint, None
        self.scopes.append({})
        saved = self.body
        try:
            if c.kind == K.FOR_STMT:
                # children: [init] [cond] [inc] body, absent parts left out: read them by token
                init, cond, inc, body = self._for_parts(c, ch)
                trips = self._full_unroll_plan(init, cond, inc, body) if hint != 1 else None
                if trips is not None and isinstance(hint, int) and len(trips[1]) > hint:
                    trips = None  # #pragma unroll N below the trip count: N iterations per test
                if trips is not None:
                    self._fully_unrolled(*trips, body)
                    return
                if init is not None:
                    self.stmt(init)
                plan = self._unroll_plan(cond, inc, body, hint) if hint != 1 else None
                if plan is not None:
                    self.body = []
                    self._unrolled(plan, cond, inc, body)
                    saved.append(ir.Loop(self.body))
                self.body = []
                if cond is not None:
                    p = self.cond(cond)
                    self.body.append(ir.Break(PredUse(p.value, not p.negated)))
                self._body(body)
                if inc is not None:
                    self.expr(inc, discard=True)
            elif c.kind == K.WHILE_STMT:
                self.body = []
                p = self.cond(ch[0])
                self.body.append(ir.Break(PredUse(p.value, not p.negated)))
                self.loop_kinds.append(None)
                try:
                    self.body.extend(self.block(ch[1]))
                finally:
                    self.loop_kinds.pop()
            else:  # do { } while (cond): the test at the end
                self.body = []
                self._body(ch[0])
                p = self.cond(ch[1])
                self.body.append(ir.Break(PredUse(p.value, not p.negated)))
            node = ir.Loop(self.body)
        finally:
            self.body = saved
            self.scopes.pop()
        self.body.append(node)
        self._after_loop()

    # ------------------------------------------------------------------ loop unrolling
    def _full_unroll_plan(self, init: Any, cond: Any, inc: Any, body: Any) -> tuple[Any, list[int], Any] | None:
        """``(variable, values, C type)`` when ``for (T k = C0; cond; inc) body`` runs a trip count
        known at compile time: ``k`` declared by the loop (an integer), its start, the bound and
        the step integer constant expressions (literals, macros, enumerators, template values,
        constants at file scope, ``warpSize`` where it is a constant: :attr:`warp_const`), ``cond``
        a comparison of ``k`` with the bound, ``inc`` ``++``/``--`` or ``k op= c`` (``+ - * / <<
        >>``); the body writes no ``k`` and has no ``break``/``continue``/``return`` of its own.
        ``values`` are the values of ``k`` in order, computed with C's arithmetic for the types
        clang gives (at most :data:`FULL_UNROLL_TRIPS` of them, their number times the body's size
        within :data:`FULL_UNROLL_BUDGET` clang cursors). Every lane runs the same trips, so the
        body may hold barriers and warp built-ins."""
        K = _cx.CursorKind
        if init is None or cond is None or inc is None or init.kind != K.DECL_STMT:
            return None
        decls = list(init.get_children())
        if len(decls) != 1 or decls[0].kind != K.VAR_DECL:
            return None
        var = decls[0]
        vt = _ctype(var.type)
        if vt not in (ty.i32, ty.u32, ty.i64, ty.u64):
            return None
        ini = [x for x in var.get_children() if x.kind.is_expression() or x.kind == K.UNEXPOSED_EXPR]
        start = self._cint(ini[-1], {}) if ini else None
        if start is None:
            return None
        nodes = 0
        for x in _walk(body):
            nodes += 1
            if x.kind in (K.RETURN_STMT, K.GOTO_STMT, K.SWITCH_STMT):
                return None
        if _has_own_jump(body) or var in _written(body) or var in self._address_taken():
            return None
        k = _wrap(start[0], vt)
        values: list[int] = []
        while True:
            c = self._cint(cond, {var: (k, vt)})
            if c is None:
                return None
            if not c[0]:
                break
            values.append(k)
            if len(values) > FULL_UNROLL_TRIPS or len(values) * nodes > FULL_UNROLL_BUDGET:
                return None
            nk = self._step(inc, var, k, vt)
            if nk is None:
                return None
            k = nk
        return var, values, vt

    def _step(self, inc: Any, var: Any, k: int, vt: DType) -> int | None:
        """The value of ``k`` after the increment expression ``inc`` (C's arithmetic), or None
        for another form."""
        K = _cx.CursorKind
        if inc.kind == K.UNARY_OPERATOR:
            op = _UN.get(_cx.conf.lib.clang_getCursorUnaryOperatorKind(inc))
            target = _strip(list(inc.get_children())[0])
            if op not in ("++", "post++", "--", "post--") or target.kind != K.DECL_REF_EXPR or target.referenced != var:
                return None
            return _wrap(k + (1 if "++" in op else -1), vt)
        if inc.kind != K.COMPOUND_ASSIGNMENT_OPERATOR:
            return None
        op = _BIN.get(_cx.conf.lib.clang_getCursorBinaryOperatorKind(inc))
        target, amount = inc.get_children()
        t = _strip(target)
        if op not in ("+=", "-=", "*=", "/=", "<<=", ">>=") or t.kind != K.DECL_REF_EXPR or t.referenced != var:
            return None
        a = self._cint(amount, {})
        if a is None:
            return None
        bop = op[:-1]
        ct = _promote(vt) if bop in ("<<", ">>") else _common(_promote(vt), _promote(a[1]))
        r = _arith_const(bop, _wrap(k, ct), _wrap(a[0], ct) if bop not in ("<<", ">>") else a[0], ct)
        return None if r is None else _wrap(r, vt)

    def _cint(self, c: Any, env: dict[Any, tuple[int, DType]]) -> tuple[int, DType] | None:
        """``(value, C type)`` of integer expression ``c`` when it is a compile-time constant (the
        variables in ``env`` bound to values), with C's conversions and arithmetic; else None."""
        K = _cx.CursorKind
        k = c.kind
        t = _ctype(c.type)
        ch = [x for x in c.get_children() if x.kind not in (K.TYPE_REF, K.TEMPLATE_REF, K.NAMESPACE_REF)]
        ints = (ty.i32, ty.u32, ty.i64, ty.u64, ty.bool_, ty.i8, ty.u8, ty.i16, ty.u16)
        if t not in ints:
            return None
        if k == K.PAREN_EXPR and len(ch) == 1:
            return self._cint(ch[0], env)
        if k in (K.INTEGER_LITERAL, K.CHARACTER_LITERAL):
            return int(_evaluate(c, t)), t
        if k == K.CXX_BOOL_LITERAL_EXPR:
            return int(next(c.get_tokens()).spelling == "true"), t
        if k in (K.UNEXPOSED_EXPR, K.CSTYLE_CAST_EXPR, K.CXX_STATIC_CAST_EXPR, K.CXX_FUNCTIONAL_CAST_EXPR):
            if len(ch) != 1:
                return None
            v = self._cint(ch[-1], env)
            if v is None:
                return None
            return (int(v[0] != 0) if t is ty.bool_ else _wrap(v[0], t)), t
        if k == K.DECL_REF_EXPR:
            ref = c.referenced
            if ref is None:  # a substituted template value parameter
                return self._cint(ch[0], env) if len(ch) == 1 else None
            if ref in env:
                return env[ref]
            if ref.kind == K.ENUM_CONSTANT_DECL:
                return _wrap(ref.enum_value, t), t
            if (ref.kind == K.VAR_DECL and c.spelling == "warpSize" and self.warp_const is not None
                    and _in_prelude(ref.location, self.path)):
                return self.warp_const, ty.i32
            if (ref.kind == K.VAR_DECL and _is_const(ref.type) and ref.semantic_parent is not None
                    and ref.semantic_parent.kind in (K.TRANSLATION_UNIT, K.NAMESPACE)):
                ini = [x for x in ref.get_children() if x.kind.is_expression() or x.kind == K.UNEXPOSED_EXPR]
                v = self._cint(ini[-1], {}) if ini else None
                return None if v is None else (_wrap(v[0], t), t)
            return None
        if k == K.UNARY_OPERATOR and len(ch) == 1:
            op = _UN.get(_cx.conf.lib.clang_getCursorUnaryOperatorKind(c))
            v = self._cint(ch[0], env)
            if v is None or op not in ("+", "-", "~", "!"):
                return None
            r = {"+": v[0], "-": -v[0], "~": ~v[0], "!": int(v[0] == 0)}[op]
            return _wrap(r, t) if t is not ty.bool_ else (r, t)
        if k == K.BINARY_OPERATOR and len(ch) == 2:
            op = _BIN.get(_cx.conf.lib.clang_getCursorBinaryOperatorKind(c))
            a, b = self._cint(ch[0], env), self._cint(ch[1], env)
            if a is None or b is None or op is None:
                return None
            if op in _CMP_OF:
                ct = a[1]
                x, y = _wrap(a[0], ct), _wrap(b[0], ct)
                return int({"<": x < y, ">": x > y, "<=": x <= y, ">=": x >= y, "==": x == y, "!=": x != y}[op]), t
            if op in ("&&", "||"):
                return int(bool(a[0]) and bool(b[0]) if op == "&&" else bool(a[0]) or bool(b[0])), t
            if op not in _ALU_OF:
                return None
            r = _arith_const(op, a[0], b[0], t)
            return None if r is None else (_wrap(r, t), t)
        return None

    def _fully_unrolled(self, var: Any, values: list[int], vt: DType, body: Any) -> None:
        """The body once per value of the loop variable, which each copy reads as a constant."""
        for v in values:
            self.scopes.append({var.spelling: ("var", self.const(v, _vt(vt)), vt)})
            self.loop_kinds.append(None)
            try:
                self.body.extend(self.block(body))
            finally:
                self.loop_kinds.pop()
                self.scopes.pop()

    def _unroll_plan(self, cond: Any, inc: Any, body: Any, hint: Any = None) -> tuple[int, Any] | None:
        """``(factor, step)`` when the ``for`` loop ``(...; cond; inc) body`` is a counted loop that
        can run ``factor`` iterations per test (see :meth:`_unrolled`), else None.

        The shape: ``cond`` is ``k < E`` or ``k <= E`` on an integer local ``k``; ``inc`` is ``k++``,
        ``++k``, ``k += s`` with ``s`` a positive integer constant or ``warpSize``; ``E`` is
        invariant in the loop (literals, parameters and locals the loop does not write, the built-in
        variables, arithmetic on them, elements of read-only buffers at such indices); the body
        writes neither ``k`` nor what ``E`` reads, holds no loop of its own (innermost loops only),
        no ``break``/``continue``/``return``, and calls (directly or through ``__device__``
        functions) no barrier, fence, warp built-in or ``printf`` (lanes whose loops run different
        numbers of unrolled steps must not meet at different collective instructions). The factor
        grows as the body shrinks (:data:`_UNROLL_FACTORS`); ``hint`` N (``#pragma unroll N``) sets it
        (at most :data:`PRAGMA_UNROLL_MOST`, the body times N within :data:`FULL_UNROLL_BUDGET`)."""
        K = _cx.CursorKind
        if cond is None or inc is None or cond.kind != K.BINARY_OPERATOR:
            return None
        if _BIN.get(_cx.conf.lib.clang_getCursorBinaryOperatorKind(cond)) not in ("<", "<="):
            return None
        lhs, rhs = cond.get_children()
        if _ctype(lhs.type) not in (ty.i32, ty.u32, ty.i64, ty.u64) or _ctype(rhs.type) != _ctype(lhs.type):
            return None  # the comparison's type (after C's conversions): an integer one
        iv = _strip(lhs)
        if iv.kind != K.DECL_REF_EXPR or iv.referenced is None or iv.referenced.kind != K.VAR_DECL:
            return None
        var = iv.referenced
        entry = next((sc[var.spelling] for sc in reversed(self.scopes) if var.spelling in sc), None)
        if not (isinstance(entry, tuple) and entry[0] == "var" and entry[2] in (ty.i32, ty.u32, ty.i64, ty.u64)):
            return None
        # the increment: k++ / ++k / k += s
        step: Any = 1
        if inc.kind == K.UNARY_OPERATOR:
            if _UN.get(_cx.conf.lib.clang_getCursorUnaryOperatorKind(inc)) not in ("++", "post++"):
                return None
            target = list(inc.get_children())[0]
        elif inc.kind == K.COMPOUND_ASSIGNMENT_OPERATOR:
            if _BIN.get(_cx.conf.lib.clang_getCursorBinaryOperatorKind(inc)) != "+=":
                return None
            target, amount = inc.get_children()
            a = _strip(amount)
            if (a.kind == K.DECL_REF_EXPR and a.spelling == "warpSize" and a.referenced is not None
                    and _in_prelude(a.referenced.location, self.path)):
                step = amount
            else:
                v = _int_constant(amount)
                if v is None or not 0 < v < 1 << 20:
                    return None
                step = v
        else:
            return None
        t = _strip(target)
        if t.kind != K.DECL_REF_EXPR or t.referenced != var:
            return None
        # the body: innermost, no early exits, no collective or ordered calls, writes neither k nor E
        nodes = 0
        seen: set[str] = set()
        for x in _walk(body):
            nodes += 1
            if x.kind in (K.FOR_STMT, K.WHILE_STMT, K.DO_STMT, K.BREAK_STMT, K.CONTINUE_STMT, K.RETURN_STMT,
                          K.GOTO_STMT, K.SWITCH_STMT, K.ASM_STMT, K.MS_ASM_STMT):
                return None
            if x.kind == K.CALL_EXPR and not self._unroll_call_ok(x, seen):
                return None
        factor = next((f for f, most in _UNROLL_FACTORS if nodes <= most), 0)
        if isinstance(hint, int):
            factor = min(hint, PRAGMA_UNROLL_MOST)
            if factor * nodes > FULL_UNROLL_BUDGET:
                factor = max(1, FULL_UNROLL_BUDGET // nodes)
        if factor < 2:
            return None
        # a variable whose address is taken anywhere (``int* pn = &n;`` before the loop) may be
        # written through the pointer inside the body: never invariant
        written = _written(body) | self._address_taken()
        if var in written or not self._invariant(rhs, written | _written(inc) | {var}):
            return None
        return factor, step

    def _address_taken(self) -> set[Any]:
        """The variables whose address the source takes anywhere (``&v``, ``&v[i]``, ``&v.f``):
        a pointer to one may write it where its name does not appear (computed once)."""
        got = getattr(self, "_addressed", None)
        if got is None:
            got = self._addressed = _address_taken(self.tu.cursor, self.path)
        return got

    def _unroll_call_ok(self, call: Any, seen: set[str]) -> bool:
        """Whether ``call`` (and the ``__device__`` functions it reaches) runs no barrier, fence,
        warp built-in or ``printf``."""
        K = _cx.CursorKind
        name = call.spelling
        if name in _warp.WARP_BUILTINS or name in _UNROLL_BLOCKERS:
            return False
        callee = call.referenced
        if callee is None or _in_prelude(callee.location, self.path):
            return True
        d = callee.get_definition()
        if d is None:
            return True  # a constructor or a declaration without a body: nothing to run
        usr = d.get_usr()
        if usr in seen:
            return True
        seen.add(usr)
        for x in _walk(d):
            if x.kind == K.CALL_EXPR and x != call and not self._unroll_call_ok(x, seen):
                return False
        return True

    def _invariant(self, c: Any, written: set[Any]) -> bool:
        """Whether expression ``c`` has one value in every iteration of a loop that writes the
        variables ``written`` (and no memory ``c`` reads)."""
        K = _cx.CursorKind
        k = c.kind
        ch = list(c.get_children())
        if k in (K.INTEGER_LITERAL, K.CXX_BOOL_LITERAL_EXPR, K.CHARACTER_LITERAL):
            return True
        if k in (K.UNEXPOSED_EXPR, K.PAREN_EXPR, K.CSTYLE_CAST_EXPR, K.CXX_STATIC_CAST_EXPR,
                 K.CXX_FUNCTIONAL_CAST_EXPR, K.CONDITIONAL_OPERATOR):
            return bool(ch) and all(self._invariant(x, written) for x in ch
                                    if x.kind not in (K.TYPE_REF, K.TEMPLATE_REF, K.NAMESPACE_REF))
        if k == K.DECL_REF_EXPR:
            ref = c.referenced
            if ref is None:  # a substituted template value parameter
                return all(self._invariant(x, written) for x in ch)
            return ref.kind in (K.PARM_DECL, K.VAR_DECL, K.ENUM_CONSTANT_DECL) and ref not in written
        if k == K.MEMBER_REF_EXPR:  # threadIdx.x ... (the built-in variables)
            return (len(ch) == 1 and ch[0].kind == K.DECL_REF_EXPR and ch[0].spelling in _SR
                    and ch[0].referenced is not None and _in_prelude(ch[0].referenced.location, self.path))
        if k == K.BINARY_OPERATOR:
            op = _BIN.get(_cx.conf.lib.clang_getCursorBinaryOperatorKind(c))
            return op is not None and op not in ("=", ",") and all(self._invariant(x, written) for x in ch)
        if k == K.UNARY_OPERATOR:
            op = _UN.get(_cx.conf.lib.clang_getCursorUnaryOperatorKind(c))
            return op in ("+", "-", "~", "!") and all(self._invariant(x, written) for x in ch)
        if k == K.ARRAY_SUBSCRIPT_EXPR and len(ch) == 2:
            # an element of a read-only buffer (a const pointer parameter or a __constant__
            # array: the kernel writes no such memory, and buffers do not alias, spec §4.2)
            base = _strip(ch[0])
            if base.kind != K.DECL_REF_EXPR or base.referenced is None:
                return False
            ref = base.referenced
            if ref.kind == K.PARM_DECL:
                pt = ref.type.get_canonical()
                ro = pt.kind == _cx.TypeKind.POINTER and pt.get_pointee().is_const_qualified()
            else:
                ro = ref.get_usr() in self.globals
            return ro and ref not in written and self._invariant(ch[1], written)
        return False

    def _unrolled(self, plan: tuple[int, Any], cond: Any, inc: Any, body: Any) -> None:
        """The body of the unrolled loop that runs before the original one (``self.body``):

            while (k < E && E - k > (factor - 1) * s) { factor times: body; k += s }

        ``E - k`` is computed in the comparison's unsigned type: where ``k < E`` holds it is the
        exact distance, so the test says that ``k + j*s < E`` for every ``j < factor``; every step
        then runs an iteration that the original loop runs too, the original loop (after it)
        runs the rest, and the two together make exactly the original's iterations, in order.
        (``<=``: ``E - k >= (factor - 1) * s``.) The condition has no side effects (invariant
        operands: ``_unroll_plan``), so testing it once for ``factor`` iterations changes
        nothing else."""
        factor, step = plan
        le = _BIN.get(_cx.conf.lib.clang_getCursorBinaryOperatorKind(cond)) == "<="
        lhs, rhs = cond.get_children()
        a, ta = self.rvalue(lhs)
        b, tb = self.rvalue(rhs)
        p = Value(ty.pred)
        self.emit(tr.compare_mnemonic("le" if le else "lt", _vt(ta)), p, a, b)
        ut = ty.u64 if _vt(ta).bits == 64 else ty.u32
        dist = self.alu("sub", ut, self.convert(b, tb, ut, rhs), self.convert(a, ta, ut, lhs))
        if isinstance(step, int):
            need = self.const((factor - 1) * step, ut)
        else:
            s, st = self.rvalue(step)
            need = self.alu("mul", ut, self.convert(s, st, ut, step), self.const(factor - 1, ut))
        q = Value(ty.pred)
        self.emit(tr.compare_mnemonic("ge" if le else "gt", ut), q, dist, need)
        go = Value(ty.pred)
        self.emit("and.pred", go, PredUse(p), PredUse(q))
        self.body.append(ir.Break(PredUse(go, True)))
        for _ in range(factor):
            self.loop_kinds.append(None)
            try:
                self.body.extend(self.block(body))
            finally:
                self.loop_kinds.pop()
            self.expr(inc, discard=True)

    def _body(self, body: Any) -> None:
        """The body of a for or do loop. With a ``continue`` of its own it runs inside a one-pass
        loop: ``continue`` leaves that loop (to the increment or the test), ``break`` sets a flag
        and leaves it, and the flag then leaves the outer loop."""
        if not _has_own_continue(body):
            self.loop_kinds.append(None)
            try:
                self.body.extend(self.block(body))
            finally:
                self.loop_kinds.pop()
            return
        flag = Value(ty.pred, "brk", is_var=True)
        self.mov(flag, self.const(False, ty.pred))
        self.loop_kinds.append(flag)
        try:
            inner = self.block(body)
        finally:
            self.loop_kinds.pop()
        self.body.append(ir.Loop([*inner, ir.Break()]))
        self._after_loop()
        self.body.append(ir.Break(PredUse(flag)))

    def _for_parts(self, c: Any, ch: list[Any]) -> tuple[Any, Any, Any, Any]:
        toks = [t.spelling for t in c.get_tokens()]
        # the header "for ( init ; cond ; inc )": which parts are present
        depth, semis, i = 0, [], 0
        for i, s in enumerate(toks):
            if s == "(":
                depth += 1
            elif s == ")":
                depth -= 1
                if depth == 0:
                    break
            elif s == ";" and depth == 1:
                semis.append(i)
        if len(semis) != 2:
            raise self.refuse(c, "this form of for loop")
        have = [semis[0] > 2, semis[1] > semis[0] + 1, i > semis[1] + 1]
        it = iter(ch)
        parts = [next(it) if h else None for h in have]
        return parts[0], parts[1], parts[2], next(it)

    def var_decl(self, d: Any) -> None:
        K = _cx.CursorKind
        ch = list(d.get_children())
        shared = any(x.kind == K.CUDASHARED_ATTR for x in ch)
        t = _ctype(d.type)
        if t is None:
            raise self.refuse(d, f"a variable of type {d.type.spelling!r}")
        if isinstance(t, tuple) and t[0] == "arr":  # the other children are the sizes
            init = [x for x in ch if x.kind in (K.INIT_LIST_EXPR, K.STRING_LITERAL)]
        else:
            init = [x for x in ch if x.kind.is_expression() or x.kind == K.UNEXPOSED_EXPR]
        if shared:
            if init and not (init[-1].kind == K.CALL_EXPR and not list(init[-1].get_children())):
                raise self.refuse(d, "an initialised __shared__ variable")
            if isinstance(t, tuple) and t[0] == "arr" and t[2] == 0:
                # extern __shared__ T name[]: the dynamic shared memory sized at launch, at offset 0
                # (every such declaration names the same bytes, as in CUDA)
                if not d.storage_class == _cx.StorageClass.EXTERN:
                    raise self.refuse(d, "a __shared__ array of unknown size that is not extern")
                self.uses_dynamic_shared = True
                self.scopes[-1][d.spelling] = ("place", _Ptr("local", 0, None, 0, t), t)
                return
            # one object per declaration (static storage, as in CUDA), however often its scope is
            # lowered: a loop body copied by unrolling, a __device__ function inlined twice
            key = (d.hash, d.type.spelling, d.location.line, d.location.column, d.spelling)
            base = self.shared_at.get(key)
            if base is None:
                align = max(8, _align(t))
                self.local_memory = (self.local_memory + align - 1) // align * align
                base = self.shared_at[key] = self.local_memory
                self.local_memory += _size(t)
            self.scopes[-1][d.spelling] = ("place", _Ptr("local", 0, None, base, t), t)
            return
        if d.storage_class == _cx.StorageClass.STATIC and not _is_const(d.type):
            raise self.refuse(d, "a static local variable")
        if isinstance(t, tuple) and t[0] == "arr":
            raise self.refuse(d, "a local (per-thread) array")
        if isinstance(t, tuple) and t[0] == "ptr":  # a pointer local
            if not init:
                raise self.refuse(d, "a pointer local without an initialiser")
            p = self.rvalue(init[-1])[0]
            if isinstance(p, _VarRef):  # float* q = &x: q names x
                self.scopes[-1][d.spelling] = p
                return
            if not isinstance(p, _Ptr):
                raise self.refuse(d, "this pointer initialiser")
            var = Value(ty.u32 if p.space == "local" else ty.u64, d.spelling, is_var=True)
            self.mov(var, self._offv(p))
            self.scopes[-1][d.spelling] = _PtrVar(p.space, p.buf, var, p.pointee)
            return
        if isinstance(t, tuple) and t[0] == "struct":
            v = None
            if init and not (init[-1].kind == K.CALL_EXPR and not list(init[-1].get_children())):
                v, _ = self.rvalue(init[-1])
                if not isinstance(v, _SVal):
                    raise self.refuse(init[-1], "this struct initialiser")
            self.scopes[-1][d.spelling] = self.new_struct_var(t[1], d.spelling, v, d)
            return
        var = Value(_vt(t), d.spelling, is_var=True)
        if init:
            v, vt = self.rvalue(init[-1])
            if isinstance(v, (_Ptr, _SVal)):
                raise self.refuse(init[-1], "a pointer or struct used as a number")
            self.mov(var, self.convert(v, vt, t, d))
        self.scopes[-1][d.spelling] = ("var", var, t)

    def new_struct_var(self, st: _Struct, name: str, init: _SVal | None, c: Any = None) -> Any:
        """A struct local: one variable per scalar field (nested structs nested), set from
        ``init`` when given."""
        fields: dict[str, Any] = {}
        if st.union:  # one variable, the union's bytes: each member a bit cast of it
            storage = Value(_vt(self.union_storage(st, c or self.cur)), name, is_var=True)
            fields = {fn: ("uview", storage, ft, st.storage) for fn, ft, _off in st.fields}
            place = ("svar", fields, ("struct", st))
            if init is not None:
                self.store(place, init, c or self.cur)
            return place
        for fn, ft, _off in st.fields:
            if isinstance(ft, DType):
                fields[fn] = ("var", Value(_vt(ft), f"{name}.{fn}", is_var=True), ft)
            elif ft[0] == "struct":
                fields[fn] = self.new_struct_var(ft[1], f"{name}.{fn}", None, c)
            else:
                raise self.refuse(c or self.cur, f"a struct local with an array member ({st.name}.{fn})")
        place = ("svar", fields, ("struct", st))
        if init is not None:
            self.store(place, init, c or self.cur)
        return place

    # ------------------------------------------------------------------ expressions
    def cond(self, c: Any) -> PredUse:
        v, t = self.rvalue(c)
        if isinstance(v, _Ptr):  # "not null": true, as in implicit()
            return PredUse(self.const(True, ty.pred))
        return self.as_pred(v)

    def ctype_of(self, c: Any) -> Any:
        t = _ctype(c.type)
        if t is None:
            raise self.refuse(c, f"an expression of type {c.type.spelling!r}")
        return t

    def rvalue(self, c: Any) -> tuple[Any, Any]:
        """(value, C type): a Value of a scalar, or a _Ptr."""
        r = self.expr(c)
        if isinstance(r, tuple) and r and r[0] == "lv":
            return self.load(r[1], c), r[2]
        return r

    def expr(self, c: Any, discard: bool = False) -> Any:
        """An rvalue (value, C type) or an lvalue ('lv', place, C type)."""
        K = _cx.CursorKind
        self.cur = c
        k = c.kind
        if k in (K.UNEXPOSED_EXPR, K.PAREN_EXPR):
            ch = list(c.get_children())
            if len(ch) != 1:
                t = _ctype(c.type)  # offsetof(T, f) and other integer constants clang evaluates
                if isinstance(t, DType) and t.is_int and _cx.conf.lib.clang_Cursor_Evaluate(c):
                    return self.const(_evaluate(c, t), _vt(t)), t
                raise self.refuse(c, "this expression")
            inner = ch[0]
            if k == K.PAREN_EXPR:
                return self.expr(inner, discard)
            if inner.kind in (K.DECL_REF_EXPR, K.MEMBER_REF_EXPR) and inner.type.kind == _cx.TypeKind.FUNCTIONPROTO:
                return self.expr(inner)
            return self.implicit(c, inner)
        if k in (K.CXX_UNARY_EXPR, K.SIZE_OF_PACK_EXPR):  # sizeof / alignof / sizeof...: a constant clang evaluates
            t = self.ctype_of(c)
            if not isinstance(t, DType) or not t.is_int:
                raise self.refuse(c, "this sizeof/alignof expression")
            return self.const(_evaluate(c, t), _vt(t)), t
        if k in (K.INTEGER_LITERAL, K.FLOATING_LITERAL):
            t = self.ctype_of(c)
            return self.const(_evaluate(c, t), _vt(t)), t
        if k == K.CXX_BOOL_LITERAL_EXPR:
            return self.const(next(c.get_tokens()).spelling == "true", ty.pred), ty.bool_
        if k == K.DECL_REF_EXPR:
            return self.decl_ref(c)
        if k == K.MEMBER_REF_EXPR:
            return self.member(c)
        if k == K.INIT_LIST_EXPR:
            return self.init_list(c)
        if k == K.ARRAY_SUBSCRIPT_EXPR:
            self._volatile(c)
            base, idx = c.get_children()
            p = self.pointer(base)
            return ("lv", ("mem", self.offset(p, idx, c)), p.pointee)
        if k == K.UNARY_OPERATOR:
            return self.unary(c, discard)
        if k == K.BINARY_OPERATOR:
            return self.binary(c)
        if k == K.COMPOUND_ASSIGNMENT_OPERATOR:
            return self.compound(c)
        if k in (K.CSTYLE_CAST_EXPR, K.CXX_STATIC_CAST_EXPR, K.CXX_FUNCTIONAL_CAST_EXPR,
                 K.CXX_REINTERPRET_CAST_EXPR, K.CXX_CONST_CAST_EXPR):
            ch = [x for x in c.get_children() if x.kind not in (K.TYPE_REF, K.TEMPLATE_REF, K.NAMESPACE_REF)]
            if c.type.get_canonical().kind == _cx.TypeKind.VOID and k != K.CXX_REINTERPRET_CAST_EXPR:
                # (void)x: x evaluated for its side effects, its value discarded
                if len(ch) == 1:
                    self.expr(ch[0], discard=True)
                return self.const(0, ty.i32), ty.i32
            t = self.ctype_of(c)
            if not ch:  # T(): value-initialised
                return self._zero(t, c), t
            v, st = self.rvalue(ch[-1])
            if isinstance(t, tuple) and t[0] == "ptr":
                if not isinstance(v, _Ptr):
                    raise self.refuse(c, "a number cast to a pointer")
                if (v.space == "device" and _is_const(ch[-1].type.get_canonical().get_pointee())
                        and not _is_const(c.type.get_canonical().get_pointee())):
                    raise self.refuse(c, "a pointer cast that drops const")
                return _Ptr(v.space, v.buf, v.off, v.imm, t[1]), t
            if isinstance(v, _Ptr) or k == K.CXX_REINTERPRET_CAST_EXPR:
                raise self.refuse(c, "a pointer cast to a number")
            if isinstance(t, tuple):
                if isinstance(v, _SVal) and t == st:
                    return v, t
                raise self.refuse(c, "a cast to this type")
            return self.convert(v, st, t, c), t
        if k == K.CONDITIONAL_OPERATOR:
            cnd, a, b = c.get_children()
            if c.type.get_canonical().kind == _cx.TypeKind.VOID:  # c ? f() : (void)0: one side runs
                p = self.cond(cnd)
                then = self._capture(lambda: self.expr(a, discard=True))
                orelse = self._capture(lambda: self.expr(b, discard=True))
                self.body.append(ir.If(p, then, orelse))
                return self.const(0, ty.i32), ty.i32
            t = self.ctype_of(c)
            if isinstance(t, tuple):
                raise self.refuse(c, "?: on pointers or structs")
            p = self.cond(cnd)
            var = Value(_vt(t), "sel", is_var=True)
            then = self._capture(lambda: self.mov(var, self.convert(*self.rvalue(a), t, a)))
            orelse = self._capture(lambda: self.mov(var, self.convert(*self.rvalue(b), t, b)))
            self.body.append(ir.If(p, then, orelse))
            return var, t
        if k == K.CALL_EXPR:
            return self.call(c, discard)
        if k == K.CXX_NULL_PTR_LITERAL_EXPR:
            raise self.refuse(c, "a null pointer (nullptr)")
        raise self.refuse(c)

    def decl_ref(self, c: Any) -> Any:
        """A name: a local, a parameter, a ``__constant__`` variable, an enumerator, a template's
        value parameter, a constant at file scope, ``warpSize``."""
        K = _cx.CursorKind
        ref = c.referenced
        if ref is None:  # a value template parameter, substituted: its value is the child
            ch = list(c.get_children())
            if len(ch) == 1:
                return self.expr(ch[0])
            raise self.refuse(c, "this name")
        if ref.kind == K.ENUM_CONSTANT_DECL:
            t = self.ctype_of(c)
            return self.const(ref.enum_value, _vt(t)), t
        if ref.kind == K.VAR_DECL and not any(c.spelling in sc for sc in self.scopes):
            if c.spelling == "warpSize" and _in_prelude(ref.location, self.path):
                self.wave_dependent = True
                return _warp.warp_size(self), ty.i32
            g = self.globals.get(ref.get_usr())
            if g is not None:
                return ("lv", ("mem", g[1]), g[2])
            if ref.semantic_parent is not None and ref.semantic_parent.kind in (K.TRANSLATION_UNIT, K.NAMESPACE):
                # a constant at file scope (const int N = 256; constexpr float K = 0.5f): its value
                t = _ctype(ref.type)
                init = [x for x in ref.get_children() if x.kind.is_expression() or x.kind == K.UNEXPOSED_EXPR]
                if isinstance(t, DType) and _is_const(ref.type) and init:
                    return self.const(_evaluate(init[-1], t), _vt(t)), t
                raise self.refuse(c, f"reference to {c.spelling!r} (a variable at file scope: only "
                                  "__constant__ variables and constants)")
        b = self.lookup(c.spelling, c)
        if isinstance(b, (_Ptr, _VarRef)):
            return b, ("ptr", b.pointee)
        if isinstance(b, _PtrVar):
            return _Ptr(b.space, b.buf, b.var, 0, b.pointee), ("ptr", b.pointee)
        if b[0] in ("var", "svar"):
            return ("lv", b, b[2])
        if b[0] == "place":
            return ("lv", ("mem", b[1]), b[2])
        raise self.refuse(c)

    def member(self, c: Any) -> Any:
        """``s.f`` and ``p->f``; ``threadIdx.x`` and the other built-in variables."""
        K = _cx.CursorKind
        ch = list(c.get_children())
        if len(ch) == 1 and ch[0].kind == K.DECL_REF_EXPR and ch[0].spelling in _SR and c.spelling in "xyz" \
                and ch[0].referenced is not None and _in_prelude(ch[0].referenced.location, self.path):
            r = Value(ty.u32)
            self.emit("mov.sr", r, _SR[ch[0].spelling]["xyz".index(c.spelling)])
            return r, ty.u32
        if len(ch) != 1 or c.referenced is None or c.referenced.kind != K.FIELD_DECL:
            raise self.refuse(c, "a member function or this member")
        base = ch[0]
        if base.type.get_canonical().kind == _cx.TypeKind.POINTER:  # p->f
            place: Any = self.deref(base)
            st = _ctype(base.type.get_canonical().get_pointee())
        else:
            r = self.expr(base)
            if isinstance(r, tuple) and r and r[0] == "lv":
                place, st = r[1], r[2]
            elif isinstance(r, tuple) and r and isinstance(r[0], _SVal):
                v = r[0]
                chain = v.st.path(c.spelling)
                if chain is None:
                    raise self.refuse(c, f"member {c.spelling!r}")
                for fn, ft, _off in chain:
                    if v.st.union:  # its one member's value, seen as this member
                        ((vn, x),) = v.vals.items()
                        vt = v.st.field(vn)[0]
                        if not isinstance(vt, DType) or not isinstance(ft, DType):
                            raise self.refuse(c, f"member {c.spelling!r} of a union value")
                        v = self.reinterpret(x, vt, ft)
                    else:
                        v = v.vals[fn]
                return v, chain[-1][1]
            else:
                raise self.refuse(c, "a member of this expression")
        if not (isinstance(st, tuple) and st[0] == "struct"):
            raise self.refuse(c, "a member of this type")
        chain = st[1].path(c.spelling)
        if chain is None:
            raise self.refuse(c, f"member {c.spelling!r}")
        ft = chain[-1][1]
        if place[0] == "mem":
            self._volatile(c)
            p = place[1]
            off = sum(o for _n, _t, o in chain)
            return ("lv", ("mem", _Ptr(p.space, p.buf, p.off, p.imm + off, ft)), ft)
        if place[0] == "svar":
            for fn, _t, _o in chain:
                place = place[1][fn]
            return ("lv", place, ft)
        raise self.refuse(c, "a member of this expression")

    def init_list(self, c: Any) -> Any:
        """``{a, b, ...}`` for a struct (fields in order, the rest zero) or a scalar."""
        t = self.ctype_of(c)
        ch = list(c.get_children())
        if isinstance(t, DType):
            if len(ch) > 1:
                raise self.refuse(c, "this initialiser list")
            if not ch:
                return self._zero(t, c), t
            v, vt = self.rvalue(ch[0])
            return self.convert(v, vt, t, c), t
        if not (isinstance(t, tuple) and t[0] == "struct") or len(ch) > len(t[1].fields):
            raise self.refuse(c, "this initialiser list")
        fields = t[1].fields[:1] if t[1].union else t[1].fields  # a union's initialiser: its first member
        if t[1].union:
            self.union_storage(t[1], c)
            if len(ch) > 1:
                raise self.refuse(c, "this initialiser list")
        vals: dict[str, Any] = {}
        for i, (fn, ft, _off) in enumerate(fields):
            if i < len(ch):
                v, vt = self.rvalue(ch[i])
                if isinstance(ft, tuple) != isinstance(v, _SVal) or isinstance(v, (_Ptr, _VarRef)):
                    raise self.refuse(ch[i], f"this initialiser of member {fn!r} (a struct member's needs its "
                                      "own braces)")
                vals[fn] = v if isinstance(ft, tuple) else self.convert(v, vt, ft, ch[i])
            else:
                vals[fn] = self._zero(ft, c)
        return _SVal(t[1], vals), t

    def _zero(self, t: Any, c: Any) -> Any:
        if isinstance(t, DType):
            return self.const(False if t is ty.bool_ else 0, _vt(t))
        if t[0] == "struct":
            if t[1].union:  # its first member, all its bytes
                self.union_storage(t[1], c)
                fn, ft, _ = t[1].fields[0]
                return _SVal(t[1], {fn: self._zero(ft, c)})
            return _SVal(t[1], {fn: self._zero(ft, c) for fn, ft, _ in t[1].fields})
        raise self.refuse(c, "a value-initialised array or pointer")

    def _volatile(self, c: Any) -> None:
        """Note a ``volatile`` access. It compiles as an ordinary access: WAVE's memory model
        (spec §5.3) orders accesses of different lanes only by synchronisation, never by
        ``volatile``, so warp-synchronous code is correct with ``__syncwarp()`` (a
        ``barrier.wave``) between the writes and the reads. A kernel with volatile accesses and
        no ``__syncwarp`` at all is the pre-Volta idiom that relies on lock step, a data race
        that gives wrong results on some targets: it is refused (:func:`compile_cuda`); a missing
        ``__syncwarp`` in a kernel that has some is reported by the checked emulator."""
        if self.volatile_at is None and c.type.is_volatile_qualified():
            self.volatile_at = c

    def check_volatile(self) -> None:
        """Refuse the warp-synchronous idiom without ``__syncwarp`` (see :meth:`_volatile`)."""
        if self.volatile_at is not None and not self.syncwarps:
            raise self.err(self.volatile_at,
                           "a volatile memory access in a kernel without __syncwarp(): warp-synchronous code "
                           "(lanes of a warp exchanging values through memory) relies on lock step, which no "
                           "target guarantees (a data race, spec §5.3): write __syncwarp() between the writes and "
                           "the reads (CUDA 9+), or exchange the values with __shfl*_sync "
                           "(docs/guide/cuda.md, 'Warp-synchronous code')")

    def _capture(self, f: Any) -> list[ir.Node]:
        saved = self.body
        self.body = []
        try:
            f()
        finally:
            out, self.body = self.body, saved
        return out

    def implicit(self, c: Any, inner: Any) -> Any:
        """An implicit cast: lvalue→rvalue, array→pointer decay, or a value conversion."""
        dst = _ctype(c.type)
        if dst is ty.bool_ and _strip(inner).kind == _cx.CursorKind.STRING_LITERAL:
            return self.const(True, ty.pred), ty.bool_  # a string as a condition (assert(x && "why")): true
        r = self.expr(inner)
        src_t = _ctype(inner.type)
        if isinstance(dst, tuple) and dst[0] == "ptr":
            if not isinstance(src_t, tuple):
                raise self.refuse(c, "a null pointer or a number converted to a pointer (a pointer must point "
                                  "into a buffer or a __shared__ array)")
            if isinstance(r, tuple) and r[0] == "lv" and isinstance(src_t, tuple) and src_t[0] == "arr":
                place = r[1]
                if place[0] != "mem":
                    raise self.refuse(c)
                p = place[1]
                return _Ptr(p.space, p.buf, p.off, p.imm, src_t[1]), dst
            if isinstance(r, tuple) and r and isinstance(r[0], (_Ptr, _VarRef)):
                return r
            raise self.refuse(c, "this pointer conversion")
        if dst is None:
            raise self.refuse(c, f"a value of type {c.type.spelling!r}")
        if isinstance(r, tuple) and r and r[0] == "lv":
            if isinstance(dst, tuple) and dst[0] == "struct" and dst == r[2]:
                return r  # a struct lvalue through a no-op cast (to const): still an lvalue
            v, st = self.load(r[1], c), r[2]
        else:
            v, st = r
        if isinstance(v, _Ptr):
            if dst is ty.bool_:
                # a pointer as a condition (assert(p), if (p), !p, p && q): C's "not null", true here:
                # every pointer of the front end points into a buffer or a __shared__ array (a null
                # pointer, or a number converted to a pointer, is refused above)
                return self.const(True, ty.pred), ty.bool_
            raise self.refuse(c, "a pointer converted to a number")
        if isinstance(v, _SVal) or isinstance(dst, tuple):
            if isinstance(v, _SVal) and dst == st:
                return v, dst
            raise self.refuse(c, "this struct conversion")
        return self.convert(v, st, dst, c), dst

    def pointer(self, c: Any) -> _Ptr:
        return self._as_pointer(self.rvalue(c)[0], c)

    def _as_pointer(self, v: Any, c: Any) -> _Ptr:
        """The pointer value ``v`` of expression ``c`` (evaluated once by the caller), refused
        when it is the address of a local or not a pointer."""
        if isinstance(v, _VarRef):
            raise self.refuse(c, "arithmetic or indexing on the address of a local variable (only *p and p->f)")
        if not isinstance(v, _Ptr):
            raise self.refuse(c, "subscript of a non-pointer")
        return v

    def deref(self, c: Any) -> Any:
        """The place pointer expression ``c`` points at (memory, or a local whose address it is)."""
        v, _ = self.rvalue(c)
        if isinstance(v, _VarRef):
            return v.place
        return ("mem", self._as_pointer(v, c))

    def offset(self, p: _Ptr, idx_c: Any, c: Any, negate: bool = False) -> _Ptr:
        """``p + idx`` (elements of ``p.pointee``)."""
        v, t = self.rvalue(idx_c)
        if isinstance(v, _Ptr) or not (t.is_int and t is not ty.bool_):
            raise self.refuse(c, "a non-integer index")
        es = _size(p.pointee)
        vt = _vt(t)
        if negate:
            v = self.alu("sub", vt, self.const(0, vt), v)
        if p.space == "local":
            v32 = v if vt.bits == 32 else self.convert(v, t, ty.u32, c)
            term = self.alu("mul", v32.type, v32, self.const(es, v32.type)) if es != 1 else v32
            if term.type is not ty.u32:
                term = self.convert(term, term.type, ty.u32, c)
            off = term if p.off is None else self.alu("add", ty.u32, p.off, term)
            return _Ptr(p.space, p.buf, off, p.imm, p.pointee)
        if p.off is None and p.imm == 0 and vt.bits == 32:
            if es & (es - 1) == 0:
                term = self.alu("shl", vt, v, self.const(es.bit_length() - 1, ty.u32)) if es != 1 else v
            else:
                term = self.alu("mul", vt, v, self.const(es, vt))
            return _Ptr(p.space, p.buf, term, 0, p.pointee)
        v64 = self.convert(v, t, ty.i64 if t.is_signed else ty.u64, c)
        term = self.alu("mul", ty.u64, self.convert(v64, v64.type, ty.u64, c), self.const(es, ty.u64))
        return _Ptr(p.space, p.buf, self.alu("add", ty.u64, self._off64(p), term), 0, p.pointee)

    def step(self, p: _Ptr, n: int, c: Any) -> _Ptr:
        """``p + n`` for a constant number of elements ``n`` (C's pointer arithmetic: the byte
        offset moves by ``n`` times the element size, wrapping as the offset's type does)."""
        if not isinstance(p.pointee, (DType, tuple)) or isinstance(p.pointee, tuple) and p.pointee[0] == "ptr":
            raise self.refuse(c, "arithmetic on this pointer")
        d = n * _size(p.pointee)
        t = ty.u32 if p.space == "local" else ty.u64
        o = self._offv(p)
        o = self.alu("add" if d >= 0 else "sub", t, o, self.const(abs(d), t))
        return _Ptr(p.space, p.buf, o, 0, p.pointee)

    def _offv(self, p: _Ptr) -> Value:
        """The byte offset of ``p`` as one value: u32 in local memory, u64 in a buffer."""
        if p.space != "local":
            return self._off64(p)
        o = p.off if p.off is not None else self.const(0, ty.u32)
        return self.alu("add", ty.u32, o, self.const(p.imm, ty.u32)) if p.imm else o

    def _off64(self, p: _Ptr) -> Value:
        if p.space == "local":
            raise CompileError("internal: a 64-bit offset into shared memory")
        if p.off is None:
            return self.const(p.imm, ty.u64)
        o = p.off
        if o.type.bits == 32:
            o = self.convert(o, o.type, ty.i64 if o.type.is_signed else ty.u64, None)
            o = self.convert(o, o.type, ty.u64, None)
        if p.imm:
            o = self.alu("add", ty.u64, o, self.const(p.imm, ty.u64))
        return o

    def _addr(self, p: _Ptr) -> tuple[Any, bool]:
        if p.space == "local":
            return LocAddr(p.off if p.off is not None else self.const(0, ty.u32), p.imm), False
        off = p.off if p.off is not None else self.const(0, ty.u32)
        return DevAddr(p.buf, off, p.imm), off.type.bits == 64

    def load(self, place: Any, c: Any) -> Any:
        """The value at ``place``: a Value (scalars), or an _SVal (structs)."""
        if place[0] == "var":
            return place[1]
        if place[0] == "uview":  # a member of a union local: its bytes seen as the member's type
            return self.reinterpret(place[1], place[3], place[2])
        if place[0] == "svar":
            items = list(place[1].items())
            return _SVal(place[2][1], {fn: self.load(b, c) for fn, b in (items[:1] if place[2][1].union else items)})
        p: _Ptr = place[1]
        elem = p.pointee
        if isinstance(elem, tuple) and elem[0] == "struct":
            vals = {}
            if elem[1].union:
                self.union_storage(elem[1], c)
            for fn, ft, off in elem[1].fields[:1] if elem[1].union else elem[1].fields:
                if isinstance(ft, tuple) and ft[0] == "arr":
                    raise self.refuse(c, f"a struct value with an array member ({elem[1].name}.{fn})")
                vals[fn] = self.load(("mem", _Ptr(p.space, p.buf, p.off, p.imm + off, ft)), c)
            return _SVal(elem[1], vals)
        if not isinstance(elem, DType):
            raise self.refuse(c, "an array value")
        addr, wide = self._addr(p)
        if elem is ty.bool_:  # one byte, true when not 0 (C's bool in memory)
            r = Value(ty.u32)
            self.emit(mnemonic("ld", p.space, "u8", addr64=wide), r, addr)
            return self.as_pred(r).value
        nb = elem.scalar.nbytes
        kind = {8: "b64", 4: "b32"}.get(nb) or (("i16" if elem is ty.i16 else "u16") if nb == 2
                                                else ("i8" if elem is ty.i8 else "u8"))
        r = Value(_vt(elem))
        self.emit(mnemonic("ld", p.space, kind, addr64=wide), r, addr)
        return r

    def store(self, place: Any, v: Any, c: Any) -> None:
        if place[0] == "var":
            self.mov(place[1], v)
            return
        if place[0] == "uview":
            self.mov(place[1], self.reinterpret(v, place[2], place[3]))
            return
        if place[0] == "svar":
            for fn, val in v.vals.items():  # a union's value: its one member
                self.store(place[1][fn], val, c)
            return
        p: _Ptr = place[1]
        if p.space == "device" and self.args[p.buf][1].access is Access.READ:
            raise self.err(c, f"store through a pointer to const (parameter {self.args[p.buf][0]!r})")
        elem = p.pointee
        if isinstance(elem, tuple) and elem[0] == "struct":
            for fn, ft, off in elem[1].fields:
                if fn not in v.vals:  # a union's value has one member
                    continue
                if isinstance(ft, tuple) and ft[0] == "arr":
                    raise self.refuse(c, f"a struct value with an array member ({elem[1].name}.{fn})")
                self.store(("mem", _Ptr(p.space, p.buf, p.off, p.imm + off, ft)), v.vals[fn], c)
            return
        if not isinstance(elem, DType):
            raise self.refuse(c, "an array assignment")
        addr, wide = self._addr(p)
        if elem is ty.bool_:
            b = Value(ty.u32)
            self.emit("selp.b32", b, self.const(1, ty.u32), self.const(0, ty.u32), PredUse(v))
            self.emit(mnemonic("st", p.space, "b8", addr64=wide), addr, b)
            return
        nb = elem.scalar.nbytes
        self.emit(mnemonic("st", p.space, f"b{nb * 8}", addr64=wide), addr, v)

    def lvalue(self, c: Any) -> tuple[Any, Any]:
        r = self.expr(c)
        if not (isinstance(r, tuple) and r and r[0] == "lv"):
            if c.kind == _cx.CursorKind.DECL_REF_EXPR:
                b = self.lookup(c.spelling, c)
                if isinstance(b, _PtrVar):
                    return ("ptrvar", b), ("ptr", b.pointee)
                if isinstance(b, _VarRef):
                    raise self.refuse(c, "arithmetic or assignment on a pointer to a local variable (only *p "
                                      "and p->f)")
            raise self.refuse(c, "assignment to this expression")
        return r[1], r[2]

    def unary(self, c: Any, discard: bool) -> Any:
        op = _UN.get(_cx.conf.lib.clang_getCursorUnaryOperatorKind(c))
        (x,) = c.get_children()
        if op in ("++", "--", "post++", "post--"):
            place, t = self.lvalue(x)
            if place[0] == "ptrvar":  # C: the pointer steps by one element; postfix yields the old one
                pv = place[1]
                cur = _Ptr(pv.space, pv.buf, pv.var, 0, pv.pointee)
                old_p = cur
                if op.startswith("post") and not discard:
                    keep = Value(pv.var.type)
                    self.mov(keep, pv.var)
                    old_p = _Ptr(pv.space, pv.buf, keep, 0, pv.pointee)
                self.mov(pv.var, self._offv(self.step(cur, 1 if "++" in op else -1, c)))
                return (old_p if op.startswith("post") else cur), t
            if isinstance(t, tuple):
                raise self.refuse(c, "++/-- on this type")
            old = self.load(place, c)
            if place[0] == "var" and not discard and op.startswith("post"):
                keep = Value(old.type)
                self.mov(keep, old)
                old = keep
            vt = _vt(t)
            if t is ty.bool_ or not isinstance(t, DType):
                raise self.refuse(c, "++/-- on this type")
            ct = ty.i32 if t in ty.NARROW_TYPES else t
            one = self.const(1, _vt(ct))
            new = self.alu("add" if "++" in op else "sub", _vt(ct), self.convert(old, t, ct, c), one)
            new = self.convert(new, ct, t, c)
            self.store(place, new, c)
            del vt
            return (old, t) if op.startswith("post") else (new, t)
        if op == "*":
            self._volatile(c)
            v, _ = self.rvalue(x)  # once: the operand may have side effects (*p++)
            if isinstance(v, _VarRef):
                return ("lv", v.place, v.pointee)
            p = self._as_pointer(v, x)
            return ("lv", ("mem", p), p.pointee)
        if op == "&":
            r = self.expr(x)
            if isinstance(r, tuple) and r and r[0] == "lv" and r[1][0] == "mem":
                return r[1][1], ("ptr", r[2])
            if isinstance(r, tuple) and r and r[0] == "lv" and r[1][0] in ("var", "svar", "uview"):
                return _VarRef(r[1], r[2]), ("ptr", r[2])  # the address of a local: only dereferenced
            raise self.refuse(c, "& of this expression")
        v, t = self.rvalue(x)
        if isinstance(v, _Ptr):
            raise self.refuse(c, f"unary {op} on a pointer")
        if op == "+":
            return v, t
        if op == "-":
            return (self.alu("neg", v.type, v) if t.is_float else
                    self.alu("sub", v.type, self.const(0, v.type), v)), t
        if op == "~":
            return self.alu("not", v.type, v), t
        if op == "!":
            p = self.as_pred(v)
            r = Value(ty.pred)
            self.emit("mov.pred", r, PredUse(p.value, not p.negated))
            return r, ty.bool_
        raise self.refuse(c, f"unary operator {op or '?'}")

    def binary(self, c: Any) -> Any:
        op = _BIN.get(_cx.conf.lib.clang_getCursorBinaryOperatorKind(c))
        a, b = c.get_children()
        if op == "=":
            place, t = self.lvalue(a)
            v, vt = self.rvalue(b)
            if place[0] == "ptrvar":
                if not isinstance(v, _Ptr) or v.buf != place[1].buf or v.space != place[1].space:
                    raise self.refuse(c, "a pointer local assigned a pointer into another buffer")
                self.mov(place[1].var, self._offv(v))
                return _Ptr(v.space, v.buf, place[1].var, 0, v.pointee), t
            if isinstance(v, _Ptr):
                raise self.refuse(c, "a pointer stored as a number")
            v = self.convert(v, vt, t, c)
            self.store(place, v, c)
            return ("lv", place, t)
        if op in ("&&", "||"):
            r = Value(ty.pred, "sc", is_var=True)
            pa = self.cond(a)
            self.mov(r, self.pred_value(pa))
            rest = self._capture(lambda: self.mov(r, self.pred_value(self.cond(b))))
            self.body.append(ir.If(PredUse(r, op == "||"), rest, []))
            return r, ty.bool_
        if op == ",":
            self.expr(a, discard=True)
            return self.expr(b)
        if op is None:
            raise self.refuse(c, "this binary operator")
        va, ta = self.rvalue(a)
        if op in ("+", "-") and (isinstance(va, _Ptr) or isinstance(self.rvalue_peek(b), _Ptr)):
            if isinstance(va, _Ptr):
                if _ctype(b.type) is not None and isinstance(_ctype(b.type), tuple):
                    raise self.refuse(c, "pointer difference")
                return self.offset(va, b, c, negate=op == "-"), ta
            raise self.refuse(c, "integer + pointer (write pointer + integer)")
        vb, tb = self.rvalue(b)
        if isinstance(va, _Ptr) or isinstance(vb, _Ptr):
            raise self.refuse(c, f"operator {op} on pointers")
        if op in _CMP_OF:
            p = Value(ty.pred)
            if ta is ty.bool_:
                va, vb = self.convert(va, ty.bool_, ty.i32, c), self.convert(vb, ty.bool_, ty.i32, c)
                ta = ty.i32
            self.emit(tr.compare_mnemonic(_CMP_OF[op], _vt(ta)), p, va, vb)
            return p, ty.bool_
        t = self.ctype_of(c)
        return self.arith(op, t, va, vb, tb, c), t

    def rvalue_peek(self, c: Any) -> Any:
        t = _ctype(c.type)
        return _Ptr("device", 0, None, 0, None) if isinstance(t, tuple) else None

    def pred_value(self, p: PredUse) -> Value:
        if not p.negated:
            return p.value
        r = Value(ty.pred)
        self.emit("mov.pred", r, p)
        return r

    def arith(self, op: str, t: DType, va: Value, vb: Value, tb: DType, c: Any) -> Value:
        vt = _vt(t)
        if t is ty.bool_ or t in ty.NARROW_TYPES:
            raise self.refuse(c, f"operator {op} computed in {t.name}")
        if op in ("<<", ">>"):
            # the count has its own (promoted) type: C shifts by its value
            if _vt(tb).bits != 32:
                vb = self.convert(vb, tb, ty.u32, c)
            return self.alu(_ALU_OF[op], vt, va, vb)
        if op in ("&", "|", "^", "%") and t.is_float:
            raise self.refuse(c, f"operator {op} on floats")
        return self.alu(_ALU_OF[op], vt, va, vb)

    def compound(self, c: Any) -> Any:
        op = _BIN.get(_cx.conf.lib.clang_getCursorBinaryOperatorKind(c))
        a, b = c.get_children()
        place, t = self.lvalue(a)
        if place[0] == "ptrvar":
            if op not in ("+=", "-="):
                raise self.refuse(c, f"{op} on a pointer")
            pv = place[1]
            p = self.offset(_Ptr(pv.space, pv.buf, pv.var, 0, pv.pointee), b, c, negate=op == "-=")
            self.mov(pv.var, self._offv(p))
            return _Ptr(pv.space, pv.buf, pv.var, 0, pv.pointee), t
        old = self.load(place, c)
        vb, tb = self.rvalue(b)
        if isinstance(vb, _Ptr) or isinstance(t, tuple):
            raise self.refuse(c, f"{op} with a pointer")
        bop = op[:-1]
        if bop in ("<<", ">>"):
            ct = _promote(t)
        else:
            ct = _common(_promote(t), _promote(tb))  # C's computation type (usual conversions)
            vb = self.convert(vb, tb, ct, c)
        r = self.arith(bop, ct, self.convert(old, t, ct, c), vb, tb if bop in ("<<", ">>") else ct, c)
        self.store(place, self.convert(r, ct, t, c), c)
        return ("lv", place, t)

    def atomic(self, c: Any, op: str, args: list[Any], discard: bool) -> Any:
        """``atomicOp(p, [compare,] v)``: CUDA's atomics are relaxed, device scope on global memory
        (spec §8.6 ``atom``/``red``); the old value is returned."""
        p = self.pointer(args[0])
        t = p.pointee
        if t not in (ty.i32, ty.u32, ty.f32):
            raise self.refuse(c, f"a {t.name if isinstance(t, DType) else 'non-scalar'} atomic (the 32-bit ones only: "
                              "WAVE's atomics are 32-bit)")
        if p.space == "device" and self.args[p.buf][1].access is not Access.READWRITE:
            raise self.err(c, f"atomic on read-only buffer {self.args[p.buf][0]!r}")
        vals = []
        for a in args[1:]:
            v, at = self.rvalue(a)
            vals.append(self.convert(v, at, t, a))
        if op in ("add", "sub"):
            tname = "f32" if t is ty.f32 else "u32"
        elif op in ("min", "max"):
            tname = t.name
        else:
            tname = "b32"
        addr, wide = self._addr(p)
        if wide:
            raise self.err(c, "not supported by the CUDA front end yet: an atomic at a 64-bit offset "
                           "(index the pointer parameter with a 32-bit int)")
        so: tuple[Any, ...] = (Scope.DEVICE, MemoryOrder.RELAXED) if p.space == "device" else ()
        if discard and op not in ("exch", "cas"):
            self.emit(mnemonic("red", f"{p.space}.{op}", tname), addr, *vals, *so)
            return self.const(0, ty.i32), ty.i32
        r = Value(_vt(t))
        self.emit(mnemonic("atom", f"{p.space}.{op}", tname), r, addr, *vals, *so)
        return r, t

    def bits(self, c: Any, name: str, args: list[Any]) -> Any:
        """``__popc``/``__clz``/``__ffs``/``__brev`` and their ``ll`` forms (CUDA Math API,
        integer intrinsics): the ``ll`` forms on the two 32-bit halves."""
        v, t = self.rvalue(args[0])
        wide = name.endswith("ll")
        op = _BITS[name]
        at = ty.u64 if wide else ty.u32
        v = self.convert(v, t, at, c)
        if not wide:
            halves = [v]
        else:
            halves = [self.convert(v, ty.u64, ty.u32, c),
                      self.convert(self.alu("shr", ty.u64, v, self.const(32, ty.u32)), ty.u64, ty.u32, c)]

        def one(x: Value, m: str) -> Value:
            r = Value(ty.u32)
            self.emit(f"{m}.b32", r, x)
            return r

        if op == "brev":
            if not wide:
                return one(v, "brev"), ty.u32
            lo, hi = (self.convert(one(h, "brev"), ty.u32, ty.u64, c) for h in halves)
            return self.alu("or", ty.u64, self.alu("shl", ty.u64, lo, self.const(32, ty.u32)), hi), ty.u64
        if op == "popc":
            r = one(halves[0], "popc")
            if wide:
                r = self.alu("add", ty.u32, r, one(halves[1], "popc"))
        elif op == "clz":
            r = one(halves[-1], "clz")
            if wide:  # the high half's count, plus the low half's when the high half is 0
                p = Value(ty.pred)
                self.emit("setp.eq.u32", p, halves[1], self.const(0, ty.u32))
                both = self.alu("add", ty.u32, r, one(halves[0], "clz"))
                sel = Value(ty.u32)
                self.emit("selp.b32", sel, both, r, PredUse(p))
                r = sel
        else:  # __ffs: 1 + index of the least significant set bit, 0 for 0 (ctz gives 32 / 64)
            r = one(halves[0], "ctz")
            if wide:
                p = Value(ty.pred)
                self.emit("setp.eq.u32", p, halves[0], self.const(0, ty.u32))
                both = self.alu("add", ty.u32, r, one(halves[1], "ctz"))
                sel = Value(ty.u32)
                self.emit("selp.b32", sel, both, r, PredUse(p))
                r = sel
            r1 = self.alu("add", ty.u32, r, self.const(1, ty.u32))
            z = Value(ty.pred)
            self.emit("setp.eq.u32", z, r, self.const(64 if wide else 32, ty.u32))
            sel = Value(ty.u32)
            self.emit("selp.b32", sel, self.const(0, ty.u32), r1, PredUse(z))
            r = sel
        out = Value(ty.i32)
        self.mov(out, r)
        return out, ty.i32

    @property
    def cx(self) -> Any:
        return _cx

    def user_line(self, c: Any) -> int:
        return int(_where(c.location, self.path).rsplit(":", 2)[1])

    def user_file_line(self, c: Any) -> str:
        """``file:line`` of cursor ``c`` as the user names them (:func:`_where`)."""
        return _where(c.location, self.path).rsplit(":", 1)[0]

    def print_buffer(self) -> int:
        """The argument index of printf's hidden record buffer (the kernel's last argument)."""
        if self.print_arg is None:
            self.args.append((PRINT_ARG, ty.BufferType(ty.u32, Access.READWRITE)))
            self.print_arg = len(self.args) - 1
        return self.print_arg

    def call(self, c: Any, discard: bool) -> Any:
        K = _cx.CursorKind
        callee = c.referenced
        name = c.spelling
        args = _call_args(c)
        if callee is not None and callee.kind == K.CONSTRUCTOR:
            return self.construct(c, callee, args)
        if callee is not None and callee.kind == K.CONVERSION_FUNCTION:  # half -> float
            obj = next((x for x in c.get_children() if x.kind == K.MEMBER_REF_EXPR), None)
            base = list(obj.get_children()) if obj is not None else []
            t = self.ctype_of(c)
            if len(base) != 1 or not isinstance(t, DType):
                raise self.refuse(c, f"the conversion {name!r}")
            v, vt = self.rvalue(base[0])
            return self.convert(v, vt, t, c), t
        if callee is not None and callee.kind == K.CXX_METHOD and name == "operator=" and len(args) == 2:
            place, t = self.lvalue(args[0])
            v, vt = self.rvalue(args[1])
            if isinstance(t, DType):
                v = self.convert(v, vt, t, c)
            elif not (isinstance(v, _SVal) and vt == t):
                raise self.refuse(c, "this assignment")
            self.store(place, v, c)
            return ("lv", place, t)
        if callee is not None and callee.kind == K.CXX_METHOD and not _in_prelude(callee.location, self.path):
            raise self.refuse(c, f"a member function call ({name!r})")
        if name.startswith("__builtin_"):  # INFINITY, NAN ...: a constant clang evaluates
            t = self.ctype_of(c)
            if isinstance(t, DType) and _cx.conf.lib.clang_Cursor_Evaluate(c):
                return self.const(_evaluate(c, t), _vt(t)), t
            raise self.refuse(c, f"call of {name!r}")
        if callee is not None and _in_prelude(callee.location, self.path):
            if name == "__syncthreads" and not args:
                self.emit("barrier")
                return self.const(0, ty.i32), ty.i32
            if name in ("__threadfence", "__threadfence_block"):
                self.emit("fence", Scope.DEVICE if name == "__threadfence" else Scope.WORKGROUP, MemoryOrder.SEQ_CST)
                return self.const(0, ty.i32), ty.i32
            if name in _ATOMIC:
                return self.atomic(c, _ATOMIC[name], args, discard)
            if name in _warp.WARP_BUILTINS:
                return _warp.lower(self, c, name, args)
            if name == "__syncwarp":
                return _warp.syncwarp(self, args)
            if name in _BITS:
                return self.bits(c, name, args)
            if name == "__anywave_assert":  # assert(e) of <cassert>/<assert.h>
                return _builtins.assert_(self, c, args)
            if name == "__ldg":
                p = self.pointer(args[0])
                return self.load(("mem", p), c), p.pointee
            r = _builtins.lower(self, c, name, args)
            if r is not None:
                return r
            if not name.startswith("make_"):
                raise self.refuse(c, f"call of {name!r}")
        if callee is None or callee.kind != K.FUNCTION_DECL:
            raise self.refuse(c, f"call of {name!r}")
        return self.inline(c, callee, name, args)

    def construct(self, c: Any, ctor: Any, args: list[Any]) -> Any:
        """A constructor call: a struct's implicit copy (or default) constructor, or a
        ``half``/``__nv_bfloat16`` made from a number."""
        t = self.ctype_of(c)
        if not args:
            return self._zero(t, c), t
        if len(args) == 1:
            v, vt = self.rvalue(args[0])
            if isinstance(t, DType) and isinstance(vt, DType):
                return self.convert(v, vt, t, c), t
            if isinstance(v, _SVal) and vt == t:
                return v, t
        raise self.refuse(c, f"constructor {ctor.displayname!r} (only a struct's implicit ones)")

    def inline(self, c: Any, callee: Any, name: str, args: list[Any]) -> Any:
        """A call of a ``__device__`` function defined in the source (a template's instance
        included), inlined: the arguments evaluated in the caller's scope and bound as the
        callee's locals; an early ``return`` leaves a one-pass loop around the body."""
        K = _cx.CursorKind
        defn = callee.get_definition()
        if defn is None and callee.kind == K.FUNCTION_DECL and callee.is_definition():
            defn = callee
        attrs = {x.kind for x in callee.get_children()} | ({x.kind for x in defn.get_children()} if defn else set())
        if K.CUDADEVICE_ATTR not in attrs or defn is None:
            raise self.refuse(c, f"call of {name!r} (only __device__ functions defined in the source, "
                              "and the built-ins listed in the docs)")
        if _in_prelude(callee.location, self.path) and not name.startswith("make_"):
            raise self.refuse(c, f"call of {name!r}")
        if defn is not None and any(f == defn for f in self.functions):
            raise self.refuse(c, f"recursion: {name!r} calls itself (directly or through other functions)")
        if self._inline_depth > 32:
            raise self.err(c, f"call of {name!r}: __device__ functions nested more than 32 deep (recursion?)")
        params = list(defn.get_arguments())
        keys = _param_keys(params)
        bound: dict[Any, Any] = {}
        for i, p in enumerate(params):
            a = args[i] if i < len(args) else None
            if a is None or (a.kind == K.UNEXPOSED_EXPR and not list(a.get_children())):
                a = _default_arg(p)  # a default argument: the parameter's own expression
                if a is None:
                    raise self.refuse(c, f"the default argument of parameter {p.spelling!r}")
            pt = _ctype(p.type)
            if pt is None:
                raise self.refuse(p, f"a parameter of type {p.type.spelling!r}")
            v, at = self.rvalue(a)
            if isinstance(pt, tuple) and pt[0] == "ptr":
                if isinstance(v, _VarRef):  # &local: the callee reads and writes the caller's variable
                    bound[keys[i]] = v
                    continue
                if not isinstance(v, _Ptr):
                    raise self.refuse(a, "this pointer argument")
                var = Value(ty.u32 if v.space == "local" else ty.u64, p.spelling, is_var=True)
                self.mov(var, self._offv(v))
                bound[keys[i]] = _PtrVar(v.space, v.buf, var, v.pointee)
                continue
            if isinstance(pt, tuple) and pt[0] == "struct":
                if not isinstance(v, _SVal):
                    raise self.refuse(a, "this struct argument")
                bound[keys[i]] = self.new_struct_var(pt[1], p.spelling, v)
                continue
            var = Value(_vt(pt), p.spelling, is_var=True)
            self.mov(var, self.convert(v, at, pt, a))
            bound[keys[i]] = ("var", var, pt)
        body = next(x for x in defn.get_children() if x.kind == K.COMPOUND_STMT)
        stmts = list(body.get_children())
        rt = _ctype(c.type) if c.type.get_canonical().kind != _cx.TypeKind.VOID else None
        early = any(x.kind == K.RETURN_STMT for s in stmts[:-1] for x in _walk(s)) or any(
            x.kind == K.RETURN_STMT for x in list(_walk(stmts[-1]))[1:]) if stmts else False
        slot: dict[str, Any] = {"value": None, "flag": None, "var": None, "t": rt}
        if early:
            slot["flag"] = Value(ty.pred, "ret", is_var=True)
            self.mov(slot["flag"], self.const(False, ty.pred))
            if rt is not None:
                if not isinstance(rt, DType):
                    raise self.refuse(c, f"__device__ function {name!r}: an early return of a pointer or struct")
                slot["var"] = Value(_vt(rt), "retval", is_var=True)
        saved_scopes = self.scopes
        self.scopes = [{}, bound]
        self.ret_stack.append(slot)
        self.functions.append(defn)
        saved_loops = self.loop_kinds
        self.loop_kinds = []
        self._inline_depth += 1
        saved_body = self.body
        if early:
            self.body = []
        try:
            for st in stmts:
                self.stmt(st)
        finally:
            self._inline_depth -= 1
            self.functions.pop()
            self.loop_kinds = saved_loops
            self.ret_stack.pop()
            self.scopes = saved_scopes
            if early:
                inner, self.body = self.body, saved_body
        if early:
            self.body.append(ir.Loop([*inner, ir.Break()]))
            if rt is None:
                return self.const(0, ty.i32), ty.i32
            return slot["var"], rt
        if rt is None:
            return self.const(0, ty.i32), ty.i32
        if slot["value"] is None:
            raise self.err(c, f"__device__ function {name!r} does not end in a return")
        v, vt = slot["value"]
        if isinstance(rt, tuple):
            return v, rt
        return self.convert(v, vt, rt, c), rt


def _constant_vars(fn: Any, path: str) -> list[Any]:
    """The ``__constant__`` variables that kernel ``fn`` and the functions it calls refer to, in
    declaration order."""
    K = _cx.CursorKind
    found: dict[str, Any] = {}
    seen: set[int] = set()
    todo = [fn]
    while todo:
        f = todo.pop()
        for x in _walk(f):
            if x.kind not in (K.DECL_REF_EXPR, K.CALL_EXPR):
                continue
            r = x.referenced
            if r is None:
                continue
            if r.kind == K.VAR_DECL and any(ch.kind == K.CUDACONSTANT_ATTR for ch in r.get_children()):
                found[r.get_usr()] = r
            elif r.kind == K.FUNCTION_DECL and not _in_prelude(r.location, path):
                d = r.get_definition() or (r if r.is_definition() else None)
                if d is not None and d.hash not in seen:
                    seen.add(d.hash)
                    todo.append(d)
    return sorted(found.values(), key=lambda r: (r.location.file.name if r.location.file else "", r.location.offset))


def _constant_init(v: Any, t: Any, elem: DType) -> Any:
    """The initial contents of ``__constant__`` variable ``v`` (C type ``t``) as a read-only
    NumPy array of the buffer's element type ``elem``; None when it has no initialiser."""
    import numpy as np

    K = _cx.CursorKind
    lits = [x for x in v.get_children() if x.kind.is_expression() or x.kind == K.UNEXPOSED_EXPR]
    if isinstance(t, tuple) and t[0] == "arr":  # the other expressions are the sizes
        lits = [x for x in lits if x.kind == K.INIT_LIST_EXPR]
    if not lits:
        return None
    flat = _flat(t)
    leaves: list[Any] = []

    def walk(c: Any) -> None:
        if c.kind == K.INIT_LIST_EXPR:
            for x in c.get_children():
                walk(x)
        else:
            leaves.append(c)

    walk(lits[-1])
    if len(leaves) > len(flat):
        raise CompileError(f"{_decl_where(v)}: __constant__ {v.spelling!r}: more initialisers than elements")
    data = bytearray(_size(t))
    for (st, off), leaf in zip(flat, leaves, strict=False):
        val = _evaluate(leaf, st)
        bits = literal_bits(val, st) if st is not ty.bool_ else int(bool(val))
        data[off:off + _size(st)] = int(bits).to_bytes(_size(st), "little")
    arr = np.frombuffer(bytes(data), dtype=elem.np_dtype if elem is not ty.u8 else np.uint8).copy()
    arr.flags.writeable = False
    return arr


def _call_args(c: Any) -> list[Any]:
    """The argument cursors of call ``c`` (the callee's own reference left out; an operator's
    operands in source order)."""
    out = []
    for x in c.get_children():
        tk = x.type.get_canonical()
        if tk.kind == _cx.TypeKind.FUNCTIONPROTO or (
                tk.kind == _cx.TypeKind.POINTER and tk.get_pointee().kind == _cx.TypeKind.FUNCTIONPROTO):
            continue
        out.append(x)
    return out


def _param_keys(params: list[Any]) -> list[Any]:
    """The scope key of each parameter declaration of a function: its name, or for a name that
    several parameters share (the elements of a function parameter pack in a template's
    instance, ``T... a``: each its own declaration named ``a``) ``("decl", cursor)``, which
    :meth:`CudaLowering.lookup` finds from the ``DECL_REF_EXPR`` that refers to it."""
    names = [p.spelling for p in params]
    return [("decl", p) if p.spelling and names.count(p.spelling) > 1 else p.spelling for p in params]


def _launch_names(params: list[Any]) -> list[str | None]:
    """The launch (argument) name of each parameter of a kernel: its own name; ``arg{i}`` for an
    unnamed one; ``{name}_{j}`` for element ``j`` of a function parameter pack ``T... name``
    (the instance's parameters that share the name). None where that name is another
    parameter's."""
    names = [p.spelling for p in params]
    out: list[str | None] = []
    seen: dict[str, int] = {}
    for i, n in enumerate(names):
        if not n:
            out.append(f"arg{i}")
        elif names.count(n) > 1:
            out.append(f"{n}_{seen.get(n, 0)}")
            seen[n] = seen.get(n, 0) + 1
        else:
            out.append(n)
    return [n if n is not None and out.count(n) == 1 else None for n in out]


def _default_arg(p: Any) -> Any:
    """The default-argument expression of parameter declaration ``p`` (None: none)."""
    K = _cx.CursorKind
    for x in p.get_children():
        if x.kind not in (K.TYPE_REF, K.TEMPLATE_REF, K.NAMESPACE_REF) and (x.kind.is_expression()
                                                                             or x.kind == K.UNEXPOSED_EXPR):
            return x
    return None


#: most iterations of a loop unrolled in full (a trip count known at compile time), and most clang
#: cursors of its body times its trip count
FULL_UNROLL_TRIPS = 32
FULL_UNROLL_BUDGET = 1024
#: the largest factor ``#pragma unroll N`` gets for a loop whose trip count is not a constant
PRAGMA_UNROLL_MOST = 32


#: declarations in a function body that declare only types (or check a constant): lowered to nothing
_TYPE_DECLS: frozenset[Any] = frozenset()


def _pragma(c: Any) -> list[str] | None:
    """The words of the pragma that statement ``c`` (clang's attributed statement, which libclang
    shows as an unexposed statement) starts with: ``['unroll', '4']`` for ``#pragma unroll 4``
    and for ``_Pragma("unroll 4")`` (the operator form), also from a macro's expansion (``#define
    UNROLL _Pragma("unroll")``, as CUTLASS_PRAGMA_UNROLL is: :func:`_macro_tokens`); None when
    ``c`` does not start with a pragma."""
    toks = []
    for t in c.get_tokens():
        toks.append(t)
        if len(toks) > 2 and t.location.line != toks[0].location.line:
            toks.pop()
            break
    spell = [t.spelling for t in toks]
    words = _pragma_words(spell)
    if words is None and (not spell or spell[0] not in ("#", "[")):
        expansion = _macro_tokens(c)
        if expansion is not None:
            words = _pragma_words(expansion)
    return words


def _pragma_words(spell: list[str]) -> list[str] | None:
    """The pragma's words of tokens ``spell`` that start ``#pragma WORDS`` or ``_Pragma("WORDS")``;
    None for other tokens."""
    if len(spell) >= 4 and spell[0] == "_Pragma" and spell[1] == "(" and spell[3] == ")" \
            and re.fullmatch(r'(?:L|u8|u|U)?"(?:[^"\\]|\\.)*"', spell[2]):
        # C's destringizing of the operand (C17 6.10.9): the prefix and quotes removed, \" and
        # \\ unescaped; then the pragma's words as the preprocessor splits them
        text = re.sub(r'\\(["\\])', r"\1", spell[2][spell[2].index('"') + 1:-1])
        return re.findall(r"[A-Za-z_]\w*|\d[\w.]*|\S", text)
    if len(spell) < 2 or spell[0] != "#" or spell[1] != "pragma":
        return None
    return spell[2:]


def _macro_tokens(c: Any) -> list[str] | None:
    """The replacement tokens of the macro whose expansion cursor ``c`` starts with (``UNROLL``
    of ``#define UNROLL _Pragma("unroll")``; its tokens are not ``c``'s when the macro is
    defined in a header), read from a second parse of the same source that keeps the macro
    expansions (made once per translation unit, only when needed); None when ``c`` does not
    start with a macro."""
    tu = c.translation_unit
    how = getattr(tu, "_anywave_parse", None)
    start = c.extent.start
    if how is None or start.file is None:
        return None
    if "detailed" not in how:
        how["detailed"] = parse(*how["args"], detailed=True)
    K = _cx.CursorKind
    for m in how["detailed"].cursor.get_children():
        loc = m.location
        if m.kind == K.MACRO_INSTANTIATION and loc.line == start.line and loc.column == start.column \
                and loc.file is not None and loc.file.name == start.file.name:
            d = m.referenced
            return None if d is None else [t.spelling for t in d.get_tokens()][1:]
    return None


#: statement attributes that change nothing a kernel computes (hints to the optimiser): ignored
_HARMLESS_ATTRIBUTES = frozenset({"likely", "unlikely", "clang::nomerge", "clang::noinline", "clang::always_inline",
                                  "gnu::noinline", "gnu::always_inline"})


def _attributes(c: Any) -> list[str] | None:
    """The names of the C++ attributes statement ``c`` starts with (``[[likely]] x;``: ``['likely']``,
    ``[[clang::noinline]]``: ``['clang::noinline']``), None when it starts with none."""
    toks = [t.spelling for t in c.get_tokens()]
    if toks[:2] != ["[", "["] or "]" not in toks:
        return None
    inside = "".join(toks[2:toks.index("]")])
    return [re.sub(r"\(.*", "", a) for a in inside.split(",") if a] or None


def _loop_hint(words: list[str]) -> Any:
    """The loop hint of pragma ``words``: 1 (keep the loop rolled: ``unroll 1``, ``nounroll``,
    ``clang loop unroll(disable)``), N (``unroll N``, ``clang loop unroll_count(N)``), ``"auto"``
    (bare ``unroll``, ``unroll N`` with N not a literal, the other ``clang loop`` hints); None
    for a pragma that is not a loop hint."""
    text = "".join(words)
    if words[:1] in (["nounroll"], ["nounroll_and_jam"]):
        return 1
    if words[:1] in (["unroll"], ["unroll_and_jam"]):
        n = text[len(words[0]):].strip("()")
        if not n:
            return "auto"
        try:
            v = int(n, 0)
        except ValueError:
            return "auto"  # a macro or template value: the default choice
        return max(v, 1)
    if words[:2] == ["clang", "loop"]:
        if "unroll(disable)" in text:
            return 1
        m = re.search(r"unroll_count\((\d+)\)", text)
        return max(int(m.group(1)), 1) if m else "auto"
    return None


def _wrap(v: int, t: DType) -> int:
    """``v`` as a value of integer type ``t`` (two's complement wrap-around)."""
    if t is ty.bool_:
        return int(v != 0)
    bits = t.bits
    v &= (1 << bits) - 1
    return v - (1 << bits) if t.is_signed and v >> (bits - 1) else v


def _arith_const(op: str, a: int, b: int, t: DType) -> int | None:
    """C's ``a op b`` in integer type ``t`` (operands already of ``t``; the shift count ``b`` of
    the promoted left type), or None where C leaves it undefined (division by zero, a shift
    count out of range)."""
    if op in ("<<", ">>"):
        if not 0 <= b < t.bits:
            return None
        if op == "<<":
            return a << b
        return a >> b if t.is_signed else (a & ((1 << t.bits) - 1)) >> b
    if op in ("/", "%"):
        if b == 0:
            return None
        q = abs(a) // abs(b) * (1 if (a >= 0) == (b >= 0) else -1)
        return q if op == "/" else a - q * b
    return {"+": a + b, "-": a - b, "*": a * b, "&": a & b, "|": a | b, "^": a ^ b}.get(op)


def _has_own_jump(c: Any) -> bool:
    """A ``break`` or ``continue`` in ``c`` that belongs to the loop around ``c``."""
    K = _cx.CursorKind
    for x in c.get_children():
        if x.kind in (K.CONTINUE_STMT, K.BREAK_STMT):
            return True
        if x.kind not in (K.FOR_STMT, K.WHILE_STMT, K.DO_STMT) and _has_own_jump(x):
            return True
    return False


#: (factor, most clang cursors in the body) of the unrolled counted loops, first match: about the
#: budget of LLVM's runtime unrolling (a body times the factor within a few hundred instructions),
#: which NVRTC applies (its matvec loop: 16 iterations per test)
_UNROLL_FACTORS = ((16, 16), (8, 32), (4, 160))
#: calls a loop body must not make to be unrolled (besides the warp built-ins)
_UNROLL_BLOCKERS = frozenset({"__syncthreads", "__syncwarp", "__threadfence", "__threadfence_block", "printf",
                              "__anywave_assert",
                              "__syncthreads_count", "__syncthreads_and", "__syncthreads_or"})


def _strip(c: Any) -> Any:
    """``c`` without the implicit casts and parentheses around it."""
    K = _cx.CursorKind
    while c.kind in (K.UNEXPOSED_EXPR, K.PAREN_EXPR):
        ch = list(c.get_children())
        if len(ch) != 1:
            break
        c = ch[0]
    return c


def _int_constant(c: Any) -> int | None:
    """The value of integer constant expression ``c`` as clang evaluates it, or None."""
    K = _cx.CursorKind
    inner = _strip(c)
    if inner.kind not in (K.INTEGER_LITERAL, K.CHARACTER_LITERAL) or _ctype(c.type) not in (
            ty.i32, ty.u32, ty.i64, ty.u64):
        return None
    return int(_evaluate(c, _ctype(c.type)))


def _written(c: Any) -> set[Any]:
    """The variables (declaration cursors) that the statement or expression ``c`` may write: the
    targets of assignments, ``++``/``--`` and ``&``, and every variable named other than as a
    plain value (an implicit lvalue-to-rvalue conversion around it, parentheses between them
    allowed: ``x[(k) & 255]`` reads ``k``), e.g. bound to a reference."""
    K = _cx.CursorKind
    out: set[Any] = set()

    def walk(x: Any, parent: Any) -> None:
        if x.kind == K.DECL_REF_EXPR and x.referenced is not None and x.referenced.kind in (K.VAR_DECL, K.PARM_DECL):
            if parent is None or parent.kind != K.UNEXPOSED_EXPR:
                out.add(x.referenced)
        for y in x.get_children():
            # an operand in parentheses is used as the parentheses are: (k) = 1 writes k, (k) + 1 reads it
            walk(y, parent if x.kind == K.PAREN_EXPR else x)

    walk(c, None)
    return out


def _address_taken(root: Any, path: str) -> set[Any]:
    """The variables (declaration cursors) of the user's source under ``root`` that are the base
    of an operand of unary ``&``: ``&v``, ``&v[i]``, ``&v.f``, ``&(v)``."""
    K = _cx.CursorKind
    out: set[Any] = set()

    def base(x: Any) -> Any:
        x = _strip(x)
        while x.kind in (K.ARRAY_SUBSCRIPT_EXPR, K.MEMBER_REF_EXPR):
            ch = list(x.get_children())
            if not ch:
                break
            x = _strip(ch[0])
        return x

    def walk(x: Any) -> None:
        if x.kind == K.UNARY_OPERATOR and _UN.get(_cx.conf.lib.clang_getCursorUnaryOperatorKind(x)) == "&":
            ch = list(x.get_children())
            b = base(ch[0]) if ch else None
            if b is not None and b.kind == K.DECL_REF_EXPR and b.referenced is not None \
                    and b.referenced.kind in (K.VAR_DECL, K.PARM_DECL):
                out.add(b.referenced)
        for y in x.get_children():
            walk(y)

    for top in root.get_children():
        if not _in_prelude(top.location, path):
            walk(top)
    return out


def _has_own_continue(c: Any) -> bool:
    """A ``continue`` in ``c`` that belongs to the loop around ``c`` (not to a nested loop)."""
    K = _cx.CursorKind
    for x in c.get_children():
        if x.kind == K.CONTINUE_STMT:
            return True
        if x.kind not in (K.FOR_STMT, K.WHILE_STMT, K.DO_STMT) and _has_own_continue(x):
            return True
    return False


#: the start of the name of the translation unit's main file, a file of the front end's own
#: (:func:`parse`): the prelude, then ``#include`` of the user's file
_MAIN_MARK = "<anywave>"


def _main_name(path: str) -> str:
    """The name of :func:`parse`'s main file for the user's file ``path`` (in its folder)."""
    d, b = os.path.split(path)
    return os.path.join(d, _MAIN_MARK + b)


def _user_name(path: str) -> str:
    """The name clang gives the user's file ``path`` when it is included by its base name from
    :func:`_main_name` (a bare name is found as ``./name``)."""
    return path if os.path.dirname(path) else os.path.join(".", path)


def _user_path(name: str) -> str:
    """The user's path of a main file's name (:func:`_main_name`); other names as they are."""
    d, b = os.path.split(name)
    return os.path.join(d, b[len(_MAIN_MARK):]) if b.startswith(_MAIN_MARK) else name


def _where(loc: Any, path: str) -> str:
    """``file:line:column`` of a clang location, lines of the user's source (the user's file is
    read with a ``#line`` directive first, :func:`parse`: its line is subtracted)."""
    path = _user_path(path)
    f = loc.file.name if loc.file else path
    line = loc.line
    if f in (path, _user_name(path)):
        f, line = path, line - 1
    elif f == _main_name(path):
        f = path
    return f"{f}:{line}:{loc.column}"


def _decl_where(decl: Any) -> str:
    """``file:line:column`` of declaration ``decl`` (:func:`_where`, the translation unit's
    main file naming the user's source)."""
    return _where(decl.location, decl.translation_unit.spelling)


def _in_prelude(loc: Any, path: str) -> bool:
    return loc.file is not None and loc.file.name == _main_name(_user_path(path))


def _evaluate(c: Any, t: DType) -> Any:
    """The value of literal ``c`` as clang evaluated it (macros expanded; a ``float`` literal is
    the float clang rounded it to, exactly representable as a double)."""
    lib = _cx.conf.lib
    r = lib.clang_Cursor_Evaluate(c)
    if not r:
        raise CompileError(f"internal: clang could not evaluate the literal at {c.location.line}:{c.location.column}")
    try:
        if t.is_float:
            return lib.clang_EvalResult_getAsDouble(r)
        if t.is_signed:
            return lib.clang_EvalResult_getAsLongLong(r)
        return lib.clang_EvalResult_getAsUnsigned(r)
    finally:
        lib.clang_EvalResult_dispose(r)


def _promote(t: DType) -> DType:
    """C's integer promotion (char/short/bool → int)."""
    return ty.i32 if t in ty.NARROW_TYPES or t is ty.bool_ else t


def _common(a: DType, b: DType) -> DType:
    """C's usual arithmetic conversions on promoted types (LP64: long is 64 bits)."""
    if a is b:
        return a
    if a.is_float or b.is_float:
        return ty.f64 if ty.f64 in (a, b) else ty.f32
    if a.bits != b.bits:
        return a if a.bits > b.bits else b
    return a if not a.is_signed else b


# ----------------------------------------------------------------------------- parse and compile

#: the variable the front end appends to take the address of a template kernel's instance
_INSTANCE_VAR = "__anywave_instance"


def kernel_symbol(name: str) -> str:
    """The WAVE kernel name of CUDA kernel ``name``: the name itself, or for a template
    instance (``reduce<float, 256>``) an identifier made of its parts (``reduce_float_256``; a
    negative argument's sign as ``m``: ``reduce<float, -4>`` gives ``reduce_float_m4``)."""
    if "<" not in name:
        return name
    # a minus sign that starts an argument is spelled ``m`` (``reduce<float, -4>``:
    # ``reduce_float_m4``), so that it and ``reduce<float, 4>`` differ; names without one are
    # unchanged
    out = re.sub(r"([<,(]\s*)-", r"\1m", name)
    out = re.sub(r"[^A-Za-z0-9_]+", "_", out).strip("_")
    return out if out and not out[0].isdigit() else f"k_{out}"


def parse(source: str, path: str = "kernel.cu", args: tuple[str, ...] = (), instance: str | None = None,
          detailed: bool = False) -> Any:
    """The clang translation unit of CUDA ``source`` (``#include "..."`` relative to ``path``'s
    folder, the usual system and CUDA headers empty: the prelude declares their names);
    ``instance``: a template kernel's instance (``reduce<float, 256>``) to instantiate;
    ``detailed``: keep the macro definitions and expansions as cursors (:func:`_macro_tokens`).
    CompileError listing clang's errors."""
    cx = _clang()
    if instance is not None:
        _check_instance(instance)
    check_includes(source, path, args)
    base = os.path.basename(path)
    if not base or any(ch in path for ch in '"\n\r\0'):
        raise CompileError(f"{path!r}: not a source file's name (a name without quotes or line breaks)")
    index = cx.Index.create()
    # the main file is the front end's own: the prelude, then an #include of the user's file
    # (given to clang as `source`), so that an #include of that file (a guarded self-include,
    # the X-macro idiom) reads the user's text, as with nvcc; the user's text starts with a
    # #line naming it as the user did, so the locations clang writes into its own messages and
    # type spellings ("(lambda at kernel.cu:2:12)", __LINE__, __FILE__) are the user's (libclang's
    # cursor locations count that line: _where subtracts it)
    main = _main_name(path)
    text = PRELUDE + f'#include "{base}"\n'
    if instance is not None:
        text += f"static void* {_INSTANCE_VAR} = (void*)&{instance};\n"
    quoted = path.replace("\\", "\\\\")
    unsaved = [(main, text), (_user_name(path), f'#line 1 "{quoted}"\n' + source)] + [
        (f"{_prelude.INCLUDE_DIR}/{h}", _prelude.HEADER_TEXT.get(h, "")) for h in _prelude.HEADERS]
    try:
        tu = index.parse(main, args=[*CLANG_ARGS, *args], unsaved_files=unsaved,
                         options=cx.TranslationUnit.PARSE_DETAILED_PROCESSING_RECORD if detailed else 0)
    except cx.TranslationUnitLoadError as e:  # clang gave no translation unit at all (a bad argument)
        raise CompileError(f"{path}: clang could not parse the source with the arguments {list(args)!r} "
                           f"(an unknown or malformed clang argument?): {e}") from None
    errors = [d for d in tu.diagnostics if d.severity >= cx.Diagnostic.Error]
    if errors:
        if instance is not None and any(d.location.file is not None and d.location.file.name == main
                                        and d.location.line > PRELUDE_LINES for d in errors):
            msgs = "; ".join(d.spelling for d in errors[:3])
            raise CompileError(f"{path}: cannot instantiate the kernel {instance!r}: {msgs}")
        for d in errors:  # an error about a CUDA feature the front end does not take: named
            what = _prelude.unsupported(d.spelling, _token_at(tu, d.location))
            if what is not None:
                raise CompileError(f"{_where(d.location, path)}: not supported by the CUDA front end: {what} "
                                   "(docs/guide/cuda.md lists what is)")
        lines = [f"{_where(d.location, path)}: {d.spelling}" for d in errors[:10]]
        raise CompileError("the CUDA source does not compile:\n" + "\n".join(lines))
    tu._anywave_parse = {"args": (source, path, args, instance)}  # for a detailed parse (_macro_tokens)
    return tu


def _token_at(tu: Any, loc: Any) -> str | None:
    """The spelling of the token that starts at location ``loc`` of translation unit ``tu``
    (None: none there)."""
    if loc.file is None:
        return None
    cx = _cx
    try:
        start = cx.SourceLocation.from_position(tu, loc.file, loc.line, loc.column)
        end = cx.SourceLocation.from_position(tu, loc.file, loc.line, loc.column + 1)
        toks = list(tu.get_tokens(extent=cx.SourceRange.from_locations(start, end)))
    except Exception:  # noqa: BLE001 - a location libclang cannot map back: no token
        return None
    return toks[0].spelling if toks else None


#: a template kernel's instance as :func:`parse` takes it: a name, then template arguments in
#: angle brackets, without anything that could end the declaration it is pasted into
_INSTANCE_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(::[A-Za-z_][A-Za-z0-9_]*)*\s*<[^;{}#\"'\\\n\r]*>")


def _check_instance(instance: str) -> None:
    """CompileError unless ``instance`` reads as one template-id (``reduce<float, 256>``): it is
    pasted into the source after the user's code to make clang instantiate it."""
    ok = isinstance(instance, str) and _INSTANCE_RE.fullmatch(instance) is not None \
        and "//" not in instance and "/*" not in instance
    depth = 0
    for ch in instance if ok else "":
        depth += {"<": 1, ">": -1, "(": 1, ")": -1}.get(ch, 0)
        if depth < 0:
            ok = False
            break
    if not ok or depth:
        raise CompileError(f"{instance!r} is not a template kernel's instance: write the template's name and its "
                           "arguments, such as 'reduce<float, 256>'")


#: directives that make clang read a file (the quoted or bracketed name): ``#include``,
#: ``#include_next``, ``#import`` and ``#embed``, also after a comment on the same line
_INCLUDE_RE = re.compile(r'^[ \t]*(?:/\*[^\n]*?\*/[ \t]*)*#[ \t]*(?:include_next|include|import|embed)[ \t]*'
                         r'[<"]([^">\n]+)[">]', re.M)

#: the largest file an ``#include`` may name (bytes): a source, not a data file
MAX_INCLUDE_BYTES = 64 << 20


def check_includes(source: str, path: str, args: tuple[str, ...] = ()) -> None:
    """CompileError when an ``#include`` of ``source`` (or of a header it includes, found the
    way clang finds it: the including file's folder, ``-I`` folders, an absolute path) names
    something other than a regular file, or a file over :data:`MAX_INCLUDE_BYTES`: clang would
    read ``/dev/zero`` or a FIFO for ever. (An include spelled through a macro is not seen.)"""
    import stat

    dirs = []
    forced = []  # -include FILE: read as if included at the top
    it = iter(args)
    for a in it:
        if a in ("-I", "-isystem", "-iquote", "-idirafter"):
            dirs.append(next(it, ""))
        elif a.startswith("-I"):
            dirs.append(a[2:])
        elif a == "-include":
            forced.append(next(it, ""))
    seen: set[str] = set()
    todo = [(source, os.path.dirname(os.path.abspath(path)), path)]
    if forced:
        todo.append(("".join(f'#include "{f}"\n' for f in forced), os.getcwd(), "-include"))
    while todo and len(seen) < 4096:
        text, here, where = todo.pop()
        for m in _INCLUDE_RE.finditer(text):
            name = m.group(1)
            cands = [name] if os.path.isabs(name) else [os.path.join(d, name) for d in (here, *dirs) if d]
            for c in cands:
                try:
                    st = os.stat(c)
                except (OSError, ValueError):
                    continue
                line = text.count("\n", 0, m.start()) + 1
                if not stat.S_ISREG(st.st_mode):
                    what = "a directory" if stat.S_ISDIR(st.st_mode) else "a device, FIFO or socket"
                    raise CompileError(f"{where}:{line}: #include names {c!r}, which is {what}, not a source file")
                if st.st_size > MAX_INCLUDE_BYTES:
                    raise CompileError(f"{where}:{line}: #include names {c!r}, {st.st_size} bytes: more than "
                                       f"{MAX_INCLUDE_BYTES} bytes is not a header")
                real = os.path.realpath(c)
                if real not in seen:
                    seen.add(real)
                    try:
                        with open(real, encoding="utf-8", errors="replace") as f:
                            todo.append((f.read(), os.path.dirname(real), c))
                    except OSError:
                        pass
                break


def kernel_names(source: str, path: str = "kernel.cu", clang_args: tuple[str, ...] = ()) -> list[str]:
    """The names of the ``__global__`` functions defined in ``source`` (templates left out)."""
    cx = _clang()
    tu = parse(source, path, clang_args)
    return [c.spelling for c in _walk(tu.cursor)
            if c.kind == cx.CursorKind.FUNCTION_DECL and c.is_definition()
            and any(x.kind == cx.CursorKind.CUDAGLOBAL_ATTR for x in c.get_children())
            and c.get_num_template_arguments() <= 0]


def find_kernel(tu: Any, name: str, path: str) -> Any:
    cx = _cx
    K = cx.CursorKind
    if "<" in name:  # a template's instance: the function the appended variable points at
        for c in tu.cursor.get_children():
            if c.kind == K.VAR_DECL and c.spelling == _INSTANCE_VAR:
                for x in _walk(c):
                    r = x.referenced if x.kind == K.DECL_REF_EXPR else None
                    if r is not None and r.kind == K.FUNCTION_DECL:
                        if not any(y.kind == K.CUDAGLOBAL_ATTR for y in r.get_children()):
                            raise CompileError(f"{path}: {name!r} is not a __global__ function")
                        return r
        raise CompileError(f"{path}: no __global__ template instance {name!r}")
    found = []
    for c in _walk(tu.cursor):
        if c.kind == K.FUNCTION_DECL and c.is_definition():
            if any(x.kind == K.CUDAGLOBAL_ATTR for x in c.get_children()) and c.get_num_template_arguments() <= 0:
                found.append(c)
                if c.spelling == name:
                    return c
        elif c.kind == K.FUNCTION_TEMPLATE and c.spelling == name:
            raise CompileError(f"{_where(c.location, path)}: template kernel {name!r}: name one of its instances, "
                               f"such as '{name}<float>' (its template arguments)")
    names = ", ".join(repr(c.spelling) for c in found) or "none"
    raise CompileError(f"{path}: no __global__ function {name!r} (the __global__ functions: {names})")


#: the deepest AST a kernel may have (levels of nested expressions and statements, the device
#: functions it calls counted inlined): the lowering recurses ~3 Python frames a level
MAX_NESTING = 4000
#: Python frames allowed per AST level when the recursion limit is raised for a deep kernel
#: (measured ~3 on CPython 3.11; twice that and more for margin)
_FRAMES_PER_LEVEL = 8
#: kernels at most this deep are lowered on the caller's thread, under its recursion limit
_SHALLOW = 60
_deep_lock = threading.Lock()


def nesting(fn: Any, path: str) -> int:
    """The depth of function ``fn``'s AST with the ``__device__`` functions it calls counted as
    inlined at their call (each call adds the callee's depth at its call site, bounded by the sum
    along the deepest call chain), found without recursion. CompileError above
    :data:`MAX_NESTING`: the lowering recurses once a level, and libclang's cursor visitor
    swallows a RecursionError raised in it (the AST it returns is cut short)."""
    K = _cx.CursorKind
    own: dict[Any, tuple[int, list[Any]]] = {}

    def scan(f: Any) -> tuple[int, list[Any]]:
        if f in own:
            return own[f]
        best, callees, stack = 0, [], [(f, 1)]
        while stack:
            c, d = stack.pop()
            best = max(best, d)
            if c.kind == K.CALL_EXPR:
                r = c.referenced
                dfn = r.get_definition() if r is not None else None
                if dfn is not None and dfn != f:
                    callees.append(dfn)
            stack.extend((ch, d + 1) for ch in c.get_children())
        own[f] = (best, callees)
        return own[f]

    total: dict[Any, int] = {}
    stack: list[tuple[Any, bool]] = [(fn, False)]
    active: set[Any] = set()
    while stack:  # the deepest call chain, callees first (a cycle counts once: recursion is refused later)
        f, done = stack.pop()
        if done:
            active.discard(f)
            d, callees = scan(f)
            total[f] = d + max((total.get(g, 0) for g in callees), default=0)
            continue
        if f in total or f in active:
            continue
        active.add(f)
        stack.append((f, True))
        stack.extend((g, False) for g in scan(f)[1] if g not in total and g not in active)
    levels = total[fn]
    if levels > MAX_NESTING:
        raise CompileError(f"{_where(fn.location, path)}: {fn.spelling!r} nests expressions and statements "
                           f"{levels} levels deep (the __device__ functions it calls counted inlined), more than "
                           f"the CUDA front end's {MAX_NESTING}")
    return levels


def _deep_call(work: Callable[[], Any], levels: int) -> Any:
    """``work()`` -- the lowering of an AST ``levels`` deep -- on this thread when shallow, else
    on a thread of its own with a 512 MiB stack under a recursion limit raised for it (restored
    after, unless something else changed it meanwhile)."""
    import sys

    if levels <= _SHALLOW:
        return work()
    need = levels * _FRAMES_PER_LEVEL + 1000
    out: list[tuple[bool, Any]] = []

    def body() -> None:
        try:
            out.append((True, work()))
        except BaseException as e:  # noqa: BLE001 - handed to the caller's thread
            out.append((False, e))

    with _deep_lock:
        old_limit = sys.getrecursionlimit()
        if need > old_limit:
            sys.setrecursionlimit(need)
        old_stack = threading.stack_size()
        try:
            threading.stack_size(512 << 20)
        except (ValueError, RuntimeError):  # pragma: no cover - a platform without the setting
            pass
        try:
            t = threading.Thread(target=body, name="anywave-cuda-lowering", daemon=True)
            t.start()
        finally:
            threading.stack_size(old_stack)
        try:
            t.join()  # (Ctrl-C here: the limit is restored all the same; the thread's result is dropped)
        finally:
            if need > old_limit and sys.getrecursionlimit() == need:
                sys.setrecursionlimit(old_limit)
    ok, v = out[0]
    if not ok:
        raise v
    return v


#: per thread: the list collecting exceptions raised inside ctypes callbacks (libclang's cursor
#: visitor calls Python for each child; an exception there -- a RecursionError deep in an
#: expression -- is only reported through sys.unraisablehook, and the visit goes on with the
#: children found so far)
_callback_local = threading.local()
_hook_lock = threading.Lock()
_hook_installed = False


def _unraisable(u: Any, prev: Any) -> None:
    sink = getattr(_callback_local, "sink", None)
    if sink is not None:
        sink.append(u.exc_value)
    else:
        prev(u)


class _callback_errors:
    """``with _callback_errors() as lost:``: exceptions lost in ctypes callbacks on this thread
    while the block runs are appended to ``lost`` instead of printed (one process-wide hook,
    installed once, forwards every other unraisable exception to the hook it replaced)."""

    def __enter__(self) -> list[BaseException]:
        global _hook_installed
        import sys

        with _hook_lock:
            if not _hook_installed:
                prev = sys.unraisablehook
                sys.unraisablehook = lambda u, prev=prev: _unraisable(u, prev)
                _hook_installed = True
        self.outer = getattr(_callback_local, "sink", None)
        self.sink: list[BaseException] = []
        _callback_local.sink = self.sink
        return self.sink

    def __exit__(self, *exc: Any) -> None:
        _callback_local.sink = self.outer


def _deep_error(low: Any, path: str, msg: str, lost: list[BaseException]) -> CompileError:
    why = f" ({type(lost[0]).__name__} in libclang's cursor visitor)" if lost else ""
    if low is not None and getattr(low, "cur", None) is not None:
        return low.err(low.cur, msg + why)
    return CompileError(f"{path}: {msg}{why}")


@dataclass
class CudaCompiled:
    """A compiled CUDA kernel: the WAVE ``kernel`` (named :func:`kernel_symbol`), its
    ``params`` (the CUDA parameters, then the ``__constant__`` variables it reads, each a
    read-only buffer whose default is its initialiser when it has one), the allocator's report
    ``info``, the C element type of each buffer parameter (``buffer_ctypes``: struct layouts
    for the launch's checks) and whether it uses ``extern __shared__`` memory."""

    kernel: Kernel
    params: list[Param]
    info: Any
    buffer_ctypes: dict[str, Any]
    dynamic_shared: bool


def compile_cuda(source: str, name: str, path: str = "kernel.cu", *, workgroup: Any = None,
                 optimize: bool = True, clang_args: tuple[str, ...] = (), shared_bytes: int = 0) -> CudaCompiled:
    """The WAVE Kernel of ``__global__`` function ``name`` in ``source`` (a template's instance
    such as ``"reduce<float, 256>"``), through the compiler's passes, allocator and codegen;
    ``shared_bytes``: the bytes of ``extern __shared__`` memory (CUDA's dynamic shared memory,
    the launch's third argument), laid out at offset 0 before the static ``__shared__``
    variables."""
    if not isinstance(shared_bytes, int) or isinstance(shared_bytes, bool) or shared_bytes < 0:
        raise CompileError(f"shared_bytes must be a non-negative int (bytes), got {shared_bytes!r}")
    deep = "expression or statements nested too deeply to compile"
    tu = parse(source, path, clang_args, instance=name if "<" in name else None)
    fn = find_kernel(tu, name, path)
    levels = nesting(fn, path)
    low = CudaLowering(tu, fn, path, dynamic_shared=shared_bytes)

    def lower() -> None:  # reads `low` when called: the retry below lowers a fresh one
        with _callback_errors() as swallowed:  # (on the thread that lowers)
            try:
                low.build()
                low.check_volatile()
            except tr.TypeRuleError as e:  # an operation the instruction set lacks for this type
                if swallowed:
                    raise _deep_error(low, path, deep, swallowed) from None
                raise low.err(low.cur, f"not supported by the CUDA front end yet: {e.message}") from None
            except RecursionError:
                raise _deep_error(low, path, deep, swallowed) from None
            except CompileError:
                if swallowed:
                    raise _deep_error(low, path, deep, swallowed) from None
                raise
            except Exception:
                if swallowed:  # an error that followed one libclang's callback swallowed: that one is the cause
                    raise _deep_error(low, path, deep, swallowed) from None
                raise
            if swallowed:  # clang's cursor visitor lost an exception: the AST the lowering saw was cut short
                raise _deep_error(low, path, deep, swallowed)

    try:
        _deep_call(lower, levels)
    except CompileError:
        raise
    except Exception:
        if levels > _SHALLOW:
            raise
        # lowered on the caller's thread, whose stack may already have been nearly used up: a
        # RecursionError inside libclang's visitor is then lost before the hook can record it and
        # the AST comes back cut short. Once more, from scratch, on a thread with a stack of its own
        low = CudaLowering(tu, fn, path, dynamic_shared=shared_bytes)
        _deep_call(lower, _SHALLOW + 1)
    body = low.body
    if optimize:
        passes.optimize(body)
    threads = None if workgroup is None else workgroup[0] * workgroup[1] * workgroup[2]
    symbol = kernel_symbol(name)
    alloc, info = spill.allocate(body, symbol, local_memory=low.local_memory, threads=threads,
                                 max_workgroup_size=None)
    code, caps = codegen.emit(body, alloc)
    args = []
    for n, ann in low.args:
        if isinstance(ann, ty.BufferType):
            args.append(Arg(n, ArgKind.BUFFER, ann.elem.scalar, ann.access, ann.constant))
        else:
            args.append(Arg(n, ArgKind.SCALAR, ann.scalar))
    k = Kernel(symbol, args=args, registers=alloc.registers, local_memory=info.local_memory,
               workgroup_size=workgroup, max_workgroup_size=info.max_workgroup_size,
               capabilities=caps, code=code, flags=0 if low.wave_dependent else KERNEL_FLAG_W_INVARIANT,
               prints=list(low.prints))
    return CudaCompiled(k, low.params, info, low.buffer_ctypes, low.uses_dynamic_shared)


class CudaKernelDef:
    """One ``__global__`` function of a CUDA source (or a template kernel's instance,
    ``reduce<float, 256>``), compiled on demand, for the compiler's own users
    (``anywave compile kernel.cu``); the launchable form is :class:`anywave.jit.cuda.CudaKernel`.
    ``compile(shared_bytes=N)`` returns the Module (``N``: the bytes of ``extern __shared__``
    memory, which a ``.wbin`` declares as a fixed size), ``resources()`` the register report (as
    :meth:`anywave.compiler.kernel.KernelDef.resources`)."""

    def __init__(self, source: str, name: str, path: str = "kernel.cu", clang_args: tuple[str, ...] = ()) -> None:
        self.source, self.name, self.path, self.clang_args = source, name, path, tuple(clang_args)
        self._built: dict[int, tuple[Module, list[Param], Any, bool]] = {}

    def _build(self, shared_bytes: int = 0) -> tuple[Module, list[Param], Any, bool]:
        if shared_bytes and not self._build(0)[3]:
            shared_bytes = 0  # no extern __shared__: the size changes nothing (as CudaKernel)
        r = self._built.get(shared_bytes)
        if r is None:
            c = compile_cuda(self.source, self.name, self.path, clang_args=self.clang_args, shared_bytes=shared_bytes)
            r = self._built[shared_bytes] = (settle_version(Module(kernels=[c.kernel])), c.params, c.info,
                                             c.dynamic_shared)
        return r

    @property
    def params(self) -> list[Param]:
        return self._build()[1]

    @property
    def uses_dynamic_shared(self) -> bool:
        """Whether the kernel uses ``extern __shared__`` memory (sized by ``shared_bytes``)."""
        return self._build()[3]

    def compile(self, shared_bytes: int = 0, **constants: Any) -> Module:
        if constants:
            raise CompileError(f"CUDA kernel {self.name!r} takes no compile-time constants")
        if self.uses_dynamic_shared and not shared_bytes:
            raise CompileError(f"CUDA kernel {self.name!r} uses extern __shared__ memory: give its size in bytes "
                               "(shared_bytes=N)")
        return self._build(shared_bytes)[0]

    def resources(self, shared_bytes: int = 0, **constants: Any) -> dict[str, Any]:
        return self._build(shared_bytes)[2].as_dict()


def cuda_kernel_defs(path: str, defines: tuple[str, ...] = ()) -> dict[str, CudaKernelDef]:
    """Every (non-template) ``__global__`` function of the ``.cu`` file ``path`` by name, in
    source order; ``defines`` (``NAME=VALUE``) are passed to clang as ``-DNAME=VALUE``."""
    with open(path, encoding="utf-8") as f:
        source = f.read()
    args = tuple(f"-D{d}" for d in defines)
    return {n: CudaKernelDef(source, n, path, args) for n in kernel_names(source, path, args)}


def global_functions(source: str, path: str = "kernel.cu",
                     clang_args: tuple[str, ...] = ()) -> tuple[list[str], dict[str, str]]:
    """The ``__global__`` functions defined in ``source``: the names of the plain ones, and the
    template kernels (name -> their template parameters as written, ``typename T, unsigned int
    BLOCK``), each in source order."""
    cx = _clang()
    K = cx.CursorKind
    plain: list[str] = []
    templates: dict[str, str] = {}
    for c in _walk(parse(source, path, clang_args).cursor):
        if not (c.kind in (K.FUNCTION_DECL, K.FUNCTION_TEMPLATE) and c.is_definition()):
            continue
        kids = list(c.get_children())
        if not any(x.kind == K.CUDAGLOBAL_ATTR for x in kids):
            continue
        if c.kind == K.FUNCTION_TEMPLATE:
            ps = []
            for x in kids:
                if x.kind == K.TEMPLATE_TYPE_PARAMETER:
                    ps.append(f"typename {x.spelling}".rstrip())
                elif x.kind == K.TEMPLATE_NON_TYPE_PARAMETER:
                    ps.append(f"{x.type.spelling} {x.spelling}".rstrip())
                elif x.kind == K.TEMPLATE_TEMPLATE_PARAMETER:
                    ps.append(f"template<...> class {x.spelling}".rstrip())
            templates.setdefault(c.spelling, ", ".join(ps))
        elif c.get_num_template_arguments() <= 0 and c.spelling not in plain:
            plain.append(c.spelling)
    return plain, templates
