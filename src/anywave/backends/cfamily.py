"""One renderer for the C-like dialects (OpenCL C, SYCL, and later HIP, Metal, CUDA C).

The pattern is tinygrad's ``CStyleLanguage`` (design.md §3.5): :class:`CRenderer` walks a
WAVE module once and writes C; everything that differs between dialects -- how to spell a
kernel signature, a pointer into an address space, a bit cast, a barrier, an atomic, a
sub-group shuffle -- comes from a :class:`Dialect`, a small declarative table of strings
and lambdas. ``backends/opencl.py`` and ``backends/sycl.py`` are one screenful each; a new
dialect is another such table (see :data:`EXAMPLE_CUDA_C_SKETCH` at the end of this file
for what one more table looks like).

Semantics follow docs/spec.md (normative) and docs/decisions.md, bit for bit with the
emulator for every ``exact``/``exact-nan`` instruction:

* Registers are ``u32 r0..rN`` locals, predicates ``bool p0..p7``, all zero/false at start;
  64-bit values are assembled from pairs. Floats are bit casts of registers.
* Integer edge cases are written out (division by zero, ``MIN / -1``, shift counts >= the
  width, float->int saturation with NaN -> 0), so C's undefined behaviour is never reached.
* Floats: no contraction (the dialect disables it), ``fma`` only when written, correctly
  rounded ``/`` and ``sqrt``; NaN results are canonicalised like the emulator does.
  ``min``/``max`` are IEEE 754-2019 minimumNumber/maximumNumber written out (-0 < +0).
  f16 and bf16 are emulated on their bits: exact widening to f32, one RNE rounding back
  (f16/bf16 add/sub/mul/div/sqrt in f32 are exact after the second rounding, spec §8.2);
  fma and narrowing from f64/i64 go through round-to-odd (Boldo & Melquiond), so no device
  half-precision support is needed.
* Control flow. A kernel without wave operations uses C's own ``if``/``while(1)``/
  ``break``/``continue``/``return``; ``call`` is inlined (functions share the caller's
  registers) and ``ret`` jumps to the end of the inlined body. A kernel with wave operations
  is lowered with the spec's mask-stack machine kept per lane (``act``, and per construct
  the lanes that left it): every lane of a sub-group walks the same program, so the
  sub-group built-ins are always called in converged control flow and the set of executing
  lanes is exactly the spec's. Loops end when no lane of the wave remains (a sub-group
  vote). The workgroup is launched as one linear dimension padded to a multiple of W, so
  every sub-group is full: padding lanes never become active, exactly like the spec's
  non-existent lanes.
* Wave operations use only shuffle-by-index and a 64-bit ballot (built from a sub-group
  reduction or the dialect's ballot); f32 reductions and scans are written in the spec's
  butterfly / Kogge-Stone order, never the vendor's reduce/scan (whose order is unspecified).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from anywave.backends import cfamily_async, cfamily_mma
from anywave.binary.module import DeviceAddr, Instruction, Kernel, LocalAddr, Module, Pred, kernel_bodies
from anywave.errors import WaveError
from anywave.isa.mma import MMA_SREG_VALUES
from anywave.isa.table import Flag, InstrDef, Operand
from anywave.isa.types import ArgKind, MemoryOrder, ScalarType, Scope, SpecialRegister

T = ScalarType
S = SpecialRegister

#: wave widths the renderer can target (sub-group sizes)
WAVE_WIDTHS = (8, 16, 32, 64)


class CFamilyError(WaveError):
    """A module a C-family backend cannot render for the requested dialect/device; ``problems``
    lists every reason (kernel, instruction index, why)."""

    def __init__(self, dialect: str, problems: Sequence[str]) -> None:
        self.problems = list(problems)
        head = self.problems[0] if len(self.problems) == 1 else f"{len(self.problems)} problems"
        body = "" if len(self.problems) == 1 else "\n" + "\n".join("  - " + p for p in self.problems[:20])
        super().__init__(f"cannot render for {dialect}: {head}{body}")


@dataclass(frozen=True)
class Features:
    """What the device behind a dialect offers (probed by the runtime).

    Attributes:
        fp64: double precision arithmetic (needed by f64 instructions and by conversions that
            round through f64: int/f64 -> f16/bf16, f64 -> anything).
        wave_widths: sub-group sizes that can be forced (empty: no sub-groups).
        int64_atomics: unused by WAVE 1.0 (kept for later).
    """

    fp64: bool = True
    wave_widths: tuple[int, ...] = WAVE_WIDTHS
    int64_atomics: bool = True


@dataclass(frozen=True)
class Dialect:
    """A C-like dialect as a table. Every field is a string or a small lambda.

    ``header`` must define the types ``u8 i8 u16 i16 u32 i32 u64 i64`` and the bit casts
    ``AW_F32(u32)``, ``AW_U32(float)``, ``AW_F64(u64)``, ``AW_U64(double)``; the shared
    prelude (:data:`PRELUDE`) is written in the C subset OpenCL C and C++ share.
    """

    name: str
    header: Callable[[Features], str]
    #: the kernel's opening line(s): (name, params, W, uses_wave_ops, local bytes) -> text ending in "{"
    kernel_open: Callable[[str, list[str], int, bool, int], str]
    #: statements at the top of every kernel body (e.g. fetching the nd_item in SYCL)
    kernel_preamble: Callable[[int, bool], str]
    global_ptr: Callable[[str], str]  # element type -> pointer type to device memory
    local_ptr: Callable[[str], str]
    buffer_param: Callable[[str], str]  # parameter name -> declaration
    u32_param: Callable[[str], str]
    u64_param: Callable[[str], str]
    #: declaration of the workgroup's local memory ``aw_lm`` (bytes) as a ``u8`` array/pointer
    local_decl: Callable[[int], str]
    local_linear_id: str  # thread index inside the (1-D, padded) workgroup
    group_id: Callable[[int], str]  # workgroup id, dimension 0..2 (x, y, z)
    num_groups: Callable[[int], str]
    barrier: str
    fence: Callable[[Scope, MemoryOrder], str]
    #: atomic read-modify-write returning the old value: (space, op, ctype, address expr, value,
    #: scope, order) -> expression. op in add sub min max and or xor exch.
    atomic_rmw: Callable[[str, str, str, str, str, Scope, MemoryOrder], str]
    #: compare-and-swap statement: (space, address, expected-lvalue, desired, scope, order)
    #: -> statement that leaves the old value in the expected variable
    atomic_cas: Callable[[str, str, str, str, Scope, MemoryOrder], str]
    math: dict[str, str]  # WAVE op -> function name (sqrt, fma, floor, ...)
    popcount: str
    clz: str
    ctz: str
    shuffle: Callable[[str, str], str]  # (u32 value, u32 lane index) -> u32
    ballot: Callable[[str], str]  # (bool) -> u64 mask of the sub-group
    any_lane: Callable[[str], str]  # (bool) -> bool over the sub-group
    wave_barrier: str  # sub-group barrier with local memory visibility (for mma)
    build_notes: str = ""
    #: why this dialect cannot honour one instruction (an operand it has no spelling for, e.g. a
    #: memory order), naming the instruction; None when it can. Per-instruction-kind refusals
    #: (fp64, sub-groups) come from :func:`unsupported_reason` and ``Features`` instead.
    refuse: Callable[[Instruction], str | None] = lambda ins: None
    #: a 16-byte vector of four u32 for 128-bit accesses (``uint4``), its component i of a
    #: value, and its construction from four u32 expressions; "" keeps four 32-bit accesses
    vec4: str = ""
    vec4_get: Callable[[str, int], str] = lambda v, i: f"{v}.{'xyzw'[i]}"
    vec4_make: Callable[[list[str]], str] = lambda xs: "(uint4)(" + ", ".join(xs) + ")"


# --------------------------------------------------------------------------- shared prelude

#: helpers shared by every dialect, in the C subset OpenCL C and C++ have in common.
PRELUDE = r"""
#ifndef AW_FN
#define AW_FN static inline
#endif
AW_FN bool aw_isnan32(float x) { return x != x; }
AW_FN u32 aw_c32(float x) { return x != x ? 0x7FC00000u : AW_U32(x); }
/* bit reversal by bytes (Anderson's 64-bit multiply/modulus trick): written so that LLVM does
   not turn it into llvm.bitreverse, which one SYCL JIT path cannot read back */
