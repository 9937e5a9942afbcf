"""One renderer for the C-like dialects (OpenCL C, SYCL, and later HIP, Metal, CUDA C).

The pattern is tinygrad's ``CStyleLanguage`` (design.md §3.5): :class:`CRenderer` walks a
WAVE module once and writes C; everything that differs between dialects -- how to spell a
kernel signature, a pointer into an address space, a bit cast, a barrier, an atomic, a
sub-group shuffle -- comes from a :class:`Dialect`, a small declarative table of strings
and lambdas. ``backends/opencl.py`` and ``backends/sycl.py`` are one screenful each; a new
dialect is another such table (``backends/hip.py`` and ``backends/metal.py`` are two more;
docs/internals.md, "Adding a backend", lists what one costs).

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
* Control flow is lowered by :mod:`anywave.backends.lowering.control` (shared with PTX). A
  kernel without wave operations uses C's own ``if``/``while(1)``/``break``/``continue``/
  ``return``; ``call`` is inlined (functions share the caller's registers) and ``ret`` jumps to
  the end of the inlined body. A kernel with wave operations is lowered with the spec's
  mask-stack machine kept per lane (``act``, and per depth ``awg_fo``/``awg_fp``/``awg_fc``):
  every lane of a sub-group walks the same program, so the sub-group built-ins are always
  called in converged control flow and the set of executing lanes is exactly the spec's. A
  region no lane is active in is skipped by the whole sub-group (a sub-group vote), and a
  loop repeats while some lane of the wave remains. The workgroup is launched as one linear
  dimension padded to a multiple of W, so every sub-group is full: padding lanes never
  become active, exactly like the spec's non-existent lanes.
* Wave operations use only shuffle-by-index and a 64-bit ballot (built from a sub-group
  reduction or the dialect's ballot); f32 reductions and scans are written in the spec's
  butterfly / Kogge-Stone order, never the vendor's reduce/scan (whose order is unspecified).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from anywave.backends import cfamily_mma
from anywave.backends.cfamily_ops import C_DISPATCH, handler
from anywave.backends.cfamily_prelude import PRELUDE, gen_name
from anywave.backends.lowering.arith import needs_f64
from anywave.backends.lowering.control import ControlWalk, Frame, Mask, uses_wave_ops
from anywave.backends.lowering.need import Need, unpredicated
from anywave.binary.module import DeviceAddr, Instruction, Kernel, LocalAddr, Module, Pred, kernel_bodies
from anywave.errors import WaveError
from anywave.isa.table import Flag, InstrDef
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
    """

    fp64: bool = True
    wave_widths: tuple[int, ...] = WAVE_WIDTHS
    #: the device is a CPU (pocl, Intel's CPU runtimes): a fragment's per-lane element loops stay
    #: loops (``_Pragma("unroll 1")``). Unrolled, they let a GPU keep the per-lane array in
    #: registers; on a CPU compiler they only cost build time: pocl's -O2 build of the
    #: conformance group ``mma_acc`` (8 kernels, W = 16) took 56 s unrolled and 10 s rolled here
    cpu_device: bool = False


