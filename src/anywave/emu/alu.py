"""Register-to-register semantics: integer, float, bitwise, compare, conversion and moves.

Each ``_op_*`` factory receives one :class:`~anywave.binary.module.Instruction` and returns
a closure ``run(st, mask, dense)`` that executes it for every lane of a batch at once:
``st`` is the batch state (:class:`anywave.emu.machine.Batch`), ``mask`` a bool array
``[N]`` of the lanes it takes effect in, ``dense`` True when ``mask`` holds every existing
lane (the closure may then overwrite whole register rows). Registers live in
``st.regs``, ``uint32[nregs, N]``; predicates in ``st.preds``, ``bool[8, N]``.
Semantics: docs/decisions.md (normative) and the summaries in ``anywave.isa.table``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from anywave.binary.module import Instruction, Pred
from anywave.emu import floats as fl
from anywave.isa.types import ScalarType as T
from anywave.isa.types import SpecialRegister

Run = Callable[[Any, np.ndarray, bool], None]
U32, U64, I32, I64 = np.uint32, np.uint64, np.int32, np.int64
_M32 = np.uint64(0xFFFFFFFF)


# ----------------------------------------------------------------------------- access

def merge32(st: Any, row: np.ndarray, v: Any, mask: np.ndarray) -> None:
    """row = mask ? v : row for a uint32 row, branch-free (bit select with the all-ones /
    zero word mask ``st.mask32(mask)``): several times faster than ``np.copyto(where=)`` on
    divergent masks, whose per-element branches mispredict."""
    m = st.mask32(mask)
    t = st.scratch32
    if isinstance(v, np.ndarray) and v.dtype.itemsize == 4 and v.dtype.kind in "uif":
        v = v.view(U32)
    np.bitwise_xor(v, row, out=t, casting="unsafe")
    np.bitwise_and(t, m, out=t)
    np.bitwise_xor(row, t, out=row)


def merge_pred(st: Any, row: np.ndarray, v: Any, mask: np.ndarray) -> None:
    """row = mask ? v : row for a bool row (bit select on the 0/1 bytes)."""
    t = st.scratch8
    r8 = row.view(np.uint8)
    v8 = v.view(np.uint8) if isinstance(v, np.ndarray) and v.dtype == bool else np.asarray(v, bool).view(np.uint8)
    np.bitwise_xor(v8, r8, out=t)
    np.bitwise_and(t, mask.view(np.uint8), out=t)
    np.bitwise_xor(r8, t, out=r8)


def w32(st: Any, r: int, v: Any, mask: np.ndarray, dense: bool) -> None:
    """Write uint32 values (array [N] or scalar) to register r where mask holds."""
    if dense:
        st.regs[r] = v
    else:
        merge32(st, st.regs[r], v, mask)


def r64(st: Any, r: int) -> np.ndarray:
    """Register pair r:r+1 as uint64 [N] (low word in r)."""
    return st.regs[r].astype(U64) | (st.regs[r + 1].astype(U64) << np.uint64(32))


def w64(st: Any, r: int, v: np.ndarray, mask: np.ndarray, dense: bool) -> None:
    v = np.asarray(v, U64)
    w32(st, r, (v & _M32).astype(U32), mask, dense)
    w32(st, r + 1, (v >> np.uint64(32)).astype(U32), mask, dense)


def wp(st: Any, p: int, v: Any, mask: np.ndarray, dense: bool) -> None:
    """Write predicate p."""
    if dense:
        st.preds[p] = v
    else:
        merge_pred(st, st.preds[p], v, mask)


def rp(st: Any, p: Pred) -> np.ndarray:
    v = st.preds[p.index]
    return ~v if p.negated else v


def read_int(st: Any, r: int, t: T) -> np.ndarray:
    """A register (pair) as the NumPy integer type matching t."""
    if t.bits == 64:
        v = r64(st, r)
        return v.view(I64) if t.is_signed else v
    v = st.regs[r]
    return v.view(I32) if t.is_signed else v


def read_float(st: Any, r: int, t: T) -> np.ndarray:
    """A float register value in its compute dtype: float64 for f64, float32 otherwise."""
    if t is T.F64:
        return r64(st, r).view(np.float64)
    if t is T.F32:
        return st.regs[r].view(np.float32)
    if t is T.F16:
        return fl.f16_bits_to_f32(st.regs[r])
    if t is T.BF16:
        return fl.bf16_bits_to_f32(st.regs[r])
    raise AssertionError(t)


def round_bits(x: np.ndarray, t: T) -> np.ndarray:
    """Compute-dtype value -> register bits (uint32, or uint64 for f64), NaN canonical."""
    if t is T.F64:
        return fl.canon64(x)
    if t is T.F32:
        return fl.canon32(x.astype(np.float32, copy=False)) if x.dtype == np.float32 else \
            fl.canon32(x.astype(np.float32))
    if t is T.F16:
        return fl.f32_to_f16_bits(x) if x.dtype == np.float32 else fl.f64_to_f16_bits(x)
    if t is T.BF16:
        return fl.f32_to_bf16_bits(x) if x.dtype == np.float32 else fl.f64_to_bf16_bits(x)
    raise AssertionError(t)


def write_float(st: Any, r: int, t: T, x: np.ndarray, mask: np.ndarray, dense: bool) -> None:
    bits = round_bits(x, t)
    if t is T.F64:
        w64(st, r, bits, mask, dense)
    else:
        w32(st, r, bits, mask, dense)


def write_int(st: Any, r: int, t: T, v: np.ndarray, mask: np.ndarray, dense: bool) -> None:
    if t.bits == 64:
        w64(st, r, v.astype(U64, copy=False) if v.dtype != U64 else v, mask, dense)
    else:
        w32(st, r, v.astype(U32, copy=False) if v.dtype != U32 else v, mask, dense)


# ----------------------------------------------------------------------------- integer

def _ufunc_into(fn: np.ufunc, dt: Any, d: int, srcs: tuple[int, ...]) -> Run:
    """A 32-bit elementwise op computed straight into register row d (viewed as dt), only
    where the mask holds: one pass, no temporaries (the ufunc's ``out=``/``where=``)."""
    if len(srcs) == 2:
        a, b = srcs

        def run2(st: Any, mask: np.ndarray, dense: bool) -> None:
            r = st.regs
            if dense:
                fn(r[a].view(dt), r[b].view(dt), out=r[d].view(dt))
            else:
                t = st.scratch32b
                fn(r[a].view(dt), r[b].view(dt), out=t.view(dt))
                merge32(st, r[d], t, mask)
        return run2
    (a,) = srcs

    def run1(st: Any, mask: np.ndarray, dense: bool) -> None:
        r = st.regs
        if dense:
            fn(r[a].view(dt), out=r[d].view(dt))
        else:
            t = st.scratch32b
            fn(r[a].view(dt), out=t.view(dt))
            merge32(st, r[d], t, mask)
    return run1


#: ops whose 32-bit two's-complement result does not depend on signedness
_SIGN_FREE = {np.add, np.subtract, np.multiply, np.bitwise_and, np.bitwise_or, np.bitwise_xor,
              np.invert, np.negative}


def _int_binop(fn: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> Callable[[Instruction], Run]:
    def make(ins: Instruction) -> Run:
        t = ins.defn.type
        d, a, b = ins.operands
        if t.bits == 32 and isinstance(fn, np.ufunc):
            return _ufunc_into(fn, U32 if fn in _SIGN_FREE or not t.is_signed else I32, d, (a, b))

        def run(st: Any, mask: np.ndarray, dense: bool) -> None:
            write_int(st, d, t, fn(read_int(st, a, t), read_int(st, b, t)), mask, dense)
        return run
    return make


def _div_like(ins: Instruction) -> Run:
    t = ins.defn.type
    d, a, b = ins.operands
    is_rem = ins.defn.op == "rem"
    n = t.bits

    def run(st: Any, mask: np.ndarray, dense: bool) -> None:
        x = read_int(st, a, t)
        y = read_int(st, b, t)
        zero = y == 0
        if t.is_signed:
            xs = x.astype(I64)
            ys = y.astype(I64)
            minv = -(1 << (n - 1))
            ovf = (xs == minv) & (ys == -1)
            bad = zero | ovf
            ysafe = np.where(bad, I64(1), ys)
            q = np.abs(xs) // np.abs(ysafe)  # |MIN| of i64 wraps to MIN; excluded below
            q = np.where((xs < 0) ^ (ysafe < 0), -q, q)
            r = xs - q * ysafe
            if is_rem:
                res = np.where(zero, xs, np.where(ovf, I64(0), r))
            else:
                res = np.where(zero, I64(-1), np.where(ovf, xs, q))
            res = res.astype(U64)
        else:
            ysafe = np.where(zero, y.dtype.type(1), y)
            q = x // ysafe
            if is_rem:
                res = np.where(zero, x, x - q * ysafe)
            else:
                res = np.where(zero, x.dtype.type(-1 & ((1 << n) - 1)), q)
        write_int(st, d, t, res.astype(U64 if n == 64 else U32), mask, dense)
    if t.is_signed and n == 64:
        # abs(INT64_MIN) wraps in NumPy; do the 64-bit signed case on Python-exact paths
        def run64(st: Any, mask: np.ndarray, dense: bool) -> None:
            x = read_int(st, a, t)
            y = read_int(st, b, t)
            zero = y == 0
            minv = I64(-(1 << 63))
            ovf = (x == minv) & (y == -1)
            ysafe = np.where(zero | ovf, I64(1), y)
            ax = x.view(U64).copy()
            neg_x = x < 0
            ax[neg_x] = (~ax[neg_x]) + np.uint64(1)  # |x| as unsigned, exact for MIN
            ay = np.where(ysafe < 0, (~ysafe.view(U64)) + np.uint64(1), ysafe.view(U64))
            qa = ax // ay
            neg_q = neg_x ^ (ysafe < 0)
            q = np.where(neg_q, (~qa) + np.uint64(1), qa)
            r = x.view(U64) - q * ysafe.view(U64)
            if is_rem:
                res = np.where(zero, x.view(U64), np.where(ovf, np.uint64(0), r))
            else:
                res = np.where(zero, np.uint64(0xFFFFFFFFFFFFFFFF), np.where(ovf, x.view(U64), q))
            w64(st, d, res, mask, dense)
        return run64
    return run


def _unary_int(fn: Callable[[np.ndarray], np.ndarray]) -> Callable[[Instruction], Run]:
    def make(ins: Instruction) -> Run:
        t = ins.defn.type
        d, a = ins.operands
        if t.bits == 32 and isinstance(fn, np.ufunc):
            return _ufunc_into(fn, U32 if fn in _SIGN_FREE or not t.is_signed else I32, d, (a,))

        def run(st: Any, mask: np.ndarray, dense: bool) -> None:
            write_int(st, d, t, fn(read_int(st, a, t)), mask, dense)
        return run
    return make


def _mulhi(ins: Instruction) -> Run:
    d, a, b = ins.operands
    signed = ins.defn.type.is_signed

    def run(st: Any, mask: np.ndarray, dense: bool) -> None:
        if signed:
            p = st.regs[a].view(I32).astype(I64) * st.regs[b].view(I32).astype(I64)
            res = (p >> 32).astype(U32)
        else:
            p = st.regs[a].astype(U64) * st.regs[b].astype(U64)
            res = (p >> np.uint64(32)).astype(U32)
        w32(st, d, res, mask, dense)
    return run


def _mad(ins: Instruction) -> Run:
    d, a, b, c = ins.operands

    def run(st: Any, mask: np.ndarray, dense: bool) -> None:
        w32(st, d, st.regs[a] * st.regs[b] + st.regs[c], mask, dense)
    return run


# ----------------------------------------------------------------------------- float

def _packed_halves(st: Any, r: int, t: T) -> tuple[np.ndarray, np.ndarray]:
    v = st.regs[r]
    conv = fl.f16_bits_to_f32 if t is T.F16X2 else fl.bf16_bits_to_f32
    return conv(v & 0xFFFF), conv(v >> 16)


def _float_op(nargs: int, fn: Callable[..., np.ndarray]) -> Callable[[Instruction], Run]:
    """Elementwise float op computed in the compute dtype, rounded once to the type."""
    def make(ins: Instruction) -> Run:
        t = ins.defn.type
        d, *src = ins.operands
        assert len(src) == nargs
        if t.is_packed:
            half = T.F16 if t is T.F16X2 else T.BF16

            def run_packed(st: Any, mask: np.ndarray, dense: bool) -> None:
                halves = [_packed_halves(st, r, t) for r in src]
                lo = round_bits(fn(*[h[0] for h in halves]), half)
                hi = round_bits(fn(*[h[1] for h in halves]), half)
                w32(st, d, (lo | (hi << 16)).astype(U32), mask, dense)
            return run_packed

        def run(st: Any, mask: np.ndarray, dense: bool) -> None:
            write_float(st, d, t, fn(*[read_float(st, r, t) for r in src]), mask, dense)
        return run
    return make


def _fma(ins: Instruction) -> Run:
    t = ins.defn.type
    d, a, b, c = ins.operands
    if t.is_packed:
        bf = t is T.BF16X2

        def run_packed(st: Any, mask: np.ndarray, dense: bool) -> None:
            (al, ah), (bl, bh), (cl, ch) = (_packed_halves(st, r, t) for r in (a, b, c))
            lo = fl.fma_small_bits(al, bl, cl, bf)
            hi = fl.fma_small_bits(ah, bh, ch, bf)
            w32(st, d, (lo | (hi << 16)).astype(U32), mask, dense)
        return run_packed

    def run(st: Any, mask: np.ndarray, dense: bool) -> None:
        x, y, z = (read_float(st, r, t) for r in (a, b, c))
        if t is T.F32:
            w32(st, d, fl.canon32(fl.fma_f32(x, y, z)), mask, dense)
        elif t is T.F64:
            w64(st, d, fl.canon64(fl.fma_f64(x, y, z)), mask, dense)
        else:
            w32(st, d, fl.fma_small_bits(x, y, z, t is T.BF16), mask, dense)
    return run


_SIGN = {T.F32: 0x80000000, T.F16: 0x8000, T.BF16: 0x8000, T.F16X2: 0x80008000,
         T.BF16X2: 0x80008000}
_VALUE = {T.F32: 0xFFFFFFFF, T.F16: 0xFFFF, T.BF16: 0xFFFF, T.F16X2: 0xFFFFFFFF,
          T.BF16X2: 0xFFFFFFFF}


def _sign_op(ins: Instruction) -> Run:
    """neg/abs: pure sign-bit operations (exact on NaN too)."""
    t = ins.defn.type
    d, a = ins.operands
    neg = ins.defn.op == "neg"
    if t is T.F64:
        def run64(st: Any, mask: np.ndarray, dense: bool) -> None:
            hi = st.regs[a + 1]
            hi = hi ^ U32(0x80000000) if neg else hi & U32(0x7FFFFFFF)
            lo = st.regs[a].copy()
            w32(st, d, lo, mask, dense)
            w32(st, d + 1, hi, mask, dense)
        return run64
    sign = U32(_SIGN[t])
    keep = U32(_VALUE[t])

    def run(st: Any, mask: np.ndarray, dense: bool) -> None:
        v = st.regs[a] & keep
        w32(st, d, v ^ sign if neg else v & ~sign, mask, dense)
    return run


def _recip(x: np.ndarray) -> np.ndarray:
    return np.float32(1.0) / x


_APPROX: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "ex2": np.exp2, "lg2": np.log2, "sin": np.sin, "cos": np.cos,
    "rsqrt": lambda x: 1.0 / np.sqrt(x), "tanh": np.tanh,
}


def _approx(ins: Instruction) -> Run:
    d, a = ins.operands
    op = ins.defn.op
    fn = _APPROX.get(op)

    def run(st: Any, mask: np.ndarray, dense: bool) -> None:
        x = st.regs[a].view(np.float32)
        res = _recip(x) if fn is None else fn(x.astype(np.float64)).astype(np.float32)
        w32(st, d, fl.canon32(res), mask, dense)
    return run


# ----------------------------------------------------------------------------- bitwise

def _shift(ins: Instruction) -> Run:
    t = ins.defn.type
    d, a, b = ins.operands
    n = t.bits
    op = ins.defn.op

    if n == 32:
        dt = I32 if t.is_signed else U32
        ufn = np.left_shift if op == "shl" else np.right_shift

        def run32(st: Any, mask: np.ndarray, dense: bool) -> None:
            r = st.regs
            cnt = r[b]
            if int(cnt.max(initial=0)) >= 32:
                return run(st, mask, dense)  # counts >= width: the defined 0 / sign result
            if dense:
                ufn(r[a].view(dt), cnt.view(dt), out=r[d].view(dt))
            else:
                tmp = st.scratch32b
                ufn(r[a].view(dt), cnt.view(dt), out=tmp.view(dt))
                merge32(st, r[d], tmp, mask)

    def run(st: Any, mask: np.ndarray, dense: bool) -> None:
        x = read_int(st, a, t)
        cnt = st.regs[b]
        big = cnt >= n
        c = np.minimum(cnt, n - 1).astype(x.dtype)
        if op == "shl":
            res = np.where(big, x.dtype.type(0), x << c)
        elif t.is_signed:
            res = x >> c  # count >= n: the clamped arithmetic shift already gives 0 or -1
        else:
            res = np.where(big, x.dtype.type(0), x >> c)
        write_int(st, d, t, res.view(U64 if n == 64 else U32) if t.is_signed else res, mask, dense)
    return run32 if n == 32 else run


def _clz32(x: np.ndarray) -> np.ndarray:
    _, e = np.frexp(x.astype(np.float64))
    return (32 - e).astype(U32)


def _ctz32(x: np.ndarray) -> np.ndarray:
    low = x & (~x + U32(1))
    _, e = np.frexp(low.astype(np.float64))
    return np.where(x == 0, U32(32), (e - 1).astype(U32))


def _brev32(x: np.ndarray) -> np.ndarray:
    x = x.astype(U32)
    x = ((x >> 1) & U32(0x55555555)) | ((x & U32(0x55555555)) << 1)
    x = ((x >> 2) & U32(0x33333333)) | ((x & U32(0x33333333)) << 2)
    x = ((x >> 4) & U32(0x0F0F0F0F)) | ((x & U32(0x0F0F0F0F)) << 4)
    x = ((x >> 8) & U32(0x00FF00FF)) | ((x & U32(0x00FF00FF)) << 8)
    return ((x >> 16) | (x << 16)).astype(U32)


def _rotl(ins: Instruction) -> Run:
    d, a, b = ins.operands

    def run(st: Any, mask: np.ndarray, dense: bool) -> None:
        x = st.regs[a]
        c = st.regs[b] & U32(31)
        # (32 - c) & 31 keeps both counts below the width (NumPy, like C, leaves >= 32 undefined)
        w32(st, d, (x << c) | (x >> ((U32(32) - c) & U32(31))), mask, dense)
    return run


def _popc32(x: np.ndarray) -> np.ndarray:
    return np.bitwise_count(x).astype(U32)


# ----------------------------------------------------------------------------- compare

_CMP = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal,
        "gt": np.greater, "ge": np.greater_equal}


