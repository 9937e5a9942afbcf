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
* Control flow (lowered by :mod:`anywave.backends.lowering.control`, shared with the C
  family; this module spells it). A kernel without wave-collective instructions is lowered to plain
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
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from anywave.backends import ptx_alu, ptx_memory, ptx_mma, ptx_wave
from anywave.backends.lowering.bodies import body_keys
from anywave.backends.lowering.control import ControlWalk, Frame, Mask, of_pred, uses_wave_ops
from anywave.backends.lowering.need import Need, unpredicated
from anywave.backends.ptx_block import WAVE_WIDTH, Block  # noqa: F401 - WAVE_WIDTH is public here
from anywave.binary.module import DeviceAddr, Instruction, Kernel, Module, Pred
from anywave.errors import WaveError
from anywave.isa import dispatch
from anywave.isa.mma import GROUP_ALIGN
from anywave.isa.table import INSTRUCTIONS, Category, Flag, InstrDef
from anywave.isa.types import LIMITS, ArgKind, ScalarType

T = ScalarType

#: PTX ISA version used for each supported architecture (the lowest that has every form
#: this backend emits for it, so older drivers can still JIT the text).
PTX_VERSIONS: dict[int, str] = {
    75: "7.0", 80: "7.0", 86: "7.1", 87: "7.4", 89: "7.8", 90: "7.8",
    100: "8.6", 101: "8.6", 103: "8.8", 110: "9.0", 120: "8.7", 121: "8.8",
}
#: blocks of at most this many PTX lines are predicated line by line instead of branched around
_PREDICATE_LINES = 12
#: static shared memory above this needs the dynamic (extern) form
STATIC_SHARED_LIMIT = 48 * 1024


#: the lighter mask-stack lowering on PTX (per-thread islands, lowering.need's unpredicated
#: register-only instructions, one ballot per run of wave operations, conditions of W folded),
#: the default since it passed conformance on an H100 (655/655 bit-identical to the emulator,
#: bench/results/cuda_conformance_h100_9461882_islands.json; the CUDA suite 1.02x NVRTC in
#: geometric mean, cuda_suite_h100_9461882_islands.json). ANYWAVE_PTX_ISLANDS=0 gives the plain
#: machine (every instruction predicated on the active mask), as before.
PTX_ISLANDS = os.environ.get("ANYWAVE_PTX_ISLANDS", "1") != "0"


#: WAVE constant buffers (spec §12) read from CUDA's constant bank: a kernel whose one constant
#: buffer is only ever the source of plain loads reads it with ``ld.const`` from the module's
#: ``.const`` array ``__wa_cbank`` (bank 3: ``LDC``, the constant cache, as nvcc's ``__constant__``),
#: which the CUDA runtime fills from the buffer on the launch's stream before the kernel
#: (``PtxKernel.const_bank``). The k-means of the CUDA suite read its centres this way at 1.005 of
#: NVRTC's speed against 0.903 through ``ld.global.nc`` (bench/results/kmeans_const_h200_c2ccdb2.json).
#: ANYWAVE_PTX_CONST_BANK=0 keeps every constant buffer on the global path.
PTX_CONST_BANK = os.environ.get("ANYWAVE_PTX_CONST_BANK", "1") != "0"
#: bytes of ``__wa_cbank``: a launch's constant buffers total at most this (spec §12)
CONST_BANK_BYTES = LIMITS.max_constant_bytes
CONST_BANK = "__wa_cbank"


def const_bank_buffer(module: Module, kernel: Kernel) -> int:
    """The ABI index of the buffer a kernel reads from the constant bank, or -1: its only
    constant buffer, when every instruction that addresses that buffer (in the kernel and in the
    module's functions) is a plain load (``mem.ld``), so no other access needs its global address."""
    if not PTX_CONST_BANK:
        return -1
    const = [i for i, a in enumerate(kernel.args) if a.kind is ArgKind.BUFFER and a.constant]
    if len(const) != 1:
        return -1
    i = const[0]
    for code in [kernel.code, *(f.code for f in module.functions)]:
        for ins in code:
            for op in ins.operands:
                if isinstance(op, DeviceAddr) and op.buffer == i and PTX_DISPATCH.handler(ins.defn) is not _mem._e_ld:
                    return -1
    return i


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
    if not PTX_DISPATCH.handles(defn):
        return f"{defn.mnemonic}: no PTX emitter for {defn.sem!r}"
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
    #: the kernel uses mma.group: a launch needs a multiple of 4 waves (128 threads) per workgroup
    wave_groups: bool = False
    #: ABI index of the constant buffer the kernel reads from the module's constant bank
    #: (``CONST_BANK``, see :data:`PTX_CONST_BANK`; -1: none): a launch copies that buffer's bytes
    #: to the bank's start on the launch's stream before the kernel
    const_bank: int = -1


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


