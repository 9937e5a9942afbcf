"""The CUDA library calls the CUDA front end lowers by name (:mod:`anywave.compiler.cuda_frontend`):
the math library, the intrinsics, ``min``/``max``/``abs``, ``half``/``__nv_bfloat16`` and
``printf``. Declared in :mod:`anywave.compiler.cuda_prelude`; a declared name this module does
not lower is refused by the front end, by name.

Classes (spec §10, docs/guide/cuda.md "Math"):

* **exact** (one correctly rounded WAVE instruction, or an exact composition): ``sqrtf``,
  ``fabsf``, ``fminf``/``fmaxf``, ``fmaf``, ``floorf``/``ceilf``/``truncf``/``rintf``/
  ``nearbyintf``, ``roundf`` (half away from zero: ``trunc`` plus a select), ``copysignf``,
  ``fdimf``, ``__saturatef``, ``__fadd_rn`` ... ``__fmaf_rn``, ``__fsqrt_rn``,
  ``__frcp_rn``, the conversions ``__float2int_rn`` ..., the bit casts ``__float_as_int`` ...,
  ``__mul24``, ``__mulhi``, ``min``/``max``/``abs``; the same on every target and nvcc's bits.
* **precise** (the Python language's precise library, :mod:`anywave.compiler.stdlib`: built
  from exact instructions only, so every target returns the same bits; its error bounds are in
  that module's docstring): ``expf``, ``exp2f``, ``logf``, ``log2f``, ``sinf``, ``cosf``,
  ``sincosf``, ``tanhf``, ``erff``, ``powf`` (``aw.pow``, spec §8.18); ``rsqrtf`` is
  ``1.0f / sqrtf(x)`` (two correct roundings).
  Their bits are not nvcc's (CUDA's libdevice is a different approximation).
* **approx** (the ``*.approx.f32`` instructions, spec's bounds, may differ between targets):
  ``__expf`` (``ex2.approx(x · log2 e)``), ``__exp10f``, ``__logf``, ``__log2f``,
  ``__log10f``, ``__sinf``, ``__cosf``, ``__tanf`` (``__sinf / __cosf``), ``__sincosf``,
  ``__powf`` (``ex2.approx(y · lg2.approx(x))``, CUDA's own definition), ``__fdividef``
  (``x · rcp.approx(y)``).

Refused by name: the functions without a precise lowering yet (``tanf``, ``log10f``,
``atan2f`` ..., and every ``double`` transcendental).
"""

from __future__ import annotations

import re
import types as _pytypes
from typing import Any

from anywave.binary.module import PRINT_ARG, PrintFormat
from anywave.isa.types import Access, MemoryOrder, Scope
from anywave.isa.types import SpecialRegister as SR

from . import ir
from . import language as _lang
from . import stdlib as _std
from . import types as ty
from .errors import CompileError
from .ir import PredUse, Value

#: exact ALU operations: C name -> (operation, arity)
EXACT = {
    "sqrtf": ("sqrt", 1), "sqrt": ("sqrt", 1), "fabsf": ("abs", 1), "fabs": ("abs", 1),
    "fminf": ("min", 2), "fmin": ("min", 2), "fmaxf": ("max", 2), "fmax": ("max", 2),
    "fmaf": ("fma", 3), "fma": ("fma", 3), "floorf": ("floor", 1), "floor": ("floor", 1),
    "ceilf": ("ceil", 1), "ceil": ("ceil", 1), "truncf": ("trunc", 1), "trunc": ("trunc", 1),
    "rintf": ("rint", 1), "rint": ("rint", 1), "nearbyintf": ("rint", 1), "nearbyint": ("rint", 1),
    "__fadd_rn": ("add", 2), "__fsub_rn": ("sub", 2), "__fmul_rn": ("mul", 2), "__fdiv_rn": ("div", 2),
    "__fmaf_rn": ("fma", 3), "__fsqrt_rn": ("sqrt", 1), "__dadd_rn": ("add", 2), "__dsub_rn": ("sub", 2),
    "__dmul_rn": ("mul", 2), "__ddiv_rn": ("div", 2), "__fma_rn": ("fma", 3), "__dsqrt_rn": ("sqrt", 1),
}
#: precise f32 functions of the language's library: C name -> stdlib function name
PRECISE = {"expf": "exp", "exp": "exp", "exp2f": "exp2", "exp2": "exp2", "logf": "log", "log": "log",
           "log2f": "log2", "log2": "log2", "sinf": "sin", "sin": "sin", "cosf": "cos", "cos": "cos",
           "tanhf": "tanh", "tanh": "tanh", "erff": "erf", "erf": "erf"}
