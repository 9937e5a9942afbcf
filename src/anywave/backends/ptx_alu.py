"""PTX emitters of the ALU instructions: integer, float, bitwise, compare/select/predicate
logic, conversions and data movement (see the notes at the top of :mod:`anywave.backends.ptx`)."""

from __future__ import annotations

from anywave.backends.lowering.arith import div_rule, narrowing_steps
from anywave.backends.ptx_block import CANON_NAN, INT_PTX, SIGN, WAVE_WIDTH, Block
from anywave.binary.module import Instruction, Pred
from anywave.isa.mma import MMA_SREG_VALUES
from anywave.isa.table import Operand
from anywave.isa.types import ScalarType, SpecialRegister

T = ScalarType


# --- integer
def _e_int(b: Block, ins: Instruction) -> None:
    d = ins.defn
    t = d.type
    assert t is not None
    op = d.op
    wide = t.bits == 64
    ops = ins.operands
    srcs = [b.get64(r) if wide else b.r(r) for r in ops[1:]]
    kind = "b64" if wide else "b32"
    s = INT_PTX[t]
    res = b.t(kind)
    if op in ("add", "sub"):
        b(f"{op}.{s} {res}, {srcs[0]}, {srcs[1]};")
    elif op == "mul":
        b(f"mul.lo.{s} {res}, {srcs[0]}, {srcs[1]};")
    elif op == "neg":
        b(f"neg.{s} {res}, {srcs[0]};")
    elif op == "abs":  # wrapping: abs MIN = MIN (PTX abs leaves MIN unspecified)
        m = b.t(kind)
        b(f"shr.{s} {m}, {srcs[0]}, {t.bits - 1};")
        b(f"xor.b{t.bits} {res}, {srcs[0]}, {m};")
        b(f"sub.{s} {res}, {res}, {m};")
    elif op in ("min", "max"):
        b(f"{op}.{s} {res}, {srcs[0]}, {srcs[1]};")
    elif op == "mulhi":
        b(f"mul.hi.{s} {res}, {srcs[0]}, {srcs[1]};")
    elif op == "mad":
        b(f"mad.lo.s32 {res}, {srcs[0]}, {srcs[1]}, {srcs[2]};")
    elif op in ("div", "rem"):
        # divide by a safe divisor (1 where b = 0 or, signed, a = MIN and b = -1: MIN / 1 = MIN
        # and MIN % 1 = 0 are the spec's overflow answers), then patch the b = 0 lanes
        rule = div_rule(op, t)
        a_, b_ = srcs
        z = b.t("pred")
        safe = b.t(kind)
        b(f"setp.eq.{s} {z}, {b_}, 0;")
        if rule.signed:
            ov = b.t("pred")
            q2 = b.t("pred")
            b(f"setp.eq.{s} {ov}, {a_}, {rule.min_value:#x};")
            b(f"setp.eq.{s} {q2}, {b_}, -1;")
            b(f"and.pred {ov}, {ov}, {q2};")
            b(f"or.pred {ov}, {ov}, {z};")
            b(f"selp.b{t.bits} {safe}, 1, {b_}, {ov};")
        else:
            b(f"selp.b{t.bits} {safe}, 1, {b_}, {z};")
        b(f"{op}.{s} {res}, {a_}, {safe};")
        zero = "-1" if rule.zero_result == "all_ones" else a_
        b(f"selp.b{t.bits} {res}, {zero}, {res}, {z};")
    else:  # pragma: no cover - table/emitter mismatch
        raise AssertionError(op)
    if wide:
        b.set64(ops[0], res)
    else:
        b(f"mov.b32 %r{ops[0]}, {res};")


# --- float
_F_CMP = {"eq": "eq", "ne": "neu", "lt": "lt", "le": "le", "gt": "gt", "ge": "ge", "unord": "nan"}


