"""The C-family handlers: the C statements of every WAVE instruction, keyed by ``op``.

Each handler takes the kernel renderer (:class:`anywave.backends.cfamily._KernelRenderer`:
register spellings, the dialect table ``x.d``, the wave width ``x.W``) and one instruction,
and returns C statements that run where the instruction executes (the renderer wraps them in
the execution condition). Wave-collective handlers run in every lane, with ``ex`` = this lane
executes. Integer edge cases, step lists, identities and narrowing paths come from
:mod:`anywave.backends.lowering`; the dialect only spells names (``x.d``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from anywave.backends import cfamily_async, cfamily_mma
from anywave.backends.cfamily_prelude import gen_name
from anywave.backends.lowering.arith import narrowing_steps
from anywave.backends.lowering.bodies import BodySpelling, body_keys, render_record
from anywave.backends.lowering.collectives import butterfly_steps, exclusive_first, identity, kogge_stone_steps
from anywave.binary.module import DeviceAddr, Instruction, LocalAddr, Pred
from anywave.isa import dispatch
from anywave.isa.bodies import operand_types, result_type
from anywave.isa.expr import Expr, width
from anywave.isa.mma import MMA_SREG_VALUES
from anywave.isa.table import InstrDef, Operand
from anywave.isa.types import MemoryOrder, ScalarType, Scope, SpecialRegister

T = ScalarType
S = SpecialRegister


class _KernelRenderer(Protocol):
    """What a handler uses of the kernel renderer (:class:`anywave.backends.cfamily._KernelRenderer`
    implements it): the dialect table ``d``, the wave width ``W``, the kernel ``k`` and its scalar
    parameter names ``scal``, and the spellings of register values, bit casts and addresses.
    Declared here so that this module needs nothing of :mod:`anywave.backends.cfamily`."""

    d: Any
    W: int
    k: Any
    scal: Any

    def p(self, pr: Pred) -> str: ...
    def u64(self, r: int) -> str: ...
    def fval(self, r: int, t: T) -> str: ...
    def fbits(self, expr: str, t: T) -> str: ...
    def set64(self, r: int, expr: str) -> list[str]: ...
    def set_t(self, r: int, t: T, expr: str) -> list[str]: ...
    def ival(self, r: int, t: T) -> str: ...
    def daddr(self, a: DeviceAddr, wide: bool) -> str: ...
    def laddr(self, a: LocalAddr) -> str: ...


# --------------------------------------------------------------------------- instruction handlers
# Each handler returns the C statements of one instruction (executed where the exec
# condition holds). Wave-collective handlers run in every lane with ``ex`` = executing.

_Handler = Callable[["_KernelRenderer", Instruction], list[str]]


# ---- instruction bodies (anywave.isa.bodies) spelt in C
_UT = {"b32": "u32", "b64": "u64"}
_ST = {"b32": "i32", "b64": "i64"}


def _c_bin(sym: str, signed: bool = False) -> Callable[[Any, Expr, list[str]], str]:
    def f(x: Any, n: Expr, v: list[str]) -> str:
        ty = n.args[0].ty
        if ty == "pred":
            return {"&": f"({v[0]} && {v[1]})", "|": f"({v[0]} || {v[1]})", "^": f"({v[0]} != {v[1]})",
                    "==": f"({v[0]} == {v[1]})", "!=": f"({v[0]} != {v[1]})"}[sym]
        a, b = (f"({_ST[ty]}){v[0]}", f"({_ST[ty]}){v[1]}") if signed else v
        out = f"({a} {sym} {b})"
        return out if n.ty == "pred" else f"(({_UT[n.ty]}){out})"
    return f


def _c_shift(sym: str, signed: bool = False) -> Callable[[Any, Expr, list[str]], str]:
    def f(x: Any, n: Expr, v: list[str]) -> str:
        a = f"({_ST[n.ty]}){v[0]}" if signed else v[0]
        return f"(({_UT[n.ty]})({a} {sym} {v[1]}))"
    return f


def _c_not(x: Any, n: Expr, v: list[str]) -> str:
    return f"(!{v[0]})" if n.ty == "pred" else f"(({_UT[n.ty]})~{v[0]})"


def _c_const(x: Any, v: int, ty: str) -> str:
    if ty == "pred":
        return "true" if v else "false"
    return f"0x{v:X}{'ul' if width(ty) == 64 else 'u'}"


#: the C family's spelling of the expression vocabulary (C99 / C++ integer arithmetic on the
#: unsigned types ``u32``/``u64``, signed views by cast; the dialect names clz and popcount)
C_SPELLING = BodySpelling("c-family", {
    "add": _c_bin("+"), "sub": _c_bin("-"), "mul": _c_bin("*"), "and": _c_bin("&"), "or": _c_bin("|"),
    "xor": _c_bin("^"), "not": _c_not,
    "shl": _c_shift("<<"), "lshr": _c_shift(">>"), "ashr": _c_shift(">>", True),
    "udiv": _c_bin("/"), "sdiv": _c_bin("/", True), "urem": _c_bin("%"), "srem": _c_bin("%", True),
    "eq": _c_bin("=="), "ne": _c_bin("!="), "ult": _c_bin("<"), "ule": _c_bin("<="),
    "slt": _c_bin("<", True), "sle": _c_bin("<=", True),
    "select": lambda x, n, v: f"({v[0]} ? {v[1]} : {v[2]})",
    "clz": lambda x, n, v: f"((u32){x.d.clz}({v[0]}))",
    "popc": lambda x, n, v: f"((u32){x.d.popcount}({v[0]}))",
    "brev": lambda x, n, v: f"aw_brev({v[0]})",
    "zext": lambda x, n, v: f"((u64){v[0]})", "sext": lambda x, n, v: f"((u64)(i64)(i32){v[0]})",
    "trunc": lambda x, n, v: f"((u32){v[0]})",
}, _c_const)


def _body(x: _KernelRenderer, ins: Instruction) -> list[str]:
    """Any record with a body: its expression spelt with :data:`C_SPELLING` (64-bit operands
    read once into locals)."""
    d = ins.defn
    lines: list[str] = []
    leaves = []
    for i, (ty, v) in enumerate(zip(operand_types(d), (ins.operands[j] for j in d.srcs), strict=True)):
        if ty == "pred":
            leaves.append(f"({x.p(v)})")
        elif ty == "b64":
            name = gen_name("s", i)
            lines.append(f"const u64 {name} = {x.u64(v)};")
            leaves.append(name)
        else:
            leaves.append(f"r{v}")
    res = render_record(d, leaves, C_SPELLING, x)
    dst = ins.operands[d.dests[0]]
    ty = result_type(d)
    if ty == "pred":
        return lines + [f"p{dst} = {res};"]
    if ty == "b64":
        return lines + x.set64(dst, res)
    return lines + [f"r{dst} = {res};"]


def _ctz(x: _KernelRenderer, ins: Instruction) -> list[str]:
    """The dialect's count-trailing-zeros (the body is clz(brev(a)))."""
    dreg, a = ins.operands
    return [f"r{dreg} = (u32){x.d.ctz}(r{a});"]