# ------------------------------------------------------------------------ emitters
Emitter = Callable[[Block, Instruction], None]
_alu, _mem, _wave = ptx_alu, ptx_memory, ptx_wave

#: the PTX consumer of the instruction table (:mod:`anywave.isa.dispatch`): an emitter per
#: semantic key; ``None`` for control flow, which :mod:`anywave.backends.lowering.control` lowers
PTX_DISPATCH = dispatch.consumer("ptx")
#: native overrides of instruction bodies: one PTX instruction where the body takes several, and
#: the float operations (PTX's own rounding and NaN handling, written out in ptx_alu)
_ALU_NATIVE = {
    **{f"int.{op}": _alu._e_int_native for op in ("min", "max", "mulhi", "mad")},
    "bit.shl": _alu._e_shift, "bit.shr": _alu._e_shift, "bit.rotl": _alu._e_rotl,
    **{f"float.{op}": _alu._e_float for op in ("add", "sub", "mul", "fma", "min", "max", "neg", "abs", "div",
                                               "sqrt", "floor", "ceil", "trunc", "rint", "ex2", "lg2", "sin",
                                               "cos", "rsqrt", "rcp", "tanh")},
    "cvt.cvt": _alu._e_cvt, "cvt.cvt_pack": _alu._e_cvt_pack,
}
PTX_DISPATCH.register({
    # every other ALU key: its body (anywave.isa.bodies) spelt with ptx_alu.PTX_SPELLING
    **_ALU_NATIVE, **{k: _alu._e_body for k in body_keys(_ALU_NATIVE)},
    **{f"setp.{c}.{t}": _alu._e_setp_float for t in ("f32", "f64", "f16", "bf16")
       for c in ("eq", "ne", "lt", "le", "gt", "ge", "unord")},
    "mem.ld": _mem._e_ld, "mem.st": _mem._e_st, "atomic.atom": _mem._e_atom, "atomic.red": _mem._e_atom,
    "wave.shfl": _wave._e_shfl, "wave.bcast": _wave._e_bcast, "wave.ballot": _wave._e_ballot,
    "wave.any": _wave._e_vote, "wave.all": _wave._e_vote, "wave.wred": _wave._e_wred, "wave.wscan": _wave._e_wscan,
    "mma.mma": _wave._e_mma, **{f"mma.{op}": e for op, e in ptx_mma.EMITTERS.items()},
    "sync.barrier": _mem._e_barrier, "sync.fence": _mem._e_fence, "sync.wave_barrier": _mem._e_wave_barrier,
    **{f"async.{op}": e for op, e in _mem.ASYNC_EMITTERS.items()},
    "move.mov": _alu._e_mov, "move.movi": _alu._e_movi, "move.mov_sr": _alu._e_mov_sr, "move.ldarg": _alu._e_ldarg,
    "ctl.*": None,  # structured control flow and nop: the walk
})


def emitter_for(defn: InstrDef) -> Emitter | None:
    """The emitter of one table entry (None for control flow, lowered structurally).

    Raises:
        UnsupportedInstruction: no emitter (``tests/test_isa_dispatch.py`` makes sure this never
            happens for a record of the table)."""
    return PTX_DISPATCH.handler(defn)


# ------------------------------------------------------------------------ kernel emitter