def _minmax(b: Block, op: str, t: ScalarType, x: str, y: str, a: str, bb: str) -> str:
    """minimumNumber/maximumNumber: compare domain values x, y (f32 or f64 typed regs of the
    same width as ``ct``), select among bit patterns a, bb (already clean)."""
    ct = "f64" if t is T.F64 else "f32"
    w = 64 if t is T.F64 else 32
    kind = "b64" if w == 64 else "b32"
    qa, qb, ql, qe = (b.t("pred") for _ in range(4))
    r = b.t(kind)
    o = b.t(kind)
    b(f"setp.nan.{ct} {qa}, {x}, {x};")
    b(f"setp.nan.{ct} {qb}, {y}, {y};")
    b(f"setp.{'lt' if op == 'min' else 'gt'}.{ct} {ql}, {x}, {y};")
    b(f"selp.b{w} {r}, {a}, {bb}, {ql};")
    b(f"setp.eq.{ct} {qe}, {x}, {y};")
    # equal values: identical bits except for zeros, where -0 < +0 decides
    b(f"{'or' if op == 'min' else 'and'}.b{w} {o}, {a}, {bb};")
    b(f"selp.b{w} {r}, {o}, {r}, {qe};")
    b(f"selp.b{w} {r}, {a}, {r}, {qb};")
    b(f"selp.b{w} {r}, {bb}, {r}, {qa};")
    b(f"and.pred {qa}, {qa}, {qb};")
    b(f"selp.b{w} {r}, {CANON_NAN[t]:#x}, {r}, {qa};")
    return r


def _f_scalar(b: Block, op: str, t: ScalarType, srcs: list[str]) -> str:
    """One scalar float operation on b32 registers (16-bit values in clean low halves for
    f16/bf16); returns a b32 temp (high half zero for 16-bit types)."""
    if op in ("neg", "abs"):
        r = b.t()
        if op == "neg":
            b(f"xor.b32 {r}, {srcs[0]}, {SIGN[t]:#x};")
        else:
            b(f"and.b32 {r}, {srcs[0]}, {SIGN[t] - 1:#x};")
        if t.bits == 16:
            b(f"and.b32 {r}, {r}, 0xffff;")
        return r
    if op in ("min", "max"):
        xs = [b.to_f32(t, s) for s in srcs]
        return _minmax(b, op, t, xs[0], xs[1], srcs[0], srcs[1])
    if t is T.F32:
        r = b.t()
        _f32_op(b, op, r, srcs)
        return r
    if t is T.F16 and op in ("add", "sub", "mul", "fma"):
        hs = []
        for s in srcs:
            h = b.t("b16")
            b(f"cvt.u16.u32 {h}, {s};")
            hs.append(h)
        hd = b.t("b16")
        b(f"{op}.rn.f16 {hd}, {', '.join(hs)};")
        r = b.t()
        b(f"cvt.u32.u16 {r}, {hd};")
        return r
    if t is T.BF16 and op == "fma":
        hs = []
        for s in srcs:
            h = b.t("b16")
            b(f"cvt.u16.u32 {h}, {s};")
            hs.append(h)
        hd = b.t("b16")
        b(f"fma.rn.bf16 {hd}, {', '.join(hs)};")
        r = b.t()
        b(f"cvt.u32.u16 {r}, {hd};")
        return r
    # computed in f32 and rounded once more: innocuous for add/sub/mul/div/sqrt (spec §8.2),
    # exact for floor/ceil/trunc/rint (the integral result is representable)
    xs = [b.to_f32(t, s) for s in srcs]
    f = b.t()
    _f32_op(b, op, f, xs)
    return b.from_f32(t, f)


_ROUND = {"floor": "rmi", "ceil": "rpi", "trunc": "rzi", "rint": "rni"}


def _f32_op(b: Block, op: str, r: str, xs: list[str], ft: str = "f32") -> None:
    if op in ("add", "sub", "mul", "fma", "div"):
        b(f"{op}.rn.{ft} {r}, {', '.join(xs)};")
    elif op == "sqrt":
        b(f"sqrt.rn.{ft} {r}, {xs[0]};")
    elif op in _ROUND:
        b(f"cvt.{_ROUND[op]}.{ft}.{ft} {r}, {xs[0]};")
    else:  # pragma: no cover
        raise AssertionError(op)