def _setp(ins: Instruction) -> Run:
    t = ins.defn.type
    d, a, b = ins.operands
    var = ins.defn.variant
    read = read_float if t.is_float else read_int

    if var != "unord" and t in (T.F32, T.U32, T.I32, T.B32):
        dt = np.float32 if t is T.F32 else (I32 if t.is_signed else U32)
        cmp = _CMP[var]

        def run32(st: Any, mask: np.ndarray, dense: bool) -> None:
            r = st.regs
            if dense:
                cmp(r[a].view(dt), r[b].view(dt), out=st.preds[d])
            else:
                t = st.scratch_pred
                cmp(r[a].view(dt), r[b].view(dt), out=t)
                merge_pred(st, st.preds[d], t, mask)
        return run32

    def run(st: Any, mask: np.ndarray, dense: bool) -> None:
        x = read(st, a, t)
        y = read(st, b, t)
        res = (np.isnan(x) | np.isnan(y)) if var == "unord" else _CMP[var](x, y)
        wp(st, d, res, mask, dense)
    return run


def _selp(ins: Instruction) -> Run:
    d, a, b, p = ins.operands
    wide = ins.defn.type.bits == 64

    def run(st: Any, mask: np.ndarray, dense: bool) -> None:
        c = rp(st, p)
        if wide:
            w64(st, d, np.where(c, r64(st, a), r64(st, b)), mask, dense)
        else:
            w32(st, d, np.where(c, st.regs[a], st.regs[b]), mask, dense)
    return run


