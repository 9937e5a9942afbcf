"""WAVE → NVIDIA PTX translator.

``translate(module, arch="sm_90")`` turns every kernel of a valid WAVE module into one PTX
entry point. The translation follows docs/spec.md (normative) and is meant to be bit-exact
with the emulator at W = 32 for every ``exact``/``exact-nan`` instruction:

* f32/f64 ``add``/``sub``/``mul``/``fma`` carry an explicit ``.rn`` (ptxas never contracts
  an instruction with an explicit rounding mode into an FMA); ``div.rn``/``sqrt.rn``; no
  ``.ftz`` anywhere, so subnormals are preserved.
* f16 ``add``/``sub``/``mul``/``fma`` use the native ``.rn.f16`` forms; ``div``/``sqrt`` and
  every bf16 operation except ``fma`` are computed in f32 and rounded once more (innocuous
  double rounding, spec §8.2); ``fma.bf16`` uses ``fma.rn.bf16`` (sm_80+, unsupported on
  older architectures). Narrowing conversions that could double-round (f64 → f16/bf16,
  int → f16/bf16) go through f32 with *round-to-odd* and a final round-to-nearest-even,
  which is exact (Boldo & Melquiond 2008) because 24 ≥ 11 + 2.
* Integer division/remainder get the spec's checks (b = 0, MIN / −1) around PTX ``div``/
  ``rem``, whose result PTX leaves unspecified there. PTX shifts clamp counts > width, which
  is exactly the spec's rule. Float ``min``/``max`` are built from compares and selects so
  that −0 < +0 and two NaNs give the spec's canonical NaN (PTX's canonical NaN differs).
* Control flow. A kernel without wave-collective instructions is lowered to plain
  per-thread branches: by spec §7.8 each thread then behaves as if it ran alone. A kernel
  that uses wave operations or ``mma`` is lowered with the spec's mask-stack machine
  (§7.4) kept *per lane* in predicate registers: every lane of a warp walks the same
  structured program (branches are taken only on ``vote.sync`` results, so they are
  warp-uniform), the lane's "active" bit predicates each instruction, and wave operations
  use ``vote.sync``/``shfl.sync`` over the warp's existing lanes with the executing set
  computed exactly as the spec defines it. Nothing relies on hardware reconvergence.
* Wave operations: W = 32 (one warp); lane = linear thread id mod 32 (warps are formed
  from linear thread ids, x fastest, as in the spec). Reductions use the spec's butterfly
  order, scans the Kogge–Stone order, identities for inactive lanes as the spec says.
* Memory: each buffer argument is a ``.param .u64`` pointer; ``x[r + imm]`` is pointer +
  zext(r) + sext(imm). Local memory is ``.shared``. ``call`` is inlined (the spec has no
  recursion and functions share the caller's registers).
* ``mma`` is a per-element loop that accumulates k = 0..15 in order with ``fma.rn.f32``
  (the emulator's order; class ``bounded`` allows more, this gives bit-identical results).

The output is readable: each WAVE instruction is preceded by a comment with its text and
source location.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from anywave.backends import ptx_mma
from anywave.backends.ptx_memory import ASYNC_EMITTERS, load_space
from anywave.binary.module import DeviceAddr, Instruction, Kernel, LocalAddr, Module, Pred
from anywave.errors import WaveError
from anywave.isa.mma import MMA_SREG_VALUES
from anywave.isa.table import INSTRUCTIONS, Category, Flag, InstrDef, Operand
from anywave.isa.types import ArgKind, MemoryOrder, ScalarType, Scope, SpecialRegister

T = ScalarType

#: PTX ISA version used for each supported architecture (the lowest that has every form
#: this backend emits for it, so older drivers can still JIT the text).
PTX_VERSIONS: dict[int, str] = {
    75: "7.0", 80: "7.0", 86: "7.1", 87: "7.4", 89: "7.8", 90: "7.8",
    100: "8.6", 101: "8.6", 103: "8.8", 110: "9.0", 120: "8.7", 121: "8.8",
}
#: wave width of every NVIDIA target
WAVE_WIDTH = 32
#: blocks of at most this many PTX lines are predicated line by line instead of branched around
_PREDICATE_LINES = 12
#: static shared memory above this needs the dynamic (extern) form
STATIC_SHARED_LIMIT = 48 * 1024

_CANON_NAN = {T.F32: 0x7FC00000, T.F16: 0x7E00, T.BF16: 0x7FC0, T.F64: 0x7FF8000000000000}
_SIGN = {T.F32: 0x80000000, T.F16: 0x8000, T.BF16: 0x8000, T.F64: 0x8000000000000000}
_SCOPE = {Scope.WAVE: "cta", Scope.WORKGROUP: "cta", Scope.DEVICE: "gpu", Scope.SYSTEM: "sys"}
_INT_PTX = {T.I32: "s32", T.U32: "u32", T.I64: "s64", T.U64: "u64", T.B32: "b32", T.B64: "b64"}


class PtxError(WaveError):
    """A module the PTX backend cannot translate for the requested architecture (an
    instruction unsupported there, or an unknown architecture). ``problems`` lists all."""

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems = list(problems)
        head = self.problems[0] if len(self.problems) == 1 else f"{len(self.problems)} problems"
        body = "" if len(self.problems) == 1 else "\n" + "\n".join("  - " + p for p in self.problems)
        super().__init__("cannot translate to PTX: " + head + body)


def parse_arch(arch: str | int) -> int:
    """``"sm_90"``, ``"90"`` or ``90`` → 90.

    Raises:
        PtxError: not a supported architecture (the message lists the supported ones).
    """
    text = str(arch).strip().lower()
    if text.startswith("sm_"):
        text = text[3:]
    text = text.rstrip("a")
    try:
        num = int(text)
    except ValueError:
        num = -1
    if num not in PTX_VERSIONS:
        valid = ", ".join(f"sm_{a}" for a in PTX_VERSIONS)
        raise PtxError([f"unknown or unsupported architecture {arch!r}; valid: {valid}"])
    return num


# ------------------------------------------------------------------------ support table

def unsupported_reason(defn: InstrDef, arch: str | int = "sm_90") -> str | None:
    """Why ``defn`` cannot be translated for ``arch``, or None when it can."""
    a = parse_arch(arch)
    if defn.op == "fma" and defn.type in (T.BF16, T.BF16X2) and a < 80:
        return (f"{defn.mnemonic} needs fma.rn.bf16 (sm_80 or newer); a single-rounding "
                f"emulation on sm_{a} is not implemented")
    if defn.op not in EMITTERS:
        return f"{defn.mnemonic}: no PTX emitter for operation {defn.op!r}"
    return ptx_mma.unsupported_reason(defn, a)


def check_supported(module: Module, arch: str | int = "sm_90") -> list[str]:
    """Every instruction of ``module`` that cannot be translated for ``arch``, as messages
    naming the kernel/function, the instruction index and the reason (empty when all can)."""
    problems: list[str] = []
    bodies = [(f"kernel {k.name!r}", k.code) for k in module.kernels]
    bodies += [(f"function {f.name!r}", f.code) for f in module.functions]
    for owner, code in bodies:
        for i, ins in enumerate(code):
            why = unsupported_reason(ins.defn, arch)
            if why:
                problems.append(f"{owner}, instruction {i}: {why}")
    return problems


# ------------------------------------------------------------------------ result types

@dataclass(frozen=True)
class PtxParam:
    """One ``.param`` of an entry: ``kind`` is ``"buffer"`` (u64 pointer), ``"b32"`` or ``"b64"``."""

    name: str
    ptx_name: str
    kind: str
    type: ScalarType


@dataclass(frozen=True)
class PtxKernel:
    """What the runtime needs to launch one translated kernel."""

    name: str
    params: tuple[PtxParam, ...]
    #: bytes of dynamic shared memory to request at launch (0 when the local memory is static)
    dynamic_shared: int
    local_memory: int
    #: True when the mask-stack (warp-uniform) lowering was used
    uniform: bool
    #: bounds-checked build (:mod:`anywave.backends.bounds`): hidden ``.u64`` params after the
    #: WAVE ones, ``__wa_n<i>`` (bytes of buffer i, ABI order) then ``__wa_err`` (error record)
    checked: bool = False
    #: the guarded accesses, indexed by the site number an error record holds
    sites: tuple = ()


@dataclass(frozen=True)
class PtxProgram:
    """A translated module: PTX ``text`` for ``arch`` and per-kernel launch information."""

    text: str
    arch: str
    kernels: dict[str, PtxKernel] = field(default_factory=dict)

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.text.encode()).hexdigest()

    def __str__(self) -> str:
        return self.text


# ------------------------------------------------------------------------ per-instruction block

class _Block:
    """PTX lines of one WAVE instruction, with scoped temporaries."""

    _PREFIX = {"b32": "%t", "b64": "%d", "b16": "%h", "pred": "%q"}

    def __init__(self, kx: _KernelEmitter, ins: Instruction) -> None:
        self.kx = kx
        self.ins = ins
        self.lines: list[str] = []
        self.count = {k: 0 for k in self._PREFIX}
        #: predicate of the executing lanes (only for wave-collective emitters)
        self.pe = "%pe"

    # temporaries and registers
    def t(self, kind: str = "b32") -> str:
        n = self.count[kind]
        self.count[kind] = n + 1
        return f"{self._PREFIX[kind]}{n}"

    def decls(self) -> list[str]:
        return [f".reg .{k} {self._PREFIX[k]}<{n}>;" for k, n in self.count.items() if n]

    def __call__(self, line: str) -> None:
        self.lines.append(line)

    def label(self, what: str) -> str:
        return self.kx.new_label(what)

    @staticmethod
    def r(n: int) -> str:
        return f"%r{n}"

    def get64(self, n: int) -> str:
        t = self.t("b64")
        self(f"mov.b64 {t}, {{%r{n}, %r{n + 1}}};")
        return t

    def set64(self, n: int, t: str) -> None:
        self(f"mov.b64 {{%r{n}, %r{n + 1}}}, {t};")

    @staticmethod
    def pred(p: Pred, negate: bool = False) -> str:
        neg = p.negated != negate
        return ("!" if neg else "") + f"%p{p.index}"

    def const32(self, value: int) -> str:
        t = self.t()
        self(f"mov.b32 {t}, {value & 0xFFFFFFFF:#010x};")
        return t

    # float domains: 16-bit floats live in the low half of a b32
    def lo16(self, reg: str) -> str:
        t = self.t()
        self(f"and.b32 {t}, {reg}, 0xffff;")
        return t

    def hi16(self, reg: str) -> str:
        t = self.t()
        self(f"shr.u32 {t}, {reg}, 16;")
        return t

    def to_f32(self, t: ScalarType, reg: str) -> str:
        """f32 bits (b32) of the t-typed value in the low bits of ``reg`` (exact)."""
        if t is T.F32:
            return reg
        f = self.t()
        if t is T.BF16:
            self(f"shl.b32 {f}, {reg}, 16;")
        else:
            h = self.t("b16")
            self(f"cvt.u16.u32 {h}, {reg};")
            self(f"cvt.f32.f16 {f}, {h};")
        return f

    def from_f32(self, t: ScalarType, f: str) -> str:
        """Round f32 bits ``f`` to ``t`` (nearest even) → b32 with the high half zero."""
        if t is T.F32:
            return f
        d = self.t()
        if t is T.F16:
            h = self.t("b16")
            self(f"cvt.rn.f16.f32 {h}, {f};")
            self(f"cvt.u32.u16 {d}, {h};")
            return d
        # bf16: round to nearest even on the bit pattern; NaN -> canonical NaN
        q = self.t("pred")
        self(f"setp.nan.f32 {q}, {f}, {f};")
        self(f"shr.u32 {d}, {f}, 16;")
        self(f"and.b32 {d}, {d}, 1;")
        self(f"add.u32 {d}, {d}, 0x7fff;")
        self(f"add.u32 {d}, {d}, {f};")
        self(f"shr.u32 {d}, {d}, 16;")
        self(f"selp.b32 {d}, 0x7fc0, {d}, {q};")
        return d

    def f64_to_f32_odd(self, x: str) -> str:
        """f64 (b64) → f32 bits rounded to odd (sticky): exact when rounded again to a format
        with at most 22 significand bits."""
        f = self.t()
        back = self.t("b64")
        q = self.t("pred")
        self(f"cvt.rz.f32.f64 {f}, {x};")
        self(f"cvt.f64.f32 {back}, {f};")
        self(f"setp.neu.f64 {q}, {back}, {x};")
        self(f"@{q} or.b32 {f}, {f}, 1;")
        return f

    def int64_to_f64_odd(self, x: str, signed: bool) -> str:
        """i64/u64 (b64) → f64 rounded to odd."""
        s = "s64" if signed else "u64"
        d = self.t("b64")
        back = self.t("b64")
        q = self.t("pred")
        self(f"cvt.rz.f64.{s} {d}, {x};")
        self(f"cvt.rzi.{s}.f64 {back}, {d};")
        self(f"setp.ne.b64 {q}, {back}, {x};")
        self(f"@{q} or.b64 {d}, {d}, 1;")
        return d

    def addr(self, kind: Operand, a: DeviceAddr | LocalAddr) -> str:
        """PTX address operand ``[%dN+imm]`` for a WAVE device or local address."""
        t = self.t("b64")
        if isinstance(a, LocalAddr):
            self(f"cvt.u64.u32 {t}, %r{a.reg};")
            self(f"add.s64 {t}, {t}, %lmbase;")
        else:
            if kind is Operand.DADDR64:
                self(f"mov.b64 {t}, {{%r{a.reg}, %r{a.reg + 1}}};")
            else:
                self(f"cvt.u64.u32 {t}, %r{a.reg};")
            self(f"add.s64 {t}, {t}, %buf{a.buffer};")
        off = a.offset
        return f"[{t}+{off}]" if off else f"[{t}]"

    def space(self) -> str:
        return "shared" if self.ins.defn.variant.startswith("local") else "global"


# ------------------------------------------------------------------------ emitters

Emitter = Callable[[_Block, Instruction], None]


def _ops(ins: Instruction) -> tuple:
    return ins.operands


# --- integer
def _e_int(b: _Block, ins: Instruction) -> None:
    d = ins.defn
    t = d.type
    assert t is not None
    op = d.op
    wide = t.bits == 64
    ops = _ops(ins)
    srcs = [b.get64(r) if wide else b.r(r) for r in ops[1:]]
    kind = "b64" if wide else "b32"
    s = _INT_PTX[t]
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
        a_, b_ = srcs
        z = b.t("pred")
        safe = b.t(kind)
        b(f"setp.eq.{s} {z}, {b_}, 0;")
        if t.is_signed:
            # b' = 1 when b = 0 or (a = MIN and b = -1): MIN / 1 = MIN and MIN % 1 = 0 are the
            # spec's answers for the overflow case; b = 0 is patched below.
            ov = b.t("pred")
            q2 = b.t("pred")
            minv = "0x8000000000000000" if wide else "0x80000000"
            b(f"setp.eq.{s} {ov}, {a_}, {minv};")
            b(f"setp.eq.{s} {q2}, {b_}, -1;")
            b(f"and.pred {ov}, {ov}, {q2};")
            b(f"or.pred {ov}, {ov}, {z};")
            b(f"selp.b{t.bits} {safe}, 1, {b_}, {ov};")
        else:
            b(f"selp.b{t.bits} {safe}, 1, {b_}, {z};")
        b(f"{op}.{s} {res}, {a_}, {safe};")
        if op == "div":
            b(f"selp.b{t.bits} {res}, -1, {res}, {z};")
        else:
            b(f"selp.b{t.bits} {res}, {a_}, {res}, {z};")
    else:  # pragma: no cover - table/emitter mismatch
        raise AssertionError(op)
    if wide:
        b.set64(ops[0], res)
    else:
        b(f"mov.b32 %r{ops[0]}, {res};")


# --- float
_F_CMP = {"eq": "eq", "ne": "neu", "lt": "lt", "le": "le", "gt": "gt", "ge": "ge", "unord": "nan"}


def _minmax(b: _Block, op: str, t: ScalarType, x: str, y: str, a: str, bb: str) -> str:
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
    b(f"selp.b{w} {r}, {_CANON_NAN[t]:#x}, {r}, {qa};")
    return r


def _f_scalar(b: _Block, op: str, t: ScalarType, srcs: list[str]) -> str:
    """One scalar float operation on b32 registers (16-bit values in clean low halves for
    f16/bf16); returns a b32 temp (high half zero for 16-bit types)."""
    if op in ("neg", "abs"):
        r = b.t()
        if op == "neg":
            b(f"xor.b32 {r}, {srcs[0]}, {_SIGN[t]:#x};")
        else:
            b(f"and.b32 {r}, {srcs[0]}, {_SIGN[t] - 1:#x};")
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


def _f32_op(b: _Block, op: str, r: str, xs: list[str], ft: str = "f32") -> None:
    if op in ("add", "sub", "mul", "fma", "div"):
        b(f"{op}.rn.{ft} {r}, {', '.join(xs)};")
    elif op == "sqrt":
        b(f"sqrt.rn.{ft} {r}, {xs[0]};")
    elif op in _ROUND:
        b(f"cvt.{_ROUND[op]}.{ft}.{ft} {r}, {xs[0]};")
    else:  # pragma: no cover
        raise AssertionError(op)


def _e_float(b: _Block, ins: Instruction) -> None:
    d = ins.defn
    t = d.type
    assert t is not None
    ops = _ops(ins)
    op = d.op
    if t is T.F64:
        srcs = [b.get64(r) for r in ops[1:]]
        if op in ("neg", "abs"):
            r = b.t("b64")
            if op == "neg":
                b(f"xor.b64 {r}, {srcs[0]}, {_SIGN[t]:#x};")
            else:
                b(f"and.b64 {r}, {srcs[0]}, {_SIGN[t] - 1:#x};")
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
def _e_bitwise(b: _Block, ins: Instruction) -> None:
    d = ins.defn
    t = d.type
    assert t is not None
    ops = _ops(ins)
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
def _e_setp(b: _Block, ins: Instruction) -> None:
    d = ins.defn
    t = d.type
    assert t is not None
    ops = _ops(ins)
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
        b(f"setp.{d.variant}.{_INT_PTX[t]} %p{ops[0]}, {x}, {y};")


def _e_selp(b: _Block, ins: Instruction) -> None:
    d = ins.defn
    ops = _ops(ins)
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


def _e_predlogic(b: _Block, ins: Instruction) -> None:
    d = ins.defn
    ops = _ops(ins)
    if d.op == "mov":
        p: Pred = ops[1]
        b(f"{'not' if p.negated else 'mov'}.pred %p{ops[0]}, %p{p.index};")
    else:
        b(f"{d.op}.pred %p{ops[0]}, {b.pred(ops[1])}, {b.pred(ops[2])};")


def _e_setp_const(b: _Block, ins: Instruction) -> None:
    b(f"mov.pred %p{ins.operands[0]}, {1 if ins.defn.variant == 'true' else 0};")


# --- memory
_LD = {T.U8: "u8", T.I8: "s8", T.U16: "u16", T.I16: "s16", T.B32: "b32"}
_ST = {T.B8: "b8", T.B16: "b16", T.B32: "b32"}


def _regs_list(first: int, count: int) -> str:
    return "{" + ", ".join(f"%r{first + i}" for i in range(count)) + "}"


def _e_ld(b: _Block, ins: Instruction) -> None:
    d = ins.defn
    t = d.type
    assert t is not None
    kind = d.operands[1]
    a = b.addr(kind, ins.operands[1])
    sp = load_space(b, ins)
    dst = ins.operands[0]
    if t.bits <= 32:
        b(f"ld.{sp}.{_LD[t]} %r{dst}, {a};")
    else:
        n = t.bits // 32
        b(f"ld.{sp}.v{n}.b32 {_regs_list(dst, n)}, {a};")


def _e_st(b: _Block, ins: Instruction) -> None:
    d = ins.defn
    t = d.type
    assert t is not None
    kind = d.operands[0]
    a = b.addr(kind, ins.operands[0])
    sp = b.space()
    src = ins.operands[1]
    if t.bits <= 32:
        b(f"st.{sp}.{_ST[t]} {a}, %r{src};")
    else:
        n = t.bits // 32
        b(f"st.{sp}.v{n}.b32 {a}, {_regs_list(src, n)};")


# --- atomics
_ATOM_TYPE = {T.U32: "u32", T.I32: "s32", T.B32: "b32", T.F32: "f32"}


def _sem(order: MemoryOrder, scope: Scope, returning: bool) -> tuple[str, str]:
    """(prefix fence line or '', qualifier string) for a device atomic."""
    sc = _SCOPE[scope]
    if order is MemoryOrder.SEQ_CST:
        return f"fence.sc.{sc};", f".acq_rel.{sc}" if returning else f".release.{sc}"
    name = {MemoryOrder.RELAXED: "relaxed", MemoryOrder.ACQUIRE: "acquire", MemoryOrder.RELEASE: "release",
            MemoryOrder.ACQ_REL: "acq_rel"}[order]
    return "", f".{name}.{sc}"


def _e_atom(b: _Block, ins: Instruction) -> None:
    d = ins.defn
    t = d.type
    assert t is not None
    returning = d.op == "atom"
    space, op = d.variant.split(".")
    ops = list(ins.operands)
    dst: int | None = None
    if returning:
        dst = ops.pop(0)
    addr_v = ops.pop(0)
    a = b.addr(d.operands[1 if returning else 0], addr_v)
    if space == "device":
        scope, order = ops[-2], ops[-1]
        ops = ops[:-2]
        if not returning and order not in (MemoryOrder.RELAXED, MemoryOrder.RELEASE):
            # PTX red has no acquire forms (the spec makes them invalid, but be total):
            # a returning atomic with the result discarded has the same effect
            returning = True
            dst = None
        pre, qual = _sem(order, scope, returning)
        if pre:
            b(pre)
        sp = "global"
    else:
        qual, sp = "", "shared"
    vals = [b.r(x) for x in ops]
    res = b.t()
    if t is T.F32:
        # f32 add as a CAS loop: PTX's atom/red.add.f32 may flush subnormals; the spec keeps them
        old, new, prev = b.t(), b.t(), b.t()
        q = b.t("pred")
        loop = b.label("cas")
        if sp == "global":
            b(f"ld.relaxed.gpu.global.b32 {old}, {a};")
        else:
            b(f"ld.volatile.shared.b32 {old}, {a};")
        b(f"{loop}:")
        b(f"add.rn.f32 {new}, {old}, {vals[0]};")
        b(f"atom{qual}.{sp}.cas.b32 {prev}, {a}, {old}, {new};")
        b(f"setp.ne.b32 {q}, {prev}, {old};")
        b(f"mov.b32 {old}, {prev};")
        b(f"@{q} bra {loop};")
        if returning and dst is not None:
            b(f"mov.b32 %r{dst}, {old};")
        return
    ptype = _ATOM_TYPE[t]
    if op == "sub":  # PTX has no atomic sub: add the two's complement negation
        n = b.t()
        b(f"neg.s32 {n}, {vals[0]};")
        vals = [n]
        op, ptype = "add", "u32"
    if returning:
        b(f"atom{qual}.{sp}.{op}.{ptype} {res}, {a}, {', '.join(vals)};")
        if dst is not None:
            b(f"mov.b32 %r{dst}, {res};")
    else:
        b(f"red{qual}.{sp}.{op}.{ptype} {a}, {vals[0]};")


# --- sync
def _e_barrier(b: _Block, ins: Instruction) -> None:
    b("bar.sync 0;")


def _e_fence(b: _Block, ins: Instruction) -> None:
    scope, order = ins.operands
    if order is MemoryOrder.RELAXED:
        b("// fence .relaxed: no effect")
    elif order is MemoryOrder.SEQ_CST:
        b(f"fence.sc.{_SCOPE[scope]};")
    else:
        b(f"fence.acq_rel.{_SCOPE[scope]};")


def _e_nop(b: _Block, ins: Instruction) -> None:
    b("// nop")


# --- conversions
def _int_value(b: _Block, t: ScalarType, reg: int) -> str:
    return b.get64(reg) if t.bits == 64 else b.r(reg)


def _e_cvt(b: _Block, ins: Instruction) -> None:
    d = ins.defn
    dst_t, src_t = d.type, d.src_type
    assert dst_t is not None and src_t is not None
    dreg, sreg = ins.operands
    res = _convert(b, dst_t, src_t, sreg)
    if dst_t.bits == 64:
        b.set64(dreg, res)
    else:
        b(f"mov.b32 %r{dreg}, {res};")


def _convert(b: _Block, dst: ScalarType, src: ScalarType, sreg: int) -> str:
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
        s = _INT_PTX[src]
        x = _int_value(b, src, sreg)
        if dst in (T.F32, T.F64):
            b(f"cvt.rn.{dst.spelling}.{s} {r}, {x};")
            return r
        # f16/bf16: exact f64 (32-bit ints) or round-to-odd f64 (64-bit), then round-to-odd
        # f32, then one rounding to nearest even: a single correct rounding overall
        if src.bits == 64:
            wide = b.int64_to_f64_odd(x, src.is_signed)
        else:
            wide = b.t("b64")
            b(f"cvt.rn.f64.{s} {wide}, {x};")
        return b.from_f32(dst, b.f64_to_f32_odd(wide))
    if not dst.is_float:
        # float -> int: PTX cvt.rzi truncates and saturates, but NaN does not always give 0
        # (f64 -> i32 and f32 -> i64 give MIN on sm_90), so NaN is mapped to 0 explicitly
        dt = _INT_PTX[dst]
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
        return b.from_f32(dst, b.f64_to_f32_odd(x))
    f = b.to_f32(src, b.r(sreg))
    if dst is T.F64:
        b(f"cvt.f64.f32 {r}, {f};")
        return r
    if dst is T.F32:
        return f
    return b.from_f32(dst, f)


def _e_cvt_pack(b: _Block, ins: Instruction) -> None:
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


def _e_mov(b: _Block, ins: Instruction) -> None:
    d = ins.defn
    ops = ins.operands
    if d.type is T.B64:
        b.set64(ops[0], b.get64(ops[1]))
    else:
        b(f"mov.b32 %r{ops[0]}, %r{ops[1]};")


def _e_movi(b: _Block, ins: Instruction) -> None:
    d = ins.defn
    dst, imm = ins.operands
    if d.operands[0] is Operand.RD64:
        imm &= (1 << 64) - 1
        b(f"mov.b32 %r{dst}, {imm & 0xFFFFFFFF:#010x};")
        b(f"mov.b32 %r{dst + 1}, {imm >> 32:#010x};")
    else:
        b(f"mov.b32 %r{dst}, {imm & 0xFFFFFFFF:#010x};")


def _e_mov_sr(b: _Block, ins: Instruction) -> None:
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


def _e_ldarg(b: _Block, ins: Instruction) -> None:
    dst, arg = ins.operands
    name = b.kx.param_name(arg)
    if ins.defn.type is T.B64:
        t = b.t("b64")
        b(f"ld.param.b64 {t}, [{name}];")
        b.set64(dst, t)
    else:
        b(f"ld.param.b32 %r{dst}, [{name}];")


# --- wave operations (uniform lowering only: every existing lane executes these lines)
def _ballot_e(b: _Block) -> str:
    em = b.t()
    b(f"vote.sync.ballot.b32 {em}, {b.pe}, %exist;")
    return em


def _lane_in(b: _Block, em: str, lane: str, valid: str) -> None:
    """valid &= bit ``lane`` of ``em`` (shift counts >= 32 give 0)."""
    t = b.t()
    q = b.t("pred")
    b(f"shr.b32 {t}, {em}, {lane};")
    b(f"and.b32 {t}, {t}, 1;")
    b(f"setp.ne.b32 {q}, {t}, 0;")
    b(f"and.pred {valid}, {valid}, {q};")


def _e_shfl(b: _Block, ins: Instruction) -> None:
    mode = ins.defn.variant
    dst, a, c = ins.operands
    av, bv = b.r(a), b.r(c)
    em = _ballot_e(b)
    s, v = b.t(), b.t("pred")
    if mode == "idx":
        b(f"setp.lt.u32 {v}, {bv}, 32;")
        b(f"mov.b32 {s}, {bv};")
    elif mode == "up":
        b(f"setp.le.u32 {v}, {bv}, %sr_lane;")
        b(f"sub.u32 {s}, %sr_lane, {bv};")
    elif mode == "down":
        room = b.t()
        b(f"sub.u32 {room}, 32, %sr_lane;")
        b(f"setp.lt.u32 {v}, {bv}, {room};")
        b(f"add.u32 {s}, %sr_lane, {bv};")
    else:
        b(f"setp.lt.u32 {v}, {bv}, 32;")
        b(f"xor.b32 {s}, %sr_lane, {bv};")
    _lane_in(b, em, s, v)
    b(f"selp.b32 {s}, {s}, %sr_lane, {v};")
    r = b.t()
    b(f"shfl.sync.idx.b32 {r}, {av}, {s}, 0x1f, %exist;")
    b(f"selp.b32 {r}, {r}, {av}, {v};")
    b(f"@{b.pe} mov.b32 %r{dst}, {r};")


def _e_bcast(b: _Block, ins: Instruction) -> None:
    dst, a, c = ins.operands
    em = _ballot_e(b)
    low, t = b.t(), b.t()
    b(f"brev.b32 {t}, {em};")
    b(f"clz.b32 {low}, {t};")
    b(f"and.b32 {low}, {low}, 31;")  # empty E: nobody writes; keep the index in range
    big_l = b.t()
    b(f"shfl.sync.idx.b32 {big_l}, %r{c}, {low}, 0x1f, %exist;")
    v = b.t("pred")
    b(f"setp.lt.u32 {v}, {big_l}, 32;")
    _lane_in(b, em, big_l, v)
    src = b.t()
    b(f"selp.b32 {src}, {big_l}, {low}, {v};")
    r = b.t()
    b(f"shfl.sync.idx.b32 {r}, %r{a}, {src}, 0x1f, %exist;")
    b(f"@{b.pe} mov.b32 %r{dst}, {r};")


def _e_ballot(b: _Block, ins: Instruction) -> None:
    dst, p = ins.operands
    q = b.t("pred")
    b(f"and.pred {q}, {b.pe}, {b.pred(p)};")
    r = b.t()
    b(f"vote.sync.ballot.b32 {r}, {q}, %exist;")
    b(f"@{b.pe} mov.b32 %r{dst}, {r};")
    b(f"@{b.pe} mov.b32 %r{dst + 1}, 0;")  # bits >= W = 32 are 0


def _e_vote(b: _Block, ins: Instruction) -> None:
    dst, p = ins.operands
    q, r = b.t("pred"), b.t("pred")
    if ins.defn.op == "any":
        b(f"and.pred {q}, {b.pe}, {b.pred(p)};")
        b(f"vote.sync.any.pred {r}, {q}, %exist;")
        b(f"@{b.pe} mov.pred %p{dst}, {r};")
    else:  # all: no executing lane has p false
        b(f"and.pred {q}, {b.pe}, {b.pred(p, negate=True)};")
        b(f"vote.sync.any.pred {r}, {q}, %exist;")
        b(f"@{b.pe} not.pred %p{dst}, {r};")


_RED_IDENTITY = {
    ("add", T.I32): 0, ("add", T.U32): 0, ("add", T.F32): 0x80000000,
    ("min", T.I32): 0x7FFFFFFF, ("min", T.U32): 0xFFFFFFFF, ("min", T.F32): 0x7FC00000,
    ("max", T.I32): 0x80000000, ("max", T.U32): 0, ("max", T.F32): 0x7FC00000,
    ("and", T.B32): 0xFFFFFFFF, ("or", T.B32): 0, ("xor", T.B32): 0,
}


def _combine(b: _Block, op: str, t: ScalarType, left: str, right: str, out: str) -> None:
    """out = left OP right (f32 add rounded to nearest even; min/max f32 minimumNumber)."""
    if t is T.F32 and op == "add":
        b(f"add.rn.f32 {out}, {left}, {right};")
    elif t is T.F32:
        r = _minmax(b, op, T.F32, left, right, left, right)
        b(f"mov.b32 {out}, {r};")
    elif op == "add":
        b(f"add.u32 {out}, {left}, {right};")
    elif op in ("min", "max"):
        b(f"{op}.{_INT_PTX[t]} {out}, {left}, {right};")
    else:
        b(f"{op}.b32 {out}, {left}, {right};")


def _e_wred(b: _Block, ins: Instruction) -> None:
    d = ins.defn
    t = d.type
    assert t is not None
    op = d.variant
    dst, a = ins.operands
    ident = _RED_IDENTITY[(op, t)]
    s = b.t()
    b(f"selp.b32 {s}, %r{a}, {ident:#010x}, {b.pe};")
    nexist = b.t()
    b(f"popc.b32 {nexist}, %exist;")
    k = 1
    while k < WAVE_WIDTH:
        # butterfly partner block: lanes [base, base + k) with base = (lane ^ k) & ~(k - 1).
        # Every lane of a block holds the block's value, so its lowest lane stands for it;
        # a block without existing lanes holds the identity (all contributions inactive).
        base, o = b.t(), b.t()
        v = b.t("pred")
        b(f"xor.b32 {base}, %sr_lane, {k};")
        b(f"and.b32 {base}, {base}, {~(k - 1) & 0xFFFFFFFF:#010x};")
        b(f"setp.lt.u32 {v}, {base}, {nexist};")
        b(f"selp.b32 {base}, {base}, %sr_lane, {v};")
        b(f"shfl.sync.idx.b32 {o}, {s}, {base}, 0x1f, %exist;")
        b(f"selp.b32 {o}, {o}, {ident:#010x}, {v};")
        _combine(b, op, t, s, o, s)
        k *= 2
    b(f"@{b.pe} mov.b32 %r{dst}, {s};")


def _e_wscan(b: _Block, ins: Instruction) -> None:
    d = ins.defn
    t = d.type
    assert t is not None
    dst, a = ins.operands
    ident = 0x80000000 if t is T.F32 else 0
    s = b.t()
    b(f"selp.b32 {s}, %r{a}, {ident:#010x}, {b.pe};")
    k = 1
    while k < WAVE_WIDTH:
        # Kogge-Stone: s = s[lane - k] + s for lane >= k (lower lanes' partial on the left);
        # the source lane is below an existing lane, so it exists
        o = b.t()
        v = b.t("pred")
        b(f"shfl.sync.up.b32 {o}|{v}, {s}, {k}, 0, %exist;")
        if t is T.F32:
            b(f"@{v} add.rn.f32 {s}, {o}, {s};")
        else:
            b(f"@{v} add.u32 {s}, {o}, {s};")
        k *= 2
    if d.variant == "excl":
        o = b.t()
        v = b.t("pred")
        b(f"shfl.sync.up.b32 {o}|{v}, {s}, 1, 0, %exist;")
        b(f"selp.b32 {s}, {o}, 0, {v};")  # lane 0: +0.0 / 0
    b(f"@{b.pe} mov.b32 %r{dst}, {s};")


def _e_mma(b: _Block, ins: Instruction) -> None:
    """Per-element MMA: lane l computes D[i][j] for elements e = l + 32*m (m = 0..7):
    i = l/16 + 2m, j = l%16, accumulating k = 0..15 in order with fma.rn.f32."""
    et = ins.defn.src_type
    rd, ra, rb, rc = ins.operands
    lq, lr = b.t(), b.t()
    b(f"shr.u32 {lq}, %sr_lane, 4;")
    b(f"and.b32 {lr}, %sr_lane, 15;")

    def base(reg: int, row_bytes: int, col_bytes: int) -> str:
        p = b.t("b64")
        t = b.t()
        b(f"mul.lo.u32 {t}, {lq}, {row_bytes};")
        b(f"mad.lo.u32 {t}, {lr}, {col_bytes}, {t};")
        b(f"add.u32 {t}, {t}, %r{reg};")
        b(f"cvt.u64.u32 {p}, {t};")
        b(f"add.s64 {p}, {p}, %lmbase;")
        return p

    # the mask-stack machine walks every instruction with the whole warp, also where no lane is
    # active (after a break, in a skipped branch): an mma whose executing set is empty must not
    # run (it would accumulate once more: issue 15)
    skip = b.label("mma_skip")
    anyq = b.t("pred")
    b(f"vote.sync.any.pred {anyq}, {b.pe}, %exist;")
    b(f"@!{anyq} bra {skip};")
    pa = base(ra, 32, 0)  # A[i][k]: A + 32*i + 2k, i = lq + 2m
    pb = base(rb, 0, 2)  # B[k][j]: B + 32*k + 2j
    pc = base(rc, 64, 4)  # C[i][j]: C + 64*i + 4j
    pd = base(rd, 64, 4)
    b("bar.warp.sync %exist;")  # order the wave's earlier local stores before the reads
    acc = [b.t() for _ in range(8)]
    for m, r in enumerate(acc):
        b(f"ld.shared.b32 {r}, [{pc}+{128 * m}];")
    k = b.t()
    q = b.t("pred")
    loop = b.label("mma")
    b(f"mov.b32 {k}, 0;")
    b(f"{loop}:")

    def load_f32(ptr: str, off: int) -> str:
        x = b.t()
        b(f"ld.shared.u16 {x}, [{ptr}+{off}];")
        return b.to_f32(et, x)

    fb = load_f32(pb, 0)
    for m, r in enumerate(acc):
        fa = load_f32(pa, 64 * m)
        b(f"fma.rn.f32 {r}, {fa}, {fb}, {r};")
    b(f"add.s64 {pa}, {pa}, 2;")
    b(f"add.s64 {pb}, {pb}, 32;")
    b(f"add.u32 {k}, {k}, 1;")
    b(f"setp.lt.u32 {q}, {k}, 16;")
    b(f"@{q} bra {loop};")
    b("bar.warp.sync %exist;")  # every lane has read A, B, C before D is written
    for m, r in enumerate(acc):
        b(f"st.shared.b32 [{pd}+{128 * m}], {r};")
    b("bar.warp.sync %exist;")
    b(f"{skip}:")


#: op -> emitter. Control-flow ops (if, else, ...) are handled by the kernel emitter itself.
EMITTERS: dict[str, Emitter | None] = {
    **{op: _e_int for op in ("add", "sub", "mul", "neg", "abs", "div", "rem", "min", "max",
                             "mulhi", "mad")},
    "fma": _e_float, "sqrt": _e_float, "floor": _e_float, "ceil": _e_float, "trunc": _e_float,
    "rint": _e_float, "ex2": _e_float, "lg2": _e_float, "sin": _e_float, "cos": _e_float,
    "rsqrt": _e_float, "rcp": _e_float, "tanh": _e_float,
    "and": _e_bitwise, "or": _e_bitwise, "xor": _e_bitwise, "not": _e_bitwise, "shl": _e_bitwise,
    "shr": _e_bitwise, "popc": _e_bitwise, "clz": _e_bitwise, "ctz": _e_bitwise, "brev": _e_bitwise,
    "setp": _e_setp, "selp": _e_selp, "setp_const": _e_setp_const,
    "ld": _e_ld, "st": _e_st, "atom": _e_atom, "red": _e_atom,
    "shfl": _e_shfl, "bcast": _e_bcast, "ballot": _e_ballot, "any": _e_vote, "all": _e_vote,
    "wred": _e_wred, "wscan": _e_wscan, "mma": _e_mma, **ptx_mma.EMITTERS,
    "barrier": _e_barrier, "fence": _e_fence, "nop": _e_nop,
    **ASYNC_EMITTERS,
    "cvt": _e_cvt, "cvt_pack": _e_cvt_pack,
    "mov": _e_mov, "movi": _e_movi, "mov_sr": _e_mov_sr, "ldarg": _e_ldarg,
    # structured control flow: lowered by _KernelEmitter
    "if": None, "else": None, "endif": None, "loop": None, "endloop": None, "break": None,
    "continue": None, "call": None, "ret": None, "halt": None,
}


def emitter_for(defn: InstrDef) -> Emitter | None:
    """The emitter of one table entry (None for control flow, lowered structurally).

    Raises:
        KeyError: no emitter (a coverage test makes sure this never happens)."""
    op = defn.op
    if defn.category is Category.FLOAT and op in ("add", "sub", "mul", "min", "max", "neg", "abs", "div"):
        return _e_float
    if defn.category is Category.COMPARE and op in ("and", "or", "xor", "mov"):
        return _e_predlogic
    return EMITTERS[op]


# ------------------------------------------------------------------------ kernel emitter

@dataclass
class _Frame:
    kind: str  # if | loop | call
    depth: int
    label: str
    has_else: bool = False


def _uses_collectives(module: Module, code: Iterable[Instruction], seen: set[int] | None = None) -> bool:
    seen = set() if seen is None else seen
    for ins in code:
        if Flag.WAVE_COLLECTIVE in ins.defn.flags:
            return True
        if ins.defn.op == "call":
            f = ins.operands[0]
            if f not in seen:
                seen.add(f)
                if _uses_collectives(module, module.functions[f].code, seen):
                    return True
    return False


class _KernelEmitter:
    def __init__(self, module: Module, kernel: Kernel, arch: int, comments: bool, checked: bool = False) -> None:
        self.m = module
        self.k = kernel
        self.checked = checked
        self.sites: list = []
        self.labels = {id(kernel.code): f"kernel {kernel.name!r}",
                       **{id(f.code): f"function {f.name!r}" for f in module.functions}}
        self.cur: tuple[str, int] = (self.labels[id(kernel.code)], 0)
        self.arch = arch
        self.comments = comments
        self.uniform = _uses_collectives(module, kernel.code)
        #: wave operations under control flow proven warp-uniform: per-thread branches (ptx_mma)
        self.flat = self.uniform and ptx_mma.warp_uniform_control(module, kernel)
        self.uniform = self.uniform and not self.flat
        self.body: list[str] = []
        self.nlabel = 0
        self.frames: list[_Frame] = []
        self.max_depth = 0
        #: inside a segment that a warp with no active lane skips as a whole (ptx_mma)
        self.frag_covered = False
        from anywave.asm.disassembler import _Printer

        self._printer = _Printer(module)

    # names
    def new_label(self, what: str) -> str:
        self.nlabel += 1
        return f"$L{self.nlabel}_{what}"

    def param_name(self, index: int) -> str:
        return f"__wa_p{index}"

    def _arg_name(self, index: int, buffer: bool) -> str:
        args = self.k.args
        return args[index].name if 0 <= index < len(args) else f"${index}"

    def text_of(self, ins: Instruction) -> str:
        try:
            text = self._printer.instruction(ins, self._arg_name)
        except Exception:  # noqa: BLE001 - a comment must never break translation
            text = ins.mnemonic
        if ins.loc is not None:
            text += f"    ({ins.loc})"
        return text

    # emission
    def out(self, line: str, indent: int = 1) -> None:
        self.body.append("    " * indent + line)

    def emit_code(self, code: Sequence[Instruction]) -> None:
        label = self.labels.get(id(code), "function")
        seg: str | None = None  # open straight-line segment of wave-scope fragment code (ptx_mma)
        for i, ins in enumerate(code):
            self.cur = (label, i)
            boundary = ins.defn.category is Category.CONTROL or ins.defn.op == "barrier"
            if seg is not None and boundary:
                self.out(f"{seg}:", 0)
                seg, self.frag_covered = None, False
            if seg is None and self.uniform and not boundary and ptx_mma.segment_has_fragments(code, i):
                # skip the whole segment in a warp with no active lane, so its fragment
                # instructions need no per-instruction test (spec 8.14)
                seg = self.new_label("frag_seg")
                self.out("vote.sync.any.pred %pany, %A, %exist;")
                self.out(f"@!%pany bra {seg};")
                self.frag_covered = True
            if self.comments:
                self.out(f"// {self.text_of(ins)}")
            if ins.defn.category is Category.CONTROL:
                self.control(ins)
            else:
                self.instruction(ins)
        if seg is not None:
            self.out(f"{seg}:", 0)
            self.frag_covered = False

    def exec_pred(self, guard: Pred | None) -> str | None:
        """Predicate string of the executing lanes (None: every thread that runs this)."""
        if not self.uniform:
            return None if guard is None else Block_pred(guard)
        if guard is None:
            return "%A"
        self.out(f"and.pred %pe, %A, {Block_pred(guard)};")
        return "%pe"

    def instruction(self, ins: Instruction) -> None:
        emit = emitter_for(ins.defn)
        assert emit is not None
        b = _Block(self, ins)
        if Flag.WAVE_COLLECTIVE in ins.defn.flags:
            # every existing lane runs these lines; the executing set is b.pe
            if ins.guard is None:
                b.pe = "%A"
            else:
                self.out(f"and.pred %pe, %A, {Block_pred(ins.guard)};")
                b.pe = "%pe"
            emit(b, ins)
            self.block(b, None)
            return
        pe = self.exec_pred(ins.guard)
        emit(b, ins)
        if self.checked and ins.defn.flags & (Flag.LOAD | Flag.STORE):
            from anywave.backends.bounds import guard_ptx

            pe = guard_ptx(self, ins, pe)
        self.block(b, pe)

    def block(self, b: _Block, pe: str | None) -> None:
        decls = b.decls()
        simple = len(b.lines) == 1 and not decls and not b.lines[0].startswith(("@", "//", "$"))
        if pe is None:
            if simple:
                self.out(b.lines[0])
                return
            self.out("{")
            for line in decls + b.lines:
                self.out(line, 2)
            self.out("}")
            return
        if simple:
            self.out(f"@{pe} {b.lines[0]}")
            return
        if len(b.lines) <= _PREDICATE_LINES and not any(ln.startswith(("@", "//", "$")) for ln in b.lines):
            # a short straight-line block: predicate every line instead of branching around it,
            # so ptxas schedules across WAVE instructions (no basic-block boundary per instruction)
            self.out("{")
            for line in decls:
                self.out(line, 2)
            for line in b.lines:
                self.out(f"@{pe} {line}", 2)
            self.out("}")
            return
        skip = self.new_label("skip")
        neg = pe[1:] if pe.startswith("!") else "!" + pe
        self.out(f"@{neg} bra {skip};")
        self.out("{")
        for line in decls + b.lines:
            self.out(line, 2)
        self.out("}")
        self.out(f"{skip}:", 0)

    # ---------------------------------------------------------------- control flow
    def push(self, kind: str) -> _Frame:
        f = _Frame(kind, len(self.frames), self.new_label(kind))
        self.frames.append(f)
        self.max_depth = max(self.max_depth, len(self.frames))
        return f

    def innermost(self, kind: str) -> _Frame | None:
        for f in reversed(self.frames):
            if f.kind == kind:
                return f
        return None

    def vote_any(self, pred: str) -> None:
        self.out(f"vote.sync.any.pred %pany, {pred}, %exist;")

    def remove(self, x: str, above: int) -> None:
        """Uniform mode: lanes where ``x`` holds leave every frame deeper than ``above``."""
        for f in self.frames[above + 1:]:
            self.out(f"and.pred %fo{f.depth}, %fo{f.depth}, !{x};")
            if f.kind == "if":
                self.out(f"and.pred %fp{f.depth}, %fp{f.depth}, !{x};")
            elif f.kind == "loop":
                self.out(f"and.pred %fc{f.depth}, %fc{f.depth}, !{x};")
        self.out(f"and.pred %A, %A, !{x};")

    def leaving(self, guard: Pred | None) -> str:
        """Uniform mode: predicate %px = active lanes where the guard holds."""
        if guard is None:
            self.out("mov.pred %px, %A;")
        else:
            self.out(f"and.pred %px, %A, {Block_pred(guard)};")
        return "%px"

    def control(self, ins: Instruction) -> None:
        op = ins.defn.op
        if self.uniform:
            self.control_uniform(ins, op)
        else:
            self.control_thread(ins, op)

    def control_thread(self, ins: Instruction, op: str) -> None:
        g = ins.guard
        guard = "" if g is None else f"@{Block_pred(g)} "
        if op == "nop":
            return
        if op == "if":
            f = self.push("if")
            p: Pred = ins.operands[0]
            self.out(f"@{Block_pred(p, negate=True)} bra {f.label}_else;")
        elif op == "else":
            f = self.frames[-1]
            f.has_else = True
            self.out(f"bra {f.label}_end;")
            self.out(f"{f.label}_else:", 0)
        elif op == "endif":
            f = self.frames.pop()
            if not f.has_else:
                self.out(f"{f.label}_else:", 0)
            self.out(f"{f.label}_end:", 0)
        elif op == "loop":
            f = self.push("loop")
            self.out(f"{f.label}_top:", 0)
        elif op in ("break", "continue"):
            lf = self.innermost("loop")
            assert lf is not None
            self.out(f"{guard}bra {lf.label}_{'exit' if op == 'break' else 'cont'};")
        elif op == "endloop":
            f = self.frames.pop()
            self.out(f"{f.label}_cont:", 0)
            self.out(f"bra {f.label}_top;")
            self.out(f"{f.label}_exit:", 0)
        elif op == "call":
            f = self.push("call")
            self.emit_code(self.m.functions[ins.operands[0]].code)
            self.frames.pop()
            self.out(f"{f.label}_ret:", 0)
        elif op == "ret" and self.innermost("call") is not None:
            cf = self.innermost("call")
            assert cf is not None
            self.out(f"{guard}bra {cf.label}_ret;")
        elif op in ("ret", "halt"):
            self.out(f"{guard}exit;")
        else:  # pragma: no cover
            raise AssertionError(op)

    def control_uniform(self, ins: Instruction, op: str) -> None:
        if op == "nop":
            return
        if op == "if":
            f = self.push("if")
            p: Pred = ins.operands[0]
            d = f.depth
            self.out(f"mov.pred %fo{d}, %A;")
            self.out(f"and.pred %fp{d}, %A, {Block_pred(p, negate=True)};")
            self.out(f"and.pred %A, %A, {Block_pred(p)};")
            self.vote_any("%A")
            self.out(f"@!%pany bra {f.label}_else;")
        elif op == "else":
            f = self.frames[-1]
            f.has_else = True
            self.out(f"{f.label}_else:", 0)
            self.out(f"mov.pred %A, %fp{f.depth};")
            self.out(f"mov.pred %fp{f.depth}, 0;")
            self.vote_any("%A")
            self.out(f"@!%pany bra {f.label}_end;")
        elif op == "endif":
            f = self.frames.pop()
            if not f.has_else:
                self.out(f"{f.label}_else:", 0)
            self.out(f"{f.label}_end:", 0)
            self.out(f"mov.pred %A, %fo{f.depth};")
        elif op == "loop":
            f = self.push("loop")
            self.out(f"mov.pred %fo{f.depth}, %A;")
            self.out(f"mov.pred %fc{f.depth}, 0;")
            self.vote_any("%A")
            self.out(f"@!%pany bra {f.label}_exit;")
            self.out(f"{f.label}_top:", 0)
        elif op in ("break", "continue"):
            lf = self.innermost("loop")
            assert lf is not None
            x = self.leaving(ins.guard)
            self.remove(x, lf.depth)
            if op == "continue":
                self.out(f"or.pred %fc{lf.depth}, %fc{lf.depth}, {x};")
        elif op == "endloop":
            f = self.frames.pop()
            d = f.depth
            self.out(f"or.pred %A, %A, %fc{d};")
            self.out(f"mov.pred %fc{d}, 0;")
            self.vote_any("%A")
            self.out(f"@%pany bra {f.label}_top;")
            self.out(f"{f.label}_exit:", 0)
            self.out(f"mov.pred %A, %fo{d};")
        elif op == "call":
            f = self.push("call")
            self.out(f"mov.pred %fo{f.depth}, %A;")
            self.vote_any("%A")
            self.out(f"@!%pany bra {f.label}_ret;")
            self.emit_code(self.m.functions[ins.operands[0]].code)
            self.frames.pop()
            self.out(f"{f.label}_ret:", 0)
            self.out(f"mov.pred %A, %fo{f.depth};")
        elif op == "ret" and self.innermost("call") is not None:
            cf = self.innermost("call")
            assert cf is not None
            self.remove(self.leaving(ins.guard), cf.depth)
        elif op in ("ret", "halt"):
            # halted lanes leave every frame (never reactivated) but keep walking the
            # program with the warp, so collective operations keep a fixed member mask
            self.remove(self.leaving(ins.guard), -1)
        else:  # pragma: no cover
            raise AssertionError(op)

    # ---------------------------------------------------------------- whole kernel
    def params(self) -> tuple[PtxParam, ...]:
        out = []
        for i, a in enumerate(self.k.args):
            if a.kind is ArgKind.BUFFER:
                kind = "buffer"
            else:
                kind = "b64" if a.type.bits == 64 else "b32"
            out.append(PtxParam(a.name, self.param_name(i), kind, a.type))
        return tuple(out)

    def run(self) -> tuple[str, PtxKernel]:
        k = self.k
        self.emit_code(k.code)
        params = self.params()
        dynamic = k.local_memory if k.local_memory > STATIC_SHARED_LIMIT else 0
        lines = [f"// kernel {k.name}: {len(k.args)} arguments, {k.registers} registers, "
                 f"local memory {k.local_memory} bytes, "
                 f"{'warp-uniform mask-stack' if self.uniform else 'per-thread'} control flow"]
        plist = []
        for p in params:
            if p.kind == "buffer":
                plist.append(f"    .param .u64 .ptr.global.align 16 {p.ptx_name}")
            else:
                plist.append(f"    .param .{p.kind} {p.ptx_name}")
        if self.checked:
            from anywave.backends.bounds import ptx_hidden_params

            plist += ptx_hidden_params(self)
        lines.append(f".visible .entry {k.name}(" + ("\n" + ",\n".join(plist) + "\n" if plist else "") + ")")
        lines.append("{")
        pro = [f".reg .b32 %r<{max(k.registers, 1)}>;", ".reg .pred %p<8>;",
               ".reg .pred %pe, %pany, %px, %A;",
               ".reg .b32 %sr_tx, %sr_ty, %sr_tz, %sr_nx, %sr_ny, %sr_nz, %sr_cx, %sr_cy, %sr_cz;",
               ".reg .b32 %sr_gx, %sr_gy, %sr_gz, %sr_tl, %sr_lane, %sr_wave, %sr_nwaves, %exist;",
               ".reg .b64 %lmbase;"]
        if self.max_depth:
            dd = self.max_depth
            pro.append(f".reg .pred %fo<{dd}>, %fp<{dd}>, %fc<{dd}>;")
        bufs = [i for i, a in enumerate(k.args) if a.kind is ArgKind.BUFFER]
        if bufs:
            pro.append(".reg .b64 " + ", ".join(f"%buf{i}" for i in bufs) + ";")
        if k.local_memory and not dynamic:
            pro.append(f".shared .align 16 .b8 __wa_local[{k.local_memory}];")
        for i in bufs:
            a = k.args[i]
            pro.append(f"ld.param.u64 %buf{i}, [{self.param_name(i)}];   // buffer {a.name}")
            pro.append(f"cvta.to.global.u64 %buf{i}, %buf{i};")
        if self.checked:
            from anywave.backends.bounds import ptx_prologue

            pro += ptx_prologue(self)
        if k.local_memory:
            pro.append(f"mov.u64 %lmbase, {'__wa_dynlocal' if dynamic else '__wa_local'};")
        else:
            pro.append("mov.u64 %lmbase, 0;")
        for ax in "xyz":
            pro += [f"mov.u32 %sr_t{ax}, %tid.{ax};", f"mov.u32 %sr_n{ax}, %ntid.{ax};",
                    f"mov.u32 %sr_c{ax}, %ctaid.{ax};", f"mov.u32 %sr_g{ax}, %nctaid.{ax};"]
        pro += [
            "// linear thread id t = x + y*Sx + z*Sx*Sy; wave t/32, lane t%32 (spec 2.2-2.3)",
            "mad.lo.u32 %sr_tl, %sr_tz, %sr_ny, %sr_ty;",
            "mad.lo.u32 %sr_tl, %sr_tl, %sr_nx, %sr_tx;",
            "and.b32 %sr_lane, %sr_tl, 31;",
            "shr.u32 %sr_wave, %sr_tl, 5;",
            "mul.lo.u32 %sr_nwaves, %sr_nx, %sr_ny;",
            "mul.lo.u32 %sr_nwaves, %sr_nwaves, %sr_nz;",
            "// existing lanes of this warp: min(32, S - 32*wave) low bits (a shift by 32 gives 0)",
            "shl.b32 %exist, %sr_wave, 5;",
            "sub.u32 %exist, %sr_nwaves, %exist;",
            "min.u32 %exist, %exist, 32;",
            "shl.b32 %exist, 1, %exist;",
            "sub.u32 %exist, %exist, 1;",
            "add.u32 %sr_nwaves, %sr_nwaves, 31;",
            "shr.u32 %sr_nwaves, %sr_nwaves, 5;",
            "mov.pred %A, 1;",
            "// registers start at 0, predicates false (spec 3.1, 3.2)",
        ]
        pro += [f"mov.b32 %r{i}, 0;" for i in range(k.registers)]
        pro += [f"mov.pred %p{i}, 0;" for i in range(8)]
        pro += ptx_mma.declarations(self.m, k.code)  # fragment registers (spec 8.14), +0.0
        lines += ["    " + p for p in pro]
        lines += self.body
        lines.append("    exit;")
        lines.append("}")
        info = PtxKernel(k.name, params, dynamic, k.local_memory, self.uniform, self.checked, tuple(self.sites))
        return "\n".join(lines), info


def Block_pred(p: Pred, negate: bool = False) -> str:  # noqa: N802 - shared with _Block.pred
    return _Block.pred(p, negate)


# ------------------------------------------------------------------------ public entry points

def translate(module: Module, arch: str | int = "sm_90", *, kernels: Iterable[str] | None = None,
              comments: bool = True, checked: bool = False) -> PtxProgram:
    """Translate ``module`` to PTX for ``arch``.

    Args:
        module: a WAVE module; it is verified first (once per module object).
        arch: ``"sm_75"``, ``"sm_80"``, ``"sm_90"`` ... (see :data:`PTX_VERSIONS`).
        kernels: names of the kernels to translate (default: all).
        comments: precede each instruction's PTX with its WAVE text and source location.
        checked: a bounds-checked build (:mod:`anywave.backends.bounds`; hidden parameters in
            ``PtxKernel.params`` order, see ``PtxKernel.checked``).

    Returns:
        :class:`PtxProgram` with the text and per-kernel launch information.

    Raises:
        VerifyError: ``module`` breaks a rule of the spec.
        PtxError: unknown architecture, unknown kernel name, or instructions unsupported on
            ``arch`` (every one is listed, before any translation happens).
    """
    from anywave.binary.verify import verify_cached

    verify_cached(module)
    a = parse_arch(arch)
    names = [k.name for k in module.kernels]
    wanted = names if kernels is None else list(kernels)
    bad = [n for n in wanted if n not in names]
    if bad:
        raise PtxError([f"module has no kernel {n!r}; its kernels are {names}" for n in bad])
    problems = check_supported(module, a)
    if problems:
        raise PtxError(problems)
    head = [
        "// generated by anywave (WAVE -> PTX); see docs/spec.md for the semantics",
        f".version {PTX_VERSIONS[a]}",
        f".target sm_{a}",
        ".address_size 64",
        "",
    ]
    parts: list[str] = []
    infos: dict[str, PtxKernel] = {}
    need_dynamic = False
    for k in module.kernels:
        if k.name not in wanted:
            continue
        text, info = _KernelEmitter(module, k, a, comments, checked).run()
        parts.append(text)
        infos[k.name] = info
        need_dynamic |= info.dynamic_shared > 0
    if need_dynamic:
        head.append(".extern .shared .align 16 .b8 __wa_dynlocal[];")
        head.append("")
    return PtxProgram("\n".join(head) + "\n" + "\n\n".join(parts) + "\n", f"sm_{a}", infos)


def table_coverage(arch: str | int = "sm_90") -> dict[str, str]:
    """For every table entry: ``"translated"`` or ``"unsupported: <reason>"`` on ``arch``."""
    out = {}
    for d in INSTRUCTIONS:
        why = unsupported_reason(d, arch)
        out[d.mnemonic] = "translated" if why is None else f"unsupported: {why}"
    return out
