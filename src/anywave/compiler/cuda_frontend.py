"""CUDA C++ front end (first slice): ``__global__``/``__device__`` functions → the typed IR.

The source is parsed by clang (the ``libclang`` wheel, ``pip install 'anywave[cuda-frontend]'``)
in CUDA mode, host side only (``-x cuda --cuda-host-only -nocudainc -nocudalib``), with a small
prelude of this module's own (:data:`PRELUDE`) declaring the built-in variables, ``__syncthreads``
and the math functions, since the CUDA SDK headers are not needed. The AST clang builds already
holds C's conversions (the usual arithmetic conversions, integer promotions, float→double
promotion of double literals) as implicit-cast nodes, so the lowering converts exactly where
clang says and computes each operation in the type clang gives it: ``2.0f * x`` is f32,
``2.0 * x`` is f64, ``u - 1u`` wraps modulo 2^32. No contraction: ``a*b+c`` is a ``mul`` and an
``add`` (two roundings); ``fmaf`` is one ``fma``.

Supported in this slice: parameters of type int/unsigned/long long/unsigned long long/float/
double and pointers to those and to (un)signed char/short (a pointer parameter is a buffer);
locals of the scalar types, bool and char/short; pointer locals into one buffer; ``p[i]``,
``*p``, ``p + i``; static ``__shared__`` arrays (any rank); ``if``/``for``/``while``/
``do``/``break``/``continue``; ``return`` (anywhere in a
kernel; as the last statement of a ``__device__`` function, inlined); ``?:``, ``&&``, ``||``
(short-circuit), compound assignment, ``++``/``--``; ``threadIdx``/``blockIdx``/``blockDim``/
``gridDim`` ``.x/.y/.z``; ``__syncthreads()``; ``sqrtf``/``sqrt``, ``fabsf``/``fabs``,
``fminf``/``fmaxf``/``fmin``/``fmax``, ``fmaf``/``fma``, ``floorf``/``ceilf``/``truncf``/
``rintf`` (each one correctly rounded WAVE instruction, spec §8.2); the 32-bit atomics
(``atomicAdd`` ... ``atomicCAS``, relaxed, device scope) and ``__ldg``. Anything else raises
:class:`~anywave.compiler.errors.CompileError` naming the construct, file, line and column.

Results where C leaves them undefined take the WAVE instruction's defined result (integer
division by zero, shift counts >= the width, float→int out of range: spec §8.1).
"""

from __future__ import annotations

import ctypes
import threading
from dataclasses import dataclass
from typing import Any

from anywave.binary.module import KERNEL_FLAG_W_INVARIANT, Arg, Kernel, Module
from anywave.isa import mnemonic
from anywave.isa.table import BY_MNEMONIC
from anywave.isa.types import Access, ArgKind, MemoryOrder, Scope, SpecialRegister

from . import codegen, ir, passes, spill
from . import cuda_warp as _warp
from . import typerules as tr
from . import types as ty
from .constants import literal_bits
from .errors import CompileError
from .ir import DevAddr, LocAddr, Op, PredUse, Value
from .kernel import Param
from .types import DType