_PRED_OPS = {"and": np.logical_and, "or": np.logical_or, "xor": np.logical_xor}


def _pred_op(ins: Instruction) -> Run:
    op = ins.defn.op
    if op == "mov":  # mov.pred (sem pred.mov)
        d, a = ins.operands
        return lambda st, mask, dense: wp(st, d, rp(st, a).copy(), mask, dense)
    if op == "setp_const":
        (d,) = ins.operands
        val = ins.defn.variant == "true"
        return lambda st, mask, dense: wp(st, d, np.full(st.N, val), mask, dense)
    d, a, b = ins.operands
    fn = _PRED_OPS[op]
    return lambda st, mask, dense: wp(st, d, fn(rp(st, a), rp(st, b)), mask, dense)


# ----------------------------------------------------------------------------- convert

def _int_to_f64_odd(v: np.ndarray) -> np.ndarray:
    """int64/uint64 -> float64 rounded to odd (exact split in two 32-bit halves, TwoSum)."""
    hi = (v >> v.dtype.type(32)).astype(np.float64) * 4294967296.0
    lo = (v & v.dtype.type(0xFFFFFFFF)).astype(np.float64)
    return fl._sum_to_odd(hi, lo)


_INT_RANGE = {T.I32: (-(1 << 31), (1 << 31) - 1), T.U32: (0, (1 << 32) - 1),
              T.I64: (-(1 << 63), (1 << 63) - 1), T.U64: (0, (1 << 64) - 1)}


