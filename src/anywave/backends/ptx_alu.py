"""PTX emitters of the ALU instructions: integer, float, bitwise, compare/select/predicate
logic, conversions and data movement (see the notes at the top of :mod:`anywave.backends.ptx`)."""

from __future__ import annotations

from anywave.backends.lowering.arith import narrowing_steps
from anywave.backends.lowering.bodies import BodySpelling, render_record
from anywave.backends.ptx_block import CANON_NAN, INT_PTX, SIGN, WAVE_WIDTH, Block
from anywave.binary.module import Instruction, Pred
from anywave.isa.bodies import operand_types, result_type
from anywave.isa.expr import Expr, width
from anywave.isa.mma import MMA_SREG_VALUES
from anywave.isa.table import Operand
from anywave.isa.types import ScalarType, SpecialRegister

T = ScalarType


# --- instruction bodies (anywave.isa.bodies) spelt in PTX
def _kind(ty: str) -> str:
    return {"pred": "pred", "b64": "b64"}.get(ty, "b32")


def _spell(fmt: str) -> object:
    """A primitive spelt as one PTX instruction: ``fmt`` with ``{n}`` (the operands' width),
    ``{r}`` (the result) and ``{0}``, ``{1}`` ... (the operands)."""
    def f(b: Block, node: Expr, xs: list[str]) -> str:
        r = b.t(_kind(node.ty))
        n = width(node.args[0].ty)
        b(fmt.format(*xs, n=n, r=r) + ";")
        return r
    return f


def _logic(op: str) -> object:
    """and/or/xor/not on bit patterns (``.bN``) or on predicates (``.pred``)."""
    def f(b: Block, node: Expr, xs: list[str]) -> str:
        r = b.t(_kind(node.ty))
        b(f"{op}.{'pred' if node.ty == 'pred' else f'b{width(node.ty)}'} {r}, {', '.join(xs)};")
        return r
    return f


def _const(b: Block, v: int, ty: str) -> str:
    if ty == "pred":
        r = b.t("pred")
        b(f"setp.ne.u32 {r}, {v}, 0;")
        return r
    return f"{v:#x}"


#: PTX's spelling of the expression vocabulary: integer operations on bit patterns, compares
#: to predicates, conversions between widths (PTX ISA 8.x, "Integer Arithmetic Instructions",
#: "Comparison and Selection Instructions", "Logic and Shift Instructions"); every primitive of
#: the integer bodies is native, so the legaliser expands nothing here
PTX_SPELLING = BodySpelling("ptx", {
    "add": _spell("add.s{n} {r}, {0}, {1}"), "sub": _spell("sub.s{n} {r}, {0}, {1}"),
    "mul": _spell("mul.lo.s{n} {r}, {0}, {1}"),
    **{op: _logic(op) for op in ("and", "or", "xor", "not")},
    "shl": _spell("shl.b{n} {r}, {0}, {1}"), "lshr": _spell("shr.u{n} {r}, {0}, {1}"),
    "ashr": _spell("shr.s{n} {r}, {0}, {1}"),
    "udiv": _spell("div.u{n} {r}, {0}, {1}"), "sdiv": _spell("div.s{n} {r}, {0}, {1}"),
    "urem": _spell("rem.u{n} {r}, {0}, {1}"), "srem": _spell("rem.s{n} {r}, {0}, {1}"),
    "clz": _spell("clz.b32 {r}, {0}"), "popc": _spell("popc.b32 {r}, {0}"), "brev": _spell("brev.b32 {r}, {0}"),
    "eq": _spell("setp.eq.u{n} {r}, {0}, {1}"), "ne": _spell("setp.ne.u{n} {r}, {0}, {1}"),
    "ult": _spell("setp.lo.u{n} {r}, {0}, {1}"), "ule": _spell("setp.ls.u{n} {r}, {0}, {1}"),
    "slt": _spell("setp.lt.s{n} {r}, {0}, {1}"), "sle": _spell("setp.le.s{n} {r}, {0}, {1}"),
    "select": lambda b, node, xs: _selp(b, node, xs),
    "zext": _spell("cvt.u64.u32 {r}, {0}"), "sext": _spell("cvt.s64.s32 {r}, {0}"),
    "trunc": _spell("cvt.u32.u64 {r}, {0}"),
}, _const, has=lambda n: n.args[0].ty != "pred" or n.op in ("and", "or", "xor", "not", "select"))


