"""Per-instruction lowering of :mod:`anywave.backends.spirv`: one handler per WAVE operation,
each emitting the instruction's effect through the kernel lowering ``x`` (inside a selection on
its executing condition; wave-collective handlers run in every invocation with ``x.ex`` = this
lane executes). :data:`SPIRV` (an :class:`anywave.isa.dispatch.Dispatch`) maps every record of the
instruction table to its handler by semantic key."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from anywave.backends.lowering.bodies import BodySpelling, body_keys, render_record
from anywave.backends.spirv_asm import SCOPE, SEM
from anywave.backends.spirv_mma import HANDLERS as FRAGMENT_HANDLERS
from anywave.binary.module import Instruction
from anywave.isa import dispatch, semantics
from anywave.isa.bodies import operand_types, result_type
from anywave.isa.expr import Expr
from anywave.isa.types import MemoryOrder, ScalarType, Scope, SpecialRegister

T = ScalarType
S = SpecialRegister
_Lowering = Any  # anywave.backends.spirv._Lowering (kept out of the imports: no cycle)

SCOPE_OF = {Scope.WAVE: "Subgroup", Scope.WORKGROUP: "Workgroup", Scope.DEVICE: "Device", Scope.SYSTEM: "Device"}
ORDER_SEM = {MemoryOrder.RELAXED: 0, MemoryOrder.ACQUIRE: SEM["Acquire"], MemoryOrder.RELEASE: SEM["Release"],
             MemoryOrder.ACQ_REL: SEM["AcquireRelease"], MemoryOrder.SEQ_CST: SEM["AcquireRelease"]}

# Each handler emits one instruction's effect (inside a selection on its executing condition);
# wave-collective handlers run in every invocation with ``x.ex`` = this lane executes.

_Handler = Callable[[_Lowering, Instruction], None]

def _ival(x: _Lowering, r: int, t: T) -> tuple[int, int]:
    """(value, SPIR-V type) of an integer register operand of type t."""
    return (x.r64(r), x.u64) if t.bits == 64 else (x.r(r), x.u32)


def _iset(x: _Lowering, r: int, t: T, v: int) -> None:
    (x.set64 if t.bits == 64 else x.setr)(r, v)


def _iconst(x: _Lowering, t: int, v: int) -> int:
    return x.b.const_u64(v) if t == x.u64 else x.c(v)


# ---- instruction bodies (anywave.isa.bodies) spelt in SPIR-V
def _ty(x: _Lowering, ty: str) -> int:
    return {"b32": x.u32, "b64": x.u64, "pred": x.bool_}[ty]


def _sv(name: str, logical: str | None = None) -> Callable[[Any, Expr, list[int]], int]:
    """One SPIR-V instruction; ``logical``: its name on booleans (``LogicalAnd`` ...)."""
    def f(x: _Lowering, n: Expr, v: list[int]) -> int:
        boolean = n.args[0].ty == "pred"
        return x.op(logical if boolean else name, _ty(x, n.ty), *v)
    return f


def _sv_shift(name: str) -> Callable[[Any, Expr, list[int]], int]:
    def f(x: _Lowering, n: Expr, v: list[int]) -> int:
        count = x.op("UConvert", x.u64, v[1]) if n.ty == "b64" else v[1]
        return x.op(name, _ty(x, n.ty), v[0], count)
    return f


def _sv_clz(x: _Lowering, n: Expr, v: list[int]) -> int:
    msb = x.ext(x.u32, "FindUMsb", v[0])  # -1 (all ones) for 0
    return x.sel(x.u32, x.ieq(v[0], x.c(0)), x.c(32), x.op("ISub", x.u32, x.c(31), msb))


def _sv_const(x: _Lowering, v: int, ty: str) -> int:
    if ty == "pred":
        return x.b.const_bool(bool(v))
    return x.b.const_u64(v) if ty == "b64" else x.c(v)


#: SPIR-V's spelling of the expression vocabulary (SPIR-V 1.5 core instructions and GLSL.std.450
#: ``FindUMsb``). ``srem`` is left to the legaliser (a - b * (a / b)): NVIDIA's ``OpSRem`` gives
#: wrong answers for some negative operands
SPIRV_SPELLING = BodySpelling("spirv", {
    "add": _sv("IAdd"), "sub": _sv("ISub"), "mul": _sv("IMul"),
    "and": _sv("BitwiseAnd", "LogicalAnd"), "or": _sv("BitwiseOr", "LogicalOr"),
    "xor": _sv("BitwiseXor", "LogicalNotEqual"), "not": _sv("Not", "LogicalNot"),
    "shl": _sv_shift("ShiftLeftLogical"), "lshr": _sv_shift("ShiftRightLogical"),
    "ashr": _sv_shift("ShiftRightArithmetic"),
    "udiv": _sv("UDiv"), "sdiv": _sv("SDiv"), "urem": _sv("UMod"),
    "clz": _sv_clz, "popc": _sv("BitCount"), "brev": _sv("BitReverse"),
    "eq": _sv("IEqual", "LogicalEqual"), "ne": _sv("INotEqual", "LogicalNotEqual"), "ult": _sv("ULessThan"),
    "ule": _sv("ULessThanEqual"), "slt": _sv("SLessThan"), "sle": _sv("SLessThanEqual"),
    "select": lambda x, n, v: x.sel(_ty(x, n.ty), *v),
    "zext": lambda x, n, v: x.op("UConvert", x.u64, v[0]), "sext": lambda x, n, v: x.op("SConvert", x.u64, v[0]),
    "trunc": lambda x, n, v: x.op("UConvert", x.u32, v[0]),
}, _sv_const)


def _body(x: _Lowering, ins: Instruction) -> None:
    """Any record with a body: its expression spelt with :data:`SPIRV_SPELLING`."""
    d = ins.defn
    leaves = []
    for ty, v in zip(operand_types(d), (ins.operands[j] for j in d.srcs), strict=True):
        leaves.append(x.p(v) if ty == "pred" else x.r64(v) if ty == "b64" else x.r(v))
    res = render_record(d, leaves, SPIRV_SPELLING, x)
    dst = ins.operands[d.dests[0]]
    ty = result_type(d)
    if ty == "pred":
        x.store(x.pv[dst], res)
    elif ty == "b64":
        x.set64(dst, res)
    else:
        x.setr(dst, res)


def _mulhi(x: _Lowering, ins: Instruction) -> None:
    dreg, a, b = ins.operands
    st = x.b.t_struct(x.u32, x.u32, key="mulext")
    r = x.op("SMulExtended" if ins.defn.type.is_signed else "UMulExtended", st, x.r(a), x.r(b))
    x.setr(dreg, x.op("CompositeExtract", x.u32, r, 1))


def _float_compute(x: _Lowering, op: str, t: T, vals: list[int]) -> int:
    """Bits of the result of a float op on compute-type values (t is F32 or F64 compute)."""
    ft = x.f64 if t is T.F64 else x.f32
    if op in ("add", "sub", "mul"):
        return x.fbits(x.fop({"add": "FAdd", "sub": "FSub", "mul": "FMul"}[op], ft, *vals), t)
    if op == "div":
        if t is T.F64:
            return x.fbits(x.fop("FDiv", ft, *vals), t)
        return x.div_exact(*vals)
    if op == "sqrt":
        if t is T.F64:
            return x.fbits(x.ext(ft, "Sqrt", vals[0]), t)
        return x.sqrt_exact(vals[0])
    if op in ("min", "max"):
        return x.minmax(op, t, *vals)
    if op == "fma":
        if t is T.F64:
            return x.fbits(x.fma64(*vals), t)
        return x.fma_exact(*vals, T.F32)
    if t is T.F64:
        return x.fbits(x.integral64(op, vals[0]), t)
    name = {"floor": "Floor", "ceil": "Ceil", "trunc": "Trunc", "rint": "RoundEven"}[op]
    return x.fbits(x.ext(ft, name, vals[0]), t)


def _canon_nan(x: _Lowering, t: T, bits: int) -> int:
    """f32 / f64 result bits with a NaN replaced by the canonical quiet NaN (0x7FC00000 /
    0x7FF8000000000000), as the emulator and the C family give: lavapipe's OpFAdd / OpFSub / OpFMul
    pass an input NaN's payload through (and the exact div / sqrt / fma built on them can too), and
    a later f16 / bf16 or integer reading of those bits then differed from the other targets
    (bench/fuzz_robust_sc.py; tests/test_vulkan.py test_nan_results_are_canonical)."""
    if t is T.F64:
        return x.sel(x.u64, x.isnan(x.f64_of(bits)), x.b.const_u64(semantics.CANONICAL_NAN[T.F64]), bits)
    return x.sel(x.u32, x.isnan(x.bits_f32(bits)), x.c(semantics.CANONICAL_NAN[T.F32]), bits)


def _float_op(x: _Lowering, ins: Instruction) -> None:
    t, op = ins.defn.type, ins.defn.op
    dreg, *src = ins.operands
    if t.is_packed:
        h = T.F16 if t is T.F16X2 else T.BF16
        conv = x.h2f if h is T.F16 else x.bf2f
        halves = []
        for hi in (False, True):
            vals = [conv(x.shr(x.r(r), 16) if hi else x.r(r)) for r in src]
            halves.append(_half_op(x, op, h, vals))
        x.setr(dreg, x.ior(halves[0], x.shl(halves[1], 16)))
        return
    if t in (T.F16, T.BF16):
        x.setr(dreg, _half_op(x, op, t, [x.fval(r, t) for r in src]))
        return
    bits = _canon_nan(x, t, _float_compute(x, op, t, [x.fval(r, t) for r in src]))
    if t is T.F64:
        x.set64(dreg, bits)
    else:
        x.setr(dreg, bits)


def _half_op(x: _Lowering, op: str, h: T, vals: list[int]) -> int:
    """A 16-bit float op on f32 values: computed in f32 (innocuous double rounding, spec §8.2),
    fma through f64 with round to odd; returns the 16-bit bits."""
    if op == "fma":
        return x.fma_exact(*vals, h)
    bits = _float_compute(x, op, T.F32, vals)
    f = x.bits_f32(bits)
    return x.f2h(f) if h is T.F16 else x.f2bf(f)


def _sign_op(x: _Lowering, ins: Instruction) -> None:
    t = ins.defn.type
    dreg, a = ins.operands
    neg = ins.defn.op == "neg"
    if t is T.F64:
        hi = x.r(a + 1)
        hi = x.op("BitwiseXor", x.u32, hi, x.c(0x80000000)) if neg else x.iand(hi, x.c(0x7FFFFFFF))
        lo = x.r(a)
        x.setr(dreg, lo)
        x.setr(dreg + 1, hi)
        return
    sign = {T.F32: 0x80000000, T.F16: 0x8000, T.BF16: 0x8000}.get(t, 0x80008000)
    keep = 0xFFFF if t in (T.F16, T.BF16) else 0xFFFFFFFF
    v = x.iand(x.r(a), x.c(keep))
    x.setr(dreg, x.op("BitwiseXor", x.u32, v, x.c(sign)) if neg else x.iand(v, x.c(~sign & 0xFFFFFFFF)))


def _approx(x: _Lowering, ins: Instruction) -> None:
    dreg, a = ins.operands
    op = ins.defn.op
    v = x.bits_f32(x.r(a))
    if op == "rcp":
        x.setr(dreg, x.div_exact(x.b.const_f32(0x3F800000), v))
        return
    name = {"ex2": "Exp2", "lg2": "Log2", "sin": "Sin", "cos": "Cos", "rsqrt": "InverseSqrt", "tanh": "Tanh"}[op]
    x.setr(dreg, x.f32_bits(x.ext(x.f32, name, v)))


def _setp_float(x: _Lowering, ins: Instruction) -> None:
    """Float compares on the bits (:meth:`FloatOps.fcmp`; integer compares are bodies)."""
    t, var = ins.defn.type, ins.defn.variant
    dreg, a, b = ins.operands
    if t is T.F64:
        res = x.fcmp(var, x.r64(a), x.r64(b), True)
    else:
        res = x.fcmp(var, x.f32_bits(x.fval(a, t)), x.f32_bits(x.fval(b, t)), False)
    x.store(x.pv[dreg], res)

def _f2int(x: _Lowering, v: int, src: T, dst: T) -> int:
    """float (compute type) -> integer: truncate, saturate, NaN -> 0 (spec §8.11)."""
    d64 = src is T.F64
    ft = x.f64 if d64 else x.f32
    ty = x.u64 if dst.bits == 64 else x.u32
    n = dst.bits

    def fc(val: float) -> int:
        import struct as _s

        if d64:
            return x.b.const_f64(_s.unpack("<Q", _s.pack("<d", val))[0])
        return x.b.const_f32(_s.unpack("<I", _s.pack("<f", val))[0])

    nan = x.isnan(v)
    if dst.is_signed:
        lo, hi = -(2.0 ** (n - 1)), 2.0 ** (n - 1)
        conv = x.op("ConvertFToS", ty, v)
        small = x.and_(x.op("FOrdGreaterThan", x.bool_, v, fc(-1.0)), x.op("FOrdLessThan", x.bool_, v, fc(1.0)))
        res = x.sel(ty, x.op("FOrdLessThanEqual", x.bool_, v, fc(lo)), _iconst(x, ty, 1 << (n - 1)), conv)
        res = x.sel(ty, x.op("FOrdGreaterThanEqual", x.bool_, v, fc(hi)), _iconst(x, ty, (1 << (n - 1)) - 1), res)
        return x.sel(ty, x.or_(nan, small), _iconst(x, ty, 0), res)
    conv = x.op("ConvertFToU", ty, v)
    res = x.sel(ty, x.op("FOrdGreaterThanEqual", x.bool_, v, fc(2.0 ** n)), _iconst(x, ty, (1 << n) - 1), conv)
    del ft
    return x.sel(ty, x.or_(nan, x.op("FOrdLessThanEqual", x.bool_, v, fc(0.0))), _iconst(x, ty, 0), res)


def _cvt(x: _Lowering, ins: Instruction) -> None:
    dst, src = ins.defn.type, ins.defn.src_type
    dreg, a = ins.operands
    if src.is_float:
        v = x.fval(a, src)
        if dst.is_float:
            # a NaN result canonical (see _canon_nan): the exact widenings h2f / bf2f / f2d keep
            # the payload bits (cvt.f32.bf16 of 0xffff gave 0xffff0000; fuzz seed 10)
            if dst is T.F64:
                x.set64(dreg, _canon_nan(x, T.F64, x.u64_of(x.f2d(v))))
            elif src is T.F64:
                if dst is T.F32:
                    x.setr(dreg, _canon_nan(x, T.F32, x.f32_bits(x.d2f(v))))
                else:
                    f = x.d2f_odd(v)
                    x.setr(dreg, x.f2h(f) if dst is T.F16 else x.f2bf(f))
            elif dst is T.F32:
                x.setr(dreg, _canon_nan(x, T.F32, x.f32_bits(v)))
            else:
                x.setr(dreg, x.fbits(v, dst))
            return
        _iset(x, dreg, dst, _f2int(x, v, src, dst))
        return
    v, ty = _ival(x, a, src)
    if dst.is_float:
        conv = "ConvertSToF" if src.is_signed else "ConvertUToF"
        if dst is T.F32:
            x.setr(dreg, x.f32_bits(x.op(conv, x.f32, v)))
        elif dst is T.F64:
            x.set64(dreg, x.u64_of(x.op(conv, x.f64, v)))
        else:
            if src.bits == 64:
                # exact high part * 2^32 + low part, summed with round to odd
                hi = x.op("ShiftRightArithmetic" if src.is_signed else "ShiftRightLogical", x.u64, v,
                          x.b.const_u64(32))
                lo = x.op("BitwiseAnd", x.u64, v, x.b.const_u64(0xFFFFFFFF))
                hd = x.fop("FMul", x.f64, x.op(conv, x.f64, hi), x.b.const_f64(0x41F0000000000000))
                dv = x.sum_odd(hd, x.op("ConvertUToF", x.f64, lo))
            else:
                dv = x.op(conv, x.f64, v)
            f = x.d2f_odd(dv)
            x.setr(dreg, x.f2h(f) if dst is T.F16 else x.f2bf(f))
        return
    if dst.bits == 64:
        if src.bits == 64:
            x.set64(dreg, v)
        else:
            x.set64(dreg, x.op("SConvert" if src.is_signed else "UConvert", x.u64, v))
        return
    x.setr(dreg, x.op("UConvert", x.u32, v) if src.bits == 64 else v)


def _cvt_pack(x: _Lowering, ins: Instruction) -> None:
    dreg, a, b = ins.operands
    fn = x.f2h if ins.defn.type is T.F16X2 else x.f2bf
    lo = fn(x.bits_f32(x.r(a)))
    hi = fn(x.bits_f32(x.r(b)))
    x.setr(dreg, x.ior(lo, x.shl(hi, 16)))


def _mov(x: _Lowering, ins: Instruction) -> None:
    dreg, a = ins.operands
    if ins.defn.type.bits == 64:
        lo, hi = x.r(a), x.r(a + 1)
        x.setr(dreg, lo)
        x.setr(dreg + 1, hi)
    else:
        x.setr(dreg, x.r(a))


def _movi(x: _Lowering, ins: Instruction) -> None:
    dreg, imm = ins.operands
    if ins.defn.type.bits == 64:
        v = int(imm) & 0xFFFFFFFFFFFFFFFF
        x.setr(dreg, x.opaque(v & 0xFFFFFFFF))
        x.setr(dreg + 1, x.opaque(v >> 32))
        return
    mask = 0xFFFF if ins.defn.type.bits == 16 else 0xFFFFFFFF
    x.setr(dreg, x.opaque(int(imm) & mask))


def _mov_sr(x: _Lowering, ins: Instruction) -> None:
    dreg, sr = ins.operands
    sr = SpecialRegister(sr)
    W, tl, wgx, wgy = x.W, x.tl, x.wgx, x.wgy
    udiv = lambda a, b: x.op("UDiv", x.u32, a, b)  # noqa: E731
    umod = lambda a, b: x.op("UMod", x.u32, a, b)  # noqa: E731
    mul = lambda a, b: x.op("IMul", x.u32, a, b)  # noqa: E731
    ex = lambda v, i: x.op("CompositeExtract", x.u32, v, i)  # noqa: E731
    tid = [lambda: umod(tl, wgx), lambda: umod(udiv(tl, wgx), wgy), lambda: udiv(tl, mul(wgx, wgy))]
    size = [wgx, wgy, x.wgz]
    if sr in (S.THREAD_ID_X, S.THREAD_ID_Y, S.THREAD_ID_Z):
        v = tid[sr - S.THREAD_ID_X]()
    elif sr is S.WAVE_ID:
        v = udiv(tl, x.c(W))
    elif sr is S.LANE_ID:
        v = umod(tl, x.c(W))
    elif sr in (S.WORKGROUP_ID_X, S.WORKGROUP_ID_Y, S.WORKGROUP_ID_Z):
        v = ex(x.wg_id, sr - S.WORKGROUP_ID_X)
    elif sr in (S.WORKGROUP_SIZE_X, S.WORKGROUP_SIZE_Y, S.WORKGROUP_SIZE_Z):
        v = size[sr - S.WORKGROUP_SIZE_X]
    elif sr in (S.GRID_SIZE_X, S.GRID_SIZE_Y, S.GRID_SIZE_Z):
        v = ex(x.num_wg, sr - S.GRID_SIZE_X)
    elif sr is S.WAVE_WIDTH:
        v = x.c(W)
    elif sr is S.NUM_WAVES:
        v = udiv(x.add(x.nthreads, x.c(W - 1)), x.c(W))
    elif sr in (S.GLOBAL_ID_X, S.GLOBAL_ID_Y, S.GLOBAL_ID_Z):
        i = sr - S.GLOBAL_ID_X
        v = x.add(mul(ex(x.wg_id, i), size[i]), tid[i]())
    elif sr is S.THREAD_LINEAR_ID:
        v = tl
    else:
        from anywave.isa.mma import MMA_SREG_VALUES  # the reference dialect's fixed fragment shape (§3.3)

        v = x.c(MMA_SREG_VALUES[sr.name])
    x.setr(dreg, v)


def _ldarg(x: _Lowering, ins: Instruction) -> None:
    dreg, idx = ins.operands
    w = x.push_index[int(idx)]
    if ins.defn.type.bits == 64:
        lo = x.push_word(w)
        hi = x.push_word(w + 1) if x.k.args[int(idx)].type.bits == 64 else x.c(0)
        x.setr(dreg, lo)
        x.setr(dreg + 1, hi)
    else:
        x.setr(dreg, x.push_word(w))


def _ld(x: _Lowering, ins: Instruction) -> None:
    t = ins.defn.type
    dreg, addr = ins.operands
    off = x.byte_offset(addr.reg, addr.offset)
    if t.bits >= 32:
        vals = [x.load(x.word_ptr(addr, off, i)) for i in range(t.bits // 32)]
        for i, v in enumerate(vals):
            x.setr(dreg + i, v)
        return
    word = x.load(x.word_ptr(addr, off))
    bit = x.shl(x.iand(off, x.c(3)), 3)
    ext = "BitFieldSExtract" if t.is_signed else "BitFieldUExtract"
    x.setr(dreg, x.op(ext, x.u32, word, bit, x.c(t.bits)))


def _st(x: _Lowering, ins: Instruction) -> None:
    t = ins.defn.type
    addr, sreg = ins.operands
    off = x.byte_offset(addr.reg, addr.offset)
    if t.bits >= 32:
        vals = [x.r(sreg + i) for i in range(t.bits // 32)]
        for i, v in enumerate(vals):
            x.store(x.word_ptr(addr, off, i), v)
        return
    # sub-word store: clear then set the bytes atomically, so neighbouring bytes never race
    ptr = x.word_ptr(addr, off)
    bit = x.shl(x.iand(off, x.c(3)), 3)
    mask = x.op("ShiftLeftLogical", x.u32, x.c((1 << t.bits) - 1), bit)
    val = x.op("ShiftLeftLogical", x.u32, x.iand(x.r(sreg), x.c((1 << t.bits) - 1)), bit)
    scope, sem = x.mem_scope_sem(addr)
    x.op("AtomicAnd", x.u32, ptr, x.c(scope), x.sem(sem), x.op("Not", x.u32, mask))
    x.op("AtomicOr", x.u32, ptr, x.c(scope), x.sem(sem), val)


def _cp_async(x: _Lowering, ins: Instruction) -> None:
    """Asynchronous copy (spec §4.5), synchronous here: words loaded from the buffer, stored to
    local memory at the issue; commit and wait have nothing left to do."""
    laddr, daddr = ins.operands
    doff, loff = x.byte_offset(daddr.reg, daddr.offset), x.byte_offset(laddr.reg, laddr.offset)
    vals = [x.load(x.word_ptr(daddr, doff, i)) for i in range(ins.defn.type.bits // 32)]
    for i, v in enumerate(vals):
        x.store(x.word_ptr(laddr, loff, i), v)


_ATOM = {"add": "AtomicIAdd", "sub": "AtomicISub", "and": "AtomicAnd", "or": "AtomicOr", "xor": "AtomicXor",
         "exch": "AtomicExchange"}


def _atom(x: _Lowering, ins: Instruction) -> None:
    space, op = ins.defn.variant.split(".")
    t = ins.defn.type
    ret = ins.defn.op == "atom"
    ops = list(ins.operands)
    dreg = ops.pop(0) if ret else None
    addr = ops.pop(0)
    if space == "device":
        scope_v, order = Scope(ops[-2]), MemoryOrder(ops[-1])
        ops = ops[:-2]
        scope = SCOPE[SCOPE_OF[scope_v]]
        sem = ORDER_SEM[order] | SEM["UniformMemory"]
    else:
        scope, sem = SCOPE["Workgroup"], SEM["WorkgroupMemory"]
        order = MemoryOrder.RELAXED
    off = x.byte_offset(addr.reg, addr.offset)
    ptr = x.word_ptr(addr, off)
    sc, se = x.c(scope), x.sem(sem)
    # the comparison-failed semantics of a CAS may not release
    se_fail = x.sem(sem & ~(SEM["Release"] | SEM["AcquireRelease"])
                    | (SEM["Acquire"] if sem & (SEM["AcquireRelease"]) else 0))
    if op == "cas":
        cmp_, val = ops
        old = x.op("AtomicCompareExchange", x.u32, ptr, sc, se, se_fail, x.r(val), x.r(cmp_))
    elif t is T.F32:
        (val,) = ops
        v = x.r(val)
        cur = x.var(x.u32)
        x.store(cur, x.load(ptr))
        res = x.var(x.u32)
        merge, cont = x.loop_open()
        expv = x.load(cur)
        nv = x.f32_bits(x.fop("FAdd", x.f32, x.bits_f32(expv), x.bits_f32(v)))
        got = x.op("AtomicCompareExchange", x.u32, ptr, sc, se, se_fail, nv, expv)
        x.store(res, got)
        x.store(cur, got)
        x.loop_exit_unless(x.op("INotEqual", x.bool_, got, expv), merge)
        x.loop_close(merge, cont)
        old = x.load(res)
    else:
        (val,) = ops
        if op in ("min", "max"):
            name = ("AtomicSMin" if op == "min" else "AtomicSMax") if t is T.I32 else \
                   ("AtomicUMin" if op == "min" else "AtomicUMax")
        else:
            name = _ATOM[op]
        old = x.op(name, x.u32, ptr, sc, se, x.r(val))
    if ret:
        x.setr(dreg, old)


# ---- wave operations (every invocation runs them; x.ex = this lane executes)

def _ballot_u64(x: _Lowering, cond: int) -> int:
    v = x.op("GroupNonUniformBallot", x.b.t_vec(x.u32, 4), x.c(SCOPE["Subgroup"]), cond)
    lo = x.op("CompositeExtract", x.u32, v, 0)
    hi = x.op("CompositeExtract", x.u32, v, 1) if x.W > 32 else x.c(0)
    return lo, hi


def _shuffle(x: _Lowering, v: int, lane: int) -> int:
    return x.op("GroupNonUniformShuffle", x.u32, x.c(SCOPE["Subgroup"]), v, lane)


def _bit_of(x: _Lowering, lo: int, hi: int, i: int) -> int:
    """bit i (u32, < 64) of the mask lo | hi << 32, as a bool."""
    big = x.op("UGreaterThanEqual", x.bool_, i, x.c(32))
    word = x.sel(x.u32, big, hi, lo)
    sh = x.iand(i, x.c(31))
    return x.ieq(x.iand(x.op("ShiftRightLogical", x.u32, word, sh), x.c(1)), x.c(1))


def _write_ex(x: _Lowering, dreg: int, v: int) -> None:
    x.setr(dreg, x.sel(x.u32, x.ex, v, x.r(dreg)))


def _shfl(x: _Lowering, ins: Instruction) -> None:
    dreg, a, b = ins.operands
    W, lane = x.W, x.lane
    mode = ins.defn.variant
    lo, hi = _ballot_u64(x, x.ex)
    bv = x.r(b)
    if mode == "idx":
        s, ok = bv, x.op("ULessThan", x.bool_, bv, x.c(W))
    elif mode == "up":
        s = x.op("ISub", x.u32, lane, bv)
        ok = x.op("ULessThanEqual", x.bool_, bv, lane)
    elif mode == "down":
        s = x.add(lane, bv)
        ok = x.and_(x.op("ULessThan", x.bool_, bv, x.c(W)), x.op("ULessThan", x.bool_, s, x.c(W)))
    else:
        s = x.op("BitwiseXor", x.u32, lane, bv)
        ok = x.op("ULessThan", x.bool_, s, x.c(W))
    s = x.sel(x.u32, ok, s, lane)
    ok = x.and_(ok, _bit_of(x, lo, hi, s))
    av = x.r(a)
    v = _shuffle(x, av, x.sel(x.u32, ok, s, lane))
    _write_ex(x, dreg, x.sel(x.u32, ok, v, av))


def _ctz64(x: _Lowering, lo: int, hi: int) -> int:
    lsb_lo = x.ext(x.u32, "FindILsb", lo)
    lsb_hi = x.add(x.ext(x.u32, "FindILsb", hi), x.c(32))
    r = x.sel(x.u32, x.op("INotEqual", x.bool_, lo, x.c(0)), lsb_lo, lsb_hi)
    return x.sel(x.u32, x.and_(x.ieq(lo, x.c(0)), x.ieq(hi, x.c(0))), x.c(0), r)


def _bcast(x: _Lowering, ins: Instruction) -> None:
    dreg, a, b = ins.operands
    lo, hi = _ballot_u64(x, x.ex)
    low = _ctz64(x, lo, hi)
    L = _shuffle(x, x.r(b), low)
    okL = x.and_(x.op("ULessThan", x.bool_, L, x.c(x.W)), _bit_of(x, lo, hi, x.sel(x.u32, x.op(
        "ULessThan", x.bool_, L, x.c(x.W)), L, x.c(0))))
    src = x.sel(x.u32, okL, L, low)
    _write_ex(x, dreg, _shuffle(x, x.r(a), src))


def _ballot(x: _Lowering, ins: Instruction) -> None:
    dreg, pr = ins.operands
    lo, hi = _ballot_u64(x, x.and_(x.ex, x.p(pr)))
    x.setr(dreg, x.sel(x.u32, x.ex, lo, x.r(dreg)))
    x.setr(dreg + 1, x.sel(x.u32, x.ex, hi, x.r(dreg + 1)))


def _any_all(x: _Lowering, ins: Instruction) -> None:
    dreg, pr = ins.operands
    p = x.p(pr)
    if ins.defn.op == "any":
        res = x.op("GroupNonUniformAny", x.bool_, x.c(SCOPE["Subgroup"]), x.and_(x.ex, p))
    else:
        res = x.not_(x.op("GroupNonUniformAny", x.bool_, x.c(SCOPE["Subgroup"]), x.and_(x.ex, x.not_(p))))
    old = x.load(x.pv[dreg], x.bool_)
    x.store(x.pv[dreg], x.sel(x.bool_, x.ex, res, old))


#: integer combine -> SPIR-V (a comparison picks, the others combine); identities from isa.semantics
_WRED_INT = {("add", False): "IAdd", ("add", True): "IAdd", ("min", False): "ULessThan", ("min", True): "SLessThan",
             ("max", False): "UGreaterThan", ("max", True): "SGreaterThan", ("and", False): "BitwiseAnd",
             ("or", False): "BitwiseOr", ("xor", False): "BitwiseXor"}
_NAN32 = semantics.CANONICAL_NAN[T.F32]


def _wred(x: _Lowering, ins: Instruction) -> None:
    dreg, a = ins.operands
    t, op = ins.defn.type, semantics.combine(ins.defn)
    av = x.r(a)
    s = x.sel(x.u32, x.ex, av, x.c(semantics.identity(ins.defn)))  # inactive lanes give the identity
    if t is T.F32:
        k = 1
        while k < x.W:
            o = _shuffle(x, s, x.op("BitwiseXor", x.u32, x.lane, x.c(k)))
            if op == "add":
                s = x.f32_bits(x.fop("FAdd", x.f32, x.bits_f32(s), x.bits_f32(o)))
            else:
                s = x.minmax(op, T.F32, x.bits_f32(s), x.bits_f32(o))
            k *= 2
        nan = x.isnan(x.bits_f32(s))
        _write_ex(x, dreg, x.sel(x.u32, nan, x.c(_NAN32), s))
        return
    name = _WRED_INT[(op, t.is_signed)]
    k = 1
    while k < x.W:
        o = _shuffle(x, s, x.op("BitwiseXor", x.u32, x.lane, x.c(k)))
        if name.startswith(("U", "S")):
            s = x.sel(x.u32, x.op(name, x.bool_, o, s), o, s)
        else:
            s = x.op(name, x.u32, s, o)
        k *= 2
    _write_ex(x, dreg, s)


def _wscan(x: _Lowering, ins: Instruction) -> None:
    dreg, a = ins.operands
    t = ins.defn.type
    incl = ins.defn.variant == "incl"
    flt = t is T.F32
    s = x.sel(x.u32, x.ex, x.r(a), x.c(semantics.identity(ins.defn)))
    lane = x.lane
    k = 1
    while k < x.W:
        hi = x.op("UGreaterThanEqual", x.bool_, lane, x.c(k))
        src = x.sel(x.u32, hi, x.op("ISub", x.u32, lane, x.c(k)), lane)
        o = _shuffle(x, s, src)
        if flt:
            sum_ = x.f32_bits(x.fop("FAdd", x.f32, x.bits_f32(o), x.bits_f32(s)))
        else:
            sum_ = x.add(o, s)
        s = x.sel(x.u32, hi, sum_, s)
        k *= 2
    if not incl:
        pos = x.op("UGreaterThan", x.bool_, lane, x.c(0))
        o = _shuffle(x, s, x.sel(x.u32, pos, x.op("ISub", x.u32, lane, x.c(1)), x.c(0)))
        s = x.sel(x.u32, pos, o, x.c(semantics.exclusive_first(ins.defn)))
    if flt:
        s = x.sel(x.u32, x.isnan(x.bits_f32(s)), x.c(_NAN32), s)
    _write_ex(x, dreg, s)


def _counted_loop(x: _Lowering, n: int, body: Callable[[int], None]) -> None:
    """``for (j = 0; j < n; ++j) body(j)`` as a structured SPIR-V loop (j a u32 id)."""
    jv = x.var(x.u32)
    x.store(jv, x.c(0))
    merge, cont = x.loop_open()
    j = x.load(jv)
    x.loop_exit_unless(x.op("ULessThan", x.bool_, j, x.c(n)), merge)
    body(j)
    x.store(jv, x.add(j, x.c(1)))
    x.loop_close(merge, cont)


def _lm_word(x: _Lowering, byte_off: int) -> int:
    return x.op("AccessChain", x.b.t_ptr("Workgroup", x.u32), x.lm, x.shr(byte_off, 2))


def _mma(x: _Lowering, ins: Instruction) -> None:
    """D = A x B + C on 16x16 tiles in local memory: each lane computes 256 / W elements of D,
    accumulating k = 0..15 in order with a single-rounding f32 fma (the emulator's order, spec
    §8.13), between subgroup barriers so every tile is read before D is written."""
    rd, ra, rb, rc = ins.operands
    W = x.W
    per = 256 // W
    conv = x.h2f if ins.defn.src_type is T.F16 else x.bf2f
    acc = x.var(x.b.t_array(x.f32, per))
    fptr = x.b.t_ptr("Function", x.f32)
    sg = x.c(SCOPE["Subgroup"])
    sem = x.sem(SEM["AcquireRelease"] | SEM["WorkgroupMemory"])
    mul = lambda a, b: x.op("IMul", x.u32, a, b)  # noqa: E731

    def half_at(off: int) -> int:
        word = x.load(_lm_word(x, off))
        return conv(x.op("BitFieldUExtract", x.u32, word, x.shl(x.iand(off, x.c(3)), 3), x.c(16)))

    x.b.emit("ControlBarrier", sg, sg, sem)
    with x.when(x.ex):
        a0, b0, c0 = x.r(ra), x.r(rb), x.r(rc)

        def element(j: int) -> None:
            e = x.add(x.lane, mul(j, x.c(W)))
            row, col = x.shr(e, 4), x.iand(e, x.c(15))
            s = x.var(x.f32)
            x.store(s, x.bits_f32(x.load(_lm_word(x, x.add(c0, x.shl(e, 2))))))

            def step(kk: int) -> None:
                av = half_at(x.add(a0, x.shl(x.add(x.shl(row, 4), kk), 1)))
                bv = half_at(x.add(b0, x.shl(x.add(x.shl(kk, 4), col), 1)))
                x.store(s, x.bits_f32(x.fma_exact(av, bv, x.load(s, x.f32), T.F32)))

            _counted_loop(x, 16, step)
            x.store(x.op("AccessChain", fptr, acc, j), x.load(s, x.f32))

        _counted_loop(x, per, element)
    x.b.emit("ControlBarrier", sg, sg, sem)
    with x.when(x.ex):
        d0 = x.r(rd)

        def write(j: int) -> None:
            e = x.add(x.lane, mul(j, x.c(W)))
            v = x.load(x.op("AccessChain", fptr, acc, j), x.f32)
            x.store(_lm_word(x, x.add(d0, x.shl(e, 2))), x.f32_bits(v))

        _counted_loop(x, per, write)
    x.b.emit("ControlBarrier", sg, sg, sem)


def _no_stmt(x: _Lowering, ins: Instruction) -> None:
    return None


#: the SPIR-V backend's handlers by semantic key (``InstrDef.sem``, :mod:`anywave.isa.dispatch`);
#: structured control flow and barriers are lowered by the walk itself (handler None)
SPIRV = dispatch.consumer("spirv")
#: native overrides of instruction bodies: the float operations (bit-exact sequences of
#: spirv_float), mulhi as OpUMulExtended / OpSMulExtended (no 64-bit multiply), the conversions
_ALU_NATIVE = {
    "int.mulhi": _mulhi,
    **{f"float.{op}": _float_op for op in ("add", "sub", "mul", "div", "min", "max", "fma", "sqrt", "floor", "ceil",
                                           "trunc", "rint")},
    "float.neg": _sign_op, "float.abs": _sign_op,
    **{f"float.{op}": _approx for op in ("ex2", "lg2", "sin", "cos", "rsqrt", "rcp", "tanh")},
    "cvt.cvt": _cvt, "cvt.cvt_pack": _cvt_pack,
}
SPIRV.register({
    # every other ALU key: its body (anywave.isa.bodies) spelt with SPIRV_SPELLING
    **_ALU_NATIVE, **{k: _body for k in body_keys(_ALU_NATIVE)},
    **{f"setp.{c}.{t}": _setp_float for t in ("f32", "f64", "f16", "bf16")
       for c in ("eq", "ne", "lt", "le", "gt", "ge", "unord")},
    "move.mov": _mov,
    "mem.ld": _ld, "mem.st": _st, "atomic.atom": _atom, "atomic.red": _atom,
    "wave.shfl": _shfl, "wave.bcast": _bcast, "wave.ballot": _ballot, "wave.any": _any_all, "wave.all": _any_all,
    "wave.wred": _wred, "wave.wscan": _wscan, "mma.mma": _mma,
    "move.movi": _movi, "move.mov_sr": _mov_sr, "move.ldarg": _ldarg,
    "async.cp_async": _cp_async, "async.cp_commit": _no_stmt, "async.cp_wait": _no_stmt,
    **{f"mma.{op}": h for op, h in FRAGMENT_HANDLERS.items()},
    "ctl.nop": _no_stmt,
})
SPIRV.register(["ctl.*", "sync.barrier", "sync.fence", "sync.wave_barrier"], None)  # the walk's (spirv._Lowering)