#: declarations clang needs in place of the CUDA headers (our own text)
PRELUDE = r"""
#define __global__ __attribute__((global))
#define __device__ __attribute__((device))
#define __host__ __attribute__((host))
#define __shared__ __attribute__((shared))
#define __forceinline__ __attribute__((always_inline)) inline
struct __aw_dim3 { unsigned int x, y, z; };
extern const __device__ __aw_dim3 threadIdx, blockIdx, blockDim, gridDim;
__device__ void __syncthreads(void);
__device__ float sqrtf(float); __device__ double sqrt(double);
__device__ float fabsf(float); __device__ double fabs(double);
__device__ float fminf(float, float); __device__ double fmin(double, double);
__device__ float fmaxf(float, float); __device__ double fmax(double, double);
__device__ float fmaf(float, float, float); __device__ double fma(double, double, double);
__device__ float floorf(float); __device__ double floor(double);
__device__ float ceilf(float); __device__ double ceil(double);
__device__ float truncf(float); __device__ double trunc(double);
__device__ float rintf(float); __device__ double rint(double);
// declared so that a kernel using them is refused by name (not lowered in this slice)
__device__ float expf(float); __device__ double exp(double); __device__ float logf(float);
__device__ double log(double); __device__ float powf(float, float); __device__ double pow(double, double);
__device__ float sinf(float); __device__ float cosf(float); __device__ float tanhf(float);
__device__ float __expf(float); __device__ float __logf(float); __device__ float __powf(float, float);
__device__ float rsqrtf(float);
__device__ int __popc(unsigned); __device__ int __popcll(unsigned long long);
__device__ int __clz(int); __device__ int __clzll(long long);
__device__ int __ffs(int); __device__ int __ffsll(long long);
__device__ unsigned __brev(unsigned); __device__ unsigned long long __brevll(unsigned long long);
""" + _warp.PRELUDE + "".join(f"__device__ {t} {f}({t}*, {t});\n" for f, ts in (
    ("atomicAdd", ("int", "unsigned", "float")), ("atomicSub", ("int", "unsigned")),
    ("atomicMin", ("int", "unsigned")), ("atomicMax", ("int", "unsigned")), ("atomicAnd", ("int", "unsigned")),
    ("atomicOr", ("int", "unsigned")), ("atomicXor", ("int", "unsigned")),
    ("atomicExch", ("int", "unsigned", "float"))) for t in ts) + r"""
__device__ int atomicCAS(int*, int, int); __device__ unsigned atomicCAS(unsigned*, unsigned, unsigned);
__device__ float __ldg(const float*); __device__ double __ldg(const double*);
__device__ int __ldg(const int*); __device__ unsigned __ldg(const unsigned*);
extern "C" __device__ int printf(const char*, ...);
"""
#: the prelude is put before the user's source in one buffer: its lines come first
PRELUDE_LINES = PRELUDE.count("\n") + 1
CLANG_ARGS = ("-x", "cuda", "--cuda-host-only", "-nocudainc", "-nocudalib", "-std=c++17",
              "-Wno-unknown-cuda-version")

_MATH = {  # C name -> (ALU operation, arity)
    "sqrtf": ("sqrt", 1), "sqrt": ("sqrt", 1), "fabsf": ("abs", 1), "fabs": ("abs", 1),
    "fminf": ("min", 2), "fmin": ("min", 2), "fmaxf": ("max", 2), "fmax": ("max", 2),
    "fmaf": ("fma", 3), "fma": ("fma", 3), "floorf": ("floor", 1), "floor": ("floor", 1),
    "ceilf": ("ceil", 1), "ceil": ("ceil", 1), "truncf": ("trunc", 1), "trunc": ("trunc", 1),
    "rintf": ("rint", 1), "rint": ("rint", 1),
}
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
                                ("clang_Cursor_Evaluate", ctypes.c_void_p)):
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
        return _cx


# ----------------------------------------------------------------------------- C types

_SCALAR = {"int": ty.i32, "unsigned int": ty.u32, "long": ty.i64, "unsigned long": ty.u64,
           "long long": ty.i64, "unsigned long long": ty.u64, "float": ty.f32, "double": ty.f64,
           "char": ty.i8, "signed char": ty.i8, "unsigned char": ty.u8, "short": ty.i16,
           "unsigned short": ty.u16, "bool": ty.bool_}


def _ctype(t: Any) -> Any:
    """The canonical clang type ``t`` as a DType (scalars), ('ptr', DType) or ('arr', elem, n):
    None when not supported."""
    cx = _cx
    t = t.get_canonical()
    k = t.kind
    if k == cx.TypeKind.POINTER:
        e = _ctype(t.get_pointee())
        ok = (isinstance(e, DType) and e is not ty.bool_) or (isinstance(e, tuple) and e[0] == "arr")
        return ("ptr", e) if ok else None
    if k == cx.TypeKind.CONSTANTARRAY:
        e = _ctype(t.get_array_element_type())
        return ("arr", e, t.get_array_size()) if e is not None else None
    name = t.spelling.replace("const ", "").replace("volatile ", "").strip()
    return _SCALAR.get(name)