AW_FN u32 aw_rev8(u32 b) { return (u32)((((u64)b * 0x0202020202ul) & 0x010884422010ul) % 1023ul); }
AW_FN u32 aw_brev(u32 x) {
  return (aw_rev8(x & 0xFFu) << 24) | (aw_rev8((x >> 8) & 0xFFu) << 16) | (aw_rev8((x >> 16) & 0xFFu) << 8)
         | aw_rev8(x >> 24);
}
/* f16 / bf16 bits (low half of a register) <-> float, exact in this direction */
AW_FN float aw_h2f(u32 h) {
  u32 s = (h & 0x8000u) << 16, e = (h >> 10) & 0x1Fu, m = h & 0x3FFu;
  if (e == 0u) return AW_F32(AW_U32((float)m * 0x1p-24f) | s);
  if (e == 31u) return AW_F32(s | 0x7F800000u | (m << 13));
  return AW_F32(s | ((e + 112u) << 23) | (m << 13));
}
AW_FN float aw_bf2f(u32 h) { return AW_F32((h & 0xFFFFu) << 16); }
/* float -> f16 bits, one round-to-nearest-even, overflow to inf, NaN canonical (0x7E00) */
AW_FN u32 aw_f2h(float f) {
  u32 x = AW_U32(f), s = (x >> 16) & 0x8000u, ax = x & 0x7FFFFFFFu;
  if (ax > 0x7F800000u) return 0x7E00u;
  if (ax >= 0x47800000u) return s | 0x7C00u;
  if (ax < 0x38800000u) return s | (u32)AW_RINT(AW_F32(ax) * 0x1p24f);
  u32 r = ax - 0x38000000u;
  return s | ((r + 0xFFFu + ((r >> 13) & 1u)) >> 13);
}
/* float -> bf16 bits, RNE, NaN canonical (0x7FC0) */
AW_FN u32 aw_f2bf(float f) {
  u32 b = AW_U32(f);
  if ((b & 0x7FFFFFFFu) > 0x7F800000u) return 0x7FC0u;
  return ((b + 0x7FFFu + ((b >> 16) & 1u)) >> 16) & 0xFFFFu;
}
AW_FN float aw_minnum(float a, float b) {
  if (a != a) return b; if (b != b) return a;
  if (a < b) return a; if (b < a) return b;
  return (AW_U32(a) & 0x80000000u) ? a : b;
}
AW_FN float aw_maxnum(float a, float b) {
  if (a != a) return b; if (b != b) return a;
  if (a > b) return a; if (b > a) return b;
  return (AW_U32(a) & 0x80000000u) ? b : a;
}
/* float -> integer: truncate toward zero, saturate, NaN -> 0 (spec "Conversions"). |x| < 1 gives
   0 explicitly in the signed ones: Intel's OpenCL CPU compiler folds int->float(float->int x) to
   trunc(x), which is -0.0 for x in (-1, 0) where WAVE (and C) give +0.0 */
