"""WAVE -> SPIR-V (1.5) for Vulkan compute, emitted as a binary module by
:mod:`anywave.backends.spirv_asm` (no external tool needed; ``spirv-val`` checks it in tests).

``translate(module, wave_width, features)`` gives a :class:`SpirvProgram`: one SPIR-V module per
kernel (entry point ``main``), its binding layout, and the kernels refused for the device with
the reason. Semantics follow docs/spec.md, bit for bit with the emulator for every ``exact``/
``exact-nan`` instruction:

* **Control flow.** Every kernel is lowered with the spec's mask-stack machine (§7.4) kept per
  invocation, the scheme of :mod:`anywave.backends.cfamily`: an ``act`` flag plus, per construct,
  the flags of the lanes that left it. ``if``/``else``/``break``/``continue``/``ret``/``halt`` only
  update flags; instructions run inside a SPIR-V selection on ``act`` (and their guard); a loop is
  one structured ``OpLoopMerge`` loop whose only exit is at its top, when no lane of the wave is
  still in it (``OpGroupNonUniformAny`` for kernels with wave operations; the invocation's own flag
  otherwise, which by §7.8 is the same thing for per-thread code). ``call`` is inlined. So the
  module needs no multi-level break, and subgroup operations always run in converged control flow.
* **Waves.** Kernels with wave operations get ``requiredSubgroupSize = W`` and full subgroups; the
  workgroup is one dimension padded to a multiple of W (padding lanes are never active, like the
  spec's non-existent lanes), and the WAVE linear thread id is ``SubgroupId * W +
  SubgroupLocalInvocationId``, so waves are exactly the device's subgroups whatever order the
  device assigns invocations to subgroups in. Wave operations use only ``OpGroupNonUniformShuffle``,
  ``Ballot`` and ``Any``; f32 reductions and scans are the spec's butterfly / Kogge-Stone steps.
* **Floats.** Every float add/sub/mul/div result is decorated ``NoContraction``. Vulkan promises
  correct rounding only for add, sub, mul and conversions (Vulkan 1.3 §"Precision and Operation
  of SPIR-V Instructions": ``OpFDiv`` is 2.5 ulp, ``sqrt`` inherits ``inversesqrt``'s error,
  ``fma`` may round twice), so f32 ``div``/``sqrt`` are computed in f64 and then *checked and
  fixed* against the exact midpoints (products of a 25-bit and a 24-bit significand are exact in
  f64), and f32 / f16 / bf16 ``fma`` is the exact f64 product plus the addend rounded to odd
  (Knuth's TwoSum), rounded once to the target (Boldo & Melquiond 2008). f16 and bf16 live on
  their bits as in the C renderer (:data:`anywave.backends.cfamily.PRELUDE`). The float-controls
  execution modes the device supports (``SignedZeroInfNanPreserve``, ``RoundingModeRTE``,
  ``DenormPreserve``) are declared; the runtime reports the ones it lacks.
* **Memory.** A buffer argument is a storage buffer of 32-bit words (binding = its position among
  the buffer arguments); scalars and the workgroup size are push constants (32-bit words, 64-bit
  scalars as two). 8/16-bit stores are ``OpAtomicAnd`` + ``OpAtomicOr`` on the containing word, so
  lanes storing neighbouring bytes never race. Local memory is a ``Workgroup`` array of words.
  Offsets are computed in 32 bits: a storage buffer is smaller than 4 GiB, so every in-bounds
  offset (the only defined ones) is exact.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from anywave.backends.cfamily import uses_wave_ops
from anywave.backends.spirv_asm import BUILTIN, EXEC_MODE, SCOPE, SEM, Builder
from anywave.binary.module import DeviceAddr, Instruction, Kernel, LocalAddr, Module, Pred
from anywave.errors import WaveError
from anywave.isa.table import Flag, InstrDef
from anywave.isa.types import ArgKind, MemoryOrder, ScalarType, Scope, SpecialRegister

T = ScalarType
S = SpecialRegister

#: wave widths the lowering can target (subgroup sizes)
WAVE_WIDTHS = (8, 16, 32, 64)


class SpirvError(WaveError):
    """A module the SPIR-V backend cannot translate (bad W, unknown kernel); ``problems`` lists
    every reason."""

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems = list(problems)
        head = self.problems[0] if len(self.problems) == 1 else f"{len(self.problems)} problems"
        body = "" if len(self.problems) == 1 else "\n" + "\n".join("  - " + p for p in self.problems[:20])
        super().__init__(f"cannot translate to SPIR-V: {head}{body}")


@dataclass(frozen=True)
class VulkanFeatures:
    """What the Vulkan device offers the lowering (probed by :mod:`anywave.runtime.vulkan`).

    Attributes:
        fp64: ``shaderFloat64`` (f64 instructions, and the exact f32 div/sqrt/fma emulation).
        int64: ``shaderInt64`` (64-bit integer instructions).
        wave_widths: subgroup sizes that can be required for compute (empty: no wave operations).
        signed_zero_inf_nan: widths (32, 64) with ``shaderSignedZeroInfNanPreserveFloat*``.
        rte: widths with ``shaderRoundingModeRTEFloat*``.
        denorm_preserve: widths with ``shaderDenormPreserveFloat*``.
    """

    fp64: bool = True
    int64: bool = True
    wave_widths: tuple[int, ...] = WAVE_WIDTHS
    signed_zero_inf_nan: tuple[int, ...] = (32, 64)
    rte: tuple[int, ...] = (32, 64)
    denorm_preserve: tuple[int, ...] = (32, 64)


#: a device with everything (the default of :func:`translate`)
FULL_FEATURES = VulkanFeatures()


@dataclass(frozen=True)
class SpirvKernel:
    """One translated kernel.

    Attributes:
        name: WAVE kernel name (the SPIR-V entry point is ``main``).
        words: the SPIR-V module.
        buffers: WAVE argument index of each storage-buffer binding 0, 1, ...
        push: ``(WAVE argument index, words)`` in push-constant order; the workgroup size
            ``(x, y, z)`` follows as three words.
        wave_mode: uses wave operations (needs ``requiredSubgroupSize = W`` and full subgroups;
            the workgroup is padded to a multiple of W).
        local_memory: bytes of local memory.
    """

    name: str
    words: tuple[int, ...]
    buffers: tuple[int, ...]
    push: tuple[tuple[int, int], ...]
    wave_mode: bool
    local_memory: int

    @property
    def binary(self) -> bytes:
        import struct

        return struct.pack(f"<{len(self.words)}I", *self.words)

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.binary).hexdigest()

    @property
    def push_words(self) -> int:
        return sum(n for _, n in self.push) + 3


@dataclass(frozen=True)
class SpirvProgram:
    """A translated module: per-kernel SPIR-V at one W, and the kernels refused (name -> reason)."""

    wave_width: int
    kernels: dict[str, SpirvKernel] = field(default_factory=dict)
    refused: dict[str, str] = field(default_factory=dict)

    @property
    def text(self) -> str:
        """The disassembly of every kernel (``spirv-dis``; a word dump when it is absent)."""
        parts = []
        for k in self.kernels.values():
            parts.append(f"; WAVE kernel {k.name} (W = {self.wave_width})\n" + disassemble(k.binary))
        for k, why in self.refused.items():
            parts.append(f"; WAVE kernel {k}: refused: {why}\n")
        return "\n".join(parts)


def disassemble(binary: bytes) -> str:
    """``spirv-dis`` text of a module, or a hex word dump when spirv-tools is not installed."""
    tool = shutil.which("spirv-dis")
    if tool:
        with tempfile.TemporaryDirectory() as d:
            p = Path(d) / "m.spv"
            p.write_bytes(binary)
            r = subprocess.run([tool, str(p)], capture_output=True, text=True, check=False)
            if r.returncode == 0:
                return r.stdout
    import struct

    w = struct.unpack(f"<{len(binary) // 4}I", binary)
    return "\n".join(" ".join(f"{x:08x}" for x in w[i:i + 8]) for i in range(0, len(w), 8)) + "\n"


def validate(binary: bytes, env: str = "vulkan1.2") -> str | None:
    """``spirv-val --target-env env`` on a module: None when valid (or spirv-val is absent,
    see :func:`have_validator`), else the validator's message."""
    tool = shutil.which("spirv-val")
    if not tool:
        return None
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "m.spv"
        p.write_bytes(binary)
        r = subprocess.run([tool, "--target-env", env, str(p)], capture_output=True, text=True, check=False)
    return None if r.returncode == 0 else (r.stdout + r.stderr).strip()


def have_validator() -> bool:
    return shutil.which("spirv-val") is not None


# --------------------------------------------------------------------------- support table

def _needs_f64(defn: InstrDef) -> bool:
    t, src, op = defn.type, defn.src_type, defn.op
    if T.F64 in (t, src):
        return True
    if op == "fma" or (op in ("div", "sqrt") and t is not None and t.is_float):
        return True  # exact emulation through f64
    if op == "rcp":
        return True
    if op == "cvt" and t in (T.F16, T.BF16) and src is not None and not src.is_float:
        return True  # int -> f16/bf16 rounds once through f64 (round to odd)
    return False