def _selp(b: Block, node: Expr, xs: list[str]) -> str:
    r = b.t(_kind(node.ty))
    b(f"selp.b{width(node.ty)} {r}, {xs[1]}, {xs[2]}, {xs[0]};")
    return r




def _leaf(b: Block, ty: str, v: object) -> str:
    if ty == "pred":
        p: Pred = v  # type: ignore[assignment]
        if not p.negated:
            return f"%p{p.index}"
        t = b.t("pred")
        b(f"not.pred {t}, %p{p.index};")
        return t
    return b.get64(v) if ty == "b64" else b.r(v)  # type: ignore[arg-type]


def _e_body(b: Block, ins: Instruction) -> None:
    """Any record with a body: its expression spelt with :data:`PTX_SPELLING`."""
    d = ins.defn
    srcs = [ins.operands[i] for i in d.srcs]
    leaves = [_leaf(b, ty, v) for ty, v in zip(operand_types(d), srcs, strict=True)]
    res = render_record(d, leaves, PTX_SPELLING, b)
    dst = ins.operands[d.dests[0]]
    ty = result_type(d)
    if ty == "pred":
        b(f"mov.pred %p{dst}, {res};")
    elif ty == "b64":
        b.set64(dst, res)
    else:
        b(f"mov.b32 %r{dst}, {res};")


# --- native overrides of bodies: one PTX instruction where the body would take several
def _e_int_native(b: Block, ins: Instruction) -> None:
    """min/max, mulhi and mad: PTX's own instructions."""
    d = ins.defn
    t = d.type
    assert t is not None
    ops = ins.operands
    wide = t.bits == 64
    srcs = [b.get64(r) if wide else b.r(r) for r in ops[1:]]
    res = b.t("b64" if wide else "b32")
    s = INT_PTX[t]
    if d.op in ("min", "max"):
        b(f"{d.op}.{s} {res}, {srcs[0]}, {srcs[1]};")
    elif d.op == "mulhi":
        b(f"mul.hi.{s} {res}, {srcs[0]}, {srcs[1]};")
    else:  # mad
        b(f"mad.lo.s32 {res}, {srcs[0]}, {srcs[1]}, {srcs[2]};")
    if wide:
        b.set64(ops[0], res)
    else:
        b(f"mov.b32 %r{ops[0]}, {res};")


def _e_shift(b: Block, ins: Instruction) -> None:
    """PTX clamps shift counts > width to the width: shl/shr.u give 0, shr.s sign-fills,
    exactly the spec's rule for counts >= width (count read as unsigned 32-bit)."""
    d = ins.defn
    t = d.type
    assert t is not None
    ops = ins.operands
    wide = t.bits == 64
    s = "b" if d.op == "shl" else ("s" if t.is_signed else "u")
    a = b.get64(ops[1]) if wide else b.r(ops[1])
    r = b.t("b64" if wide else "b32")
    b(f"{d.op}.{s}{t.bits} {r}, {a}, %r{ops[2]};")
    if wide:
        b.set64(ops[0], r)
    else:
        b(f"mov.b32 %r{ops[0]}, {r};")


def _e_rotl(b: Block, ins: Instruction) -> None:
    """``shf.l.wrap``: the funnel shift of a:a left by the count mod 32 is the rotation."""
    dreg, a, c = ins.operands
    b(f"shf.l.wrap.b32 %r{dreg}, %r{a}, %r{a}, %r{c};")


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


# --- float compares (integer compares, selects and predicate logic are bodies)
def _e_setp_float(b: Block, ins: Instruction) -> None:
    d = ins.defn
    t = d.type
    assert t is not None and t.is_float
    ops = ins.operands
    if t is T.F64:
        x, y = b.get64(ops[1]), b.get64(ops[2])
        ct = "f64"
    else:
        x, y = b.to_f32(t, b.r(ops[1])), b.to_f32(t, b.r(ops[2]))
        ct = "f32"
    b(f"setp.{_F_CMP[d.variant]}.{ct} %p{ops[0]}, {x}, {y};")


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