#: the fast intrinsics (approx class)
FAST = frozenset({"__expf", "__exp10f", "__logf", "__log2f", "__log10f", "__sinf", "__cosf", "__tanf",
                  "__powf", "__fdividef", "__sincosf"})
_LOG2E, _LOG2_10, _LN2, _LOG10_2 = 1.4426950408889634, 3.321928094887362, 0.6931471805599453, 0.3010299956639812
_BITCAST = {"__float_as_int": ty.i32, "__int_as_float": ty.f32, "__float_as_uint": ty.u32,
            "__uint_as_float": ty.f32, "__double_as_longlong": ty.i64, "__longlong_as_double": ty.f64}
_F2I = {"__float2int_rn": ("rint", ty.i32), "__float2int_rz": (None, ty.i32), "__float2int_rd": ("floor", ty.i32),
        "__float2int_ru": ("ceil", ty.i32), "__float2uint_rn": ("rint", ty.u32), "__float2uint_rz": (None, ty.u32),
        "__float2ll_rz": (None, ty.i64), "__double2int_rn": ("rint", ty.i32), "__double2int_rz": (None, ty.i32),
        "__int2float_rn": (None, ty.f32), "__uint2float_rn": (None, ty.f32), "__double2float_rn": (None, ty.f32)}
_HALF_BIN = {"operator+": "add", "operator-": "sub", "operator*": "mul", "operator/": "div", "__hadd": "add",
             "__hsub": "sub", "__hmul": "mul", "__hdiv": "div", "__hmax": "max", "__hmin": "min"}
_HALF_CMP = {"operator==": "eq", "operator!=": "ne", "operator<": "lt", "operator>": "gt", "operator<=": "le",
             "operator>=": "ge", "__heq": "eq", "__hne": "ne", "__hlt": "lt", "__hgt": "gt", "__hle": "le",
             "__hge": "ge"}
_HALF_COMPOUND = {"operator+=": "add", "operator-=": "sub", "operator*=": "mul", "operator/=": "div"}

#: the namespace the precise library's fragments are compiled in
_aw = _pytypes.SimpleNamespace(**_lang.INTRINSICS, **{n: getattr(_std, n) for n in _std.__all__},
                               **{k: v for k, v in vars(ty).items() if isinstance(v, ty.DType)})


def _frag_1(o, x):  # noqa: ANN001, ANN202 - compiled by the Python front end (see precise())
    o[0] = FN(x)  # noqa: F821 - FN is bound in the copy's globals


def _frag_2(o, x, y):  # noqa: ANN001, ANN202 - compiled by the Python front end (see precise())
    o[0] = FN(x, y)  # noqa: F821 - FN is bound in the copy's globals


