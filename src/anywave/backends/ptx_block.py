"""PTX lines of one WAVE instruction: the :class:`Block` every PTX emitter writes to.

A block holds the lines of one instruction and its scoped temporaries (``%t``/``%d``/``%h``/
``%q`` registers declared inside a ``{ }`` scope), and the helpers shared by the emitters:
64-bit register pairs, 16-bit floats in the low half of a b32, exact widening to f32 and the
round-to-odd narrowing steps of :func:`anywave.backends.lowering.arith.narrowing_steps`.
The emitters themselves live in ``ptx_alu``, ``ptx_memory``, ``ptx_wave`` and ``ptx_mma``.
"""

from __future__ import annotations

from typing import Any

from anywave.binary.module import DeviceAddr, Instruction, LocalAddr, Pred
from anywave.isa.table import Operand
from anywave.isa.types import ScalarType, Scope

T = ScalarType

#: wave width of every NVIDIA target
WAVE_WIDTH = 32

CANON_NAN = {T.F32: 0x7FC00000, T.F16: 0x7E00, T.BF16: 0x7FC0, T.F64: 0x7FF8000000000000}
SIGN = {T.F32: 0x80000000, T.F16: 0x8000, T.BF16: 0x8000, T.F64: 0x8000000000000000}
SCOPE = {Scope.WAVE: "cta", Scope.WORKGROUP: "cta", Scope.DEVICE: "gpu", Scope.SYSTEM: "sys"}
INT_PTX = {T.I32: "s32", T.U32: "u32", T.I64: "s64", T.U64: "u64", T.B32: "b32", T.B64: "b64"}


class Block:
    """PTX lines of one WAVE instruction, with scoped temporaries."""

    _PREFIX = {"b32": "%t", "b64": "%d", "b16": "%h", "pred": "%q"}

    def __init__(self, kx: Any, ins: Instruction) -> None:
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