def unsupported_reason(defn: InstrDef, features: VulkanFeatures = FULL_FEATURES) -> str | None:
    """Why ``defn`` cannot be translated for a device with ``features``, or None when it can.

    Every mnemonic of the instruction table is either handled or refused with a reason
    (tests/test_vulkan_spirv.py checks it)."""
    if defn.op not in _HANDLERS:
        return f"{defn.mnemonic}: no SPIR-V lowering for operation {defn.op!r}"
    if not features.fp64 and _needs_f64(defn):
        return (f"{defn.mnemonic} needs double precision (shaderFloat64), which the device lacks: "
                "Vulkan rounds OpFDiv/sqrt/fma loosely, the exact emulation goes through f64")
    if not features.int64 and (T.I64 in (defn.type, defn.src_type) or T.U64 in (defn.type, defn.src_type)
                               or (defn.type is not None and defn.type.bits == 64 and defn.op in
                                   ("and", "or", "xor", "not", "shl", "shr", "cvt"))):
        return f"{defn.mnemonic} needs 64-bit integers (shaderInt64), which the device lacks"
    if defn.flags & Flag.WAVE_COLLECTIVE and not features.wave_widths:
        return f"{defn.mnemonic} needs subgroup operations with a required subgroup size (the device has none)"
    return None


def check_supported(module: Module, features: VulkanFeatures = FULL_FEATURES) -> dict[str, list[str]]:
    """Per kernel, every instruction (its own or in a function it calls) the device cannot run,
    as messages; kernels with no problem are absent."""
    out: dict[str, list[str]] = {}
    for k in module.kernels:
        probs = []
        bodies = [(f"kernel {k.name!r}", k.code)]
        seen: set[int] = set()
        stack = list(k.code)
        while stack:
            ins = stack.pop()
            if ins.defn.op == "call":
                f = int(ins.operands[0])
                if f not in seen:
                    seen.add(f)
                    bodies.append((f"function {module.functions[f].name!r}", module.functions[f].code))
                    stack += module.functions[f].code
        for owner, code in bodies:
            for i, ins in enumerate(code):
                why = unsupported_reason(ins.defn, features)
                if why:
                    probs.append(f"{owner}, instruction {i}: {why}")
        if probs:
            out[k.name] = probs
    return out


# --------------------------------------------------------------------------- the lowering

@dataclass
class _Frame:
    kind: str  # "if", "loop", "call"
    n: int


_CONTROL = {"if", "else", "endif", "loop", "endloop", "break", "continue", "call", "ret", "halt", "nop"}
_SCOPE_OF = {Scope.WAVE: "Subgroup", Scope.WORKGROUP: "Workgroup", Scope.DEVICE: "Device", Scope.SYSTEM: "Device"}
_ORDER_SEM = {MemoryOrder.RELAXED: 0, MemoryOrder.ACQUIRE: SEM["Acquire"], MemoryOrder.RELEASE: SEM["Release"],
              MemoryOrder.ACQ_REL: SEM["AcquireRelease"], MemoryOrder.SEQ_CST: SEM["AcquireRelease"]}