def precise(low: Any, fname: str, *xs: Value) -> Value:
    """``aw.<fname>(*xs)`` of the language's precise library, lowered by the Python front end and
    spliced in: its IR with the arguments read from ``xs`` (f32), its result the value it stores."""
    from .frontend import Frontend
    from .source import FuncSource

    frag = _frag_1 if len(xs) == 1 else _frag_2
    fn = _pytypes.FunctionType(frag.__code__, {"FN": getattr(_aw, fname), "aw": _aw, "__builtins__": __builtins__},
                               f"cuda_{fname}")
    src = FuncSource.of(frag)
    src.fn = fn
    fe = Frontend(src, {}, f"cuda_{fname}")
    names = ("x", "y")[:len(xs)]
    body = fe.build([("o", ty.BufferType(ty.f32, Access.READWRITE)), *((n, ty.f32) for n in names)])
    out: list[ir.Node] = []
    result: Value | None = None
    for n in body:
        if isinstance(n, ir.Op) and n.defn.mnemonic.startswith("ldarg"):
            low.mov(n.operands[0], xs[int(n.operands[1]) - 1])  # argument 1.. (0 is o)
            continue
        if isinstance(n, ir.Op) and n.defn.mnemonic.startswith("st.device"):
            result = n.operands[1]
            continue
        out.append(n)
    if result is None:
        raise CompileError(f"internal: the precise {fname} fragment stores no result")
    for n in out:
        low.body.append(n)
    return result


def _args(low: Any, args: list[Any], t: Any) -> list[Value]:
    out = []
    for a in args:
        v, at = low.rvalue(a)
        out.append(low.convert(v, at, t, a))
    return out


def _sel(low: Any, p: PredUse, a: Value, b: Value) -> Value:
    r = Value(a.type)
    low.emit("selp.b64" if a.type.bits == 64 else "selp.b32", r, a, b, p)
    return r


def _cmp(low: Any, op: str, a: Value, b: Value) -> PredUse:
    from . import typerules as tr

    p = Value(ty.pred)
    low.emit(tr.compare_mnemonic(op, a.type), p, a, b)
    return PredUse(p)


def _approx(low: Any, mn: str, x: Value) -> Value:
    r = Value(ty.f32)
    low.emit(f"{mn}.approx.f32", r, x)
    return r