class _KernelEmitter:
    def __init__(self, module: Module, kernel: Kernel, arch: int, comments: bool, checked: bool = False) -> None:
        self.m = module
        self.k = kernel
        self.checked = checked
        #: the buffer read from the constant bank (not in a bounds-checked build: its hidden sizes
        #: and checks address the buffer's global memory)
        self.cbank = -1 if checked else const_bank_buffer(module, kernel)
        self.sites: list = []
        self.labels = {id(kernel.code): f"kernel {kernel.name!r}",
                       **{id(f.code): f"function {f.name!r}" for f in module.functions}}
        self.cur: tuple[str, int] = (self.labels[id(kernel.code)], 0)
        self.arch = arch
        #: wgmma in flight (committed, not yet waited for), oldest first: (mnemonic, first
        #: accumulator, A slot, accumulator count)
        self.wgmma_pending: list[tuple[str, int, int, int]] = []
        #: the kernel issues mma.group.async as wgmma: wait for them all before it exits
        self.group, has_async = ptx_mma.group_use(module, kernel)
        self.wgmma_async = arch == ptx_mma.WGMMA_ARCH and has_async
        self.comments = comments
        self.uniform = uses_wave_ops(module, kernel.code)
        #: wave operations under control flow proven warp-uniform: per-thread branches (ptx_mma)
        self.flat = self.uniform and ptx_mma.warp_uniform_control(module, kernel)
        self.uniform = self.uniform and not self.flat
        self.body: list[str] = []
        #: %emA holds the warp's ballot of %A (written by a wave operation's lowering, ptx_wave):
        #: valid until A changes (a mask update) or control flow joins (a label)
        self.em_a = False
        #: reuse %emA at all (ptx_wave._ballot_e): with PTX_ISLANDS, set in :meth:`run`
        self.ballot_reuse = False
        self.nlabel = 0
        self.max_depth = 0
        self._segs: list[str | None] = []
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
        if indent == 0:  # a label: control flow joins here, A may differ
            self.em_a = False
        self.body.append("    " * indent + line)

    # ---------------------------------------------------------------- the walk (lowering.Spelling)
    def body_begin(self, code: Sequence[Instruction]) -> None:
        # open straight-line segment of wave-scope fragment code (ptx_mma), one per body
        self._segs.append(None)

    def body_end(self, code: Sequence[Instruction]) -> None:
        self.wgmma_flush()
        seg = self._segs.pop()
        if seg is not None:
            self.out(f"{seg}:", 0)
            self.frag_covered = False

    def wgmma_flush(self, ins: Instruction | None = None) -> None:
        """Wait for the wgmma groups in flight (ptx_mma: ``mma.group`` commits without waiting)
        before ``ins``, as few as it needs (:func:`ptx_mma.wgmma_keep`): none for another
        ``mma.group`` into the same strip (that accumulator chain is ordered by the hardware) or
        into accumulators no group in flight uses, or for a ``cp.async.wait``; the groups up to the
        last one reading an A slot that a fragment load overwrites (``wgmma.wait_group N`` leaves
        the N most recent in flight); all of them before anything else (barriers, control flow)."""
        if not self.wgmma_pending:
            return
        keep = 0 if ins is None else ptx_mma.wgmma_keep(ins, self.wgmma_pending)
        if keep is None:
            return
        self.out(f"wgmma.wait_group.sync.aligned {keep};")
        self.wgmma_pending = self.wgmma_pending[len(self.wgmma_pending) - keep:] if keep else []

    def at(self, code: Sequence[Instruction], i: int) -> None:
        ins = code[i]
        self.wgmma_flush(ins)
        self.cur = (self.labels.get(id(code), "function"), i)
        boundary = ins.defn.category is Category.CONTROL or ins.defn.op == "barrier"
        seg = self._segs[-1]
        if seg is not None and boundary:
            self.out(f"{seg}:", 0)
            self._segs[-1], self.frag_covered = None, False
        elif seg is None and self.uniform and not boundary and ptx_mma.segment_has_fragments(code, i):
            # skip the whole segment in a warp with no active lane, so its fragment
            # instructions need no per-instruction test (spec 8.14)
            seg = self._segs[-1] = self.new_label("frag_seg")
            self.out("vote.sync.any.pred %pany, %A, %exist;")
            self.out(f"@!%pany bra {seg};")
            self.frag_covered = True
        if self.comments:
            self.out(f"// {self.text_of(ins)}")

    def frame_tag(self, kind: str) -> str:
        return self.new_label(kind)

    def exec_pred(self, guard: Pred | None, ins: Instruction | None = None) -> str | None:
        """Predicate string of the executing lanes (None: every thread that runs this).

        Mask stack: a register-only instruction runs unpredicated where no lane inactive there
        can observe its result (:func:`anywave.backends.lowering.need.unpredicated`), so that
        ptxas folds and propagates it (the CUDA warp's geometry, ``warpSize``)."""
        if not self.uniform:
            return None if guard is None else Block_pred(guard)
        if ins is not None and self.need is not None and unpredicated(ins, self.walk, self.need, self.pos):
            return None if guard is None else Block_pred(guard)
        if guard is None:
            return "%A"
        self.out(f"and.pred %pe, %A, {Block_pred(guard)};")
        return "%pe"

    def instruction(self, ins: Instruction) -> None:
        self.pos += 1
        if ins.defn.category is Category.CONTROL:  # nop: nothing to write
            return
        emit = emitter_for(ins.defn)
        assert emit is not None
        b = Block(self, ins)
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
        pe = self.exec_pred(ins.guard, ins)
        emit(b, ins)
        if self.checked and ins.defn.flags & (Flag.LOAD | Flag.STORE):
            from anywave.backends.bounds import guard_ptx

            pe = guard_ptx(self, ins, pe)
        self.block(b, pe)

    def block(self, b: Block, pe: str | None) -> None:
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

    # ---------------------------------------------------------------- per-thread control flow
    @staticmethod
    def _guard(g: Pred | None) -> str:
        return "" if g is None else f"@{Block_pred(g)} "

    def thread_if(self, f: Frame, cond: Pred) -> None:
        self.out(f"@{Block_pred(cond, negate=True)} bra {f.tag}_else;")

    def thread_else(self, f: Frame) -> None:
        self.out(f"bra {f.tag}_end;")
        self.out(f"{f.tag}_else:", 0)

    def thread_endif(self, f: Frame) -> None:
        if not f.has_else:
            self.out(f"{f.tag}_else:", 0)
        self.out(f"{f.tag}_end:", 0)

    def thread_loop(self, f: Frame) -> None:
        self.out(f"{f.tag}_top:", 0)

    def thread_endloop(self, f: Frame) -> None:
        self.out(f"{f.tag}_cont:", 0)
        self.out(f"bra {f.tag}_top;")
        self.out(f"{f.tag}_exit:", 0)

    def thread_jump(self, role: str, loop: Frame, guard: Pred | None) -> None:
        self.out(f"{self._guard(guard)}bra {loop.tag}_{'exit' if role == 'break' else 'cont'};")

    def thread_ret(self, call: Frame | None, guard: Pred | None) -> None:
        if call is None:
            if self.wgmma_async:
                self.out("wgmma.wait_group.sync.aligned 0;")
            self.out(f"{self._guard(guard)}exit;")
        else:
            self.out(f"{self._guard(guard)}bra {call.tag}_ret;")

    def thread_call(self, f: Frame) -> None:
        pass

    def thread_endcall(self, f: Frame) -> None:
        self.out(f"{f.tag}_ret:", 0)

    # ---------------------------------------------------------------- mask-stack control flow
    _MASK_REG = {"A": "%A", "x": "%px", "fo": "%fo", "fp": "%fp", "fc": "%fc"}

    def _m(self, m: Mask) -> str:
        if m.kind == "pred":
            assert m.pred is not None
            return Block_pred(m.pred, m.neg)
        name = self._MASK_REG[m.kind] + (str(m.depth) if m.depth >= 0 else "")
        return ("!" if m.neg else "") + name

    def mask(self, op: str, dst: Mask, a: Mask, b: Mask | None = None) -> None:
        self.em_a = False
        if op == "mov":
            self.out(f"mov.pred {self._m(dst)}, {'0' if a.kind == 'false' else self._m(a)};")
        else:
            assert b is not None
            self.out(f"{op}.pred {self._m(dst)}, {self._m(a)}, {self._m(b)};")

    def condition(self, cond: Pred) -> Mask:
        return of_pred(cond)

    def vote_any(self, pred: str) -> None:
        self.out(f"vote.sync.any.pred %pany, {pred}, %exist;")

    def enter(self, f: Frame, part: str) -> None:
        self.vote_any("%A")
        self.out(f"@!%pany bra {f.tag}_{ {'then': 'else', 'else': 'end', 'call': 'ret'}[part]};")

    def leave(self, f: Frame, part: str) -> None:
        if part == "then":
            self.out(f"{f.tag}_else:", 0)
        if part != "call" and (part == "else" or not f.has_else):
            self.out(f"{f.tag}_end:", 0)
        if part == "call":
            self.out(f"{f.tag}_ret:", 0)

    def loop_open(self, f: Frame) -> None:
        self.vote_any("%A")
        self.out(f"@!%pany bra {f.tag}_exit;")
        self.out(f"{f.tag}_top:", 0)

    def loop_close(self, f: Frame) -> None:
        self.vote_any("%A")
        self.out(f"@%pany bra {f.tag}_top;")
        self.out(f"{f.tag}_exit:", 0)

    #: constructs without wave operations run as per-thread islands (lowering.control), and
    #: conditions of W and constants are folded (every NVIDIA target runs W = 32): with
    #: PTX_ISLANDS, read when the kernel is emitted (:meth:`run`)
    islands = False
    wave_width: int | None = None

    def island_begin(self, tag: str) -> None:
        self.out(f"@!%A bra {tag}_end;")
        self.uniform = False

    def island_end(self, tag: str) -> None:
        self.out(f"{tag}_end:", 0)
        self.uniform = True

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
        if PTX_ISLANDS:
            self.islands, self.wave_width, self.ballot_reuse = True, WAVE_WIDTH, True
        self.need = Need(self.m, k.code, islands=self.islands, wave_width=self.wave_width) \
            if self.uniform and PTX_ISLANDS else None
        self.pos = -1
        walk = self.walk = ControlWalk(self.m, self, self.uniform)
        walk.run(k.code)
        self.max_depth = walk.max_depth
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
        if k.max_workgroup_size and self.group:
            # a wgmma kernel sized to its SM (one workgroup of many registers): its declared bound
            # lets ptxas budget 64K registers over that many threads (else a launch can be refused)
            lines.append(f".maxntid {k.max_workgroup_size}, 1, 1")
        lines.append("{")
        pro = [f".reg .b32 %r<{max(k.registers, 1)}>;", ".reg .pred %p<8>;",
               ".reg .pred %pe, %pany, %px, %A;",
               ".reg .b32 %sr_tx, %sr_ty, %sr_tz, %sr_nx, %sr_ny, %sr_nz, %sr_cx, %sr_cy, %sr_cz;",
               ".reg .b32 %sr_gx, %sr_gy, %sr_gz, %sr_tl, %sr_lane, %sr_wave, %sr_nwaves, %exist"
               + (", %emA;" if self.ballot_reuse else ";"),
               ".reg .b64 %lmbase;"]
        if self.max_depth:
            dd = self.max_depth
            pro.append(f".reg .pred %fo<{dd}>, %fp<{dd}>, %fc<{dd}>;")
        bufs = [i for i, a in enumerate(k.args) if a.kind is ArgKind.BUFFER]
        if bufs:
            pro.append(".reg .b64 " + ", ".join(f"%buf{i}" for i in bufs) + ";")
        if k.local_memory and not dynamic:
            align = GROUP_ALIGN if self.group else 16
            pro.append(f".shared .align {align} .b8 __wa_local[{k.local_memory}];")
        for i in bufs:
            a = k.args[i]
            if i == self.cbank:  # read from the constant bank (ld.const), which the launch fills
                pro.append(f"mov.u64 %buf{i}, {CONST_BANK};   // constant buffer {a.name}: the constant bank")
                continue
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
        lines += ["    " + ln for ln in ptx_mma.keep_alive(self.m, k, self.arch)]
        if self.wgmma_async:
            lines.append("    wgmma.wait_group.sync.aligned 0;")
        lines.append("    exit;")
        lines.append("}")
        info = PtxKernel(k.name, params, dynamic, k.local_memory, self.uniform, self.checked, tuple(self.sites),
                         self.group, self.cbank)
        return "\n".join(lines), info