def _float_to_int(x: np.ndarray, dst: T) -> np.ndarray:
    """float64 -> dst integer bits (uint32/uint64): truncate, saturate, NaN -> 0."""
    lo, hi = _INT_RANGE[dst]
    t = np.trunc(np.where(np.isnan(x), 0.0, x))
    if dst.bits == 32:
        return np.clip(t, lo, hi).astype(I64).astype(U32)
    big = t >= float(hi + 1)  # 2^63 or 2^64, exactly representable
    small = t < float(lo)
    safe = np.where(big | small, 0.0, t)
    v = safe.astype(U64) if dst is T.U64 else safe.astype(I64).view(U64)
    v = np.where(big, np.uint64(hi & 0xFFFFFFFFFFFFFFFF), v)
    return np.where(small, np.uint64(lo & 0xFFFFFFFFFFFFFFFF), v)


def _cvt(ins: Instruction) -> Run:
    dst = ins.defn.type
    src = ins.defn.src_type
    d, a = ins.operands

    def run(st: Any, mask: np.ndarray, dense: bool) -> None:
        if src.is_float:
            x = read_float(st, a, src).astype(np.float64)
            if dst.is_float:
                if dst is T.F32:
                    bits = fl.canon32(x.astype(np.float32))
                elif dst is T.F64:
                    bits = fl.canon64(x)
                else:
                    bits = round_bits(x, dst)
            else:
                bits = _float_to_int(x, dst)
        else:
            v = read_int(st, a, src)
            if src.bits == 32:
                v = v.astype(I64) if src.is_signed else v.astype(U64)
            if dst.is_float:
                if dst is T.F32:
                    bits = v.astype(np.float32).view(U32)
                elif dst is T.F64:
                    bits = v.astype(np.float64).view(U64)
                else:
                    bits = round_bits(_int_to_f64_odd(v), dst)
            else:
                bits = v.astype(U64) if v.dtype != U64 else v
                if dst.bits == 32:
                    bits = (bits & _M32).astype(U32)
        if dst.bits == 64:
            w64(st, d, bits, mask, dense)
        else:
            w32(st, d, bits, mask, dense)
    return run