def _e_float(b: Block, ins: Instruction) -> None:
    d = ins.defn
    t = d.type
    assert t is not None
    ops = ins.operands
    op = d.op
    if t is T.F64:
        srcs = [b.get64(r) for r in ops[1:]]
        if op in ("neg", "abs"):
            r = b.t("b64")
            if op == "neg":
                b(f"xor.b64 {r}, {srcs[0]}, {SIGN[t]:#x};")
            else:
                b(f"and.b64 {r}, {srcs[0]}, {SIGN[t] - 1:#x};")
        elif op in ("min", "max"):
            r = _minmax(b, op, t, srcs[0], srcs[1], srcs[0], srcs[1])
        else:
            r = b.t("b64")
            _f32_op(b, op, r, srcs, "f64")
        b.set64(ops[0], r)
        return
    if op in ("ex2", "lg2", "sin", "cos", "rsqrt", "rcp", "tanh"):
        b(f"{op}.approx.f32 %r{ops[0]}, %r{ops[1]};")
        return
    if t.is_packed:
        et = T.F16 if t is T.F16X2 else T.BF16
        lo = _f_scalar(b, op, et, [b.lo16(b.r(r)) for r in ops[1:]])
        hi = _f_scalar(b, op, et, [b.hi16(b.r(r)) for r in ops[1:]])
        b(f"shl.b32 {hi}, {hi}, 16;")
        b(f"or.b32 %r{ops[0]}, {lo}, {hi};")
        return
    srcs = [b.r(r) for r in ops[1:]]
    if t.bits == 16 and op in ("min", "max", "neg", "abs"):
        srcs = [b.lo16(s) for s in srcs]
    res = _f_scalar(b, op, t, srcs)
    b(f"mov.b32 %r{ops[0]}, {res};")


# --- bitwise
def _e_bitwise(b: Block, ins: Instruction) -> None:
    d = ins.defn
    t = d.type
    assert t is not None
    ops = ins.operands
    op = d.op
    if op in ("popc", "clz", "brev"):
        b(f"{op}.b32 %r{ops[0]}, %r{ops[1]};")
        return
    if op == "ctz":
        r = b.t()
        b(f"brev.b32 {r}, %r{ops[1]};")
        b(f"clz.b32 %r{ops[0]}, {r};")
        return
    wide = t.bits == 64
    if op in ("shl", "shr"):
        # PTX clamps shift counts > width to the width: shl/shr.u give 0, shr.s sign-fills,
        # exactly the spec's rule for counts >= width (count read as unsigned 32-bit)
        s = "b" if op == "shl" else ("s" if t.is_signed else "u")
        a = b.get64(ops[1]) if wide else b.r(ops[1])
        r = b.t("b64" if wide else "b32")
        b(f"{op}.{s}{t.bits} {r}, {a}, %r{ops[2]};")
    else:
        srcs = [b.get64(x) if wide else b.r(x) for x in ops[1:]]
        r = b.t("b64" if wide else "b32")
        b(f"{op}.b{t.bits} {r}, {', '.join(srcs)};")
    if wide:
        b.set64(ops[0], r)
    else:
        b(f"mov.b32 %r{ops[0]}, {r};")


# --- compare, select, predicate logic
def _e_setp(b: Block, ins: Instruction) -> None:
    d = ins.defn
    t = d.type
    assert t is not None
    ops = ins.operands
    wide = t.bits == 64
    if t.is_float:
        if t is T.F64:
            x, y = b.get64(ops[1]), b.get64(ops[2])
            ct = "f64"
        else:
            x, y = b.to_f32(t, b.r(ops[1])), b.to_f32(t, b.r(ops[2]))
            ct = "f32"
        b(f"setp.{_F_CMP[d.variant]}.{ct} %p{ops[0]}, {x}, {y};")
    else:
        x, y = (b.get64(ops[1]), b.get64(ops[2])) if wide else (b.r(ops[1]), b.r(ops[2]))
        b(f"setp.{d.variant}.{INT_PTX[t]} %p{ops[0]}, {x}, {y};")