def _vt(t: DType) -> DType:
    """Register type of a C scalar type (narrow integers live in 32-bit registers)."""
    if t is ty.bool_:
        return ty.pred
    return ty.value_type_of_element(t) if t in ty.NARROW_TYPES else t


def _size(t: Any) -> int:
    if isinstance(t, DType):
        return t.scalar.nbytes
    if t[0] == "arr":
        return _size(t[1]) * t[2]
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


class _Return(Exception):
    pass


class CudaLowering:
    """Lowers one ``__global__`` function (and the ``__device__`` functions it calls, inlined)."""

    def __init__(self, tu: Any, fn: Any, path: str) -> None:
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

    def lookup(self, name: str, c: Any) -> Any:
        for s in reversed(self.scopes):
            if name in s:
                return s[name]
        what = f"reference to {name!r}" if name else "a reference to a template parameter or other entity"
        raise self.refuse(c, f"{what} (only parameters, locals and the built-in variables)")

    # ------------------------------------------------------------------ entry
    def build(self) -> None:
        cx = _cx
        for i, p in enumerate(self.fn.get_arguments()):
            t = _ctype(p.type)
            name = p.spelling or f"arg{i}"
            if isinstance(t, tuple) and t[0] == "ptr" and isinstance(t[1], DType):
                elem = t[1]
                const = p.type.get_canonical().get_pointee().is_const_qualified()
                acc = Access.READ if const else Access.READWRITE
                ann = ty.BufferType(elem, acc)
                self.params.append(Param(name, "buffer", ann))
                self.args.append((name, ann))
                self.scopes[0][name] = _Ptr("device", len(self.args) - 1, None, 0, elem)
            elif isinstance(t, DType) and t in (ty.i32, ty.u32, ty.i64, ty.u64, ty.f32, ty.f64):
                self.params.append(Param(name, "scalar", t))
                self.args.append((name, t))
                var = Value(t, name, is_var=True)
                self.emit("ldarg.b64" if t.bits == 64 else "ldarg.b32", var, len(self.args) - 1)
                self.scopes[0][name] = ("var", var, t)
            else:
                raise self.refuse(p, f"a parameter of type {p.type.spelling!r}")
        body = next((ch for ch in self.fn.get_children() if ch.kind == cx.CursorKind.COMPOUND_STMT), None)
        if body is None:
            raise self.err(self.fn, f"kernel {self.fn.spelling!r} has no body")
        self.stmt(body)

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
        else:
            raise self.refuse(c)

    def ret(self, c: Any) -> None:
        ch = list(c.get_children())
        if not self.ret_stack:  # the kernel: this lane is done
            self.body.append(ir.Halt())
            return
        slot = self.ret_stack[-1]
        if slot["last"] != c:
            raise self.refuse(c, "a return before the end of a __device__ function")
        if ch:
            v, t = self.rvalue(ch[0])
            slot["value"] = (v, t)

    def loop(self, c: Any) -> None:
        K = _cx.CursorKind
        ch = list(c.get_children())
        self.scopes.append({})
        saved = self.body
        try:
            if c.kind == K.FOR_STMT:
                # children: [init] [cond] [inc] body, absent parts left out: read them by token
                init, cond, inc, body = self._for_parts(c, ch)
                if init is not None:
                    self.stmt(init)
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
            if not (isinstance(t, tuple) and t[0] == "arr") and not isinstance(t, DType):
                raise self.refuse(d, "this __shared__ declaration")
            if init:
                raise self.refuse(d, "an initialised __shared__ variable")
            size = _size(t)
            align = 8
            self.local_memory = (self.local_memory + align - 1) // align * align
            base = self.local_memory
            self.local_memory += size
            self.scopes[-1][d.spelling] = ("shared", base, t)
            return
        if isinstance(t, tuple) and t[0] == "arr":
            raise self.refuse(d, "a local (per-thread) array")
        if isinstance(t, tuple):  # a pointer local
            if not init:
                raise self.refuse(d, "a pointer local without an initialiser")
            p = self.rvalue(init[-1])[0]
            if not isinstance(p, _Ptr):
                raise self.refuse(d, "this pointer initialiser")
            var = Value(ty.u32 if p.space == "local" else ty.u64, d.spelling, is_var=True)
            self.mov(var, self._offv(p))
            self.scopes[-1][d.spelling] = _PtrVar(p.space, p.buf, var, p.pointee)
            return
        var = Value(_vt(t), d.spelling, is_var=True)
        if init:
            v, vt = self.rvalue(init[-1])
            if isinstance(v, _Ptr):
                raise self.refuse(init[-1], "a pointer used as a number")
            self.mov(var, self.convert(v, vt, t, d))
        self.scopes[-1][d.spelling] = ("var", var, t)

    # ------------------------------------------------------------------ expressions
    def cond(self, c: Any) -> PredUse:
        v, t = self.rvalue(c)
        if isinstance(v, _Ptr):
            raise self.refuse(c, "a pointer as a condition")
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
                raise self.refuse(c, "this expression")
            inner = ch[0]
            if k == K.PAREN_EXPR:
                return self.expr(inner, discard)
            if inner.kind in (K.DECL_REF_EXPR, K.MEMBER_REF_EXPR) and inner.type.kind == _cx.TypeKind.FUNCTIONPROTO:
                return self.expr(inner)
            return self.implicit(c, inner)
        if k == K.CXX_UNARY_EXPR:  # sizeof / alignof: an integer constant clang evaluates
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
            ref = c.referenced
            if c.spelling == "warpSize" and ref is not None and _in_prelude(ref.location, self.path):
                self.wave_dependent = True
                return _warp.warp_size(self), ty.i32
            b = self.lookup(c.spelling, c)
            if isinstance(b, _Ptr):
                return b, ("ptr", b.pointee)
            if isinstance(b, _PtrVar):
                return _Ptr(b.space, b.buf, b.var, 0, b.pointee), ("ptr", b.pointee)
            if b[0] == "var":
                return ("lv", b, b[2])
            if b[0] == "shared":
                return ("lv", ("mem", _Ptr("local", 0, None, b[1], b[2])), b[2])
            raise self.refuse(c)
        if k == K.MEMBER_REF_EXPR:
            ch = list(c.get_children())
            if len(ch) == 1 and ch[0].kind == K.DECL_REF_EXPR and ch[0].spelling in _SR and c.spelling in "xyz":
                r = Value(ty.u32)
                self.emit("mov.sr", r, _SR[ch[0].spelling]["xyz".index(c.spelling)])
                return r, ty.u32
            raise self.refuse(c, "a struct member")
        if k == K.ARRAY_SUBSCRIPT_EXPR:
            self._not_volatile(c)
            base, idx = c.get_children()
            p = self.pointer(base)
            return ("lv", ("mem", self.offset(p, idx, c)), p.pointee)
        if k == K.UNARY_OPERATOR:
            return self.unary(c, discard)
        if k == K.BINARY_OPERATOR:
            return self.binary(c)
        if k == K.COMPOUND_ASSIGNMENT_OPERATOR:
            return self.compound(c)
        if k in (K.CSTYLE_CAST_EXPR, K.CXX_STATIC_CAST_EXPR, K.CXX_FUNCTIONAL_CAST_EXPR):
            ch = [x for x in c.get_children() if x.kind != K.TYPE_REF]
            t = self.ctype_of(c)
            v, st = self.rvalue(ch[-1])
            if isinstance(v, _Ptr) or isinstance(t, tuple):
                raise self.refuse(c, "a pointer cast")
            return self.convert(v, st, t, c), t
        if k == K.CONDITIONAL_OPERATOR:
            cnd, a, b = c.get_children()
            t = self.ctype_of(c)
            if isinstance(t, tuple):
                raise self.refuse(c, "?: on pointers")
            p = self.cond(cnd)
            var = Value(_vt(t), "sel", is_var=True)
            then = self._capture(lambda: self.mov(var, self.convert(*self.rvalue(a), t, a)))
            orelse = self._capture(lambda: self.mov(var, self.convert(*self.rvalue(b), t, b)))
            self.body.append(ir.If(p, then, orelse))
            return var, t
        if k == K.CALL_EXPR:
            return self.call(c, discard)
        raise self.refuse(c)

    def _not_volatile(self, c: Any) -> None:
        """Refuse a ``volatile`` access: in CUDA it is the warp-synchronous idiom (lanes of a warp
        communicating through memory with no barrier), which has no meaning in WAVE's memory
        model (spec §5.3) without a wave-level barrier."""
        if c.type.is_volatile_qualified():
            raise self.refuse(c, "a volatile memory access (warp-synchronous code needs a wave-level barrier "
                              "that WAVE lacks: use __syncthreads() or the __shfl*_sync built-ins)")

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
        r = self.expr(inner)
        src_t = _ctype(inner.type)
        if isinstance(dst, tuple) and dst[0] == "ptr":
            if isinstance(r, tuple) and r[0] == "lv" and isinstance(src_t, tuple) and src_t[0] == "arr":
                place = r[1]
                if place[0] != "mem":
                    raise self.refuse(c)
                p = place[1]
                return _Ptr(p.space, p.buf, p.off, p.imm, src_t[1]), dst
            if isinstance(r, tuple) and r and isinstance(r[0], _Ptr):
                return r
            raise self.refuse(c, "this pointer conversion")
        if dst is None:
            raise self.refuse(c, f"a value of type {c.type.spelling!r}")
        if isinstance(r, tuple) and r and r[0] == "lv":
            v, st = self.load(r[1], c), r[2]
        else:
            v, st = r
        if isinstance(v, _Ptr):
            raise self.refuse(c, "a pointer converted to a number")
        return self.convert(v, st, dst, c), dst

    def pointer(self, c: Any) -> _Ptr:
        v, _ = self.rvalue(c)
        if not isinstance(v, _Ptr):
            raise self.refuse(c, "subscript of a non-pointer")
        return v

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
            term = self.alu("shl", vt, v, self.const(es.bit_length() - 1, ty.u32)) if es != 1 else v
            return _Ptr(p.space, p.buf, term, 0, p.pointee)
        v64 = self.convert(v, t, ty.i64 if t.is_signed else ty.u64, c)
        term = self.alu("mul", ty.u64, self.convert(v64, v64.type, ty.u64, c), self.const(es, ty.u64))
        return _Ptr(p.space, p.buf, self.alu("add", ty.u64, self._off64(p), term), 0, p.pointee)

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

    def load(self, place: Any, c: Any) -> Value:
        if place[0] == "var":
            return place[1]
        p: _Ptr = place[1]
        elem = p.pointee
        if not isinstance(elem, DType):
            raise self.refuse(c, "an array value")
        addr, wide = self._addr(p)
        nb = elem.scalar.nbytes
        kind = {8: "b64", 4: "b32"}.get(nb) or (("i16" if elem.is_signed else "u16") if nb == 2
                                                else ("i8" if elem.is_signed else "u8"))
        r = Value(_vt(elem))
        self.emit(mnemonic("ld", p.space, kind, addr64=wide), r, addr)
        return r

    def store(self, place: Any, v: Value, c: Any) -> None:
        if place[0] == "var":
            self.mov(place[1], v)
            return
        p: _Ptr = place[1]
        if p.space == "device" and self.args[p.buf][1].access is Access.READ:
            raise self.err(c, f"store through a pointer to const (parameter {self.args[p.buf][0]!r})")
        addr, wide = self._addr(p)
        nb = p.pointee.scalar.nbytes
        self.emit(mnemonic("st", p.space, f"b{nb * 8}", addr64=wide), addr, v)

    def lvalue(self, c: Any) -> tuple[Any, Any]:
        r = self.expr(c)
        if not (isinstance(r, tuple) and r and r[0] == "lv"):
            if c.kind == _cx.CursorKind.DECL_REF_EXPR:
                b = self.lookup(c.spelling, c)
                if isinstance(b, _PtrVar):
                    return ("ptrvar", b), ("ptr", b.pointee)
            raise self.refuse(c, "assignment to this expression")
        return r[1], r[2]

    def unary(self, c: Any, discard: bool) -> Any:
        op = _UN.get(_cx.conf.lib.clang_getCursorUnaryOperatorKind(c))
        (x,) = c.get_children()
        if op in ("++", "--", "post++", "post--"):
            place, t = self.lvalue(x)
            if place[0] == "ptrvar" or isinstance(t, tuple):
                raise self.refuse(c, "++/-- on a pointer")
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
            self._not_volatile(c)
            p = self.pointer(x)
            return ("lv", ("mem", p), p.pointee)
        if op == "&":
            r = self.expr(x)
            if isinstance(r, tuple) and r and r[0] == "lv" and r[1][0] == "mem":
                return r[1][1], ("ptr", r[2])
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

    def call(self, c: Any, discard: bool) -> Any:
        K = _cx.CursorKind
        ch = list(c.get_children())
        callee = c.referenced
        name = c.spelling
        args = ch[1:]
        if name == "__syncthreads" and not args:
            self.emit("barrier")
            return self.const(0, ty.i32), ty.i32
        if name in _MATH and callee is not None and _in_prelude(callee.location, self.path):
            opn, n = _MATH[name]
            t = self.ctype_of(c)
            vals = []
            for a in args:
                v, at = self.rvalue(a)
                vals.append(self.convert(v, at, t, a))
            if len(vals) != n:
                raise self.refuse(c, f"{name} with {len(vals)} arguments")
            return self.alu(opn, t, *vals), t
        if name in _ATOMIC and callee is not None and _in_prelude(callee.location, self.path):
            return self.atomic(c, _ATOMIC[name], args, discard)
        if callee is not None and _in_prelude(callee.location, self.path):
            if name in _warp.WARP_BUILTINS:
                return _warp.lower(self, c, name, args)
            if name == "__syncwarp":
                raise self.refuse(c, "__syncwarp (WAVE has no wave-level barrier yet, issue 28 item 2: "
                                  "exchange values with the __shfl*_sync built-ins, or use __syncthreads())")
            if name in _BITS:
                return self.bits(c, name, args)
        if name == "__ldg" and callee is not None and _in_prelude(callee.location, self.path):
            p = self.pointer(args[0])
            return self.load(("mem", p), c), p.pointee
        if callee is None or callee.kind != K.FUNCTION_DECL:
            raise self.refuse(c, f"call of {name!r}")
        attrs = {x.kind for x in callee.get_children()}
        defn = callee.get_definition()
        if (defn is not None and defn.kind != K.FUNCTION_DECL) or callee.get_num_template_arguments() > 0:
            raise self.refuse(c, f"call of template function {name!r}")
        if K.CUDADEVICE_ATTR not in attrs or defn is None:
            raise self.refuse(c, f"call of {name!r} (only __device__ functions defined in the source, "
                              "__syncthreads and the math functions listed in the docs)")
        if self._inline_depth > 32:
            raise self.err(c, f"call of {name!r}: __device__ functions nested more than 32 deep (recursion?)")
        # evaluate the arguments in the caller's scope, then bind them as the callee's locals
        params = list(defn.get_arguments())
        bound: dict[str, Any] = {}
        for p, a in zip(params, args, strict=True):
            pt = _ctype(p.type)
            if pt is None:
                raise self.refuse(p, f"a parameter of type {p.type.spelling!r}")
            v, at = self.rvalue(a)
            if isinstance(pt, tuple):
                if not isinstance(v, _Ptr):
                    raise self.refuse(a, "this pointer argument")
                bound[p.spelling] = v
                continue
            var = Value(_vt(pt), p.spelling, is_var=True)
            self.mov(var, self.convert(v, at, pt, a))
            bound[p.spelling] = ("var", var, pt)
        body = next(x for x in defn.get_children() if x.kind == K.COMPOUND_STMT)
        stmts = list(body.get_children())
        slot = {"last": stmts[-1] if stmts else None, "value": None}
        saved_scopes = self.scopes
        self.scopes = [saved_scopes[0] if False else {}, bound]
        self.ret_stack.append(slot)
        saved_loops = self.loop_kinds
        self.loop_kinds = []
        self._inline_depth += 1
        try:
            for s in stmts:
                self.stmt(s)
        finally:
            self._inline_depth -= 1
            self.loop_kinds = saved_loops
            self.ret_stack.pop()
            self.scopes = saved_scopes
        rt = _ctype(c.type) if c.type.kind != _cx.TypeKind.VOID else None
        if rt is None:
            return self.const(0, ty.i32), ty.i32
        if slot["value"] is None:
            raise self.err(c, f"__device__ function {name!r} does not end in a return")
        v, vt = slot["value"]
        return self.convert(v, vt, rt, c), rt


