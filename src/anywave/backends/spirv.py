"""WAVE -> SPIR-V (1.5) for Vulkan compute, emitted as a binary module by
:mod:`anywave.backends.spirv_asm` (no external tool needed; ``spirv-val`` checks it in tests).

``translate(module, wave_width, features)`` gives a :class:`SpirvProgram`: one SPIR-V module per
kernel (entry point ``main``), its binding layout, and the kernels refused for the device with
the reason. Semantics follow docs/spec.md, bit for bit with the emulator for every ``exact``/
``exact-nan`` instruction:

* **Control flow.** The shared control walk (:class:`anywave.backends.lowering.control.ControlWalk`,
  the one PTX and the C family take) with its mask-stack strategy (spec §7.4) for every kernel,
  kept per invocation; :mod:`anywave.backends.spirv_control` spells it: ``if``/``else``/
  ``break``/``continue``/``ret``/``halt`` only update masks, a region the walk enters is one
  ``OpSelectionMerge`` selection on "some invocation of the subgroup is active", a loop one
  ``OpLoopMerge`` loop whose only exit is at its top, and instructions run inside a selection on
  ``A`` (and their guard). ``call`` is inlined by the walk. So the module needs no multi-level
  break, and subgroup operations always run in converged control flow.
* **Waves.** Kernels with wave operations get ``requiredSubgroupSize = W`` and full subgroups; the
  workgroup is one dimension padded to a multiple of W (padding lanes are never active, like the
  spec's non-existent lanes), and the WAVE linear thread id is ``SubgroupId * W +
  SubgroupLocalInvocationId``, so waves are exactly the device's subgroups whatever order the
  device assigns invocations to subgroups in. Wave operations use only ``OpGroupNonUniformShuffle``,
  ``Ballot`` and ``Any``; f32 reductions and scans are the spec's butterfly / Kogge-Stone steps.
* **Floats.** Every float add/sub/mul/div result is decorated ``NoContraction``. What Vulkan does
  not round correctly (``OpFDiv``, ``sqrt``, ``fma``), what drivers get wrong (lavapipe's f64
  ``Trunc``/``RoundEven``, NVIDIA's flushing of subnormal f32 in compares and ``OpFConvert``) and
  f16/bf16 are emulated exactly in :mod:`anywave.backends.spirv_float`. The float-controls
  execution modes the device supports (``SignedZeroInfNanPreserve``, ``RoundingModeRTE``,
  ``DenormPreserve``) are declared; the runtime reports the ones it lacks.
* **MMA fragments** (spec §8.14): :mod:`anywave.backends.spirv_mma` (slots as ``Function``
  arrays spread over the wave, ``mma`` through subgroup shuffles and the exact fma); on a device
  with ``VK_KHR_cooperative_matrix`` at W, :mod:`anywave.backends.spirv_coop` (wave-scope slots as
  cooperative matrices, ``mma`` on the device's matrix unit, class ``bounded``).
* **Memory.** A buffer argument is a storage buffer of 32-bit words (binding = its position among
  the buffer arguments); scalars and the workgroup size are push constants (32-bit words, 64-bit
  scalars as two). 8/16-bit stores are ``OpAtomicAnd`` + ``OpAtomicOr`` on the containing word, so
  lanes storing neighbouring bytes never race. Local memory is a ``Workgroup`` array of words.
  Offsets are computed in 32 bits: a storage buffer is smaller than 4 GiB, so every in-bounds
  offset (the only defined ones) is exact.
"""

from __future__ import annotations

import dataclasses
import hashlib
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from anywave.backends import spirv_control, spirv_coop, spirv_mma, spirv_status
from anywave.backends.cfamily import uses_wave_ops
from anywave.backends.lowering.control import ControlWalk
from anywave.backends.lowering.fragments import fragment_slots
from anywave.backends.spirv_asm import BUILTIN, EXEC_MODE, OP, SCOPE, SEM, STORAGE, Builder, encode
from anywave.backends.spirv_float import FloatOps
from anywave.backends.spirv_ops import SPIRV
from anywave.binary.module import DeviceAddr, Kernel, LocalAddr, Module, Pred, kernel_bodies
from anywave.errors import WaveError
from anywave.isa.table import Flag, InstrDef
from anywave.isa.types import ArgKind, ScalarType, SpecialRegister

T = ScalarType
S = SpecialRegister