def _e_selp(b: Block, ins: Instruction) -> None:
    d = ins.defn
    ops = ins.operands
    p: Pred = ops[3]
    first, second = (ops[1], ops[2]) if not p.negated else (ops[2], ops[1])
    pr = f"%p{p.index}"
    if d.type is T.B64:
        lo, hi = b.t(), b.t()
        b(f"selp.b32 {lo}, %r{first}, %r{second}, {pr};")
        b(f"selp.b32 {hi}, %r{first + 1}, %r{second + 1}, {pr};")
        b(f"mov.b32 %r{ops[0]}, {lo};")
        b(f"mov.b32 %r{ops[0] + 1}, {hi};")
    else:
        b(f"selp.b32 %r{ops[0]}, %r{first}, %r{second}, {pr};")


def _e_predlogic(b: Block, ins: Instruction) -> None:
    d = ins.defn
    ops = ins.operands
    if d.op == "mov":
        p: Pred = ops[1]
        b(f"{'not' if p.negated else 'mov'}.pred %p{ops[0]}, %p{p.index};")
    else:
        b(f"{d.op}.pred %p{ops[0]}, {b.pred(ops[1])}, {b.pred(ops[2])};")


def _e_setp_const(b: Block, ins: Instruction) -> None:
    b(f"mov.pred %p{ins.operands[0]}, {1 if ins.defn.variant == 'true' else 0};")


# --- conversions
def _int_value(b: Block, t: ScalarType, reg: int) -> str:
    return b.get64(reg) if t.bits == 64 else b.r(reg)


def _e_cvt(b: Block, ins: Instruction) -> None:
    d = ins.defn
    dst_t, src_t = d.type, d.src_type
    assert dst_t is not None and src_t is not None
    dreg, sreg = ins.operands
    res = _convert(b, dst_t, src_t, sreg)
    if dst_t.bits == 64:
        b.set64(dreg, res)
    else:
        b(f"mov.b32 %r{dreg}, {res};")


def _convert(b: Block, dst: ScalarType, src: ScalarType, sreg: int) -> str:
    dk = "b64" if dst.bits == 64 else "b32"
    r = b.t(dk)
    if not dst.is_float and not src.is_float:
        x = _int_value(b, src, sreg)
        if dst.bits == src.bits:
            b(f"mov.b{dst.bits} {r}, {x};")
        elif dst.bits > src.bits:
            b(f"cvt.{'s64.s32' if src.is_signed else 'u64.u32'} {r}, {x};")
        else:
            b(f"cvt.u32.u64 {r}, {x};")
        return r
    if not src.is_float:  # int -> float
        s = INT_PTX[src]
        x = _int_value(b, src, sreg)
        steps = narrowing_steps(src, dst)
        if not steps:
            b(f"cvt.rn.{dst.spelling}.{s} {r}, {x};")
            return r
        return _narrow(b, steps, x, src)
    if not dst.is_float:
        # float -> int: PTX cvt.rzi truncates and saturates, but NaN does not always give 0
        # (f64 -> i32 and f32 -> i64 give MIN on sm_90), so NaN is mapped to 0 explicitly
        dt = INT_PTX[dst]
        ft = "f64" if src is T.F64 else "f32"
        x = b.get64(sreg) if src is T.F64 else b.to_f32(src, b.r(sreg))
        q = b.t("pred")
        b(f"cvt.rzi.{dt}.{ft} {r}, {x};")
        b(f"setp.nan.{ft} {q}, {x}, {x};")
        b(f"selp.b{dst.bits} {r}, 0, {r}, {q};")
        return r
    # float -> float
    if src is T.F64:
        x = b.get64(sreg)
        if dst is T.F32:
            b(f"cvt.rn.f32.f64 {r}, {x};")
            return r
        return _narrow(b, narrowing_steps(src, dst), x, src)
    f = b.to_f32(src, b.r(sreg))
    if dst is T.F64:
        b(f"cvt.f64.f32 {r}, {f};")
        return r
    if dst is T.F32:
        return f
    return b.from_f32(dst, f)