#: :attr:`Dialect.spin_side_effect` of the C++ dialects: a volatile store, a side effect in
#: the sense of C++ [intro.progress] that costs one private store per turn of a loop that never ends
SPIN_SIDE_EFFECT = "{ volatile u32 aw_spin = 0u; (void)aw_spin; }"


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
    #: ``barrier.wave`` (spec §7.10): a sub-group barrier that is also an acq_rel fence on local
    #: *and* device memory among the sub-group's work-items; called by every lane (the kernel is
    #: lowered with the mask-stack machine, so control flow is converged)
    wave_sync: str
    build_notes: str = ""
    #: native rotate left ``(u32 value, u32 count) -> u32`` by the count mod 32 (OpenCL C
    #: ``rotate``); None: the body of ``rotl.b32`` (two shifts and an or) is rendered instead
    rotate_left: Callable[[str, str], str] | None = None
    #: statement opening the body of a loop that can never end (no ``break``/``ret``/``halt``
    #: inside, :func:`anywave.backends.lowering.control.loop_may_exit`). C++ lets a compiler
    #: assume every loop without a side effect ends ([intro.progress]; clang then deletes the
    #: loop and falls into whatever code follows, a crash): the C++ dialects put a volatile
    #: access here, so a spinning WAVE kernel spins. C (OpenCL C) exempts ``while (1)``.
    spin_side_effect: str = ""
    #: the language has no ``goto`` (Metal: MSL leaves it out of its C++ base): a ``ret`` in an
    #: inlined call leaves through a one-trip loop (the control walk's ``goto_free`` form,
    #: :mod:`anywave.backends.lowering.control`) instead of ``goto`` the call's end label
    goto_free: bool = False
    #: why this dialect cannot honour one instruction (an operand it has no spelling for, e.g. a
    #: memory order), naming the instruction; None when it can. Per-instruction-kind refusals
    #: (fp64, sub-groups) come from :func:`unsupported_reason` and ``Features`` instead.
    refuse: Callable[[Instruction], str | None] = lambda ins: None
    #: a 16-byte vector of four u32 for 128-bit accesses (``uint4``), its component i of a
    #: value, and its construction from four u32 expressions; "" keeps four 32-bit accesses
    vec4: str = ""
    vec4_get: Callable[[str, int], str] = lambda v, i: f"{v}.{'xyzw'[i]}"
    vec4_make: Callable[[list[str]], str] = lambda xs: "(uint4)(" + ", ".join(xs) + ")"


# --------------------------------------------------------------------------- support table



def unsupported_reason(defn: InstrDef, features: Features = Features()) -> str | None:
    """Why ``defn`` cannot be rendered for a device with ``features``, or None when it can.

    Every mnemonic of the instruction table is either handled here or refused with a reason
    (tests/test_cfamily.py enforces it)."""
    if not C_DISPATCH.handles(defn):
        return f"{defn.mnemonic}: no C-family renderer for {defn.sem!r}"
    if not features.fp64:
        uses_f64 = T.F64 in (defn.type, defn.src_type)
        if uses_f64 or (defn.op == "cvt" and needs_f64(defn.src_type, defn.type)) or (
                defn.op == "fma" and defn.type in (T.F16, T.BF16, T.F16X2, T.BF16X2)):
            return f"{defn.mnemonic} needs double precision (device has no fp64)"
    if defn.flags & Flag.WAVE_COLLECTIVE and not features.wave_widths:
        return f"{defn.mnemonic} needs sub-groups (device has none)"
    return None


# --------------------------------------------------------------------------- renderer state