def _rotl(x: _KernelRenderer, ins: Instruction) -> list[str]:
    """The dialect's rotate (OpenCL ``rotate``) where it has one, else the body."""
    if x.d.rotate_left is None:
        return _body(x, ins)
    dreg, a, b = ins.operands
    return [f"r{dreg} = {x.d.rotate_left(f'r{a}', f'r{b}')};"]


def _half_of(t: T) -> T:
    return T.F16 if t is T.F16X2 else T.BF16


def _float_expr(x: _KernelRenderer, op: str, t: T, vals: list[str]) -> str:
    """The compute-type expression of a float op on compute-type values."""
    m = x.d.math
    dbl = t is T.F64
    if op in ("add", "sub", "mul", "div"):
        sym = {"add": "+", "sub": "-", "mul": "*", "div": "/"}[op]
        return f"({vals[0]} {sym} {vals[1]})"
    if op == "min":
        return f"{'aw_minnum64' if dbl else 'aw_minnum'}({vals[0]}, {vals[1]})"
    if op == "max":
        return f"{'aw_maxnum64' if dbl else 'aw_maxnum'}({vals[0]}, {vals[1]})"
    if op == "fma":
        return f"{m['fma']}({vals[0]}, {vals[1]}, {vals[2]})"
    return f"{m[op]}({vals[0]})"