def lower(low: Any, c: Any, name: str, args: list[Any]) -> tuple[Any, Any] | None:
    """The call ``name(args)`` at cursor ``c`` if this module lowers it: (value, C type), or
    None (the front end then refuses it by name)."""
    t = low.ctype_of(c) if c.type.get_canonical().kind != low.cx.TypeKind.VOID else None
    if name in EXACT:
        op, n = EXACT[name]
        if len(args) != n or not isinstance(t, ty.DType):
            return None
        return low.alu(op, t, *_args(low, args, t)), t
    if name in ("min", "max") and isinstance(t, ty.DType):
        return low.alu(name, t, *_args(low, args, t)), t
    if name in ("abs", "labs", "llabs") and isinstance(t, ty.DType):
        (x,) = _args(low, args, t)
        return low.alu("abs", t, x), t
    if name in PRECISE and t is ty.f32:
        (x,) = _args(low, args, ty.f32)
        return precise(low, PRECISE[name], x), t
    if name in ("powf", "pow") and t is ty.f32 and len(args) == 2:
        x, y = _args(low, args, ty.f32)
        return precise(low, "pow", x, y), t
    if name in ("sincosf", "__sincosf", "sincos") and args:
        (x,) = _args(low, args[:1], ty.f32) if name != "sincos" else (None,)
        if x is None:
            return None
        for a, f in zip(args[1:], ("sin", "cos"), strict=True):
            v = precise(low, f, x) if name == "sincosf" else _approx(low, f, x)
            low.store(low.deref(a), v, a)
        return low.const(0, ty.i32), ty.i32
    if name in ("rsqrtf", "rsqrt") and t is ty.f32:
        (x,) = _args(low, args, ty.f32)
        return low.alu("div", ty.f32, low.const(1.0, ty.f32), low.alu("sqrt", ty.f32, x)), t
    if name == "__frcp_rn" and t is ty.f32:
        (x,) = _args(low, args, ty.f32)
        return low.alu("div", ty.f32, low.const(1.0, ty.f32), x), t
    if name in ("roundf", "round") and isinstance(t, ty.DType) and t.is_float:
        (x,) = _args(low, args, t)
        tr_ = low.alu("trunc", t, x)  # x - trunc(x) is exact
        frac = low.alu("abs", t, low.alu("sub", t, x, tr_))
        half = _cmp(low, "ge", frac, low.const(0.5, t))
        neg = _cmp(low, "lt", x, low.const(0.0, t))
        step = _sel(low, neg, low.const(-1.0, t), low.const(1.0, t))
        return _sel(low, half, low.alu("add", t, tr_, step), tr_), t
    if name in ("copysignf", "copysign") and isinstance(t, ty.DType) and t.is_float:
        a, b = _args(low, args, t)
        ut = ty.u32 if t.bits == 32 else ty.u64
        sign = 1 << (t.bits - 1)
        ab, bb = Value(ut), Value(ut)
        low.mov(ab, a)
        low.mov(bb, b)
        mag = low.alu("and", ut, ab, low.const(sign - 1, ut))
        sg = low.alu("and", ut, bb, low.const(sign, ut))
        r = Value(t)
        low.mov(r, low.alu("or", ut, mag, sg))
        return r, t
    if name in ("fdimf", "fdim") and isinstance(t, ty.DType) and t.is_float:
        a, b = _args(low, args, t)  # a - b when a > b, +0 when a <= b, NaN when either is NaN
        d = low.alu("sub", t, a, b)
        le = _cmp(low, "le", a, b)
        return _sel(low, le, low.const(0.0, t), d), t
    if name == "__saturatef":
        (x,) = _args(low, args, ty.f32)  # clamp to [0, 1] (-0.0 kept); NaN -> +0
        ge0 = _cmp(low, "ge", x, low.const(0.0, ty.f32))
        y = _sel(low, ge0, x, low.const(0.0, ty.f32))
        lt1 = _cmp(low, "le", y, low.const(1.0, ty.f32))
        return _sel(low, lt1, y, low.const(1.0, ty.f32)), ty.f32
    if name in ("isnan", "isinf", "isfinite", "signbit") and args:
        v, at = low.rvalue(args[0])
        if not (isinstance(at, ty.DType) and at.is_float):
            return None
        if name == "isnan":
            return _cmp(low, "ne", v, v).value, ty.bool_
        a = low.alu("abs", at, v)
        if name == "isinf":
            return _cmp(low, "eq", a, low.const(float("inf"), at)).value, ty.bool_
        if name == "isfinite":
            return _cmp(low, "lt", a, low.const(float("inf"), at)).value, ty.bool_
        ut = ty.u32 if at.bits == 32 else ty.u64
        b = Value(ut)
        low.mov(b, v)
        return _cmp(low, "ne", low.alu("shr", ut, b, low.const(at.bits - 1, ty.u32)), low.const(0, ut)).value, ty.bool_
    if name in _BITCAST:
        dst = _BITCAST[name]
        src_t = {ty.i32: ty.f32, ty.u32: ty.f32, ty.f32: None, ty.i64: ty.f64, ty.f64: ty.i64}[dst]
        v, at = low.rvalue(args[0])
        if src_t is None:
            src_t = ty.i32 if name == "__int_as_float" else ty.u32
        v = low.convert(v, at, src_t, args[0])
        r = Value(dst)
        low.emit("mov.b64" if dst.bits == 64 else "mov.b32", r, v)
        return r, dst
    if name in _F2I:
        rnd, dst = _F2I[name]
        v, at = low.rvalue(args[0])
        if rnd is not None:
            v = low.alu(rnd, at, v)
        return low.convert(v, at, dst, c), dst
    if name in ("__mul24", "__umul24"):
        signed = name == "__mul24"
        it = ty.i32 if signed else ty.u32
        a, b = _args(low, args, it)
        k = low.const(8, ty.u32)

        def low24(x: Value) -> Value:
            if signed:
                return low.alu("shr", it, low.alu("shl", it, x, k), k)
            return low.alu("and", it, x, low.const(0xFFFFFF, it))

        return low.alu("mul", it, low24(a), low24(b)), it
    if name in ("__mulhi", "__umulhi"):
        it = ty.i32 if name == "__mulhi" else ty.u32
        a, b = _args(low, args, it)
        return low.alu("mulhi", it, a, b), it
    if name in FAST:
        return _fast(low, c, name, args)
    if t in (ty.f16, ty.bf16) or name in _HALF_CMP or name in _HALF_COMPOUND or name.startswith(("__h", "h")) \
            or name in ("__half2float", "__bfloat162float", "__float2half", "__float2half_rn",
                        "__float2bfloat16", "__float2bfloat16_rn"):
        return _half(low, c, name, args, t)
    if name == "printf":
        return printf(low, c, args)
    return None