#: a device with everything (the default of the render functions)
FULL_FEATURES = Features()


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
        self.bufname = {i: gen_name("b", i) for i, a in enumerate(kernel.args) if a.kind is ArgKind.BUFFER}
        self.scal = {i: gen_name("s", i) for i, a in enumerate(kernel.args) if a.kind is ArgKind.SCALAR}
        self.locations = False
        self.last_loc: object = None
        #: the walk (lowering.control): constructs without wave operations or barriers are
        #: per-thread islands of a mask-stack kernel; conditions of W and constants are folded
        self.wave_width = W
        self.in_island = False
        self.pos = -1
        self.need: Need | None = None
        self.walk: ControlWalk | None = None

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
        v = gen_name("t", self.fresh())
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
        for line in cfamily_mma.declarations(self.m, k.code, W, self.f.cpu_device):  # fragment slots (spec 8.14)
            self.emit(line)
        if self.wave:
            self.emit("bool act = aw_tl < aw_n;")  # padding lanes are never active
            self.emit(f"const u32 aw_lane = aw_tl % {W}u;")
        at = len(self.lines)
        if self.wave:
            self.need = Need(self.m, k.code, islands=self.islands, wave_width=W,
                             island_barriers=self.island_barriers)
        walk = self.walk = ControlWalk(self.m, self, self.wave, goto_free=d.goto_free)
        walk.run(k.code)
        if self.wave:  # the mask-stack frames (lowering.control), one set per depth
            names = ["aw_x"] + [gen_name(v, i) for i in range(walk.max_depth) for v in ("fo", "fp", "fc")]
            self.lines.insert(at, "  " + "bool " + ", ".join(f"{n} = false" for n in names) + ";")
        self.ind = 0
        text = "\n".join(head + self.lines + ["}", ""])
        return text, CKernel(k.name, cn, tuple(pinfo), self.wave, k.local_memory, self.checked, tuple(self.sites))

    # ---- the walk (lowering.Spelling)
    def body_begin(self, code: Sequence[Instruction]) -> None:
        pass

    def body_end(self, code: Sequence[Instruction]) -> None:
        pass

    def at(self, code: Sequence[Instruction], pc: int) -> None:
        ins = code[pc]
        self.cur = (self.labels.get(id(code), "function"), pc)
        if self.locations and ins.loc is not None and ins.loc != self.last_loc:
            self.last_loc = ins.loc  # source-line comments (render(locations=True)) for readers/the explorer
            self.emit(f"/* {ins.loc.file}:{ins.loc.line} */")

    def frame_tag(self, kind: str) -> str:
        return str(self.fresh())

    def exec_cond(self, ins: Instruction) -> str | None:
        g = self.p(ins.guard) if ins.guard is not None else None
        if self.wave and not self.in_island:
            assert self.walk is not None
            if unpredicated(ins, self.walk, self.need, self.pos):  # lowering.need
                return g
            return f"act && {g}" if g else "act"
        return g

    def instruction(self, ins: Instruction) -> None:
        self.pos += 1
        sem = ins.defn.sem
        if sem == "sync.barrier":
            self.emit(self.d.barrier)
            return
        if sem == "sync.fence":
            self.emit(self.d.fence(ins.operands[0], ins.operands[1]))
            return
        if sem == "sync.wave_barrier":
            self.emit(self.d.wave_sync)
            return
        if ins.defn.flags & Flag.WAVE_COLLECTIVE:
            self.emit("{")
            self.ind += 1
            g = self.p(ins.guard) if ins.guard is not None else None
            self.emit(f"const bool ex = {'act && ' + g if g else 'act'};")
            for line in handler(ins.defn)(self, ins):
                self.emit(line)
            self.ind -= 1
            self.emit("}")
            return
        stmts = handler(ins.defn)(self, ins)
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

    def _open(self, head: str) -> None:
        self.emit(head)
        self.ind += 1

    def _close(self, tail: str = "}") -> None:
        self.ind -= 1
        self.emit(tail)

    def _when(self, guard: Pred | None, stmt: str) -> None:
        self.emit(f"if ({self.p(guard)}) {stmt}" if guard is not None else stmt)

    # ---- per-thread control flow: C's own constructs
    def thread_if(self, f: Frame, cond: Pred) -> None:
        # The condition goes through a volatile copy: Intel's OpenCL CPU compiler (2026.2)
        # miscompiles some if/else on a predicate read again after the join (the predicate
        # read back true in lanes that ran the else arm); the copy keeps the optimiser from
        # correlating the branch with later reads of the predicate register.
        cv = gen_name("if", f.tag)
        self.emit(f"volatile bool {cv} = {self.p(cond)};")
        self._open(f"if ({cv}) {{")

    def thread_else(self, f: Frame) -> None:
        # The else arm is a second if on the volatile copy, not C's else: the same compiler
        # also miscompiled an if/else whose then arm sets a predicate and whose arms both
        # write one register from a constant (a converted -0.0 in one, a movi in the other):
        # lanes that ran the then arm stored the else arm's value (differential fuzz,
        # bench/fuzz_robust_sc.py seed 9; tests/test_cfamily_diff.py
        # test_opencl_if_else_select_regression). Two ifs keep it from merging the arms.
        self.ind -= 1
        self._open(f"}} if (!{gen_name('if', f.tag)}) {{")

    def thread_endif(self, f: Frame) -> None:
        self._close()

    def thread_loop(self, f: Frame) -> None:
        self._open("while (1) {")
        if not f.exits and self.d.spin_side_effect:
            self.emit(self.d.spin_side_effect)

    def thread_endloop(self, f: Frame) -> None:
        self._close()

    def thread_jump(self, role: str, loop: Frame, guard: Pred | None) -> None:
        self._when(guard, f"{role};")

    def thread_ret(self, call: Frame | None, guard: Pred | None) -> None:
        self._when(guard, "return;" if call is None else f"goto {gen_name('ret', call.tag)};")

    def thread_call(self, f: Frame) -> None:
        if not f.structured:
            self._open("{")
            return
        if f.ret_in_loop:
            self.emit(f"bool {gen_name('ret', f.tag)} = false;")
        self._open("do {")  # one trip; a ret of the call is its break (goto-free dialects)

    def thread_endcall(self, f: Frame) -> None:
        if f.structured:
            self._close("} while (0);")
            return
        self._close()
        self.emit(f"{gen_name('ret', f.tag)}: ;")

    def thread_escape(self, call: Frame, guard: Pred | None, in_loop: bool) -> None:
        self._when(guard, f"{{ {gen_name('ret', call.tag)} = true; break; }}" if in_loop else "break;")

    def thread_escape_loop(self, call: Frame) -> None:
        self.emit(f"if ({gen_name('ret', call.tag)}) break;")

    # ---- mask-stack control flow (wave kernels): every lane walks every construct
    def _m(self, m: Mask) -> str:
        if m.kind == "pred":
            assert m.pred is not None
            return ("!" if m.pred.negated != m.neg else "") + f"p{m.pred.index}"
        name = {"A": "act", "x": "aw_x", "false": "false", "raw": m.name}.get(m.kind) or gen_name(m.kind, m.depth)
        return ("!" if m.neg else "") + name

    def mask(self, op: str, dst: Mask, a: Mask, b: Mask | None = None) -> None:
        if op == "mov":
            self.emit(f"{self._m(dst)} = {self._m(a)};")
        else:
            assert b is not None
            self.emit(f"{self._m(dst)} = {self._m(a)} {'&&' if op == 'and' else '||'} {self._m(b)};")

    def condition(self, cond: Pred) -> Mask:
        # volatile copy of the condition: see thread_if
        n = self.fresh()
        vi, vc = gen_name("if", n), gen_name("c", n)
        self.emit(f"volatile bool {vi} = {self.p(cond)}; const bool {vc} = {vi};")
        return Mask("raw", name=vc)

    def enter(self, f: Frame, part: str) -> None:
        # a region no lane of the wave is active in is skipped by the whole sub-group at once
        self._open(f"if ({self.d.any_lane('act')}) {{")

    def leave(self, f: Frame, part: str) -> None:
        self._close()

    def loop_open(self, f: Frame) -> None:
        self._open(f"if ({self.d.any_lane('act')}) {{")
        self._open("do {")

    def loop_close(self, f: Frame) -> None:
        self._close(f"}} while ({self.d.any_lane('act')});")
        self._close()

    #: per-thread islands (lowering.control), without barriers: a C barrier must be reached by
    #: every work-item of the workgroup, and the mask stack emits it for all of them
    islands = True
    island_barriers = False

    def island_begin(self, tag: str) -> None:
        self._open("if (act) {")
        self.in_island = True

    def island_end(self, tag: str) -> None:
        self.in_island = False
        self._close()


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