def _float_op(x: _KernelRenderer, ins: Instruction) -> list[str]:
    t = ins.defn.type
    op = ins.defn.op
    dreg, *src = ins.operands
    if t.is_packed:
        h = _half_of(t)
        conv = "aw_h2f" if h is T.F16 else "aw_bf2f"
        halves = []
        for shift in ("", " >> 16"):
            vals = [f"{conv}(r{r}{shift})" for r in src]
            if op == "fma":
                halves.append(f"aw_fma16({vals[0]}, {vals[1]}, {vals[2]}, {str(h is T.BF16).lower()})")
            else:
                halves.append(x.fbits(_float_expr(x, op, T.F32, vals), h))
        return [f"r{dreg} = ({halves[0]}) | (({halves[1]}) << 16);"]
    vals = [x.fval(r, t) for r in src]
    if t in (T.F16, T.BF16):
        if op == "fma":
            return [f"r{dreg} = aw_fma16({vals[0]}, {vals[1]}, {vals[2]}, {str(t is T.BF16).lower()});"]
        return [f"r{dreg} = {x.fbits(_float_expr(x, op, T.F32, vals), t)};"]
    bits = x.fbits(_float_expr(x, op, t, vals), t)
    return x.set64(dreg, bits) if t is T.F64 else [f"r{dreg} = {bits};"]


def _sign_op(x: _KernelRenderer, ins: Instruction) -> list[str]:
    t = ins.defn.type
    dreg, a = ins.operands
    neg = ins.defn.op == "neg"
    if t is T.F64:
        hi = f"r{a + 1} ^ 0x80000000u" if neg else f"r{a + 1} & 0x7FFFFFFFu"
        return [f"const u32 lo = r{a}, hi = {hi};", f"r{dreg} = lo;", f"r{dreg + 1} = hi;"]
    sign = {T.F32: 0x80000000, T.F16: 0x8000, T.BF16: 0x8000}.get(t, 0x80008000)
    keep = 0xFFFF if t in (T.F16, T.BF16) else 0xFFFFFFFF
    v = f"(r{a} & 0x{keep:X}u)"
    return [f"r{dreg} = {v} ^ 0x{sign:X}u;" if neg else f"r{dreg} = {v} & ~0x{sign:X}u;"]


def _approx(x: _KernelRenderer, ins: Instruction) -> list[str]:
    dreg, a = ins.operands
    op = ins.defn.op
    v = f"AW_F32(r{a})"
    m = x.d.math
    if op == "rcp":
        e = f"(1.0f / {v})"
    elif op == "rsqrt":
        e = f"(1.0f / {m['sqrt']}({v}))"
    else:
        e = f"{m[op]}({v})"
    return [f"r{dreg} = aw_c32({e});"]


def _setp_float(x: _KernelRenderer, ins: Instruction) -> list[str]:
    """Float compares on the compute-type values (C's IEEE compares; integer compares are bodies)."""
    t = ins.defn.type
    var = ins.defn.variant
    dreg, a, b = ins.operands
    A, B = x.fval(a, t), x.fval(b, t)
    if var == "unord":
        return [f"const {'double' if t is T.F64 else 'float'} fa = {A}, fb = {B};",
                f"p{dreg} = fa != fa || fb != fb;"]
    sym = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}[var]
    return [f"p{dreg} = {A} {sym} {B};"]