def _fast(low: Any, c: Any, name: str, args: list[Any]) -> tuple[Any, Any]:
    """The ``__expf`` family: approx class (see the module's note)."""
    f32 = ty.f32
    xs = _args(low, [a for a in args if low.ctype_of(a) is not None and not isinstance(low.ctype_of(a), tuple)],
               f32)
    x = xs[0]
    if name == "__expf":
        return _approx(low, "ex2", low.alu("mul", f32, x, low.const(_LOG2E, f32))), f32
    if name == "__exp10f":
        return _approx(low, "ex2", low.alu("mul", f32, x, low.const(_LOG2_10, f32))), f32
    if name == "__logf":
        return low.alu("mul", f32, _approx(low, "lg2", x), low.const(_LN2, f32)), f32
    if name == "__log2f":
        return _approx(low, "lg2", x), f32
    if name == "__log10f":
        return low.alu("mul", f32, _approx(low, "lg2", x), low.const(_LOG10_2, f32)), f32
    if name in ("__sinf", "__cosf"):
        return _approx(low, name[2:5], x), f32
    if name == "__tanf":
        return low.alu("mul", f32, _approx(low, "sin", x), _approx(low, "rcp", _approx(low, "cos", x))), f32
    if name == "__powf":
        y = xs[1]
        return _approx(low, "ex2", low.alu("mul", f32, y, _approx(low, "lg2", x))), f32
    if name == "__fdividef":
        return low.alu("mul", f32, x, _approx(low, "rcp", xs[1])), f32
    for a, f in zip(args[1:], ("sin", "cos"), strict=True):  # __sincosf
        low.store(low.deref(a), _approx(low, f, x), a)
    return low.const(0, ty.i32), ty.i32


def _half(low: Any, c: Any, name: str, args: list[Any], t: Any) -> tuple[Any, Any] | None:
    """``half``/``__nv_bfloat16`` operators and functions (cuda_fp16.h / cuda_bf16.h names):
    each operation in the type itself, one rounding (spec §8.2 for f16/bf16)."""
    if name in ("__half2float", "__bfloat162float"):
        v, at = low.rvalue(args[0])
        return low.convert(v, at, ty.f32, c), ty.f32
    if name in ("__float2half", "__float2half_rn", "__float2bfloat16", "__float2bfloat16_rn"):
        v, at = low.rvalue(args[0])
        return low.convert(v, at, t, c), t
    vals = []
    hts = []
    for a in args:
        v, at = low.rvalue(a) if name not in _HALF_COMPOUND or a is not args[0] else (None, None)
        vals.append(v)
        hts.append(at)
    ht = next((x for x in hts if x in (ty.f16, ty.bf16)), None)
    if ht is None:
        return None
    if name in _HALF_COMPOUND:
        place, pt = low.lvalue(args[0])
        old = low.load(place, args[0])
        r = low.alu(_HALF_COMPOUND[name], ht, old, low.convert(vals[1], hts[1], ht, args[1]))
        low.store(place, r, c)
        return ("lv", place, pt)
    vals = [low.convert(v, vt, ht, a) for v, vt, a in zip(vals, hts, args, strict=True)]
    if name in _HALF_BIN and len(vals) == 2:
        return low.alu(_HALF_BIN[name], ht, *vals), ht
    if name in ("operator-", "__hneg") and len(vals) == 1:
        return low.alu("neg", ht, vals[0]), ht
    if name == "__habs":
        return low.alu("abs", ht, vals[0]), ht
    if name == "__hfma":
        return low.alu("fma", ht, *vals), ht
    if name == "hsqrt":
        return low.alu("sqrt", ht, vals[0]), ht
    if name in _HALF_CMP:
        return _cmp(low, _HALF_CMP[name], vals[0], vals[1]).value, ty.bool_
    if name == "__hisnan":
        return _cmp(low, "ne", vals[0], vals[0]).value, ty.bool_
    return None