def _has_own_continue(c: Any) -> bool:
    """A ``continue`` in ``c`` that belongs to the loop around ``c`` (not to a nested loop)."""
    K = _cx.CursorKind
    for x in c.get_children():
        if x.kind == K.CONTINUE_STMT:
            return True
        if x.kind not in (K.FOR_STMT, K.WHILE_STMT, K.DO_STMT) and _has_own_continue(x):
            return True
    return False


def _where(loc: Any, path: str) -> str:
    """``file:line:column`` of a clang location, lines of the user's source (the prelude's
    lines before it subtracted)."""
    f = loc.file.name if loc.file else path
    line = loc.line - PRELUDE_LINES if f == path else loc.line
    return f"{f}:{line}:{loc.column}"


def _in_prelude(loc: Any, path: str) -> bool:
    return loc.file is not None and loc.file.name == path and loc.line <= PRELUDE_LINES


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

def parse(source: str, path: str = "kernel.cu", args: tuple[str, ...] = ()) -> Any:
    """The clang translation unit of CUDA ``source``; CompileError listing clang's errors."""
    cx = _clang()
    index = cx.Index.create()
    tu = index.parse(path, args=[*CLANG_ARGS, *args], unsaved_files=[(path, PRELUDE + "\n" + source)])
    errors = [d for d in tu.diagnostics if d.severity >= cx.Diagnostic.Error]
    if errors:
        lines = [f"{_where(d.location, path)}: {d.spelling}" for d in errors[:10]]
        raise CompileError("the CUDA source does not compile:\n" + "\n".join(lines))
    return tu