def _cvt(x: _KernelRenderer, ins: Instruction) -> list[str]:
    dst, src = ins.defn.type, ins.defn.src_type
    dreg, a = ins.operands
    if src.is_float:
        v = x.fval(a, src)
        if dst.is_float:
            if dst is T.F64:
                return x.set64(dreg, f"aw_c64((double){v})")
            if src is T.F64 and dst is T.F32:
                return [f"r{dreg} = aw_c32((float){v});"]
            if src is T.F64:
                return [f"r{dreg} = {_narrow(narrowing_steps(src, dst), v, src)};"]
            return [f"r{dreg} = {x.fbits(v, dst)};"]
        pre = "aw_d2" if src is T.F64 else "aw_f2"
        fn = pre + {T.I32: "i32", T.U32: "u32", T.I64: "i64", T.U64: "u64"}[dst]
        return x.set_t(dreg, dst, f"{fn}({v})")
    # integer source
    if src.bits == 64:
        v = f"(i64){x.u64(a)}" if src.is_signed else x.u64(a)
    else:
        v = f"(i32)r{a}" if src.is_signed else f"r{a}"
    if dst.is_float:
        if dst is T.F32:
            return [f"r{dreg} = AW_U32((float)({v}));"]
        if dst is T.F64:
            return x.set64(dreg, f"AW_U64((double)({v}))")
        return [f"r{dreg} = {_narrow(narrowing_steps(src, dst), v, src)};"]
    if dst.bits == 64:
        return x.set64(dreg, f"(u64)(i64)({v})" if src.is_signed else f"(u64)({v})")
    return [f"r{dreg} = (u32)({v});"]


def _narrow(steps: tuple, v: str, src: T) -> str:
    """Spell the rounding path of :func:`~anywave.backends.lowering.arith.narrowing_steps`
    with the prelude's helpers (the result: 16-bit float bits as u32)."""
    for step in steps:
        if step.mode == "exact":  # 32-bit integer -> double
            v = f"(double)({v})"
        elif step.mode == "odd" and step.to is T.F64:  # 64-bit integer -> double, to odd
            v = f"aw_{'i' if src.is_signed else 'u'}64_odd({v})"
        elif step.mode == "odd":  # double -> float, to odd
            v = f"aw_d2f_odd({v})"
        else:
            v = f"{'aw_f2h' if step.to is T.F16 else 'aw_f2bf'}({v})"
    return v


def _cvt_pack(x: _KernelRenderer, ins: Instruction) -> list[str]:
    dreg, a, b = ins.operands
    fn = "aw_f2h" if ins.defn.type is T.F16X2 else "aw_f2bf"
    return [f"r{dreg} = {fn}(AW_F32(r{a})) | ({fn}(AW_F32(r{b})) << 16);"]


def _mov(x: _KernelRenderer, ins: Instruction) -> list[str]:
    dreg, a = ins.operands
    if ins.defn.type.bits == 64:
        return [f"const u32 lo = r{a}, hi = r{a + 1};", f"r{dreg} = lo;", f"r{dreg + 1} = hi;"]
    return [f"r{dreg} = r{a};"]


def _movi(x: _KernelRenderer, ins: Instruction) -> list[str]:
    dreg, imm = ins.operands
    if ins.defn.type.bits == 64:
        v = int(imm) & 0xFFFFFFFFFFFFFFFF
        return [f"r{dreg} = 0x{v & 0xFFFFFFFF:X}u;", f"r{dreg + 1} = 0x{v >> 32:X}u;"]
    mask = 0xFFFF if ins.defn.type.bits == 16 else 0xFFFFFFFF
    return [f"r{dreg} = 0x{int(imm) & mask:X}u;"]