#: the NonPrivatePointer memory-access operand (SPIR-V §3.26; Vulkan memory model)
NON_PRIVATE = 0x20
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
        loop_limit: the driver ends an invocation's loops after this many turns in all (Mesa's
            lavapipe: 65535), 0 for none; kernels with loops then get a status record that
            reports a cut loop (:mod:`anywave.backends.spirv_status`).
        guard_local: local memory is host memory the driver does not bound (lavapipe: a
            workgroup-array overrun writes into the process, a segfault): every local access is
            guarded and an overrun reported, in every build.
        cooperative_matrix: the element types (``"f16"``, ``"bf16"``) for which the device offers
            ``VK_KHR_cooperative_matrix`` 16 x 16 x 16 subgroup matrices accumulating in f32
            (empty: none, or not turned on with ``ANYWAVE_VULKAN_COOPMAT=1``): wave-scope fragments
            of those types then live in cooperative matrices (:mod:`anywave.backends.spirv_coop`).
        coop_wave_width: the subgroup size those matrices are offered at (the device's own
            subgroup size); other W keep the per-lane lowering.
    """

    fp64: bool = True
    int64: bool = True
    wave_widths: tuple[int, ...] = WAVE_WIDTHS
    signed_zero_inf_nan: tuple[int, ...] = (32, 64)
    rte: tuple[int, ...] = (32, 64)
    denorm_preserve: tuple[int, ...] = (32, 64)
    loop_limit: int = 0
    guard_local: bool = False
    cooperative_matrix: tuple[str, ...] = ()
    coop_wave_width: int = 0


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
        status: the kernel takes the status record (:mod:`anywave.backends.spirv_status`) as its
            last binding, ``len(buffers)``: ``ERR_WORDS`` u32 words, zeroed before the launch,
            read after it by :func:`anywave.backends.spirv_status.raise_if_failed`.
        checked: the bounds-checked build (every memory access guarded).
        sites: what each recorded site index of the status record is (loops, guarded accesses).
        scratch_per_wave: bytes of local memory the lowering adds per wave of the workgroup
            (cooperative-matrix staging, :mod:`anywave.backends.spirv_coop`), beyond
            ``local_memory``.
        cooperative_matrix: wave-scope fragments live in cooperative matrices (their results are
            the spec's ``bounded`` class, not the emulator's bits).
    """

    name: str
    words: tuple[int, ...]
    buffers: tuple[int, ...]
    push: tuple[tuple[int, int], ...]
    wave_mode: bool
    local_memory: int
    status: bool = False
    checked: bool = False
    sites: tuple[Any, ...] = ()
    scratch_per_wave: int = 0
    cooperative_matrix: bool = False

    def local_memory_for(self, threads: int, W: int) -> int:
        """Bytes of local memory a workgroup of ``threads`` threads uses at wave width W."""
        return self.local_memory + self.scratch_per_wave * -(-threads // W)

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
    if op in ("fma", "mma", "fmma", "fgmma", "fexp2", "fdiv") or (op in ("div", "sqrt") and t is not None
                                                                   and t.is_float):
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
    if not SPIRV.handles(defn):
        why = SPIRV.refusal(defn) or "no handler is registered"
        return f"{defn.mnemonic}: no SPIR-V lowering for {defn.sem!r} ({why})"
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
        for owner, code in kernel_bodies(module, k):
            for i, ins in enumerate(code):
                why = unsupported_reason(ins.defn, features)
                if why:
                    probs.append(f"{owner}, instruction {i}: {why}")
        if probs:
            out[k.name] = probs
    return out


# --------------------------------------------------------------------------- the lowering

class _Lowering(FloatOps):
    """Lowers one kernel to one SPIR-V module."""

    def __init__(self, feats: VulkanFeatures, module: Module, kernel: Kernel, W: int, checked: bool = False) -> None:
        self.f, self.m, self.k, self.W = feats, module, kernel, W
        self.checked = checked
        self.sites: list[Any] = []
        self.cur_label = f"kernel {kernel.name!r}"
        self.status: int | None = None
        self.wave = uses_wave_ops(module, kernel.code)
        b = self.b = Builder()
        b.capability("Shader")
        self.u32, self.bool_ = b.t_uint(), b.t_bool()
        self.f32 = b.t_float()
        self.v2u = b.t_vec(self.u32, 2)
        self.v3u = b.t_vec(self.u32, 3)
        self._vars: list[int] = []  # words of the entry block's OpVariables
        self.n = 0
        self.interface: list[int] = []
        self.uses_f64 = False
        self._headers: dict[int, int] = {}
        self.coop = False  # set by lower(): spirv_coop.usable
        #: pointers into workgroup and storage-buffer memory (their accesses are NonPrivatePointer
        #: under the Vulkan memory model, which cooperative-matrix kernels use)
        self._shared: set[int] = set()
        self._shared_types: set[int] = set()

    # ---- small helpers
    def c(self, v: int) -> int:
        return self.b.const_u32(v)

    def opaque(self, v: int) -> int:
        """The u32 constant ``v`` as a value the driver cannot see through: ``v ^ z`` where ``z``
        is 0 at run time but unknown to the driver's compiler (the workgroup size's x, a push
        constant at most the device's workgroup limit, shifted right by 31). ``movi`` puts its
        immediate in a register this way, so a literal operand reaches a float instruction
        exactly as a run-time value does: drivers fold IEEE special cases of literals wrongly
        (lavapipe 22.3: ``x / 0.0`` gave +0, ``0 * inf`` a non-canonical NaN, though the module
        declares SignedZeroInfNanPreserve and every result is NoContraction; issue 31, item
        14), and run-time operands are right. Cost: one XOR per ``movi``."""
        return self.op("BitwiseXor", self.u32, self.c(v), self.opaque_zero)

    def fresh(self) -> int:
        self.n += 1
        return self.n

    def var(self, t: int, init: int | None = None) -> int:
        v = self.b.id()
        extra = (init,) if init is not None else ()
        self._vars += encode(OP["Variable"], (self.b.t_ptr("Function", t), v, STORAGE["Function"], *extra))
        return v

    def op(self, name: str, rtype: int, *args: int) -> int:
        r = self.b.value(name, rtype, *args)
        if name == "AccessChain" and rtype in self._shared_types:
            self._shared.add(r)
        return r

    def fop(self, name: str, rtype: int, *args: int) -> int:
        """A float arithmetic op decorated NoContraction (never fused or reassociated)."""
        r = self.b.value(name, rtype, *args)
        self.b.decorate(r, "NoContraction")
        return r

    def load(self, ptr: int, t: int | None = None) -> int:
        if ptr in self._shared:
            return self.op("Load", self.u32 if t is None else t, ptr, NON_PRIVATE)
        return self.op("Load", self.u32 if t is None else t, ptr)

    def store(self, ptr: int, v: int) -> None:
        if ptr in self._shared:
            self.b.emit("Store", ptr, v, NON_PRIVATE)
        else:
            self.b.emit("Store", ptr, v)

    def sem(self, bits: int) -> int:
        """The memory-semantics constant ``bits``; under the Vulkan memory model (cooperative-matrix
        kernels) a release also makes the storage classes' writes available and an acquire makes
        them visible (``MakeAvailable`` / ``MakeVisible``: without them a barrier orders the
        invocations but forms no availability or visibility chain, Vulkan memory model appendix)."""
        ordered = SEM["Acquire"] | SEM["Release"] | SEM["AcquireRelease"] | SEM["SequentiallyConsistent"]
        if not bits & ordered:
            # relaxed: no storage-class bits either (they only qualify an ordering; Vulkan's
            # VUID-StandaloneSpirv-MemorySemantics-10871 rejects them on a relaxed atomic)
            return self.c(0)
        if self.coop and bits & (SEM["UniformMemory"] | SEM["WorkgroupMemory"]):
            if bits & (SEM["Release"] | SEM["AcquireRelease"]):
                bits |= SEM["MakeAvailable"]
            if bits & (SEM["Acquire"] | SEM["AcquireRelease"]):
                bits |= SEM["MakeVisible"]
        return self.c(bits)

    def memory_operands(self) -> tuple[int, ...]:
        """The memory operands of an access to workgroup or storage-buffer memory: under the Vulkan
        memory model (cooperative-matrix kernels) ``NonPrivatePointer``, so that the barriers'
        availability and visibility operations order it between invocations; none otherwise."""
        return (NON_PRIVATE,) if self.coop else ()

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

    def loop_open(self, control: int = 0) -> tuple[int, int]:
        """Start a loop; returns (merge, continue) ids. The caller emits the body and
        :meth:`loop_close`; :meth:`loop_exit_unless` is the loop's (only) exit. ``control``:
        the SPIR-V loop control mask (2 = DontUnroll)."""
        header, body, merge, cont = (self.b.id() for _ in range(4))
        self._headers[merge] = header
        self.b.emit("Branch", header)
        self.label(header)
        self.b.emit("LoopMerge", merge, cont, control)
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
        sbs = self.sbs = b.t_struct(rarr, key="sb")
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
        self.binding_of = {a: j for j, a in enumerate(buffers)}
        every = [ins for _, code in kernel_bodies(self.m, k) for ins in code]
        if not any(ins.mnemonic == "loop" for ins in every) and not fragment_slots(self.m, k.code):
            self.f = dataclasses.replace(self.f, loop_limit=0)  # (fragment instructions are loops: spirv_mma)
        local = any(isinstance(v, LocalAddr) for ins in every for v in ins.operands)
        if self.checked or self.f.loop_limit or (self.f.guard_local and local):
            spirv_status.declare(self)
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
        sx = self.spec_wgx = b.id()
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
        self.coop = spirv_coop.usable(self)  # wave-scope fragments as cooperative matrices
        if self.coop:
            self._shared_types = {b.t_ptr("Workgroup", self.u32), self.sb_ptr}
        self.scratch: int | None = None  # their per-wave staging area (spirv_coop.scratch)
        self.frags = spirv_mma.declare(self)  # fragment slots (spec §8.14)
        self.all_turns = self.var(self.u32, self.c(0))
        self.act = self.var(self.bool_)  # the walk's A (lowering.control); the rest of its masks: spirv_control
        self.wgx = self.push_word(self.wg_word)
        self.wgy = self.push_word(self.wg_word + 1)
        self.wgz = self.push_word(self.wg_word + 2)
        self.opaque_zero = self.shr(self.wgx, 31)  # 0: launch_dims keeps x <= the device maximum
        self.nthreads = self.op("IMul", self.u32, self.op("IMul", self.u32, self.wgx, self.wgy), self.wgz)
        if self.wave:
            sid = self.sid = self.builtin("SubgroupId", self.u32)
            lane = self.builtin("SubgroupLocalInvocationId", self.u32)
            self.lane = lane
            self.tl = self.add(self.op("IMul", self.u32, sid, self.c(W)), lane)
        else:
            self.tl = self.builtin("LocalInvocationIndex", self.u32)
            self.lane = self.op("UMod", self.u32, self.tl, self.c(W))
        inside = self.op("ULessThan", self.bool_, self.tl, self.nthreads)
        self.store(self.act, inside)  # padding invocations are never active
        self.wg_id = self.builtin("WorkgroupId", self.v3u)
        self.num_wg = self.builtin("NumWorkgroups", self.v3u)
        ControlWalk(self.m, spirv_control.Control(self), mask_stack=True).run(k.code)
        spirv_status.flush(self)  # every path reaches here: ret/halt only set flags
        b.emit("Return")
        b.emit("FunctionEnd")
        fsec = b.sec["function"]
        b.sec["function"] = fsec[:head_len] + self._vars + fsec[head_len:]
        if self.coop:  # cooperative matrices need the Vulkan memory model (SPV_KHR_cooperative_matrix)
            b.capability("VulkanMemoryModel")
            b.capability("VulkanMemoryModelDeviceScope")  # device-scope atomics, fences, status record
            b.put("memory_model", "MemoryModel", 0, 3)  # Logical, Vulkan
        else:
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
        return SpirvKernel(k.name, tuple(b.words()), tuple(buffers), tuple(push), self.wave, k.local_memory,
                           self.status is not None, self.checked, tuple(self.sites),
                           spirv_coop.SCRATCH_BYTES if self.scratch is not None else 0, self.coop)

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

# --------------------------------------------------------------------------- entry point

def translate(module: Module, wave_width: int = 32, features: VulkanFeatures = FULL_FEATURES,
              kernels: Sequence[str] | None = None, checked: bool = False) -> SpirvProgram:
    """Translate the kernels of ``module`` (all, or the named ones) to SPIR-V for subgroup size W.

    Args:
        module: a valid WAVE module.
        wave_width: W, one of 8, 16, 32, 64 (the subgroup size required for wave kernels).
        features: the device's features; kernels needing more are listed in
            ``SpirvProgram.refused`` with the instructions and reasons instead of translated.
        kernels: restrict to these kernel names.
        checked: a bounds-checked build: every device and local memory access is guarded and
            the first failure recorded in the status record (:mod:`anywave.backends.spirv_status`).

    Raises:
        VerifyError: ``module`` breaks a rule of the spec (it is verified first, once per
            module object, by the same :func:`anywave.binary.verify.verify_cached` as every backend).
        SpirvError: W not supported, or an unknown kernel name.
    """
    from anywave.binary.verify import verify_cached

    verify_cached(module)
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
        out[k.name] = _Lowering(features, module, k, wave_width, checked).lower()
    return SpirvProgram(wave_width, out, refused)