# ----------------------------------------------------------------------------- printf

_CONV = {"d": "d", "i": "d", "u": "d", "x": "x", "X": "X", "o": "o", "c": "c", "f": "f", "F": "F", "e": "e",
         "E": "E", "g": "g", "G": "G", "a": None, "s": None, "p": None, "n": None}


def _format(fmt: str, c: Any, low: Any) -> tuple[str, list[str]]:
    """C's printf format ``fmt`` as a Python format string (one ``{}`` field per value) and the
    conversion letter of each field. CompileError for %s, %p, %n, %a and ``*`` widths."""
    out, convs, i = [], [], 0
    while i < len(fmt):
        ch = fmt[i]
        if ch in "{}":
            out.append(ch * 2)
            i += 1
            continue
        if ch != "%":
            out.append(ch)
            i += 1
            continue
        if fmt[i + 1:i + 2] == "%":
            out.append("%")
            i += 2
            continue
        j = i + 1
        flags = ""
        while j < len(fmt) and fmt[j] in "-+ #0":
            flags += fmt[j]
            j += 1
        width = ""
        while j < len(fmt) and fmt[j].isdigit():
            width += fmt[j]
            j += 1
        prec = ""
        if j < len(fmt) and fmt[j] == ".":
            j += 1
            prec = "."
            while j < len(fmt) and fmt[j].isdigit():
                prec += fmt[j]
                j += 1
            if prec == ".":
                prec = ".0"
        while j < len(fmt) and fmt[j] in "hlLqjzt":
            j += 1
        conv = fmt[j] if j < len(fmt) else ""
        if conv not in _CONV or _CONV[conv] is None or "*" in fmt[i:j]:
            raise low.refuse(c, f"printf conversion %{fmt[i + 1:j + 1]} (only %d %i %u %x %X %o %c %f %e %g)")
        spec = ("<" if "-" in flags else "") + ("+" if "+" in flags else (" " if " " in flags else "")) + \
            ("#" if "#" in flags else "") + ("0" if "0" in flags and "-" not in flags else "") + width
        if conv in "dioxXuc" and prec:
            prec = ""  # an integer precision (minimum digits) is not Python's; dropped
        out.append("{:" + spec + prec + _CONV[conv] + "}")
        convs.append(conv)
        i = j + 1
    return "".join(out), convs