def kernel_names(source: str, path: str = "kernel.cu", clang_args: tuple[str, ...] = ()) -> list[str]:
    """The names of the ``__global__`` functions defined in ``source`` (templates left out)."""
    cx = _clang()
    tu = parse(source, path, clang_args)
    return [c.spelling for c in tu.cursor.walk_preorder()
            if c.kind == cx.CursorKind.FUNCTION_DECL and c.is_definition()
            and any(x.kind == cx.CursorKind.CUDAGLOBAL_ATTR for x in c.get_children())]


def find_kernel(tu: Any, name: str, path: str) -> Any:
    cx = _cx
    found = []
    for c in tu.cursor.walk_preorder():
        if c.kind == cx.CursorKind.FUNCTION_DECL and c.is_definition():
            if any(x.kind == cx.CursorKind.CUDAGLOBAL_ATTR for x in c.get_children()):
                found.append(c)
                if c.spelling == name:
                    return c
        elif c.kind == cx.CursorKind.FUNCTION_TEMPLATE and c.spelling == name:
            raise CompileError(f"{_where(c.location, path)}: not supported by the CUDA front end "
                               f"yet: template kernel {name!r}")
    names = ", ".join(repr(c.spelling) for c in found) or "none"
    raise CompileError(f"{path}: no __global__ function {name!r} (the __global__ functions: {names})")