def _mov_sr(x: _KernelRenderer, ins: Instruction) -> list[str]:
    dreg, sr = ins.operands
    d, W = x.d, x.W
    e = {
        S.THREAD_ID_X: "aw_tl % aw_wgx", S.THREAD_ID_Y: "(aw_tl / aw_wgx) % aw_wgy",
        S.THREAD_ID_Z: "aw_tl / (aw_wgx * aw_wgy)", S.WAVE_ID: f"aw_tl / {W}u",
        S.LANE_ID: f"aw_tl % {W}u", S.WORKGROUP_ID_X: d.group_id(0), S.WORKGROUP_ID_Y: d.group_id(1),
        S.WORKGROUP_ID_Z: d.group_id(2), S.WORKGROUP_SIZE_X: "aw_wgx", S.WORKGROUP_SIZE_Y: "aw_wgy",
        S.WORKGROUP_SIZE_Z: "aw_wgz", S.GRID_SIZE_X: d.num_groups(0), S.GRID_SIZE_Y: d.num_groups(1),
        S.GRID_SIZE_Z: d.num_groups(2), S.WAVE_WIDTH: f"{W}u", S.NUM_WAVES: f"(aw_n + {W - 1}u) / {W}u",
        S.GLOBAL_ID_X: f"(u32){d.group_id(0)} * aw_wgx + aw_tl % aw_wgx",
        S.GLOBAL_ID_Y: f"(u32){d.group_id(1)} * aw_wgy + (aw_tl / aw_wgx) % aw_wgy",
        S.GLOBAL_ID_Z: f"(u32){d.group_id(2)} * aw_wgz + aw_tl / (aw_wgx * aw_wgy)",
        S.THREAD_LINEAR_ID: "aw_tl",
        **{S[name]: f"{v}u" for name, v in MMA_SREG_VALUES.items()},
    }[SpecialRegister(sr)]
    return [f"r{dreg} = (u32)({e});"]


def _ldarg(x: _KernelRenderer, ins: Instruction) -> list[str]:
    dreg, idx = ins.operands
    name = x.scal[int(idx)]
    if ins.defn.type.bits == 64:
        if x.k.args[int(idx)].type.bits == 64:
            return x.set64(dreg, name)
        return [f"r{dreg} = (u32){name};", f"r{dreg + 1} = 0u;"]
    return [f"r{dreg} = (u32){name};"]


_LD_TYPE = {T.U8: ("u8", "(u32)"), T.I8: ("i8", "(u32)(i32)"), T.U16: ("u16", "(u32)"),
            T.I16: ("i16", "(u32)(i32)"), T.B32: ("u32", "")}


def _ptr(x: _KernelRenderer, ins: Instruction, addr: DeviceAddr | LocalAddr, ctype: str) -> str:
    if isinstance(addr, LocalAddr):
        return f"(({x.d.local_ptr(ctype)}){x.laddr(addr)})"
    wide = Operand.DADDR64 in ins.defn.operands
    return f"(({x.d.global_ptr(ctype)}){x.daddr(addr, wide)})"


def _ld(x: _KernelRenderer, ins: Instruction) -> list[str]:
    t = ins.defn.type
    dreg, addr = ins.operands
    if t.bits == 128 and x.d.vec4:  # one 16-byte access (aligned: spec 4.4)
        return [f"{x.d.vec4} q = *{_ptr(x, ins, addr, x.d.vec4)};",
                *[f"r{dreg + i} = {x.d.vec4_get('q', i)};" for i in range(4)]]
    if t.bits == 128:
        return [f"{x.d.global_ptr('u32') if isinstance(addr, DeviceAddr) else x.d.local_ptr('u32')} q = "
                f"{_ptr(x, ins, addr, 'u32')};", *[f"r{dreg + i} = q[{i}];" for i in range(4)]]
    if t.bits == 64:
        return x.set64(dreg, f"*{_ptr(x, ins, addr, 'u64')}")
    ctype, cast = _LD_TYPE[t]
    return [f"r{dreg} = {cast}*{_ptr(x, ins, addr, ctype)};"]