def printf(low: Any, c: Any, args: list[Any]) -> tuple[Any, Any]:
    """``printf(fmt, ...)`` as ``aw.print`` records (compiler/debugprint.py): the host prints
    them after the launch, sorted by workgroup, thread and program order. Returns 0 (CUDA's
    printf returns the number of arguments parsed; nothing here reads it)."""
    K = low.cx.CursorKind
    fc = args[0]
    while fc.kind in (K.UNEXPOSED_EXPR, K.PAREN_EXPR) and len(list(fc.get_children())) == 1:
        fc = next(fc.get_children())
    if fc.kind != K.STRING_LITERAL:
        raise low.refuse(args[0], "printf with a format that is not a string literal")
    raw = fc.spelling
    fmt = bytes(raw[1:-1], "utf-8").decode("unicode_escape")
    if fmt.endswith("\n"):  # each call prints one line (aw.print adds the newline)
        fmt = fmt[:-1]
    pyfmt, convs = _format(fmt, c, low)
    if len(convs) != len(args) - 1:
        raise low.err(c, f"printf: the format has {len(convs)} conversion(s) but {len(args) - 1} value(s) were given")
    words: list[Value] = []
    types = []
    for a, conv in zip(args[1:], convs, strict=True):
        v, at = low.rvalue(a)
        if not isinstance(at, ty.DType):
            raise low.refuse(a, "printf of a pointer or struct")
        if conv in "uxXo" and at.is_int and at.is_signed:  # C reads the bits as unsigned
            at2 = ty.u64 if at.bits == 64 else ty.u32
            v, at = low.convert(v, at, at2, a), at2
        elif conv in "dic" and at.is_int and not at.is_signed:
            at2 = ty.i64 if at.bits == 64 else ty.i32
            v, at = low.convert(v, at, at2, a), at2
        elif conv in "fFeEgG" and not at.is_float:
            raise low.err(a, f"printf: %{conv} needs a floating-point value, got {at.name}")
        elif conv in "diuxXoc" and not at.is_int and at is not ty.bool_:
            raise low.err(a, f"printf: %{conv} needs an integer value, got {at.name}")
        if at is ty.bool_ or at in ty.NARROW_TYPES:
            v, at = low.convert(v, at, ty.i32, a), ty.i32
        if at in (ty.f16, ty.bf16):
            v, at = low.convert(v, at, ty.f32, a), ty.f32
        types.append(at.scalar)
        if at.bits == 64:
            b = v if at is ty.u64 else Value(ty.u64)
            if b is not v:
                low.emit("mov.b64", b, v)
            words.append(low.convert(b, ty.u64, ty.u32, a))
            words.append(low.convert(low.alu("shr", ty.u64, b, low.const(32, ty.u32)), ty.u64, ty.u32, a))
        else:
            w = v if at is ty.u32 else Value(ty.u32)
            if w is not v:
                low.emit("mov.b32", w, v)
            words.append(w)
    _record(low, c, pyfmt, types, words)
    return low.const(len(args) - 1, ty.i32), ty.i32


def _stringized_text(spelling: str) -> str:
    """The text of a stringized expression (``#e``, as clang spells the literal) as the user
    wrote it: stringizing escapes ``\\`` and ``\"`` (C17 6.10.3.2) and clang spells each byte of
    a non-ASCII character as an octal escape (``ü``: ``\\303\\274``); those are undone, the
    bytes read as UTF-8."""
    def one(m: re.Match[bytes]) -> bytes:
        e = m.group(1)
        return bytes([int(e, 8) & 0xFF]) if e[:1].isdigit() else e

    raw = re.sub(rb'\\([0-7]{1,3}|[\\"])', one, spelling[1:-1].encode("utf-8"))
    return raw.decode("utf-8", errors="backslashreplace")