def _narrow(b: Block, steps: tuple, x: str, src: ScalarType) -> str:
    """Spell the rounding path of :func:`~anywave.backends.lowering.arith.narrowing_steps`
    (16-bit float results: b32 with the high half zero)."""
    for step in steps:
        if step.mode == "exact":  # 32-bit integer -> f64
            wide = b.t("b64")
            b(f"cvt.rn.f64.{INT_PTX[src]} {wide}, {x};")
            x = wide
        elif step.mode == "odd" and step.to is T.F64:  # 64-bit integer -> f64
            x = b.int64_to_f64_odd(x, src.is_signed)
        elif step.mode == "odd":  # f64 -> f32
            x = b.f64_to_f32_odd(x)
        else:  # f32 -> f16/bf16, nearest even
            x = b.from_f32(step.to, x)
    return x


def _e_cvt_pack(b: Block, ins: Instruction) -> None:
    d = ins.defn
    et = T.F16 if d.type is T.F16X2 else T.BF16
    dreg, a, c = ins.operands
    lo = b.from_f32(et, b.r(a))
    hi = b.from_f32(et, b.r(c))
    b(f"shl.b32 {hi}, {hi}, 16;")
    b(f"or.b32 %r{dreg}, {lo}, {hi};")


# --- data movement
_SREG_DIRECT = {
    SpecialRegister.THREAD_ID_X: "%sr_tx", SpecialRegister.THREAD_ID_Y: "%sr_ty",
    SpecialRegister.THREAD_ID_Z: "%sr_tz", SpecialRegister.WORKGROUP_ID_X: "%sr_cx",
    SpecialRegister.WORKGROUP_ID_Y: "%sr_cy", SpecialRegister.WORKGROUP_ID_Z: "%sr_cz",
    SpecialRegister.WORKGROUP_SIZE_X: "%sr_nx", SpecialRegister.WORKGROUP_SIZE_Y: "%sr_ny",
    SpecialRegister.WORKGROUP_SIZE_Z: "%sr_nz", SpecialRegister.GRID_SIZE_X: "%sr_gx",
    SpecialRegister.GRID_SIZE_Y: "%sr_gy", SpecialRegister.GRID_SIZE_Z: "%sr_gz",
    SpecialRegister.WAVE_ID: "%sr_wave", SpecialRegister.LANE_ID: "%sr_lane",
    SpecialRegister.NUM_WAVES: "%sr_nwaves", SpecialRegister.THREAD_LINEAR_ID: "%sr_tl",
}


def _e_mov(b: Block, ins: Instruction) -> None:
    d = ins.defn
    ops = ins.operands
    if d.type is T.B64:
        b.set64(ops[0], b.get64(ops[1]))
    else:
        b(f"mov.b32 %r{ops[0]}, %r{ops[1]};")


def _e_movi(b: Block, ins: Instruction) -> None:
    d = ins.defn
    dst, imm = ins.operands
    if d.operands[0] is Operand.RD64:
        imm &= (1 << 64) - 1
        b(f"mov.b32 %r{dst}, {imm & 0xFFFFFFFF:#010x};")
        b(f"mov.b32 %r{dst + 1}, {imm >> 32:#010x};")
    else:
        b(f"mov.b32 %r{dst}, {imm & 0xFFFFFFFF:#010x};")


def _e_mov_sr(b: Block, ins: Instruction) -> None:
    dst, sr = ins.operands
    if sr in _SREG_DIRECT:
        b(f"mov.b32 %r{dst}, {_SREG_DIRECT[sr]};")
    elif sr is SpecialRegister.WAVE_WIDTH:
        b(f"mov.b32 %r{dst}, {WAVE_WIDTH};")
    elif sr.name in MMA_SREG_VALUES:
        b(f"mov.b32 %r{dst}, {MMA_SREG_VALUES[sr.name]};")
    else:  # global ids wrap modulo 2^32
        axis = sr.name[-1].lower()
        b(f"mad.lo.u32 %r{dst}, %sr_c{axis}, %sr_n{axis}, %sr_t{axis};")


def _e_ldarg(b: Block, ins: Instruction) -> None:
    dst, arg = ins.operands
    name = b.kx.param_name(arg)
    if ins.defn.type is T.B64:
        t = b.t("b64")
        b(f"ld.param.b64 {t}, [{name}];")
        b.set64(dst, t)
    else:
        b(f"ld.param.b32 %r{dst}, [{name}];")