def _st(x: _KernelRenderer, ins: Instruction) -> list[str]:
    t = ins.defn.type
    addr, sreg = ins.operands
    if t.bits == 128 and x.d.vec4:
        return [f"*{_ptr(x, ins, addr, x.d.vec4)} = {x.d.vec4_make([f'r{sreg + i}' for i in range(4)])};"]
    if t.bits == 128:
        return [f"{x.d.global_ptr('u32') if isinstance(addr, DeviceAddr) else x.d.local_ptr('u32')} q = "
                f"{_ptr(x, ins, addr, 'u32')};", *[f"q[{i}] = r{sreg + i};" for i in range(4)]]
    if t.bits == 64:
        return [f"*{_ptr(x, ins, addr, 'u64')} = {x.u64(sreg)};"]
    ctype = {8: "u8", 16: "u16", 32: "u32"}[t.bits]
    return [f"*{_ptr(x, ins, addr, ctype)} = ({ctype})r{sreg};"]


def _atom(x: _KernelRenderer, ins: Instruction) -> list[str]:
    space, op = ins.defn.variant.split(".")
    t = ins.defn.type
    ret = ins.defn.op == "atom"
    ops = list(ins.operands)
    dreg = ops.pop(0) if ret else None
    addr = ops.pop(0)
    if space == "device":
        scope, order = ops[-2], ops[-1]
        ops = ops[:-2]
    else:
        scope, order = Scope.WORKGROUP, MemoryOrder.RELAXED
    ctype = "i32" if t is T.I32 else "u32"
    p = x.laddr(addr) if space == "local" else x.daddr(addr, False)
    lines: list[str] = []
    if op == "cas":
        cmp_, val = ops
        lines += [f"u32 old = r{cmp_};", x.d.atomic_cas(space, p, "old", f"r{val}", scope, order)]
    elif t is T.F32:
        (val,) = ops
        # f32 add as a CAS loop on the bits: portable; its order is schedule-class anyway
        lines += [f"u32 old = *(({x.d.global_ptr('u32') if space == 'device' else x.d.local_ptr('u32')}){p});",
                  "while (1) {",
                  f"  u32 exp_ = old; const u32 nv = AW_U32(AW_F32(old) + AW_F32(r{val}));",
                  "  " + x.d.atomic_cas(space, p, "exp_", "nv", scope, order),
                  "  if (exp_ == old) break;", "  old = exp_;", "}"]
    else:
        (val,) = ops
        v = f"(i32)r{val}" if ctype == "i32" else f"r{val}"
        lines.append(f"const u32 old = (u32){x.d.atomic_rmw(space, op, ctype, p, v, scope, order)};")
    if ret:
        lines.append(f"r{dreg} = old;")
    else:
        lines.append("(void)old;")
    return lines


# ---- wave operations (rendered in every lane; ``ex`` = this lane executes)

def _ballot_expr(x: _KernelRenderer, cond: str) -> str:
    return x.d.ballot(cond)


def _shfl(x: _KernelRenderer, ins: Instruction) -> list[str]:
    dreg, a, b = ins.operands
    W = x.W
    mode = ins.defn.variant
    src = {"idx": f"(i64)r{b}", "up": f"(i64)aw_lane - (i64)r{b}", "down": f"(i64)aw_lane + (i64)r{b}",
           "xor": f"(i64)(aw_lane ^ r{b})"}[mode]
    return [f"const u64 m = {_ballot_expr(x, 'ex')};",
            f"const i64 s = {src};",
            f"const bool ok = s >= 0 && s < {W} && ((m >> (u32)(s < 0 ? 0 : s >= {W} ? 0 : s)) & 1ul);",
            f"const u32 v = {x.d.shuffle(f'r{a}', '(ok ? (u32)s : aw_lane)')};",
            f"if (ex) r{dreg} = ok ? v : r{a};"]


def _bcast(x: _KernelRenderer, ins: Instruction) -> list[str]:
    dreg, a, b = ins.operands
    W = x.W
    return [f"const u64 m = {_ballot_expr(x, 'ex')};",
            f"const u32 low = m == 0ul ? 0u : (u32){x.d.ctz}(m);",
            f"const u32 L = {x.d.shuffle(f'r{b}', 'low')};",
            f"const u32 src = (L < {W}u && ((m >> L) & 1ul)) ? L : low;",
            f"const u32 v = {x.d.shuffle(f'r{a}', 'src')};",
            f"if (ex) r{dreg} = v;"]