def compile_cuda(source: str, name: str, path: str = "kernel.cu", *, workgroup: Any = None,
                 optimize: bool = True, clang_args: tuple[str, ...] = ()) -> tuple[Kernel, list[Param], Any]:
    """The WAVE Kernel of ``__global__`` function ``name`` in ``source``, its parameters
    (buffers for pointers, scalars) and the allocator's register report, through the compiler's
    passes, allocator and codegen."""
    tu = parse(source, path, clang_args)
    fn = find_kernel(tu, name, path)
    low = CudaLowering(tu, fn, path)
    try:
        low.build()
    except tr.TypeRuleError as e:  # an operation the instruction set lacks for this type
        raise low.err(low.cur, f"not supported by the CUDA front end yet: {e.message}") from None
    except RecursionError:
        raise low.err(low.cur, "expression or statements nested too deeply to compile") from None
    body = low.body
    if optimize:
        passes.optimize(body)
    threads = None if workgroup is None else workgroup[0] * workgroup[1] * workgroup[2]
    alloc, info = spill.allocate(body, name, local_memory=low.local_memory, threads=threads,
                                 max_workgroup_size=None)
    code, caps = codegen.emit(body, alloc)
    args = []
    for n, ann in low.args:
        if isinstance(ann, ty.BufferType):
            args.append(Arg(n, ArgKind.BUFFER, ann.elem.scalar, ann.access))
        else:
            args.append(Arg(n, ArgKind.SCALAR, ann.scalar))
    k = Kernel(name, args=args, registers=alloc.registers, local_memory=info.local_memory,
               workgroup_size=workgroup, max_workgroup_size=info.max_workgroup_size,
               capabilities=caps, code=code, flags=0 if low.wave_dependent else KERNEL_FLAG_W_INVARIANT,
               prints=[])
    return k, low.params, info