def _record(low: Any, c: Any, pyfmt: str, types: list[Any], words: list[Value]) -> None:
    """One print record of call site ``c`` (Python format ``pyfmt`` of the values ``words``, 32-bit
    each, whose types are ``types``): appended to the print buffer when it fits."""
    where = low.user_file_line(c)
    site = len(low.prints)
    low.prints.append(PrintFormat(pyfmt, tuple(types), where))
    buf = low.print_buffer()
    n = 3 + len(words)
    off = Value(ty.u32)
    low.emit("atom.device.add.u32", off, ir.DevAddr(buf, low.const(0, ty.u32)), low.const(n, ty.u32), Scope.DEVICE,
             MemoryOrder.RELAXED)
    cap = Value(ty.u32)
    low.emit("ld.device.b32", cap, ir.DevAddr(buf, low.const(4, ty.u32)))
    end = low.alu("add", ty.u32, off, low.const(n, ty.u32))
    fits = _cmp(low, "le", end, cap)
    saved = low.body
    low.body = []
    try:
        sr = {}
        for r in (SR.WORKGROUP_ID_X, SR.WORKGROUP_ID_Y, SR.WORKGROUP_ID_Z, SR.GRID_SIZE_X, SR.GRID_SIZE_Y,
                  SR.THREAD_LINEAR_ID):
            sr[r] = Value(ty.u32)
            low.emit("mov.sr", sr[r], r)
        zy = low.alu("add", ty.u32, low.alu("mul", ty.u32, sr[SR.WORKGROUP_ID_Z], sr[SR.GRID_SIZE_Y]),
                     sr[SR.WORKGROUP_ID_Y])
        wg = low.alu("add", ty.u32, low.alu("mul", ty.u32, zy, sr[SR.GRID_SIZE_X]), sr[SR.WORKGROUP_ID_X])
        record = [low.const(site + 1, ty.u32), wg, sr[SR.THREAD_LINEAR_ID], *words]
        byte = low.alu("shl", ty.u32, off, low.const(2, ty.u32))
        for k, w in enumerate(record):
            a = byte if k == 0 else low.alu("add", ty.u32, byte, low.const(4 * k, ty.u32))
            low.emit("st.device.b32", ir.DevAddr(buf, a), w)
        then = low.body
    finally:
        low.body = saved
    low.body.append(ir.If(fits, then, []))


def assert_(low: Any, c: Any, args: list[Any]) -> tuple[Any, Any]:
    """``assert(e)`` (``<cassert>``/``<assert.h>``, the macro calls ``__anywave_assert(e, "e")``):
    where ``e`` is false the thread prints CUDA's message (``file:line: function: block:
    [x,y,z], thread: [x,y,z] Assertion `e` failed.``, a printf record: the host prints it after
    the launch) and ends (``halt``), as if it returned from the kernel; the other threads go
    on. CUDA instead stops the whole grid and fails the launch: WAVE has no trap (spec §7.1),
    so the launch here completes and the message is the report. With ``NDEBUG`` defined the
    macro is ``((void)0)``: nothing is compiled."""
    K = low.cx.CursorKind
    text = args[1]
    while text.kind in (K.UNEXPOSED_EXPR, K.PAREN_EXPR) and len(list(text.get_children())) == 1:
        text = next(text.get_children())
    expr_text = _stringized_text(text.spelling) if text.kind == K.STRING_LITERAL else "?"
    p = low.cond(args[0])
    fn = low.functions[-1]
    where = low.user_file_line(c)
    head = f"{where}: {fn.displayname}: ".replace("{", "{{").replace("}", "}}")
    tail = f" Assertion `{expr_text}` failed.".replace("{", "{{").replace("}", "}}")
    fmt = head + "block: [{},{},{}], thread: [{},{},{}]" + tail
    saved = low.body
    low.body = []
    try:
        words = []
        for r in (SR.WORKGROUP_ID_X, SR.WORKGROUP_ID_Y, SR.WORKGROUP_ID_Z, SR.THREAD_ID_X, SR.THREAD_ID_Y,
                  SR.THREAD_ID_Z):
            v = Value(ty.u32)
            low.emit("mov.sr", v, r)
            words.append(v)
        _record(low, c, fmt, [ty.u32.scalar] * 6, words)
        low.body.append(ir.Halt())
        failed = low.body
    finally:
        low.body = saved
    low.body.append(ir.If(PredUse(p.value, not p.negated), failed, []))
    return low.const(0, ty.i32), ty.i32


__all__ = ["assert_", "lower", "precise", "printf", "PRINT_ARG"]