def Block_pred(p: Pred, negate: bool = False) -> str:  # noqa: N802 - shared with Block.pred
    return Block.pred(p, negate)


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
    group = any(info.wave_groups for info in infos.values())
    wg = group and a == ptx_mma.WGMMA_ARCH  # wgmma: the sm_90a target, PTX ISA 8.0
    head = [
        "// generated by anywave (WAVE -> PTX); see docs/spec.md for the semantics",
        f".version {'8.0' if wg else PTX_VERSIONS[a]}",
        f".target sm_{a}{'a' if wg else ''}",
        ".address_size 64",
        "",
    ]
    if need_dynamic:
        head.append(f".extern .shared .align {GROUP_ALIGN if group else 16} .b8 __wa_dynlocal[];")
        head.append("")
    if any(info.const_bank >= 0 for info in infos.values()):
        head.append(f".const .align 16 .b8 {CONST_BANK}[{CONST_BANK_BYTES}];")
        head.append("")
    return PtxProgram("\n".join(head) + "\n" + "\n\n".join(parts) + "\n", f"sm_{a}", infos)


def table_coverage(arch: str | int = "sm_90") -> dict[str, str]:
    """For every table entry: ``"translated"`` or ``"unsupported: <reason>"`` on ``arch``."""
    out = {}
    for d in INSTRUCTIONS:
        why = unsupported_reason(d, arch)
        out[d.mnemonic] = "translated" if why is None else f"unsupported: {why}"
    return out