def _cvt_pack(ins: Instruction) -> Run:
    d, a, b = ins.operands
    conv = fl.f32_to_f16_bits if ins.defn.type is T.F16X2 else fl.f32_to_bf16_bits

    def run(st: Any, mask: np.ndarray, dense: bool) -> None:
        lo = conv(st.regs[a].view(np.float32))
        hi = conv(st.regs[b].view(np.float32))
        w32(st, d, (lo | (hi << 16)).astype(U32), mask, dense)
    return run


# ----------------------------------------------------------------------------- moves

def _mov(ins: Instruction) -> Run:
    d, a = ins.operands
    if ins.defn.type.bits == 64:
        def run64(st: Any, mask: np.ndarray, dense: bool) -> None:
            lo, hi = st.regs[a].copy(), st.regs[a + 1].copy()
            w32(st, d, lo, mask, dense)
            w32(st, d + 1, hi, mask, dense)
        return run64
    def run(st: Any, mask: np.ndarray, dense: bool) -> None:
        r = st.regs
        if dense:
            r[d] = r[a]
        else:
            merge32(st, r[d], r[a], mask)
    return run


def _movi(ins: Instruction) -> Run:
    d, imm = ins.operands
    if ins.defn.type.bits == 64:
        v = int(imm) & 0xFFFFFFFFFFFFFFFF
        lo, hi = U32(v & 0xFFFFFFFF), U32(v >> 32)

        def run64(st: Any, mask: np.ndarray, dense: bool) -> None:
            w32(st, d, lo, mask, dense)
            w32(st, d + 1, hi, mask, dense)
        return run64
    v = int(imm) & (0xFFFF if ins.defn.type.bits == 16 else 0xFFFFFFFF)
    val = U32(v)
    return lambda st, mask, dense: w32(st, d, val, mask, dense)