def _ballot(x: _KernelRenderer, ins: Instruction) -> list[str]:
    dreg, pr = ins.operands
    return [f"const u64 m = {_ballot_expr(x, f'ex && {x.p(pr)}')};",
            f"if (ex) {{ r{dreg} = (u32)m; r{dreg + 1} = (u32)(m >> 32); }}"]


def _any_all(x: _KernelRenderer, ins: Instruction) -> list[str]:
    dreg, pr = ins.operands
    if ins.defn.op == "any":
        return [f"const u64 m = {_ballot_expr(x, f'ex && {x.p(pr)}')};", f"if (ex) p{dreg} = m != 0ul;"]
    return [f"const u64 m = {_ballot_expr(x, f'ex && !({x.p(pr)})')};", f"if (ex) p{dreg} = m == 0ul;"]


#: (op, signed) -> the C combine of two u32 partials ``s`` (own) and ``o`` (partner)
_WRED_INT = {
    "add": "s + o", "and": "(s & o)", "or": "(s | o)", "xor": "(s ^ o)",
    ("min", False): "(o < s ? o : s)", ("min", True): "((i32)o < (i32)s ? o : s)",
    ("max", False): "(o > s ? o : s)", ("max", True): "((i32)o > (i32)s ? o : s)",
}


def _wred(x: _KernelRenderer, ins: Instruction) -> list[str]:
    dreg, a = ins.operands
    t = ins.defn.type
    op = ins.defn.variant
    ident = f"0x{identity(ins.defn):08X}u"
    if t is T.F32:
        comb = {"add": "s + o", "min": "aw_minnum(s, o)", "max": "aw_maxnum(s, o)"}[op]
        lines = [f"float s = ex ? AW_F32(r{a}) : AW_F32({ident});"]
        for k in butterfly_steps(x.W):
            lines.append(f"{{ const float o = AW_F32({x.d.shuffle('AW_U32(s)', f'aw_lane ^ {k}u')}); s = {comb}; }}")
        return lines + [f"if (ex) r{dreg} = aw_c32(s);"]
    comb = _WRED_INT[op] if op in _WRED_INT else _WRED_INT[(op, t.is_signed)]
    lines = [f"u32 s = ex ? r{a} : {ident};"]
    for k in butterfly_steps(x.W):
        lines.append(f"{{ const u32 o = {x.d.shuffle('s', f'aw_lane ^ {k}u')}; s = {comb}; }}")
    return lines + [f"if (ex) r{dreg} = s;"]


def _wscan(x: _KernelRenderer, ins: Instruction) -> list[str]:
    dreg, a = ins.operands
    t = ins.defn.type
    f32 = t is T.F32
    ctype, get, put = ("float", "AW_F32({})", "AW_U32({})") if f32 else ("u32", "{}", "{}")
    ident, first = f"0x{identity(ins.defn):08X}u", f"0x{exclusive_first(ins.defn) or 0:08X}u"
    add = "o + s"  # lower lanes' partial on the left (spec 8.8)
    lines = [f"{ctype} s = ex ? {get.format(f'r{a}')} : {get.format(ident)};"]
    for k in kogge_stone_steps(x.W):
        src = x.d.shuffle(put.format("s"), f"aw_lane >= {k}u ? aw_lane - {k}u : aw_lane")
        lines.append(f"{{ const {ctype} o = {get.format(src)}; if (aw_lane >= {k}u) s = {add}; }}")
    if ins.defn.variant != "incl":
        src = x.d.shuffle(put.format("s"), "aw_lane > 0u ? aw_lane - 1u : 0u")
        lines.append(f"{{ const {ctype} o = {get.format(src)}; s = aw_lane == 0u ? {get.format(first)} : o; }}")
    return lines + [f"if (ex) r{dreg} = {'aw_c32(s)' if f32 else 's'};"]