class CudaKernelDef:
    """One ``__global__`` function of a CUDA source, compiled on demand, for the compiler's
    own users (``anywave compile kernel.cu``); the launchable form is
    :class:`anywave.jit.cuda.CudaKernel`. ``compile()`` returns the Module, ``resources()``
    the register report (as :meth:`anywave.compiler.kernel.KernelDef.resources`)."""

    def __init__(self, source: str, name: str, path: str = "kernel.cu", clang_args: tuple[str, ...] = ()) -> None:
        self.source, self.name, self.path, self.clang_args = source, name, path, tuple(clang_args)
        self._built: tuple[Module, list[Param], Any] | None = None

    def _build(self) -> tuple[Module, list[Param], Any]:
        if self._built is None:
            k, params, info = compile_cuda(self.source, self.name, self.path, clang_args=self.clang_args)
            self._built = (Module(kernels=[k]), params, info)
        return self._built

    @property
    def params(self) -> list[Param]:
        return self._build()[1]

    def compile(self, **constants: Any) -> Module:
        if constants:
            raise CompileError(f"CUDA kernel {self.name!r} takes no compile-time constants")
        return self._build()[0]

    def resources(self, **constants: Any) -> dict[str, Any]:
        return self._build()[2].as_dict()


def cuda_kernel_defs(path: str, defines: tuple[str, ...] = ()) -> dict[str, CudaKernelDef]:
    """Every (non-template) ``__global__`` function of the ``.cu`` file ``path`` by name, in
    source order; ``defines`` (``NAME=VALUE``) are passed to clang as ``-DNAME=VALUE``."""
    with open(path, encoding="utf-8") as f:
        source = f.read()
    args = tuple(f"-D{d}" for d in defines)
    return {n: CudaKernelDef(source, n, path, args) for n in kernel_names(source, path, args)}