def _mov_sr(ins: Instruction) -> Run:
    d, sr = ins.operands
    sr = SpecialRegister(sr)
    return lambda st, mask, dense: w32(st, d, st.special(sr), mask, dense)


def _ldarg(ins: Instruction) -> Run:
    d, idx = ins.operands
    wide = ins.defn.type.bits == 64

    def run(st: Any, mask: np.ndarray, dense: bool) -> None:
        v = st.launch.scalar_word(idx, ins)
        w32(st, d, U32(v & 0xFFFFFFFF), mask, dense)
        if wide:
            w32(st, d + 1, U32(v >> 32), mask, dense)
    return run


def _nop(ins: Instruction) -> Run:
    return lambda st, mask, dense: None


# ----------------------------------------------------------------------------- table

#: the emulator's semantics of the register-to-register instructions, by semantic key
#: (``InstrDef.sem``); registered with the emulator's dispatch in :mod:`anywave.emu.machine`
SEMANTICS: dict[str, Callable[[Instruction], Run]] = {
    "int.add": _int_binop(np.add),
    "int.sub": _int_binop(np.subtract),
    "int.mul": _int_binop(np.multiply),
    "int.min": _int_binop(np.minimum),
    "int.max": _int_binop(np.maximum),
    "int.neg": _unary_int(np.negative),
    "int.abs": _unary_int(np.abs),
    "int.div": _div_like, "int.rem": _div_like, "int.mulhi": _mulhi, "int.mad": _mad,

    "float.add": _float_op(2, np.add), "float.sub": _float_op(2, np.subtract),
    "float.mul": _float_op(2, np.multiply), "float.div": _float_op(2, np.divide),
    "float.sqrt": _float_op(1, np.sqrt), "float.floor": _float_op(1, np.floor),
    "float.ceil": _float_op(1, np.ceil), "float.trunc": _float_op(1, np.trunc),
    "float.rint": _float_op(1, np.rint),
    "float.min": _float_op(2, fl.min_num), "float.max": _float_op(2, fl.max_num),
    "float.fma": _fma, "float.neg": _sign_op, "float.abs": _sign_op,
    **{f"float.{op}": _approx for op in ("ex2", "lg2", "sin", "cos", "rsqrt", "rcp", "tanh")},

    "bit.and": _int_binop(np.bitwise_and), "bit.or": _int_binop(np.bitwise_or),
    "bit.xor": _int_binop(np.bitwise_xor), "bit.not": _unary_int(np.invert),
    "bit.shl": _shift, "bit.shr": _shift,
    "bit.popc": _unary_int(_popc32), "bit.clz": _unary_int(_clz32), "bit.ctz": _unary_int(_ctz32),
    "bit.brev": _unary_int(_brev32), "bit.rotl": _rotl,

    "cmp.setp": _setp, "cmp.selp": _selp,
    "pred.and": _pred_op, "pred.or": _pred_op, "pred.xor": _pred_op, "pred.mov": _pred_op,
    "pred.setp_const": _pred_op,
    "cvt.cvt": _cvt, "cvt.cvt_pack": _cvt_pack,
    "move.mov": _mov, "move.movi": _movi, "move.mov_sr": _mov_sr, "move.ldarg": _ldarg,
    "ctl.nop": _nop, "sync.fence": _nop,
}