def _mma(x: _KernelRenderer, ins: Instruction) -> list[str]:
    rd, ra, rb, rc = ins.operands
    W = x.W
    per = 256 // W
    conv = "aw_h2f" if ins.defn.src_type is T.F16 else "aw_bf2f"
    lp = x.d.local_ptr
    return [
        f"float acc[{per}];",
        x.d.wave_barrier,
        "if (ex) {",
        f"  {lp('u16')} A = ({lp('u16')})(aw_lm + r{ra}); {lp('u16')} B = ({lp('u16')})(aw_lm + r{rb});",
        f"  {lp('float')} C = ({lp('float')})(aw_lm + r{rc});",
        f"  for (u32 j = 0; j < {per}u; ++j) {{",
        f"    const u32 e = aw_lane + j * {W}u, row = e / 16u, col = e % 16u;",
        "    float s = C[e];",
        f"    for (u32 kk = 0; kk < 16u; ++kk) s = {x.d.math['fma']}({conv}(A[row * 16u + kk]), "
        f"{conv}(B[kk * 16u + col]), s);",
        "    acc[j] = s;",
        "  }",
        "}",
        x.d.wave_barrier,
        "if (ex) {",
        f"  {lp('u32')} D = ({lp('u32')})(aw_lm + r{rd});",
        f"  for (u32 j = 0; j < {per}u; ++j) D[aw_lane + j * {W}u] = aw_c32(acc[j]);",
        "}",
        x.d.wave_barrier,
    ]


def _no_stmt(x: _KernelRenderer, ins: Instruction) -> list[str]:
    return []


#: the C-family consumer of the instruction table (:mod:`anywave.isa.dispatch`): a handler per
#: semantic key. Barriers, fences and control flow are written by the renderer and its walk.
C_DISPATCH = dispatch.consumer("c-family")
#: native overrides of instruction bodies: the float operations (compute-type C with the
#: prelude's rounding helpers), the dialect's ctz and rotate, the conversions
_ALU_NATIVE = {
    **{f"float.{op}": _float_op for op in ("add", "sub", "mul", "div", "min", "max", "fma", "sqrt", "floor", "ceil",
                                           "trunc", "rint")},
    "float.neg": _sign_op, "float.abs": _sign_op,
    **{f"float.{op}": _approx for op in ("ex2", "lg2", "sin", "cos", "rsqrt", "rcp", "tanh")},
    "bit.ctz": _ctz, "bit.rotl": _rotl, "cvt.cvt": _cvt, "cvt.cvt_pack": _cvt_pack,
}
C_DISPATCH.register({
    # every other ALU key: its body (anywave.isa.bodies) spelt with C_SPELLING
    **_ALU_NATIVE, **{k: _body for k in body_keys(_ALU_NATIVE)},
    **{f"setp.{c}.{t}": _setp_float for t in ("f32", "f64", "f16", "bf16")
       for c in ("eq", "ne", "lt", "le", "gt", "ge", "unord")},
    "move.mov": _mov, "move.movi": _movi, "move.mov_sr": _mov_sr, "move.ldarg": _ldarg,
    "mem.ld": _ld, "mem.st": _st, "atomic.atom": _atom, "atomic.red": _atom,
    "wave.shfl": _shfl, "wave.bcast": _bcast, "wave.ballot": _ballot, "wave.any": _any_all, "wave.all": _any_all,
    "wave.wred": _wred, "wave.wscan": _wscan,
    "mma.mma": _mma, **{f"mma.{op}": h for op, h in cfamily_mma.HANDLERS.items()},
    **{f"async.{op}": h for op, h in cfamily_async.HANDLERS.items()},
    "sync.*": _no_stmt, "ctl.*": _no_stmt,
})


def handler(defn: InstrDef) -> _Handler:
    """The C-family handler of a table record (raises ``UnsupportedInstruction`` for none)."""
    return C_DISPATCH.handler(defn)