class _Lowering:
    """Lowers one kernel to one SPIR-V module."""

    def __init__(self, feats: VulkanFeatures, module: Module, kernel: Kernel, W: int) -> None:
        self.f, self.m, self.k, self.W = feats, module, kernel, W
        self.wave = uses_wave_ops(module, kernel.code)
        b = self.b = Builder()
        b.capability("Shader")
        self.u32, self.bool_ = b.t_uint(), b.t_bool()
        self.f32 = b.t_float()
        self.v2u = b.t_vec(self.u32, 2)
        self.v3u = b.t_vec(self.u32, 3)
        self._vars: list[int] = []  # words of the entry block's OpVariables
        self.n = 0
        self.frames: list[_Frame] = []
        self.interface: list[int] = []
        self.uses_f64 = False
        self._headers: dict[int, int] = {}
        self._loops: dict[int, tuple[int, int]] = {}
        self.fl: dict[str, int] = {}

    # ---- small helpers
    def c(self, v: int) -> int:
        return self.b.const_u32(v)

    def fresh(self) -> int:
        self.n += 1
        return self.n

    def var(self, t: int, init: int | None = None) -> int:
        from anywave.backends.spirv_asm import OP, STORAGE, encode

        v = self.b.id()
        extra = (init,) if init is not None else ()
        self._vars += encode(OP["Variable"], (self.b.t_ptr("Function", t), v, STORAGE["Function"], *extra))
        return v

    def op(self, name: str, rtype: int, *args: int) -> int:
        return self.b.value(name, rtype, *args)

    def fop(self, name: str, rtype: int, *args: int) -> int:
        """A float arithmetic op decorated NoContraction (never fused or reassociated)."""
        r = self.b.value(name, rtype, *args)
        self.b.decorate(r, "NoContraction")
        return r

    def load(self, ptr: int, t: int | None = None) -> int:
        return self.op("Load", self.u32 if t is None else t, ptr)

    def store(self, ptr: int, v: int) -> None:
        self.b.emit("Store", ptr, v)

    def r(self, n: int) -> int:
        return self.load(self.rv[n])

    def setr(self, n: int, v: int) -> None:
        self.store(self.rv[n], v)

    def p(self, pr: Pred) -> int:
        v = self.load(self.pv[pr.index], self.bool_)
        return self.op("LogicalNot", self.bool_, v) if pr.negated else v

    def flag(self, v: int) -> int:
        return self.load(v, self.bool_)

    def and_(self, *vs: int) -> int:
        out = vs[0]
        for v in vs[1:]:
            out = self.op("LogicalAnd", self.bool_, out, v)
        return out

    def or_(self, *vs: int) -> int:
        out = vs[0]
        for v in vs[1:]:
            out = self.op("LogicalOr", self.bool_, out, v)
        return out

    def not_(self, v: int) -> int:
        return self.op("LogicalNot", self.bool_, v)

    def sel(self, t: int, c: int, a: int, b: int) -> int:
        return self.op("Select", t, c, a, b)

    @property
    def u64(self) -> int:
        return self.b.t_uint(64)

    @property
    def f64(self) -> int:
        self.uses_f64 = True
        return self.b.t_float(64)

    def r64(self, n: int) -> int:
        v = self.op("CompositeConstruct", self.v2u, self.r(n), self.r(n + 1))
        return self.op("Bitcast", self.u64, v)

    def set64(self, n: int, v: int) -> None:
        vv = self.op("Bitcast", self.v2u, v)
        lo = self.op("CompositeExtract", self.u32, vv, 0)
        hi = self.op("CompositeExtract", self.u32, vv, 1)
        self.setr(n, lo)
        self.setr(n + 1, hi)

    def bits_f32(self, v: int) -> int:
        return self.op("Bitcast", self.f32, v)

    def f32_bits(self, v: int) -> int:
        return self.op("Bitcast", self.u32, v)

    def f64_of(self, u: int) -> int:
        return self.op("Bitcast", self.f64, u)

    def u64_of(self, d: int) -> int:
        return self.op("Bitcast", self.u64, d)

    def ieq(self, a: int, b: int) -> int:
        return self.op("IEqual", self.bool_, a, b)

    def iand(self, a: int, b: int) -> int:
        return self.op("BitwiseAnd", self.u32, a, b)

    def ior(self, a: int, b: int) -> int:
        return self.op("BitwiseOr", self.u32, a, b)

    def shr(self, a: int, n: int) -> int:
        return self.op("ShiftRightLogical", self.u32, a, self.c(n))

    def shl(self, a: int, n: int) -> int:
        return self.op("ShiftLeftLogical", self.u32, a, self.c(n))

    def add(self, a: int, b: int) -> int:
        return self.op("IAdd", self.u32, a, b)

    # ---- structured pieces
    def label(self, lab: int) -> None:
        self.b.emit("Label", lab)

    @contextmanager
    def when(self, cond: int | None):
        """``if (cond) { ... }`` as a SPIR-V selection (no selection when cond is None)."""
        if cond is None:
            yield
            return
        body, merge = self.b.id(), self.b.id()
        self.b.emit("SelectionMerge", merge, 0)
        self.b.emit("BranchConditional", cond, body, merge)
        self.label(body)
        yield
        self.b.emit("Branch", merge)
        self.label(merge)

    def loop_open(self) -> tuple[int, int]:
        """Start a loop; returns (merge, continue) ids. The caller emits the body and
        :meth:`loop_close`; :meth:`loop_exit_unless` is the loop's (only) exit."""
        header, body, merge, cont = (self.b.id() for _ in range(4))
        self._headers[merge] = header
        self.b.emit("Branch", header)
        self.label(header)
        self.b.emit("LoopMerge", merge, cont, 0)
        self.b.emit("Branch", body)
        self.label(body)
        return merge, cont

    def loop_exit_unless(self, cond: int, merge: int) -> None:
        go = self.b.id()
        self.b.emit("BranchConditional", cond, go, merge)
        self.label(go)

    def loop_close(self, merge: int, cont: int) -> None:
        self.b.emit("Branch", cont)
        self.label(cont)
        self.b.emit("Branch", self._headers.pop(merge))
        self.label(merge)

    # ---- globals
    def builtin(self, name: str, t: int) -> int:
        key = "bi_" + name
        if key not in self._globals:
            v = self.b.global_var(self.b.t_ptr("Input", t), "Input")
            self.b.decorate(v, "BuiltIn", BUILTIN[name])
            self.interface.append(v)
            self._globals[key] = v
        return self.load(self._globals[key], t)

    def push_word(self, i: int) -> int:
        ptr = self.op("AccessChain", self.b.t_ptr("PushConstant", self.u32), self.pc, self.c(i))
        return self.load(ptr)

    def any_lane(self, cond: int) -> int:
        if self.wave:
            return self.op("GroupNonUniformAny", self.bool_, self.c(SCOPE["Subgroup"]), cond)
        return cond

    # ---- the walk
    def lower(self) -> SpirvKernel:
        b, k, W = self.b, self.k, self.W
        self._globals: dict[str, int] = {}
        if self.wave:
            for cap in ("GroupNonUniform", "GroupNonUniformVote", "GroupNonUniformBallot",
                        "GroupNonUniformShuffle"):
                b.capability(cap)
        # storage buffers: struct { uint data[]; } per buffer argument
        rarr = b.t_rarray(self.u32)
        b.decorate(rarr, "ArrayStride", 4)
        sbs = b.t_struct(rarr, key="sb")
        b.decorate(sbs, "Block")
        b.member_decorate(sbs, 0, "Offset", 0)
        self.sb_ptr = b.t_ptr("StorageBuffer", self.u32)
        self.bufvar: dict[int, int] = {}
        buffers: list[int] = []
        push: list[tuple[int, int]] = []
        for i, a in enumerate(k.args):
            if a.kind is ArgKind.BUFFER:
                v = b.global_var(b.t_ptr("StorageBuffer", sbs), "StorageBuffer")
                b.decorate(v, "DescriptorSet", 0)
                b.decorate(v, "Binding", len(buffers))
                b.name(v, a.name)
                self.bufvar[i] = v
                self.interface.append(v)
                buffers.append(i)
            else:
                push.append((i, 2 if a.type.bits == 64 else 1))
        self.push_index: dict[int, int] = {}
        w = 0
        for i, n in push:
            self.push_index[i] = w
            w += n
        nwords = w + 3
        self.wg_word = w
        pcs = b.t_struct(*([self.u32] * nwords), key="pc")
        b.decorate(pcs, "Block")
        for j in range(nwords):
            b.member_decorate(pcs, j, "Offset", 4 * j)
        self.pc = b.global_var(b.t_ptr("PushConstant", pcs), "PushConstant")
        self.interface.append(self.pc)
        if k.local_memory:
            arr = b.t_array(self.u32, -(-k.local_memory // 4))
            self.lm = b.global_var(b.t_ptr("Workgroup", arr), "Workgroup")
            self.interface.append(self.lm)
        # workgroup size: a specialization constant (SpecId 0), set at pipeline creation
        sx = b.id()
        b.put("global", "SpecConstant", self.u32, sx, 1)
        b.decorate(sx, "SpecId", 0)
        one = self.c(1)
        wgs = b.id()
        b.put("global", "SpecConstantComposite", self.v3u, wgs, sx, one, one)
        b.decorate(wgs, "BuiltIn", BUILTIN["WorkgroupSize"])

        fn = b.id()
        b.emit("Function", b.t_void(), fn, 0, b.t_fn(b.t_void()))
        entry = b.id()
        self.label(entry)
        head_len = len(b.sec["function"])
        # registers and predicates, zero / false at start
        self.rv = [self.var(self.u32, self.c(0)) for _ in range(max(1, k.registers))]
        self.pv = [self.var(self.bool_, b.const_bool(False)) for _ in range(8)]
        self.act = self.var(self.bool_)
        self.halted = self.var(self.bool_)
        self.wgx = self.push_word(self.wg_word)
        self.wgy = self.push_word(self.wg_word + 1)
        self.wgz = self.push_word(self.wg_word + 2)
        self.nthreads = self.op("IMul", self.u32, self.op("IMul", self.u32, self.wgx, self.wgy), self.wgz)
        if self.wave:
            sid = self.builtin("SubgroupId", self.u32)
            lane = self.builtin("SubgroupLocalInvocationId", self.u32)
            self.lane = lane
            self.tl = self.add(self.op("IMul", self.u32, sid, self.c(W)), lane)
        else:
            self.tl = self.builtin("LocalInvocationIndex", self.u32)
            self.lane = self.op("UMod", self.u32, self.tl, self.c(W))
        inside = self.op("ULessThan", self.bool_, self.tl, self.nthreads)
        self.store(self.act, inside)
        self.store(self.halted, self.not_(inside))
        self.wg_id = self.builtin("WorkgroupId", self.v3u)
        self.num_wg = self.builtin("NumWorkgroups", self.v3u)
        self.body(k.code)
        b.emit("Return")
        b.emit("FunctionEnd")
        fsec = b.sec["function"]
        b.sec["function"] = fsec[:head_len] + self._vars + fsec[head_len:]
        b.put("memory_model", "MemoryModel", 0, 1)  # Logical, GLSL450
        b.put("entry", "EntryPoint", 5, fn, "main", *self.interface)
        b.put("exec_mode", "ExecutionMode", fn, EXEC_MODE["LocalSize"], 1, 1, 1)
        widths = [32] + ([64] if self.uses_f64 else [])
        for mode, have in (("SignedZeroInfNanPreserve", self.f.signed_zero_inf_nan), ("RoundingModeRTE", self.f.rte),
                           ("DenormPreserve", self.f.denorm_preserve)):
            for wd in widths:
                if wd in have:
                    b.capability(mode)
                    b.put("exec_mode", "ExecutionMode", fn, EXEC_MODE[mode], wd)
        return SpirvKernel(k.name, tuple(b.words()), tuple(buffers), tuple(push), self.wave, k.local_memory)

    def body(self, code: list[Instruction]) -> None:
        run: list[Instruction] = []
        for ins in code:
            d = ins.defn
            plain = (d.op not in _CONTROL and d.op not in ("barrier", "fence")
                     and not d.flags & Flag.WAVE_COLLECTIVE and ins.guard is None)
            if plain:
                run.append(ins)
                continue
            self.flush(run)
            run = []
            self.instr(ins)
        self.flush(run)

    def flush(self, run: list[Instruction]) -> None:
        """Consecutive unguarded instructions under one selection on ``act``."""
        if not run:
            return
        with self.when(self.flag(self.act)):
            for ins in run:
                _HANDLERS[ins.defn.op](self, ins)

    def instr(self, ins: Instruction) -> None:
        op = ins.defn.op
        if op in _CONTROL:
            self.ctl(ins)
            return
        if op == "barrier":
            sem = SEM["AcquireRelease"] | SEM["UniformMemory"] | SEM["WorkgroupMemory"]
            wg = self.c(SCOPE["Workgroup"])
            self.b.emit("ControlBarrier", wg, wg, self.c(sem))
            return
        if op == "fence":
            scope, order = ins.operands
            if MemoryOrder(order) is not MemoryOrder.RELAXED:
                sem = _ORDER_SEM[MemoryOrder(order)] | SEM["UniformMemory"] | SEM["WorkgroupMemory"]
                self.b.emit("MemoryBarrier", self.c(SCOPE[_SCOPE_OF[Scope(scope)]]), self.c(sem))
            return
        ex = self.flag(self.act)
        if ins.guard is not None:
            ex = self.and_(ex, self.p(ins.guard))
        if ins.defn.flags & Flag.WAVE_COLLECTIVE:
            self.ex = ex
            _HANDLERS[op](self, ins)
            return
        with self.when(ex):
            _HANDLERS[op](self, ins)

    # ---- mask-stack control flow (spec §7.4), as cfamily's ctl_wave
    def gone(self) -> int:
        parts = [self.flag(self.halted)]
        for fr in reversed(self.frames):
            if fr.kind == "loop":
                parts += [self.flag(self.fl[f"brk{fr.n}"]), self.flag(self.fl[f"cnt{fr.n}"])]
                break
            if fr.kind == "call":
                break
        for fr in reversed(self.frames):
            if fr.kind == "call":
                parts.append(self.flag(self.fl[f"ret{fr.n}"]))
                break
        return self.or_(*parts)

    def gone_outer(self) -> int:
        parts = [self.flag(self.halted)]
        for fr in reversed(self.frames):
            if fr.kind == "call":
                parts.append(self.flag(self.fl[f"ret{fr.n}"]))
                break
        return self.or_(*parts)

    def newflags(self, n: int, *names: str) -> None:
        for nm in names:
            self.fl[f"{nm}{n}"] = self.var(self.bool_)

    def ctl(self, ins: Instruction) -> None:
        op = ins.defn.op
        g = self.p(ins.guard) if ins.guard is not None else self.b.const_bool(True)
        act = self.act
        if op == "if":
            n = self.fresh()
            self.frames.append(_Frame("if", n))
            self.newflags(n, "is", "ic")
            a = self.flag(act)
            c = self.p(ins.operands[0])
            self.store(self.fl[f"is{n}"], a)
            self.store(self.fl[f"ic{n}"], c)
            self.store(act, self.and_(a, c))
        elif op == "else":
            n = self.frames[-1].n
            self.store(act, self.and_(self.flag(self.fl[f"is{n}"]), self.not_(self.flag(self.fl[f"ic{n}"]))))
        elif op == "endif":
            gone = self.gone()
            fr = self.frames.pop()
            self.store(act, self.and_(self.flag(self.fl[f"is{fr.n}"]), self.not_(gone)))
        elif op == "loop":
            n = self.fresh()
            self.newflags(n, "ls", "brk", "cnt")
            self.store(self.fl[f"ls{n}"], self.flag(act))
            self.store(self.fl[f"brk{n}"], self.b.const_bool(False))
            self.store(self.fl[f"cnt{n}"], self.b.const_bool(False))
            merge, cont = self.loop_open()
            outer = self.gone_outer()
            self.frames.append(_Frame("loop", n))
            a = self.and_(self.flag(self.fl[f"ls{n}"]), self.not_(self.flag(self.fl[f"brk{n}"])), self.not_(outer))
            self.store(act, a)
            self.store(self.fl[f"cnt{n}"], self.b.const_bool(False))
            self.loop_exit_unless(self.any_lane(a), merge)
            self._loops[n] = (merge, cont)
        elif op == "endloop":
            fr = self.frames.pop()
            merge, cont = self._loops.pop(fr.n)
            self.loop_close(merge, cont)
            self.store(act, self.and_(self.flag(self.fl[f"ls{fr.n}"]), self.not_(self.gone_outer())))
        elif op in ("break", "continue"):
            n = next(fr.n for fr in reversed(self.frames) if fr.kind == "loop")
            fv = self.fl[f"brk{n}" if op == "break" else f"cnt{n}"]
            self._leave(fv, g)
        elif op == "halt" or (op == "ret" and not any(fr.kind == "call" for fr in self.frames)):
            self._leave(self.halted, g)
        elif op == "ret":
            n = next(fr.n for fr in reversed(self.frames) if fr.kind == "call")
            self._leave(self.fl[f"ret{n}"], g)
        elif op == "call":
            n = self.fresh()
            self.newflags(n, "cs", "ret")
            self.store(self.fl[f"cs{n}"], self.flag(act))
            self.store(self.fl[f"ret{n}"], self.b.const_bool(False))
            self.frames.append(_Frame("call", n))
            self.body(self.m.functions[int(ins.operands[0])].code)
            self.frames.pop()
            self.store(act, self.and_(self.flag(self.fl[f"cs{n}"]), self.not_(self.gone_outer())))

    def _leave(self, flagvar: int, g: int) -> None:
        a = self.flag(self.act)
        lv = self.and_(a, g)
        self.store(flagvar, self.or_(self.flag(flagvar), lv))
        self.store(self.act, self.and_(a, self.not_(lv)))

    # ---- memory addressing
    def byte_offset(self, reg: int, imm: int) -> int:
        return self.add(self.r(reg), self.c(imm))

    def word_ptr(self, addr: DeviceAddr | LocalAddr, off: int, extra_words: int = 0) -> int:
        idx = self.shr(off, 2)
        if extra_words:
            idx = self.add(idx, self.c(extra_words))
        if isinstance(addr, LocalAddr):
            return self.op("AccessChain", self.b.t_ptr("Workgroup", self.u32), self.lm, idx)
        return self.op("AccessChain", self.sb_ptr, self.bufvar[addr.buffer], self.c(0), idx)

    def mem_scope_sem(self, addr: DeviceAddr | LocalAddr) -> tuple[int, int]:
        if isinstance(addr, LocalAddr):
            return SCOPE["Workgroup"], SEM["WorkgroupMemory"]
        return SCOPE["Device"], SEM["UniformMemory"]

    # ---- float helpers (values are SPIR-V ids)
    def h2f(self, h: int) -> int:
        """f16 bits (low half) -> float, exact."""
        s = self.shl(self.iand(h, self.c(0x8000)), 16)
        e = self.iand(self.shr(h, 10), self.c(0x1F))
        m = self.iand(h, self.c(0x3FF))
        sub = self.fop("FMul", self.f32, self.op("ConvertUToF", self.f32, m), self.b.const_f32(0x33800000))
        sub = self.ior(self.f32_bits(sub), s)
        m13 = self.shl(m, 13)
        inf = self.ior(self.ior(s, self.c(0x7F800000)), m13)
        norm = self.ior(self.ior(s, self.shl(self.add(e, self.c(112)), 23)), m13)
        r = self.sel(self.u32, self.ieq(e, self.c(0)), sub, self.sel(self.u32, self.ieq(e, self.c(31)), inf, norm))
        return self.bits_f32(r)

    def bf2f(self, h: int) -> int:
        return self.bits_f32(self.shl(self.iand(h, self.c(0xFFFF)), 16))

    def f2h(self, f: int) -> int:
        """float -> f16 bits: one round-to-nearest-even (integer arithmetic), overflow to inf,
        NaN canonical (0x7E00)."""
        x = self.f32_bits(f)
        s = self.iand(self.shr(x, 16), self.c(0x8000))
        ax = self.iand(x, self.c(0x7FFFFFFF))
        # subnormal / zero result: RNE(mant >> sh), value = mant * 2^(es - 150), sh = 126 - es
        e = self.shr(ax, 23)
        isz = self.ieq(e, self.c(0))
        mant = self.sel(self.u32, isz, ax, self.ior(self.iand(ax, self.c(0x7FFFFF)), self.c(0x800000)))
        es = self.sel(self.u32, isz, self.c(1), e)
        sh = self.op("ISub", self.u32, self.c(126), es)
        sh = self.sel(self.u32, self.op("UGreaterThan", self.bool_, sh, self.c(31)), self.c(31), sh)
        q = self.op("ShiftRightLogical", self.u32, mant, sh)
        one_sh = self.op("ShiftLeftLogical", self.u32, self.c(1), sh)
        rem = self.iand(mant, self.op("ISub", self.u32, one_sh, self.c(1)))
        half = self.op("ShiftRightLogical", self.u32, one_sh, self.c(1))
        up = self.or_(self.op("UGreaterThan", self.bool_, rem, half),
                      self.and_(self.ieq(rem, half), self.ieq(self.iand(q, self.c(1)), self.c(1))))
        sub = self.add(q, self.sel(self.u32, up, self.c(1), self.c(0)))
        r = self.op("ISub", self.u32, ax, self.c(0x38000000))
        norm = self.shr(self.add(self.add(r, self.c(0xFFF)), self.iand(self.shr(r, 13), self.c(1))), 13)
        ult = lambda a, v: self.op("ULessThan", self.bool_, a, self.c(v))  # noqa: E731
        res = self.sel(self.u32, ult(ax, 0x38800000), sub, norm)
        res = self.sel(self.u32, ult(ax, 0x47800000), res, self.c(0x7C00))
        res = self.ior(s, res)
        return self.sel(self.u32, self.op("UGreaterThan", self.bool_, ax, self.c(0x7F800000)), self.c(0x7E00), res)

    def f2bf(self, f: int) -> int:
        x = self.f32_bits(f)
        r = self.shr(self.add(self.add(x, self.c(0x7FFF)), self.iand(self.shr(x, 16), self.c(1))), 16)
        r = self.iand(r, self.c(0xFFFF))
        nan = self.op("UGreaterThan", self.bool_, self.iand(x, self.c(0x7FFFFFFF)), self.c(0x7F800000))
        return self.sel(self.u32, nan, self.c(0x7FC0), r)

    def fval(self, r: int, t: T) -> int:
        """A float register's value in its compute type (float; double for f64)."""
        if t is T.F32:
            return self.bits_f32(self.r(r))
        if t is T.F64:
            return self.f64_of(self.r64(r))
        if t is T.F16:
            return self.h2f(self.r(r))
        return self.bf2f(self.r(r))

    def fbits(self, v: int, t: T) -> int:
        """compute-type value -> register bits (u32; u64 for f64)."""
        if t is T.F32:
            return self.f32_bits(v)
        if t is T.F64:
            return self.u64_of(v)
        return self.f2h(v) if t is T.F16 else self.f2bf(v)

    def isnan(self, v: int) -> int:
        return self.op("IsNan", self.bool_, v)

    # Float compares, min/max and f32 <-> f64 conversions are done on the bits: NVIDIA's Vulkan
    # driver offers no DenormPreserve for f32 and flushes subnormal f32 operands of compares and
    # of OpFConvert (its add/sub/mul keep them), so nothing that must see a subnormal f32 goes
    # through those instructions.
    def _ord_key(self, x: int, wide: bool) -> int:
        """Unsigned key whose order is the float order of bits x (-0 < +0; NaN excluded)."""
        ut = self.u64 if wide else self.u32
        k = self.b.const_u64 if wide else self.c
        top = 1 << (63 if wide else 31)
        neg = self.op("INotEqual", self.bool_, self.op("BitwiseAnd", ut, x, k(top)), k(0))
        return self.sel(ut, neg, self.op("Not", ut, x), self.op("BitwiseOr", ut, x, k(top)))

    def _bits_nan(self, x: int, wide: bool) -> int:
        ut = self.u64 if wide else self.u32
        k = self.b.const_u64 if wide else self.c
        mag = self.op("BitwiseAnd", ut, x, k((1 << (63 if wide else 31)) - 1))
        return self.op("UGreaterThan", self.bool_, mag, k(0x7FF0000000000000 if wide else 0x7F800000))

    def _bits_zero(self, x: int, wide: bool) -> int:
        ut = self.u64 if wide else self.u32
        k = self.b.const_u64 if wide else self.c
        return self.op("IEqual", self.bool_, self.op("BitwiseAnd", ut, x, k((1 << (63 if wide else 31)) - 1)), k(0))

    def fcmp(self, var: str, a: int, b: int, wide: bool) -> int:
        """setp.CMP on float bits a, b (u32 f32 bits, or u64 f64 bits): IEEE 754 §5.11, -0 == +0,
        every comparison with a NaN false except ``ne``; ``unord`` is true iff one is NaN."""
        ut = self.u64 if wide else self.u32
        k = self.b.const_u64 if wide else self.c
        nan = self.or_(self._bits_nan(a, wide), self._bits_nan(b, wide))
        if var == "unord":
            return nan
        az = self.sel(ut, self._bits_zero(a, wide), k(0), a)
        bz = self.sel(ut, self._bits_zero(b, wide), k(0), b)
        ka, kb = self._ord_key(az, wide), self._ord_key(bz, wide)
        if var in ("eq", "ne"):
            eq = self.and_(self.not_(nan), self.op("IEqual", self.bool_, ka, kb))
            return eq if var == "eq" else self.not_(eq)
        name = {"lt": "ULessThan", "le": "ULessThanEqual", "gt": "UGreaterThan", "ge": "UGreaterThanEqual"}[var]
        return self.and_(self.not_(nan), self.op(name, self.bool_, ka, kb))

    def minmax(self, op: str, t: T, a: int, b: int) -> int:
        """IEEE 754-2019 minimumNumber / maximumNumber on compute-type values; both NaN gives
        the canonical NaN (returned as bits of ``t``'s compute type: u32 or u64)."""
        wide = t is T.F64
        ut = self.u64 if wide else self.u32
        ab = self.op("Bitcast", ut, a)
        bb = self.op("Bitcast", ut, b)
        ka, kb = self._ord_key(ab, wide), self._ord_key(bb, wide)  # raw keys: -0 < +0 built in
        first = self.op("ULessThanEqual" if op == "min" else "UGreaterThanEqual", self.bool_, ka, kb)
        r = self.sel(ut, first, ab, bb)
        na, nb = self._bits_nan(ab, wide), self._bits_nan(bb, wide)
        r = self.sel(ut, nb, ab, r)
        r = self.sel(ut, na, bb, r)
        canon = self.b.const_u64(0x7FF8000000000000) if wide else self.c(0x7FC00000)
        return self.sel(ut, self.and_(na, nb), canon, r)

    def f2d(self, v: int) -> int:
        """float -> double, exact, subnormal inputs included (scaled from their integer
        significand instead of OpFConvert, which flushes them on NVIDIA)."""
        d = self.f64
        x = self.f32_bits(v)
        sub = self.ieq(self.iand(x, self.c(0x7F800000)), self.c(0))
        m = self.op("ConvertUToF", d, self.iand(x, self.c(0x7FFFFF)))
        sv = self.fop("FMul", d, m, self.b.const_f64(0x36A0000000000000))  # * 2^-149
        sv = self.sel(d, self.ieq(self.shr(x, 31), self.c(1)), self.op("FNegate", d, sv), sv)
        return self.sel(d, sub, sv, self.op("FConvert", d, v))

    def d2f(self, v: int) -> int:
        """double -> float rounded to nearest even, subnormal results included (|v| < 2^-126 is
        scaled by 2^149 and rounded to an integer significand in f64, exactly)."""
        d = self.f64
        av = self.ext(d, "FAbs", v)
        tiny = self.op("FOrdLessThan", self.bool_, av, self.b.const_f64(0x3810000000000000))  # 2^-126
        q = self.integral64("rint", self.fop("FMul", d, av, self.b.const_f64(0x4940000000000000)))  # * 2^149
        bits = self.op("UConvert", self.u32, self.op("ConvertFToU", self.u64, q))
        sign = self.op("UConvert", self.u32, self.op("ShiftRightLogical", self.u64, self.u64_of(v),
                                                     self.b.const_u64(32)))
        sub = self.ior(self.iand(sign, self.c(0x80000000)), bits)
        return self.sel(self.f32, tiny, self.bits_f32(sub), self.op("FConvert", self.f32, v))

    def sum_odd(self, p: int, c: int) -> int:
        """p + c (doubles) rounded to odd (Knuth's TwoSum error term decides the sticky bit)."""
        d = self.f64
        s = self.fop("FAdd", d, p, c)
        bb = self.fop("FSub", d, s, p)
        err = self.fop("FAdd", d, self.fop("FSub", d, p, self.fop("FSub", d, s, bb)), self.fop("FSub", d, c, bb))
        sb = self.u64_of(s)
        finite = self.not_(self.or_(self.isnan(s), self.op("IsInf", self.bool_, s)))
        even = self.ieq(self.op("BitwiseAnd", self.u64, sb, self.b.const_u64(1)), self.b.const_u64(0))
        inexact = self.op("FOrdNotEqual", self.bool_, err, self.b.const_f64(0))
        pos_err = self.op("FOrdGreaterThan", self.bool_, err, self.b.const_f64(0))
        nonneg = self.ieq(self.op("ShiftRightLogical", self.u64, sb, self.b.const_u64(63)), self.b.const_u64(0))
        away = self.op("LogicalEqual", self.bool_, pos_err, nonneg)
        stepped = self.sel(self.u64, away, self.op("IAdd", self.u64, sb, self.b.const_u64(1)),
                           self.op("ISub", self.u64, sb, self.b.const_u64(1)))
        fix = self.and_(inexact, finite, even)
        return self.f64_of(self.sel(self.u64, fix, stepped, sb))

    def d2f_odd(self, x: int) -> int:
        """double -> float rounded to odd (exact when rounded again to <= 22 significand bits)."""
        r = self.d2f(x)
        back = self.f2d(r)
        rb = self.f32_bits(r)
        inexact = self.op("FOrdNotEqual", self.bool_, back, x)
        finite = self.not_(self.or_(self.isnan(r), self.op("IsInf", self.bool_, r)))
        even = self.ieq(self.iand(rb, self.c(1)), self.c(0))
        gt = self.op("FOrdGreaterThan", self.bool_, x, back)
        nonneg = self.ieq(self.shr(rb, 31), self.c(0))
        away = self.op("LogicalEqual", self.bool_, gt, nonneg)
        stepped = self.sel(self.u32, away, self.add(rb, self.c(1)), self.op("ISub", self.u32, rb, self.c(1)))
        return self.bits_f32(self.sel(self.u32, self.and_(inexact, finite, even), stepped, rb))

    def fma_exact(self, a: int, b: int, c: int, t: T) -> int:
        """fma of f32 values a*b + c, rounded once to t (f32/f16/bf16) -> u32 bits."""
        p = self.fop("FMul", self.f64, self.f2d(a), self.f2d(b))  # exact: 48-bit product
        s = self.sum_odd(p, self.f2d(c))
        if t is T.F32:
            return self.f32_bits(self.d2f(s))
        f = self.d2f_odd(s)
        return self.f2h(f) if t is T.F16 else self.f2bf(f)

    def _neighbours(self, qb: int) -> tuple[int, int, int]:
        """For f32 magnitude bits qb: (q, midpoint to the next larger, midpoint to the next smaller)
        as doubles (exact)."""
        d = self.f64
        q = self.f2d(self.bits_f32(qb))
        up = self.f2d(self.bits_f32(self.add(qb, self.c(1))))
        dn = self.f2d(self.bits_f32(self.op("ISub", self.u32, qb, self.c(1))))
        half = self.b.const_f64(0x3FE0000000000000)
        return (q, self.fop("FMul", d, self.fop("FAdd", d, q, up), half),
                self.fop("FMul", d, self.fop("FAdd", d, q, dn), half))

    def _round_fix(self, qb: int, c_hi: int, c_lo: int, ok: int, ties: bool) -> int:
        """Step qb to the neighbour the exact value lies nearer to: c_hi = sign of (exact - upper
        midpoint), c_lo of (exact - lower midpoint), both as doubles; ties go to even."""
        zero = self.b.const_f64(0)
        even = self.ieq(self.iand(qb, self.c(1)), self.c(0))
        up_ = self.op("FOrdGreaterThan", self.bool_, c_hi, zero)
        dn_ = self.and_(self.op("FOrdLessThan", self.bool_, c_lo, zero),
                        self.op("UGreaterThan", self.bool_, qb, self.c(0)))
        if ties:
            up_ = self.or_(up_, self.and_(self.op("FOrdEqual", self.bool_, c_hi, zero), self.not_(even)))
            dn_ = self.or_(dn_, self.and_(self.op("FOrdEqual", self.bool_, c_lo, zero), self.not_(even),
                                          self.op("UGreaterThan", self.bool_, qb, self.c(0))))
        r = self.sel(self.u32, self.and_(ok, up_), self.add(qb, self.c(1)), qb)
        return self.sel(self.u32, self.and_(ok, dn_), self.op("ISub", self.u32, qb, self.c(1)), r)

    def div_exact(self, a: int, b: int) -> int:
        """Correctly rounded f32 a / b (floats) -> u32 bits."""
        d = self.f64
        ad, bd = self.f2d(a), self.f2d(b)
        q = self.d2f(self.fop("FDiv", d, ad, bd))
        qbits = self.f32_bits(q)
        sign = self.iand(qbits, self.c(0x80000000))
        qb = self.iand(qbits, self.c(0x7FFFFFFF))
        A = self.ext(d, "FAbs", ad)
        B = self.ext(d, "FAbs", bd)
        _, m_hi, m_lo = self._neighbours(qb)
        c_hi = self.fop("FSub", d, A, self.fop("FMul", d, m_hi, B))
        c_lo = self.fop("FSub", d, A, self.fop("FMul", d, m_lo, B))
        fin = lambda v: self.not_(self.or_(self.isnan(v), self.op("IsInf", self.bool_, v)))  # noqa: E731
        nz = lambda v: self.not_(self._bits_zero(self.f32_bits(v), False))  # noqa: E731
        ok = self.and_(fin(a), fin(b), nz(a), nz(b), self.op("ULessThan", self.bool_, qb, self.c(0x7F800000)))
        return self.ior(sign, self._round_fix(qb, c_hi, c_lo, ok, ties=True))

    def sqrt_exact(self, a: int) -> int:
        """Correctly rounded f32 sqrt(a) -> u32 bits; sqrt(-0) = -0, negative -> NaN."""
        d = self.f64
        ad = self.f2d(a)
        q = self.d2f(self.ext(d, "Sqrt", ad))
        qb = self.iand(self.f32_bits(q), self.c(0x7FFFFFFF))
        _, m_hi, m_lo = self._neighbours(qb)
        c_hi = self.fop("FSub", d, ad, self.fop("FMul", d, m_hi, m_hi))
        c_lo = self.fop("FSub", d, ad, self.fop("FMul", d, m_lo, m_lo))
        ab = self.f32_bits(a)
        zero = self._bits_zero(ab, False)
        negative = self.and_(self.ieq(self.shr(ab, 31), self.c(1)), self.not_(zero))
        pos = self.and_(self.not_(zero), self.not_(negative), self.not_(self.isnan(a)))
        ok = self.and_(pos, self.not_(self.op("IsInf", self.bool_, a)),
                       self.op("ULessThan", self.bool_, qb, self.c(0x7F800000)))
        r = self._round_fix(qb, c_hi, c_lo, ok, ties=False)
        r = self.sel(self.u32, negative, self.c(0x7FC00000), r)
        r = self.sel(self.u32, zero, ab, r)
        return self.sel(self.u32, self.isnan(a), self.c(0x7FC00000), r)

    def ext(self, rtype: int, inst: str, *args: int) -> int:
        return self.b.ext(rtype, inst, *args)

    def integral64(self, op: str, x: int) -> int:
        """floor/ceil/trunc/rint of a double on its bits (exact, sign of zero kept): lavapipe's
        f64 Trunc/RoundEven drop the sign of zero and misround."""
        d, u64 = self.f64, self.u64
        k = self.b.const_u64
        xb = self.u64_of(x)
        sign = self.op("BitwiseAnd", u64, xb, k(1 << 63))
        ax = self.op("BitwiseAnd", u64, xb, k((1 << 63) - 1))
        big = self.op("UGreaterThanEqual", self.bool_, ax, k(0x4330000000000000))  # |x| >= 2^52, inf, NaN
        if op == "rint":
            two52 = self.b.const_f64(0x4330000000000000)
            r = self.fop("FSub", d, self.fop("FAdd", d, self.f64_of(ax), two52), two52)
            rb = self.op("BitwiseOr", u64, self.u64_of(r), sign)
            return self.f64_of(self.sel(u64, big, xb, rb))
        e = self.op("UConvert", self.u32, self.op("ShiftRightLogical", u64, ax, k(52)))
        frac_bits = self.op("ISub", self.u32, self.c(1075), e)  # fraction bits below the unit, when e >= 1023
        small = self.op("ULessThan", self.bool_, e, self.c(1023))  # |x| < 1
        sh = self.sel(self.u32, small, self.c(0), frac_bits)
        mask = self.op("ISub", u64, self.op("ShiftLeftLogical", u64, k(1), self.op("UConvert", u64, sh)), k(1))
        t = self.op("BitwiseAnd", u64, xb, self.op("Not", u64, mask))
        t = self.sel(u64, small, sign, t)
        t = self.sel(u64, big, xb, t)
        tv = self.f64_of(t)
        if op == "trunc":
            return tv
        one = self.b.const_f64(0x3FF0000000000000)
        if op == "floor":
            adj = self.op("FOrdLessThan", self.bool_, x, tv)
            return self.sel(d, adj, self.fop("FSub", d, tv, one), tv)
        adj = self.op("FOrdGreaterThan", self.bool_, x, tv)
        return self.sel(d, adj, self.fop("FAdd", d, tv, one), tv)

    def two_sum(self, a: int, b: int) -> tuple[int, int]:
        d = self.f64
        s = self.fop("FAdd", d, a, b)
        bb = self.fop("FSub", d, s, a)
        return s, self.fop("FAdd", d, self.fop("FSub", d, a, self.fop("FSub", d, s, bb)), self.fop("FSub", d, b, bb))

    def fma64(self, a: int, b: int, c: int) -> int:
        """Correctly rounded double a*b + c without a fused multiply-add: Dekker's exact product
        (Veltkamp splitting) and Boldo & Melquiond's correctly rounded three-term sum
        (RN(th + RO(tl + ul)), 2008). Operands are first scaled by powers of two (exact) so that
        the split cannot overflow and the product's error term cannot underflow: a huge product or
        addend is computed 2^8 lower and scaled back up (exact, or the right overflow); a tiny
        product 2^200 higher, rounded to odd, then scaled down (one rounding into the subnormal
        range). Zero, infinite or NaN operands use the driver's Fma, exact there because the
        product is then exact; a finite product plus an infinite addend is the addend."""
        d = self.f64
        k = self.b.const_f64
        fabs = lambda v: self.ext(d, "FAbs", v)  # noqa: E731
        lt = lambda u, v: self.op("FOrdLessThan", self.bool_, u, v)  # noqa: E731
        fin = lambda v: self.not_(self.or_(self.isnan(v), self.op("IsInf", self.bool_, v)))  # noqa: E731
        two900, two_900, two800 = k(0x7830000000000000), k(0x07B0000000000000), k(0x71F0000000000000)
        ph0 = self.fop("FMul", d, a, b)
        P, C = fabs(ph0), fabs(c)
        nz = lambda v: self.op("FOrdNotEqual", self.bool_, v, k(0))  # noqa: E731
        ok = self.and_(fin(a), fin(b), fin(c), nz(a), nz(b))
        hi = self.and_(ok, self.not_(self.and_(lt(P, two900), lt(C, two900))))
        lo = self.and_(ok, self.not_(hi), lt(P, two_900))
        a_big = lt(fabs(b), fabs(a))
        # hi: the larger of a, b down by 2^8 and c down by 2^8; lo: the smaller up by 2^200, c too
        s_big = self.sel(d, hi, k(0x3F70000000000000), k(0x3FF0000000000000))  # 2^-8 or 1
        s_small = self.sel(d, lo, k(0x4C70000000000000), k(0x3FF0000000000000))  # 2^200 or 1
        sa = self.sel(d, a_big, s_big, s_small)
        sb = self.sel(d, a_big, s_small, s_big)
        sc = self.sel(d, hi, s_big, s_small)
        a1, b1, c1 = self.fop("FMul", d, a, sa), self.fop("FMul", d, b, sb), self.fop("FMul", d, c, sc)
        # keep the split from overflowing: move 2^100 from a huge operand to the other (exact)
        down, up = k(0x39B0000000000000), k(0x4630000000000000)  # 2^-100, 2^100
        ab = lt(two900, fabs(a1))
        bb = lt(two900, fabs(b1))
        a2 = self.sel(d, ab, self.fop("FMul", d, a1, down), self.sel(d, bb, self.fop("FMul", d, a1, up), a1))
        b2 = self.sel(d, ab, self.fop("FMul", d, b1, up), self.sel(d, bb, self.fop("FMul", d, b1, down), b1))
        split_c = k(0x41A0000002000000)  # 2^27 + 1

        def split(v: int) -> tuple[int, int]:
            t = self.fop("FMul", d, split_c, v)
            h = self.fop("FSub", d, t, self.fop("FSub", d, t, v))
            return h, self.fop("FSub", d, v, h)

        ph = self.fop("FMul", d, a2, b2)
        ah, al = split(a2)
        bh, bl = split(b2)
        pl = self.fop("FAdd", d, self.fop("FAdd", d, self.fop("FAdd", d, self.fop("FSub", d, self.fop(
            "FMul", d, ah, bh), ph), self.fop("FMul", d, ah, bl)), self.fop("FMul", d, al, bh)),
            self.fop("FMul", d, al, bl))
        uh, ul = self.two_sum(c1, pl)
        th, tl = self.two_sum(ph, uh)
        v = self.sum_odd(tl, ul)
        res = self.fop("FAdd", d, th, v)
        res = self.sel(d, hi, self.fop("FMul", d, res, k(0x4070000000000000)), res)  # * 2^8
        # a result below 2^-1022 once scaled back: round to odd here, round once when scaling down
        sub = self.and_(lo, lt(fabs(res), k(0x0C90000000000000)))  # 2^-822
        scaled = self.sel(d, sub, self.sum_odd(th, v), res)
        # [2^-823, 2^-822) scales to subnormals of 52 bits, one too many for round-to-odd at 53:
        # round th + v to the 2^-874 grid directly (RNE of |th| by adding 2^-822, then v decides)
        band = self.and_(sub, self.not_(lt(fabs(res), k(0x0C80000000000000))))
        sgn = self.op("FOrdLessThan", self.bool_, th, k(0))
        ath = fabs(th)
        cst = k(0x0C90000000000000)
        r = self.fop("FSub", d, self.fop("FAdd", d, ath, cst), cst)
        e = self.fop("FSub", d, ath, r)
        vs = self.sel(d, sgn, self.op("FNegate", d, v), v)
        h = k(0x0940000000000000)  # half the grid: 2^-875
        grid = k(0x0950000000000000)  # 2^-874
        q = self.op("ConvertFToU", self.u64, self.fop("FMul", d, r, k(0x7690000000000000)))  # r / 2^-874
        rodd = self.ieq(self.op("BitwiseAnd", self.u64, q, self.b.const_u64(1)), self.b.const_u64(1))
        du = self.fop("FAdd", d, self.fop("FSub", d, e, h), vs)
        dd = self.fop("FAdd", d, self.fop("FAdd", d, e, h), vs)
        zero = k(0)
        go_up = self.or_(lt(zero, du), self.and_(self.op("FOrdEqual", self.bool_, du, zero), rodd))
        go_dn = self.or_(lt(dd, zero), self.and_(self.op("FOrdEqual", self.bool_, dd, zero), rodd))
        rb = self.sel(d, go_up, self.fop("FAdd", d, r, grid), self.sel(d, go_dn, self.fop("FSub", d, r, grid), r))
        rb = self.sel(d, sgn, self.op("FNegate", d, rb), rb)
        scaled = self.sel(d, band, rb, scaled)
        res = self.sel(d, lo, self.fop("FMul", d, scaled, k(0x3370000000000000)), res)  # * 2^-200
        P2 = fabs(ph)
        two1020 = k(0x7FB0000000000000)
        exact_ok = self.and_(ok, lt(two_900, P2), lt(P2, two1020), lt(fabs(c1), two1020))
        out = self.sel(d, exact_ok, res, self.ext(d, "Fma", a, b, c))
        out = self.sel(d, self.and_(lo, self.not_(lt(C, two800))), c, out)  # a tiny product leaves a huge c
        return self.sel(d, self.and_(fin(a), fin(b), self.not_(fin(c))), c, out)


# --------------------------------------------------------------------------- instruction handlers
# Each handler emits one instruction's effect (inside a selection on its executing condition);
# wave-collective handlers run in every invocation with ``x.ex`` = this lane executes.

_Handler = Callable[[_Lowering, Instruction], None]

_CMP_I = {("eq", False): "IEqual", ("ne", False): "INotEqual", ("lt", False): "ULessThan",
          ("le", False): "ULessThanEqual", ("gt", False): "UGreaterThan", ("ge", False): "UGreaterThanEqual",
          ("eq", True): "IEqual", ("ne", True): "INotEqual", ("lt", True): "SLessThan",
          ("le", True): "SLessThanEqual", ("gt", True): "SGreaterThan", ("ge", True): "SGreaterThanEqual"}


def _ival(x: _Lowering, r: int, t: T) -> tuple[int, int]:
    """(value, SPIR-V type) of an integer register operand of type t."""
    return (x.r64(r), x.u64) if t.bits == 64 else (x.r(r), x.u32)


def _iset(x: _Lowering, r: int, t: T, v: int) -> None:
    (x.set64 if t.bits == 64 else x.setr)(r, v)


def _iconst(x: _Lowering, t: int, v: int) -> int:
    return x.b.const_u64(v) if t == x.u64 else x.c(v)


def _int_bin(x: _Lowering, ins: Instruction) -> None:
    t, op = ins.defn.type, ins.defn.op
    dreg, a, b = ins.operands
    A, ty = _ival(x, a, t)
    B, _ = _ival(x, b, t)
    n = t.bits
    if op in ("add", "sub", "mul"):
        _iset(x, dreg, t, x.op({"add": "IAdd", "sub": "ISub", "mul": "IMul"}[op], ty, A, B))
        return
    if op in ("min", "max"):
        cmp = ("SLessThan" if op == "min" else "SGreaterThan") if t.is_signed else \
              ("ULessThan" if op == "min" else "UGreaterThan")
        _iset(x, dreg, t, x.sel(ty, x.op(cmp, x.bool_, A, B), A, B))
        return
    zero, one, allones = _iconst(x, ty, 0), _iconst(x, ty, 1), _iconst(x, ty, (1 << n) - 1)
    bz = x.op("IEqual", x.bool_, B, zero)
    if t.is_signed:
        mn = _iconst(x, ty, 1 << (n - 1))
        ov = x.and_(x.op("IEqual", x.bool_, A, mn), x.op("IEqual", x.bool_, B, allones))
        bad = x.or_(bz, ov)
        sb = x.sel(ty, bad, one, B)
        if op == "div":
            q = x.op("SDiv", ty, A, sb)
            res = x.sel(ty, bz, allones, x.sel(ty, ov, A, q))
        else:
            # a - b * trunc(a / b): NVIDIA's OpSRem gives wrong answers for some negative operands
            q = x.op("ISub", ty, A, x.op("IMul", ty, sb, x.op("SDiv", ty, A, sb)))
            res = x.sel(ty, bz, A, x.sel(ty, ov, zero, q))
    else:
        sb = x.sel(ty, bz, one, B)
        if op == "div":
            res = x.sel(ty, bz, allones, x.op("UDiv", ty, A, sb))
        else:
            res = x.sel(ty, bz, A, x.op("UMod", ty, A, sb))
    _iset(x, dreg, t, res)


def _int_un(x: _Lowering, ins: Instruction) -> None:
    t = ins.defn.type
    dreg, a = ins.operands
    A, ty = _ival(x, a, t)
    neg = x.op("ISub", ty, _iconst(x, ty, 0), A)
    if ins.defn.op == "neg":
        _iset(x, dreg, t, neg)
    else:
        _iset(x, dreg, t, x.sel(ty, x.op("SLessThan", x.bool_, A, _iconst(x, ty, 0)), neg, A))


def _mulhi(x: _Lowering, ins: Instruction) -> None:
    dreg, a, b = ins.operands
    st = x.b.t_struct(x.u32, x.u32, key="mulext")
    r = x.op("SMulExtended" if ins.defn.type.is_signed else "UMulExtended", st, x.r(a), x.r(b))
    x.setr(dreg, x.op("CompositeExtract", x.u32, r, 1))


def _mad(x: _Lowering, ins: Instruction) -> None:
    dreg, a, b, c = ins.operands
    x.setr(dreg, x.add(x.op("IMul", x.u32, x.r(a), x.r(b)), x.r(c)))


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
    bits = _float_compute(x, op, t, [x.fval(r, t) for r in src])
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


def _shift(x: _Lowering, ins: Instruction) -> None:
    t = ins.defn.type
    dreg, a, b = ins.operands
    n = t.bits
    A, ty = (x.r64(a), x.u64) if n == 64 else (x.r(a), x.u32)
    cnt = x.r(b)
    big = x.op("UGreaterThanEqual", x.bool_, cnt, x.c(n))
    c_ty = x.op("UConvert", x.u64, cnt) if n == 64 else cnt
    if ins.defn.op == "shl":
        res = x.sel(ty, big, _iconst(x, ty, 0), x.op("ShiftLeftLogical", ty, A, c_ty))
    elif t.is_signed:
        cl = x.sel(x.u32, x.op("UGreaterThanEqual", x.bool_, cnt, x.c(n - 1)), x.c(n - 1), cnt)
        cl = x.op("UConvert", x.u64, cl) if n == 64 else cl
        res = x.op("ShiftRightArithmetic", ty, A, cl)
    else:
        res = x.sel(ty, big, _iconst(x, ty, 0), x.op("ShiftRightLogical", ty, A, c_ty))
    _iset(x, dreg, t, res)


def _bitop(x: _Lowering, ins: Instruction) -> None:
    t, op = ins.defn.type, ins.defn.op
    if t is T.PRED:
        _pred_op(x, ins)
        return
    dreg, *src = ins.operands
    vals = [_ival(x, r, t)[0] for r in src]
    ty = x.u64 if t.bits == 64 else x.u32
    if op == "not":
        _iset(x, dreg, t, x.op("Not", ty, vals[0]))
    else:
        _iset(x, dreg, t, x.op({"and": "BitwiseAnd", "or": "BitwiseOr", "xor": "BitwiseXor"}[op], ty, *vals))


def _bitcount(x: _Lowering, ins: Instruction) -> None:
    dreg, a = ins.operands
    op = ins.defn.op
    v = x.r(a)
    if op == "brev":
        res = x.op("BitReverse", x.u32, v)
    elif op == "popc":
        res = x.op("BitCount", x.u32, v)
    elif op == "clz":
        msb = x.ext(x.u32, "FindUMsb", v)  # -1 (all ones) for 0
        res = x.sel(x.u32, x.ieq(v, x.c(0)), x.c(32), x.op("ISub", x.u32, x.c(31), msb))
    else:
        res = x.sel(x.u32, x.ieq(v, x.c(0)), x.c(32), x.ext(x.u32, "FindILsb", v))
    x.setr(dreg, res)


def _setp(x: _Lowering, ins: Instruction) -> None:
    t, var = ins.defn.type, ins.defn.variant
    dreg, a, b = ins.operands
    if t.is_float:
        if t is T.F64:
            res = x.fcmp(var, x.r64(a), x.r64(b), True)
        else:
            res = x.fcmp(var, x.f32_bits(x.fval(a, t)), x.f32_bits(x.fval(b, t)), False)
    else:
        A, _ = _ival(x, a, t)
        B, _ = _ival(x, b, t)
        res = x.op(_CMP_I[(var, t.is_signed)], x.bool_, A, B)
    x.store(x.pv[dreg], res)


def _selp(x: _Lowering, ins: Instruction) -> None:
    dreg, a, b, pr = ins.operands
    c = x.p(pr)
    if ins.defn.type.bits == 64:
        lo = x.sel(x.u32, c, x.r(a), x.r(b))
        hi = x.sel(x.u32, c, x.r(a + 1), x.r(b + 1))
        x.setr(dreg, lo)
        x.setr(dreg + 1, hi)
    else:
        x.setr(dreg, x.sel(x.u32, c, x.r(a), x.r(b)))


def _pred_op(x: _Lowering, ins: Instruction) -> None:
    op = ins.defn.op
    if op == "setp_const":
        x.store(x.pv[ins.operands[0]], x.b.const_bool(ins.defn.variant == "true"))
        return
    if op == "mov":
        dreg, a = ins.operands
        x.store(x.pv[dreg], x.p(a))
        return
    dreg, a, b = ins.operands
    name = {"and": "LogicalAnd", "or": "LogicalOr", "xor": "LogicalNotEqual"}[op]
    x.store(x.pv[dreg], x.op(name, x.bool_, x.p(a), x.p(b)))


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
            if dst is T.F64:
                x.set64(dreg, x.u64_of(x.f2d(v)))
            elif src is T.F64:
                if dst is T.F32:
                    x.setr(dreg, x.f32_bits(x.d2f(v)))
                else:
                    f = x.d2f_odd(v)
                    x.setr(dreg, x.f2h(f) if dst is T.F16 else x.f2bf(f))
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
    if ins.defn.type is T.PRED:
        _pred_op(x, ins)
        return
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
        x.setr(dreg, x.c(v & 0xFFFFFFFF))
        x.setr(dreg + 1, x.c(v >> 32))
        return
    mask = 0xFFFF if ins.defn.type.bits == 16 else 0xFFFFFFFF
    x.setr(dreg, x.c(int(imm) & mask))


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
    else:
        v = tl
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
    x.op("AtomicAnd", x.u32, ptr, x.c(scope), x.c(sem), x.op("Not", x.u32, mask))
    x.op("AtomicOr", x.u32, ptr, x.c(scope), x.c(sem), val)


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
        scope = SCOPE[_SCOPE_OF[scope_v]]
        sem = _ORDER_SEM[order] | SEM["UniformMemory"]
    else:
        scope, sem = SCOPE["Workgroup"], SEM["WorkgroupMemory"]
        order = MemoryOrder.RELAXED
    off = x.byte_offset(addr.reg, addr.offset)
    ptr = x.word_ptr(addr, off)
    sc, se = x.c(scope), x.c(sem)
    # the comparison-failed semantics of a CAS may not release
    se_fail = x.c(sem & ~(SEM["Release"] | SEM["AcquireRelease"])
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


_WRED_INT = {("add", False): (0, "IAdd"), ("add", True): (0, "IAdd"), ("min", False): (0xFFFFFFFF, "ULessThan"),
             ("min", True): (0x7FFFFFFF, "SLessThan"), ("max", False): (0, "UGreaterThan"),
             ("max", True): (0x80000000, "SGreaterThan"), ("and", False): (0xFFFFFFFF, "BitwiseAnd"),
             ("or", False): (0, "BitwiseOr"), ("xor", False): (0, "BitwiseXor")}


def _wred(x: _Lowering, ins: Instruction) -> None:
    dreg, a = ins.operands
    t, op = ins.defn.type, ins.defn.variant
    av = x.r(a)
    if t is T.F32:
        ident = 0x80000000 if op == "add" else 0x7FC00000
        s = x.sel(x.u32, x.ex, av, x.c(ident))
        k = 1
        while k < x.W:
            o = _shuffle(x, s, x.op("BitwiseXor", x.u32, x.lane, x.c(k)))
            if op == "add":
                s = x.f32_bits(x.fop("FAdd", x.f32, x.bits_f32(s), x.bits_f32(o)))
            else:
                s = x.minmax(op, T.F32, x.bits_f32(s), x.bits_f32(o))
            k *= 2
        nan = x.isnan(x.bits_f32(s))
        _write_ex(x, dreg, x.sel(x.u32, nan, x.c(0x7FC00000), s))
        return
    ident, name = _WRED_INT[(op, t.is_signed)]
    s = x.sel(x.u32, x.ex, av, x.c(ident))
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
    s = x.sel(x.u32, x.ex, x.r(a), x.c(0x80000000 if flt else 0))
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
        s = x.sel(x.u32, pos, o, x.c(0))
    if flt:
        s = x.sel(x.u32, x.isnan(x.bits_f32(s)), x.c(0x7FC00000), s)
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
    sem = x.c(SEM["AcquireRelease"] | SEM["WorkgroupMemory"])
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


def _arith(int_handler: _Handler, float_handler: _Handler) -> _Handler:
    return lambda x, i: (float_handler if i.defn.type.is_float else int_handler)(x, i)


_HANDLERS: dict[str, _Handler] = {
    "add": _arith(_int_bin, _float_op), "sub": _arith(_int_bin, _float_op), "mul": _arith(_int_bin, _float_op),
    "div": _arith(_int_bin, _float_op), "rem": _int_bin, "min": _arith(_int_bin, _float_op),
    "max": _arith(_int_bin, _float_op), "neg": _arith(_int_un, _sign_op), "abs": _arith(_int_un, _sign_op),
    "mulhi": _mulhi, "mad": _mad, "fma": _float_op, "sqrt": _float_op, "floor": _float_op,
    "ceil": _float_op, "trunc": _float_op, "rint": _float_op,
    "ex2": _approx, "lg2": _approx, "sin": _approx, "cos": _approx, "rsqrt": _approx, "rcp": _approx,
    "tanh": _approx,
    "and": _bitop, "or": _bitop, "xor": _bitop, "not": _bitop, "shl": _shift, "shr": _shift,
    "popc": _bitcount, "clz": _bitcount, "ctz": _bitcount, "brev": _bitcount,
    "setp": _setp, "selp": _selp, "setp_const": _pred_op, "mov": _mov,
    "ld": _ld, "st": _st, "atom": _atom, "red": _atom,
    "shfl": _shfl, "bcast": _bcast, "ballot": _ballot, "any": _any_all, "all": _any_all,
    "wred": _wred, "wscan": _wscan, "mma": _mma,
    "cvt": _cvt, "cvt_pack": _cvt_pack, "movi": _movi, "mov_sr": _mov_sr, "ldarg": _ldarg,
    "barrier": _no_stmt, "fence": _no_stmt,
    **{op: _no_stmt for op in _CONTROL},
}


# --------------------------------------------------------------------------- entry point

def translate(module: Module, wave_width: int = 32, features: VulkanFeatures = FULL_FEATURES,
              kernels: Sequence[str] | None = None) -> SpirvProgram:
    """Translate the kernels of ``module`` (all, or the named ones) to SPIR-V for subgroup size W.

    Args:
        module: a valid WAVE module.
        wave_width: W, one of 8, 16, 32, 64 (the subgroup size required for wave kernels).
        features: the device's features; kernels needing more are listed in
            ``SpirvProgram.refused`` with the instructions and reasons instead of translated.
        kernels: restrict to these kernel names.

    Raises:
        SpirvError: W not supported, or an unknown kernel name.
    """
    if wave_width not in WAVE_WIDTHS:
        raise SpirvError([f"wave width {wave_width!r} is not one of {WAVE_WIDTHS}"])
    names = [k.name for k in module.kernels]
    if kernels is not None:
        bad = [n for n in kernels if n not in names]
        if bad:
            raise SpirvError([f"no kernel {bad[0]!r}; the module has {names}"])
    problems = check_supported(module, features)
    out: dict[str, SpirvKernel] = {}
    refused: dict[str, str] = {}
    for k in module.kernels:
        if kernels is not None and k.name not in kernels:
            continue
        if k.name in problems:
            refused[k.name] = "; ".join(problems[k.name][:3])
            continue
        if uses_wave_ops(module, k.code) and wave_width not in features.wave_widths:
            refused[k.name] = (f"kernel {k.name!r} uses wave operations but the device cannot run subgroups "
                               f"of {wave_width} (it offers {list(features.wave_widths)})")
            continue
        out[k.name] = _Lowering(features, module, k, wave_width).lower()
    return SpirvProgram(wave_width, out, refused)