AW_FN u32 aw_f2i32(float x) {
  if (x != x || (x > -1.0f && x < 1.0f)) return 0u; if (x >= 2147483648.0f) return 0x7FFFFFFFu;
  if (x <= -2147483648.0f) return 0x80000000u; return (u32)(i32)x;
}
AW_FN u32 aw_f2u32(float x) {
  if (x != x || x <= 0.0f) return 0u; if (x >= 4294967296.0f) return 0xFFFFFFFFu; return (u32)x;
}
AW_FN u64 aw_f2i64(float x) {
  if (x != x || (x > -1.0f && x < 1.0f)) return 0ul; if (x >= 9223372036854775808.0f) return 0x7FFFFFFFFFFFFFFFul;
  if (x <= -9223372036854775808.0f) return 0x8000000000000000ul; return (u64)(i64)x;
}
AW_FN u64 aw_f2u64(float x) {
  if (x != x || x <= 0.0f) return 0ul; if (x >= 18446744073709551616.0f) return 0xFFFFFFFFFFFFFFFFul;
  return (u64)x;
}
#if AW_HAS_F64
AW_FN u64 aw_c64(double x) { return x != x ? 0x7FF8000000000000ul : AW_U64(x); }
AW_FN double aw_minnum64(double a, double b) {
  if (a != a) return b; if (b != b) return a;
  if (a < b) return a; if (b < a) return b;
  return (AW_U64(a) >> 63) ? a : b;
}
AW_FN double aw_maxnum64(double a, double b) {
  if (a != a) return b; if (b != b) return a;
  if (a > b) return a; if (b > a) return b;
  return (AW_U64(a) >> 63) ? b : a;
}
/* double -> float rounded to odd: truncate, then set the last bit if inexact */
AW_FN float aw_d2f_odd(double x) {
  float r = (float)x;
  double back = (double)r;
  if (back != x && x == x && back - back == 0.0 && (AW_U32(r) & 1u) == 0u) {
    u32 b = AW_U32(r);
    /* the exact value lies between r and its neighbour towards x: step that way */
    bool away = (x > back) == ((b >> 31) == 0u);
    r = AW_F32(away ? b + 1u : b - 1u);
  }
  return r;
}
AW_FN u32 aw_d2h(double x) { return aw_f2h(aw_d2f_odd(x)); }
AW_FN u32 aw_d2bf(double x) { return aw_f2bf(aw_d2f_odd(x)); }
/* p + c rounded to odd (Knuth TwoSum), p and c exact doubles */
AW_FN double aw_sum_odd(double p, double c) {
  double s = p + c, bb = s - p, err = (p - (s - bb)) + (c - bb);
  if (err != 0.0 && s - s == 0.0 && (AW_U64(s) & 1ul) == 0ul) {
    u64 b = AW_U64(s);
    bool away = (err > 0.0) == ((b >> 63) == 0ul);
    s = AW_F64(away ? b + 1ul : b - 1ul);
  }
  return s;
}
AW_FN double aw_i64_odd(i64 v) { return aw_sum_odd((double)(v >> 32) * 4294967296.0, (double)(v & 0xFFFFFFFFl)); }
AW_FN double aw_u64_odd(u64 v) { return aw_sum_odd((double)(v >> 32) * 4294967296.0, (double)(v & 0xFFFFFFFFul)); }
AW_FN u32 aw_fma16(float a, float b, float c, bool bf) {
  double s = aw_sum_odd((double)a * (double)b, (double)c);
  return bf ? aw_d2bf(s) : aw_d2h(s);
}
AW_FN u32 aw_d2i32(double x) {
  if (x != x || (x > -1.0 && x < 1.0)) return 0u; if (x >= 2147483647.0) return 0x7FFFFFFFu;
  if (x <= -2147483648.0) return 0x80000000u; return (u32)(i32)x;
}
AW_FN u32 aw_d2u32(double x) {
  if (x != x || x <= 0.0) return 0u; if (x >= 4294967295.0) return 0xFFFFFFFFu; return (u32)x;
}
AW_FN u64 aw_d2i64(double x) {
  if (x != x || (x > -1.0 && x < 1.0)) return 0ul; if (x >= 9223372036854775808.0) return 0x7FFFFFFFFFFFFFFFul;
  if (x <= -9223372036854775808.0) return 0x8000000000000000ul; return (u64)(i64)x;
}
AW_FN u64 aw_d2u64(double x) {
  if (x != x || x <= 0.0) return 0ul; if (x >= 18446744073709551616.0) return 0xFFFFFFFFFFFFFFFFul;
  return (u64)x;
}
#endif
"""

# --------------------------------------------------------------------------- support table

_CANON16 = {T.F16: "0x7E00u", T.BF16: "0x7FC0u"}


def _cvt_needs_f64(defn: InstrDef) -> bool:
    dst, src = defn.type, defn.src_type
    if T.F64 in (dst, src):
        return True
    # int -> f16/bf16 rounds through f64 (round to odd)
    return dst in (T.F16, T.BF16) and src is not None and not src.is_float


def unsupported_reason(defn: InstrDef, features: Features = Features()) -> str | None:
    """Why ``defn`` cannot be rendered for a device with ``features``, or None when it can.

    Every mnemonic of the instruction table is either handled here or refused with a reason
    (tests/test_cfamily.py enforces it)."""
    if defn.op not in _HANDLERS:
        return f"{defn.mnemonic}: no C-family renderer for operation {defn.op!r}"
    if not features.fp64:
        uses_f64 = T.F64 in (defn.type, defn.src_type)
        if uses_f64 or (defn.op == "cvt" and _cvt_needs_f64(defn)) or (
                defn.op == "fma" and defn.type in (T.F16, T.BF16, T.F16X2, T.BF16X2)):
            return f"{defn.mnemonic} needs double precision (device has no fp64)"
    if defn.flags & Flag.WAVE_COLLECTIVE and not features.wave_widths:
        return f"{defn.mnemonic} needs sub-groups (device has none)"
    return None


# --------------------------------------------------------------------------- renderer state

#: a device with everything (the default of the render functions)
FULL_FEATURES = Features()


@dataclass
class _Frame:
    """One open structured construct in the mask-stack lowering."""

    kind: str  # "if", "loop", "call"
    n: int


@dataclass(frozen=True)
class CKernel:
    """Launch information of one rendered kernel.

    Attributes:
        name: WAVE kernel name; ``c_name`` the C function name.
        params: ``(wave arg name, kind)`` in C parameter order, kind ``buffer``, ``u32``
            or ``u64``; three ``u32`` workgroup-size parameters follow them.
        wave_mode: True when the mask-stack lowering is used (the workgroup is padded to
            a multiple of W and the sub-group size is forced to W).
    """

    name: str
    c_name: str
    params: tuple[tuple[str, str], ...]
    wave_mode: bool
    local_memory: int
    #: bounds-checked build (:mod:`anywave.backends.bounds`): after the workgroup sizes, one
    #: ``u64`` byte size per buffer argument (ABI order), then the error record buffer
    checked: bool = False
    #: the guarded accesses, indexed by the site number an error record holds
    sites: tuple = ()


@dataclass(frozen=True)
class CProgram:
    """A rendered module: C ``text`` for one dialect and W, the launchable kernels and the
    kernels refused (name -> reason)."""

    text: str
    dialect: str
    wave_width: int
    kernels: dict[str, CKernel] = field(default_factory=dict)
    refused: dict[str, str] = field(default_factory=dict)

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.text.encode()).hexdigest()


def c_name(kernel: str) -> str:
    """A C identifier for a WAVE kernel name (WAVE names may contain dots)."""
    out = "".join(ch if ch.isalnum() or ch == "_" else "_" for ch in kernel)
    return "aw_k_" + out + "_" + hashlib.sha1(kernel.encode()).hexdigest()[:6]


def uses_wave_ops(module: Module, code: list[Instruction], seen: set[int] | None = None) -> bool:
    """Whether ``code`` (or a function it calls) contains a wave-collective instruction."""
    seen = set() if seen is None else seen
    for ins in code:
        if ins.defn.flags & Flag.WAVE_COLLECTIVE:
            return True
        if ins.defn.op == "call":
            f = int(ins.operands[0])
            if f not in seen:
                seen.add(f)
                if uses_wave_ops(module, module.functions[f].code, seen):
                    return True
    return False


class _KernelRenderer:
    def __init__(self, d: Dialect, feats: Features, module: Module, kernel: Kernel, W: int,
                 checked: bool = False) -> None:
        self.d, self.f, self.m, self.k, self.W = d, feats, module, kernel, W
        self.checked = checked
        self.sites: list = []
        self.labels = {id(kernel.code): f"kernel {kernel.name!r}",
                       **{id(f.code): f"function {f.name!r}" for f in module.functions}}
        self.cur: tuple[str, int] = (self.labels[id(kernel.code)], 0)
        self.wave = uses_wave_ops(module, kernel.code)
        self.lines: list[str] = []
        self.ind = 1
        self.n = 0
        self.frames: list[_Frame] = []
        self.ret_labels: list[int] = []
        self.bufname = {i: f"aw_b{i}" for i, a in enumerate(kernel.args) if a.kind is ArgKind.BUFFER}
        self.scal = {i: f"aw_s{i}" for i, a in enumerate(kernel.args) if a.kind is ArgKind.SCALAR}
        self.locations = False
        self.last_loc: object = None

    # ---- small helpers
    def emit(self, line: str) -> None:
        self.lines.append("  " * self.ind + line)

    def fresh(self) -> int:
        self.n += 1
        return self.n

    @staticmethod
    def p(pr: Pred) -> str:
        return ("!" if pr.negated else "") + f"p{pr.index}"

    @staticmethod
    def u64(r: int) -> str:
        return f"(((u64)r{r + 1} << 32) | (u64)r{r})"

    def fval(self, r: int, t: T) -> str:
        """A float register value in its compute type (float; double for f64)."""
        if t is T.F32:
            return f"AW_F32(r{r})"
        if t is T.F64:
            return f"AW_F64({self.u64(r)})"
        if t is T.F16:
            return f"aw_h2f(r{r})"
        if t is T.BF16:
            return f"aw_bf2f(r{r})"
        raise AssertionError(t)

    @staticmethod
    def fbits(expr: str, t: T) -> str:
        """Compute-type value -> register bits (u32, or u64 for f64), NaN canonical."""
        return {T.F32: "aw_c32({})", T.F64: "aw_c64({})", T.F16: "aw_f2h({})",
                T.BF16: "aw_f2bf({})"}[t].format(expr)

    def set64(self, r: int, expr: str) -> list[str]:
        v = f"aw_t{self.fresh()}"
        return [f"u64 {v} = {expr};", f"r{r} = (u32){v};", f"r{r + 1} = (u32)({v} >> 32);"]

    def set_t(self, r: int, t: T, expr: str) -> list[str]:
        """Write a value of integer type t (u32/u64 expression) to r / the pair at r."""
        return self.set64(r, expr) if t.bits == 64 else [f"r{r} = (u32)({expr});"]

    def ival(self, r: int, t: T) -> str:
        if t.bits == 64:
            return f"((i64){self.u64(r)})" if t.is_signed else self.u64(r)
        return f"((i32)r{r})" if t.is_signed else f"r{r}"

    # ---- addresses
    def daddr(self, a: DeviceAddr, wide: bool) -> str:
        off = self.u64(a.reg) if wide else f"(u64)r{a.reg}"
        return f"({self.bufname[a.buffer]} + ({off} + (u64)(i64){a.offset}))"

    def laddr(self, a: LocalAddr) -> str:
        return f"(aw_lm + ((u32)r{a.reg} + (u32){a.offset & 0xFFFFFFFF}u))"

    # ---- the walk
    def render(self) -> tuple[str, CKernel]:
        d, k, W = self.d, self.k, self.W
        params, pinfo = [], []
        for i, a in enumerate(k.args):
            if a.kind is ArgKind.BUFFER:
                params.append(d.buffer_param(self.bufname[i]))
                pinfo.append((a.name, "buffer"))
            elif a.type.bits == 64:
                params.append(d.u64_param(self.scal[i]))
                pinfo.append((a.name, "u64"))
            else:
                params.append(d.u32_param(self.scal[i]))
                pinfo.append((a.name, "u32"))
        params += [d.u32_param("aw_wgx"), d.u32_param("aw_wgy"), d.u32_param("aw_wgz")]
        if self.checked:
            from anywave.backends.bounds import checked_params

            params += checked_params(self)
        cn = c_name(k.name)
        head = [d.kernel_open(cn, params, W, self.wave, k.local_memory)]
        pre = d.kernel_preamble(W, self.wave)
        if pre:
            self.emit(pre)
        if k.local_memory:
            self.emit(d.local_decl(k.local_memory))
        self.emit(f"const u32 aw_tl = (u32)({d.local_linear_id});")
        self.emit("const u32 aw_n = aw_wgx * aw_wgy * aw_wgz;")
        nreg = max(1, k.registers)
        self.emit("u32 " + ", ".join(f"r{i} = 0u" for i in range(nreg)) + ";")
        self.emit("bool " + ", ".join(f"p{i} = false" for i in range(8)) + ";")
        self.emit("(void)aw_n;")
        if self.checked:
            self.emit(f"{d.global_ptr('u32')} aw_err = ({d.global_ptr('u32')})aw_errb;")
        for line in cfamily_mma.declarations(self.m, k.code, W):  # fragment slots (spec 8.14)
            self.emit(line)
        if self.wave:
            self.emit("bool act = aw_tl < aw_n;")
            self.emit("bool halted = !act;")
            self.emit(f"const u32 aw_lane = aw_tl % {W}u;")
        self.body(k.code, in_func=False)
        self.ind = 0
        text = "\n".join(head + self.lines + ["}", ""])
        return text, CKernel(k.name, cn, tuple(pinfo), self.wave, k.local_memory, self.checked, tuple(self.sites))

    def gone(self) -> str:
        """Lanes that left the innermost enclosing construct (active at its start, no longer)."""
        parts = ["halted"]
        for fr in reversed(self.frames):
            if fr.kind == "loop":
                parts += [f"brk{fr.n}", f"cnt{fr.n}"]
                break
            if fr.kind == "call":
                break
        for fr in reversed(self.frames):
            if fr.kind == "call":
                parts.append(f"ret{fr.n}")
                break
        return " || ".join(parts)

    def body(self, code: list[Instruction], in_func: bool) -> None:
        label = self.labels.get(id(code), "function")
        for pc, ins in enumerate(code):
            self.cur = (label, pc)
            if self.locations and ins.loc is not None and ins.loc != self.last_loc:
                self.last_loc = ins.loc  # source-line comments (render(locations=True)) for readers/the explorer
                self.emit(f"/* {ins.loc.file}:{ins.loc.line} */")
            self.instr(ins, in_func)

    def exec_cond(self, ins: Instruction) -> str | None:
        g = self.p(ins.guard) if ins.guard is not None else None
        if self.wave:
            return f"act && {g}" if g else "act"
        return g

    def instr(self, ins: Instruction, in_func: bool) -> None:
        op = ins.defn.op
        if op in _CONTROL:
            (self.ctl_wave if self.wave else self.ctl_native)(ins, in_func)
            return
        if op == "barrier":
            self.emit(self.d.barrier)
            return
        if op == "fence":
            self.emit(self.d.fence(ins.operands[0], ins.operands[1]))
            return
        if ins.defn.flags & Flag.WAVE_COLLECTIVE:
            self.emit("{")
            self.ind += 1
            g = self.p(ins.guard) if ins.guard is not None else None
            self.emit(f"const bool ex = {'act && ' + g if g else 'act'};")
            for line in _HANDLERS[op](self, ins):
                self.emit(line)
            self.ind -= 1
            self.emit("}")
            return
        stmts = _HANDLERS[op](self, ins)
        if not stmts:
            return
        if self.checked and ins.defn.flags & (Flag.LOAD | Flag.STORE):
            from anywave.backends.bounds import guard_c

            stmts = guard_c(self, ins, stmts)
        cond = self.exec_cond(ins)
        self.emit(f"if ({cond}) {{" if cond else "{")
        self.ind += 1
        for line in stmts:
            self.emit(line)
        self.ind -= 1
        self.emit("}")

    # ---- native (per-thread) control flow
    def ctl_native(self, ins: Instruction, in_func: bool) -> None:
        op = ins.defn.op
        g = self.p(ins.guard) if ins.guard is not None else None
        when = (lambda s: f"if ({g}) {s}") if g else (lambda s: s)
        if op == "if":
            # The condition goes through a volatile copy: Intel's OpenCL CPU compiler (2026.2)
            # miscompiles some if/else on a predicate read again after the join (the predicate
            # read back true in lanes that ran the else arm); the copy keeps the optimiser from
            # correlating the branch with later reads of the predicate register.
            n = self.fresh()
            self.emit(f"volatile bool aw_if{n} = {self.p(ins.operands[0])};")
            self.emit(f"if (aw_if{n}) {{")
            self.ind += 1
        elif op == "else":
            self.ind -= 1
            self.emit("} else {")
            self.ind += 1
        elif op in ("endif", "endloop"):
            self.ind -= 1
            self.emit("}")
        elif op == "loop":
            self.emit("while (1) {")
            self.ind += 1
        elif op == "break":
            self.emit(when("break;"))
        elif op == "continue":
            self.emit(when("continue;"))
        elif op == "halt" or (op == "ret" and not self.ret_labels):
            self.emit(when("return;"))
        elif op == "ret":
            self.emit(when(f"goto aw_ret{self.ret_labels[-1]};"))
        elif op == "call":
            n = self.fresh()
            self.ret_labels.append(n)
            self.emit("{")
            self.ind += 1
            self.body(self.m.functions[int(ins.operands[0])].code, in_func=True)
            self.ind -= 1
            self.emit("}")
            self.emit(f"aw_ret{n}: ;")
            self.ret_labels.pop()
        elif op == "nop":
            pass

    # ---- mask-stack control flow (wave kernels)
    def ctl_wave(self, ins: Instruction, in_func: bool) -> None:
        op = ins.defn.op
        g = self.p(ins.guard) if ins.guard is not None else "true"
        if op == "if":
            n = self.fresh()
            self.frames.append(_Frame("if", n))
            self.emit("{")
            self.ind += 1
            # volatile copy of the condition: see ctl_native
            self.emit(f"volatile bool aw_if{n} = {self.p(ins.operands[0])};")
            self.emit(f"const bool is{n} = act; const bool ic{n} = aw_if{n};")
            self.emit(f"act = is{n} && ic{n};")
        elif op == "else":
            n = self.frames[-1].n
            self.emit(f"act = is{n} && !ic{n};")
        elif op == "endif":
            fr = self.frames.pop()
            gone = self.gone()
            self.emit(f"act = is{fr.n} && !({gone});")
            self.ind -= 1
            self.emit("}")
        elif op == "loop":
            n = self.fresh()
            outer = self.gone_outer()
            self.frames.append(_Frame("loop", n))
            self.emit("{")
            self.ind += 1
            self.emit(f"const bool ls{n} = act; bool brk{n} = false; bool cnt{n} = false;")
            self.emit("while (1) {")
            self.ind += 1
            self.emit(f"act = ls{n} && !brk{n} && !({outer}); cnt{n} = false;")
            self.emit(f"if (!({self.d.any_lane('act')})) break;")
        elif op == "endloop":
            fr = self.frames.pop()
            self.ind -= 1
            self.emit("}")
            self.emit(f"act = ls{fr.n} && !({self.gone_outer()});")
            self.ind -= 1
            self.emit("}")
        elif op in ("break", "continue"):
            n = next(fr.n for fr in reversed(self.frames) if fr.kind == "loop")
            flag = f"brk{n}" if op == "break" else f"cnt{n}"
            self.emit(f"{{ const bool b = act && {g}; {flag} = {flag} || b; act = act && !b; }}")
        elif op == "halt" or (op == "ret" and not any(fr.kind == "call" for fr in self.frames)):
            self.emit(f"{{ const bool b = act && {g}; halted = halted || b; act = act && !b; }}")
        elif op == "ret":
            n = next(fr.n for fr in reversed(self.frames) if fr.kind == "call")
            self.emit(f"{{ const bool b = act && {g}; ret{n} = ret{n} || b; act = act && !b; }}")
        elif op == "call":
            n = self.fresh()
            self.frames.append(_Frame("call", n))
            self.emit("{")
            self.ind += 1
            self.emit(f"const bool cs{n} = act; bool ret{n} = false;")
            self.body(self.m.functions[int(ins.operands[0])].code, in_func=True)
            self.frames.pop()
            self.emit(f"act = cs{n} && !({self.gone_outer()});")
            self.ind -= 1
            self.emit("}")
        elif op == "nop":
            pass

    def gone_outer(self) -> str:
        """Lanes that left through halt or a ret of the innermost enclosing function (what can
        remove a lane from a loop or call besides its own break)."""
        parts = ["halted"]
        for fr in reversed(self.frames):
            if fr.kind == "call":
                parts.append(f"ret{fr.n}")
                break
        return " || ".join(parts)


_CONTROL = {"if", "else", "endif", "loop", "endloop", "break", "continue", "call", "ret", "halt", "nop"}

# --------------------------------------------------------------------------- instruction handlers
# Each handler returns the C statements of one instruction (executed where the exec
# condition holds). Wave-collective handlers run in every lane with ``ex`` = executing.

_Handler = Callable[[_KernelRenderer, Instruction], list[str]]


def _int_bin(x: _KernelRenderer, ins: Instruction) -> list[str]:
    t = ins.defn.type
    op = ins.defn.op
    dreg, a, b = ins.operands
    wide = t.bits == 64
    ut, st_ = ("u64", "i64") if wide else ("u32", "i32")
    A, B = x.ival(a, T.U64 if wide else T.U32), x.ival(b, T.U64 if wide else T.U32)
    if op in ("add", "sub", "mul"):
        sym = {"add": "+", "sub": "-", "mul": "*"}[op]
        return x.set_t(dreg, t, f"({ut})({A} {sym} {B})")
    if op in ("min", "max"):
        cmp = "<" if op == "min" else ">"
        if t.is_signed:
            return x.set_t(dreg, t, f"(({st_}){A} {cmp} ({st_}){B} ? {A} : {B})")
        return x.set_t(dreg, t, f"({A} {cmp} {B} ? {A} : {B})")
    # div / rem with the spec's edge cases and a divisor that never traps
    if t.is_signed:
        mn = "((i64)0x8000000000000000ul)" if wide else "((i32)0x80000000u)"
        one = "(i64)1" if wide else "1"
        lines = [f"const {st_} xa = ({st_}){A}, xb = ({st_}){B};",
                 f"const bool bad = xb == 0 || (xa == {mn} && xb == -1);",
                 f"const {st_} sb = bad ? {one} : xb;"]
        if op == "div":
            res = f"xb == 0 ? ({ut})-1 : (bad ? ({ut})xa : ({ut})(xa / sb))"
        else:
            res = f"xb == 0 ? ({ut})xa : (bad ? ({ut})0 : ({ut})(xa % sb))"
    else:
        lines = [f"const {ut} xa = {A}, xb = {B};", f"const {ut} sb = xb == 0 ? 1 : xb;"]
        res = f"xb == 0 ? ({ut})~({ut})0 : xa / sb" if op == "div" else "xb == 0 ? xa : xa % sb"
    return lines + x.set_t(dreg, t, res)


def _int_un(x: _KernelRenderer, ins: Instruction) -> list[str]:
    t = ins.defn.type
    dreg, a = ins.operands
    wide = t.bits == 64
    ut, st_ = ("u64", "i64") if wide else ("u32", "i32")
    A = x.ival(a, T.U64 if wide else T.U32)
    if ins.defn.op == "neg":
        return x.set_t(dreg, t, f"({ut})0 - {A}")
    return x.set_t(dreg, t, f"(({st_}){A} < 0 ? ({ut})0 - {A} : {A})")


def _mulhi(x: _KernelRenderer, ins: Instruction) -> list[str]:
    dreg, a, b = ins.operands
    if ins.defn.type.is_signed:
        return [f"r{dreg} = (u32)(((i64)(i32)r{a} * (i64)(i32)r{b}) >> 32);"]
    return [f"r{dreg} = (u32)(((u64)r{a} * (u64)r{b}) >> 32);"]


def _mad(x: _KernelRenderer, ins: Instruction) -> list[str]:
    dreg, a, b, c = ins.operands
    return [f"r{dreg} = r{a} * r{b} + r{c};"]


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


def _shift(x: _KernelRenderer, ins: Instruction) -> list[str]:
    t = ins.defn.type
    dreg, a, b = ins.operands
    n = t.bits
    wide = n == 64
    A = x.u64(a) if wide else f"r{a}"
    ut, st_ = ("u64", "i64") if wide else ("u32", "i32")
    if ins.defn.op == "shl":
        res = f"r{b} >= {n}u ? ({ut})0 : ({A} << r{b})"
    elif t.is_signed:
        res = f"({ut})(({st_}){A} >> (r{b} >= {n - 1}u ? {n - 1}u : r{b}))"
    else:
        res = f"r{b} >= {n}u ? ({ut})0 : ({A} >> r{b})"
    return x.set_t(dreg, t, res)


def _bitop(x: _KernelRenderer, ins: Instruction) -> list[str]:
    t = ins.defn.type
    op = ins.defn.op
    if t is T.PRED:
        return _pred_op(x, ins)
    dreg, *src = ins.operands
    wide = t.bits == 64
    vals = [x.u64(r) if wide else f"r{r}" for r in src]
    if op == "not":
        return x.set_t(dreg, t, f"~{vals[0]}")
    sym = {"and": "&", "or": "|", "xor": "^"}[op]
    return x.set_t(dreg, t, f"{vals[0]} {sym} {vals[1]}")


def _bitcount(x: _KernelRenderer, ins: Instruction) -> list[str]:
    dreg, a = ins.operands
    op = ins.defn.op
    if op == "brev":
        return [f"r{dreg} = aw_brev(r{a});"]
    fn = {"popc": x.d.popcount, "clz": x.d.clz, "ctz": x.d.ctz}[op]
    return [f"r{dreg} = (u32){fn}(r{a});"]


def _setp(x: _KernelRenderer, ins: Instruction) -> list[str]:
    t = ins.defn.type
    var = ins.defn.variant
    dreg, a, b = ins.operands
    if t.is_float:
        A, B = x.fval(a, t), x.fval(b, t)
        if var == "unord":
            return [f"const {'double' if t is T.F64 else 'float'} fa = {A}, fb = {B};",
                    f"p{dreg} = fa != fa || fb != fb;"]
    else:
        A, B = x.ival(a, t), x.ival(b, t)
    sym = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}[var]
    return [f"p{dreg} = {A} {sym} {B};"]


def _selp(x: _KernelRenderer, ins: Instruction) -> list[str]:
    dreg, a, b, pr = ins.operands
    c = x.p(pr)
    if ins.defn.type.bits == 64:
        return [f"const u32 lo = {c} ? r{a} : r{b}, hi = {c} ? r{a + 1} : r{b + 1};",
                f"r{dreg} = lo;", f"r{dreg + 1} = hi;"]
    return [f"r{dreg} = {c} ? r{a} : r{b};"]


def _pred_op(x: _KernelRenderer, ins: Instruction) -> list[str]:
    op = ins.defn.op
    if op == "setp_const":
        return [f"p{ins.operands[0]} = {'true' if ins.defn.variant == 'true' else 'false'};"]
    if op == "mov":
        dreg, a = ins.operands
        return [f"p{dreg} = {x.p(a)};"]
    dreg, a, b = ins.operands
    sym = {"and": "&&", "or": "||", "xor": "!="}[op]
    return [f"p{dreg} = ({x.p(a)}) {sym} ({x.p(b)});"]


def _cvt(x: _KernelRenderer, ins: Instruction) -> list[str]:
    dst, src = ins.defn.type, ins.defn.src_type
    dreg, a = ins.operands
    if src.is_float:
        v = x.fval(a, src)
        if dst.is_float:
            if dst is T.F64:
                return x.set64(dreg, f"aw_c64((double){v})")
            if src is T.F64:
                e = {T.F32: f"aw_c32((float){v})", T.F16: f"aw_d2h({v})", T.BF16: f"aw_d2bf({v})"}[dst]
                return [f"r{dreg} = {e};"]
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
        conv = "aw_d2h" if dst is T.F16 else "aw_d2bf"
        if src.bits == 64:
            dv = f"aw_i64_odd({v})" if src.is_signed else f"aw_u64_odd({v})"
        else:
            dv = f"(double)({v})"
        return [f"r{dreg} = {conv}({dv});"]
    if dst.bits == 64:
        return x.set64(dreg, f"(u64)(i64)({v})" if src.is_signed else f"(u64)({v})")
    return [f"r{dreg} = (u32)({v});"]


def _cvt_pack(x: _KernelRenderer, ins: Instruction) -> list[str]:
    dreg, a, b = ins.operands
    fn = "aw_f2h" if ins.defn.type is T.F16X2 else "aw_f2bf"
    return [f"r{dreg} = {fn}(AW_F32(r{a})) | ({fn}(AW_F32(r{b})) << 16);"]


def _mov(x: _KernelRenderer, ins: Instruction) -> list[str]:
    if ins.defn.type is T.PRED:
        return _pred_op(x, ins)
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


_WRED_INT = {
    ("add", False): ("0u", "s + o"), ("add", True): ("0u", "s + o"),
    ("min", False): ("0xFFFFFFFFu", "(o < s ? o : s)"), ("min", True): ("0x7FFFFFFFu", "((i32)o < (i32)s ? o : s)"),
    ("max", False): ("0u", "(o > s ? o : s)"), ("max", True): ("0x80000000u", "((i32)o > (i32)s ? o : s)"),
    ("and", False): ("0xFFFFFFFFu", "(s & o)"), ("or", False): ("0u", "(s | o)"), ("xor", False): ("0u", "(s ^ o)"),
}


def _wred(x: _KernelRenderer, ins: Instruction) -> list[str]:
    dreg, a = ins.operands
    t = ins.defn.type
    op = ins.defn.variant
    lines = []
    k = 1
    if t is T.F32:
        ident = "-0.0f" if op == "add" else "AW_F32(0x7FC00000u)"
        comb = {"add": "s + o", "min": "aw_minnum(s, o)", "max": "aw_maxnum(s, o)"}[op]
        lines.append(f"float s = ex ? AW_F32(r{a}) : {ident};")
        while k < x.W:
            lines.append(f"{{ const float o = AW_F32({x.d.shuffle('AW_U32(s)', f'aw_lane ^ {k}u')}); s = {comb}; }}")
            k *= 2
        lines.append(f"if (ex) r{dreg} = aw_c32(s);")
        return lines
    ident, comb = _WRED_INT[(op, t.is_signed)]
    lines.append(f"u32 s = ex ? r{a} : {ident};")
    while k < x.W:
        lines.append(f"{{ const u32 o = {x.d.shuffle('s', f'aw_lane ^ {k}u')}; s = {comb}; }}")
        k *= 2
    lines.append(f"if (ex) r{dreg} = s;")
    return lines


def _wscan(x: _KernelRenderer, ins: Instruction) -> list[str]:
    dreg, a = ins.operands
    t = ins.defn.type
    incl = ins.defn.variant == "incl"
    lines = []
    k = 1
    if t is T.F32:
        lines.append(f"float s = ex ? AW_F32(r{a}) : -0.0f;")
        while k < x.W:
            src = x.d.shuffle("AW_U32(s)", f"aw_lane >= {k}u ? aw_lane - {k}u : aw_lane")
            lines.append(f"{{ const float o = AW_F32({src}); if (aw_lane >= {k}u) s = o + s; }}")
            k *= 2
        if not incl:
            lines.append(f"{{ const float o = AW_F32({x.d.shuffle('AW_U32(s)', 'aw_lane > 0u ? aw_lane - 1u : 0u')});"
                         " s = aw_lane == 0u ? 0.0f : o; }")
        lines.append(f"if (ex) r{dreg} = aw_c32(s);")
        return lines
    lines.append(f"u32 s = ex ? r{a} : 0u;")
    while k < x.W:
        lines.append(f"{{ const u32 o = {x.d.shuffle('s', f'aw_lane >= {k}u ? aw_lane - {k}u : aw_lane')};"
                     f" if (aw_lane >= {k}u) s = o + s; }}")
        k *= 2
    if not incl:
        lines.append(f"{{ const u32 o = {x.d.shuffle('s', 'aw_lane > 0u ? aw_lane - 1u : 0u')};"
                     " s = aw_lane == 0u ? 0u : o; }")
    lines.append(f"if (ex) r{dreg} = s;")
    return lines


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


_HANDLERS: dict[str, _Handler] = {
    "add": lambda x, i: (_float_op if i.defn.type.is_float else _int_bin)(x, i),
    "sub": lambda x, i: (_float_op if i.defn.type.is_float else _int_bin)(x, i),
    "mul": lambda x, i: (_float_op if i.defn.type.is_float else _int_bin)(x, i),
    "div": lambda x, i: (_float_op if i.defn.type.is_float else _int_bin)(x, i),
    "rem": _int_bin,
    "min": lambda x, i: (_float_op if i.defn.type.is_float else _int_bin)(x, i),
    "max": lambda x, i: (_float_op if i.defn.type.is_float else _int_bin)(x, i),
    "neg": lambda x, i: (_sign_op if i.defn.type.is_float else _int_un)(x, i),
    "abs": lambda x, i: (_sign_op if i.defn.type.is_float else _int_un)(x, i),
    "mulhi": _mulhi, "mad": _mad, "fma": _float_op, "sqrt": _float_op, "floor": _float_op,
    "ceil": _float_op, "trunc": _float_op, "rint": _float_op,
    "ex2": _approx, "lg2": _approx, "sin": _approx, "cos": _approx, "rsqrt": _approx, "rcp": _approx,
    "tanh": _approx,
    "and": _bitop, "or": _bitop, "xor": _bitop, "not": _bitop, "shl": _shift, "shr": _shift,
    "popc": _bitcount, "clz": _bitcount, "ctz": _bitcount, "brev": _bitcount,
    "setp": _setp, "selp": _selp, "setp_const": _pred_op, "mov": _mov,
    "ld": _ld, "st": _st, "atom": _atom, "red": _atom,
    "shfl": _shfl, "bcast": _bcast, "ballot": _ballot, "any": _any_all, "all": _any_all,
    "wred": _wred, "wscan": _wscan, "mma": _mma, **cfamily_mma.HANDLERS, **cfamily_async.HANDLERS,
    "cvt": _cvt, "cvt_pack": _cvt_pack, "movi": _movi, "mov_sr": _mov_sr, "ldarg": _ldarg,
    # handled by the walk itself
    "barrier": _no_stmt, "fence": _no_stmt,
    **{op: _no_stmt for op in _CONTROL},
}


# --------------------------------------------------------------------------- entry points

def check_supported(module: Module, features: Features = Features(),
                    dialect: Dialect | None = None) -> dict[str, list[str]]:
    """Per kernel, every instruction (its own or in a function it calls) that cannot be
    rendered for ``features``, as messages; kernels with no problem are absent."""
    out: dict[str, list[str]] = {}
    for k in module.kernels:
        probs = []
        for owner, code in kernel_bodies(module, k):
            for i, ins in enumerate(code):
                why = unsupported_reason(ins.defn, features)
                if why is None and dialect is not None:
                    why = dialect.refuse(ins)
                if why:
                    probs.append(f"{owner}, instruction {i}: {why}")
        if probs:
            out[k.name] = probs
    return out


def render(module: Module, dialect: Dialect, wave_width: int, features: Features = Features(),
           kernels: Sequence[str] | None = None, checked: bool = False, *, locations: bool = False) -> CProgram:
    """Render the kernels of ``module`` (all, or the named ones) as one program in ``dialect``.

    Args:
        module: a valid WAVE module.
        dialect: the target dialect table.
        wave_width: W, one of 8, 16, 32, 64 (the sub-group size forced on wave kernels).
        features: the device's features; kernels needing more are refused (listed in
            ``CProgram.refused`` with the reason) instead of rendered.
        kernels: restrict to these kernel names.
        checked: a bounds-checked build (:mod:`anywave.backends.bounds`): every memory access
            is guarded and the first failure recorded; kernels take hidden parameters.
        locations: precede the code of each source line with a ``/* file:line */`` comment
            (from the debug table).

    Raises:
        VerifyError: ``module`` breaks a rule of the spec (it is verified first, once per
            module object).
        CFamilyError: W not supported, or an unknown kernel name.
    """
    from anywave.binary.verify import verify_cached

    verify_cached(module)
    if wave_width not in WAVE_WIDTHS:
        raise CFamilyError(dialect.name, [f"wave width {wave_width!r} is not one of {WAVE_WIDTHS}"])
    names = [k.name for k in module.kernels]
    if kernels is not None:
        bad = [n for n in kernels if n not in names]
        if bad:
            raise CFamilyError(dialect.name, [f"no kernel {bad[0]!r}; the module has {names}"])
    problems = check_supported(module, features, dialect)
    parts = [dialect.header(features), PRELUDE]
    out: dict[str, CKernel] = {}
    refused: dict[str, str] = {}
    for k in module.kernels:
        if kernels is not None and k.name not in kernels:
            continue
        if k.name in problems:
            refused[k.name] = "; ".join(problems[k.name][:3])
            continue
        wave = uses_wave_ops(module, k.code)
        if wave and wave_width not in features.wave_widths:
            refused[k.name] = (f"kernel {k.name!r} uses wave operations but the device cannot form "
                               f"sub-groups of {wave_width} (it offers {list(features.wave_widths)})")
            continue
        renderer = _KernelRenderer(dialect, features, module, k, wave_width, checked)
        renderer.locations = locations
        text, info = renderer.render()
        parts.append(f"/* WAVE kernel {k.name} */\n" + text)
        out[k.name] = info
    return CProgram("\n".join(parts), dialect.name, wave_width, out, refused)


def padded_workgroup(kernel: CKernel, workgroup: Sequence[int], wave_width: int) -> int:
    """Threads to launch per workgroup (one dimension): x*y*z, rounded up to a multiple of W for
    wave kernels (the padding lanes never become active, like the spec's non-existent lanes)."""
    n = int(workgroup[0]) * int(workgroup[1]) * int(workgroup[2])
    if kernel.wave_mode:
        return -(-n // wave_width) * wave_width
    return n


#: What a further dialect costs: the table below is CUDA C in outline (not registered or
#: tested; HIP is the same with ``__shfl_sync`` spelled ``__shfl``). Everything else --
#: control flow, integer edge cases, float rounding, wave-op lane rules -- is shared.
EXAMPLE_CUDA_C_SKETCH = """
Dialect(name="cuda-c",
  header=lambda f: "typedef unsigned int u32; ... #define AW_F32(u) __uint_as_float(u) ...",
  kernel_open=lambda n, ps, W, wave, lm: f'extern "C" __global__ void {n}({", ".join(ps)}) {{',
  kernel_preamble=lambda W, wave: "", global_ptr=lambda t: f"{t}*", local_ptr=lambda t: f"{t}*",
  buffer_param=lambda n: f"u8* {n}", u32_param=lambda n: f"u32 {n}", u64_param=lambda n: f"u64 {n}",
  local_decl=lambda n: f"__shared__ __align__(16) u8 aw_lm[{n}];",
  local_linear_id="threadIdx.x", group_id=lambda i: "blockIdx." + "xyz"[i],
  num_groups=lambda i: "gridDim." + "xyz"[i], barrier="__syncthreads();",
  fence=lambda s, o: "__threadfence();", atomic_rmw=..., atomic_cas=...,
  math={"sqrt": "__fsqrt_rn", "fma": "fma", ...}, popcount="__popc", clz="__clz", ctz="__ffs-1",
  shuffle=lambda v, i: f"__shfl_sync(0xFFFFFFFFu, {v}, {i})",
  ballot=lambda b: f"(u64)__ballot_sync(0xFFFFFFFFu, {b})", any_lane=lambda b: f"__any_sync(0xFFFFFFFFu, {b})",
  wave_barrier="__syncwarp();")
"""
