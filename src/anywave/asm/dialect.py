"""The reference WAVE toolchain's assembly dialect, read by the same :func:`assemble`.

Programs written for the reference toolchain assemble unchanged (docs/decisions.md,
"Reference toolchain dialect"). This module is data: :data:`ALIASES` maps each reference
mnemonic onto native instruction-table records, and two helpers build the flat-memory ABI.

When a kernel is read in this dialect
    * ``.dialect reference`` (or ``.dialect native``) inside the ``.kernel`` block decides
      explicitly; otherwise
    * a kernel with **no** ``.arg`` directive is a reference kernel if it has a ``label:``
      line or uses at least one mnemonic of :data:`ALIASES` that is not also a native
      mnemonic (``iadd``, ``mov_imm``, ``device_load_u32`` ... — ``halt``, ``barrier``,
      ``if`` and the other spellings both dialects share decide nothing).
    ``.func`` blocks are always native.

The mapping onto the anywave ABI
    * arguments: ``memory: buffer u8 readwrite`` (argument 0), then ``init_r0`` ..
      ``init_r{N-1}`` scalar u32, one per declared register (``.registers N``; inferred
      from the highest register used when absent);
    * an implicit prologue ``ldarg.b32 rK, init_rK`` for every register, so "arguments are
      initial register values" holds;
    * ``Kernel.flags |= KERNEL_FLAG_FLAT``;
    * a plain register where a device address is expected means ``memory[rN]``, where a
      local address is expected ``[rN]``, where a pair/quad is expected its low register;
    * scopes may be written without the dot (``device``); cache hints ``.cached``,
      ``.uncached``, ``.streaming`` (mnemonic suffix or extra operand) are accepted and
      ignored; ``icmp.lt`` is read as ``icmp_lt`` (a dot in a reference mnemonic is an
      underscore);
    * ``label:`` starts a function: the code from a label up to the next label (or
      ``.end``) becomes a module :class:`~anywave.binary.module.Function` named after the
      label, reached by ``call label``; the kernel body ends at the first label.
      ``return`` is ``ret``.
    * native mnemonics are accepted inside reference kernels too.

Semantic choices where the reference is terse (taken from its SYCL/PTX/HIP backends):
integer ops are the wrapping i32 forms; ``imul_hi`` is signed; ``wave_reduce_min/max``
are signed (i32), ``wave_reduce_add`` and ``wave_prefix_sum`` (exclusive, like Metal's
``simd_prefix_exclusive_sum``) are u32; device/local atomic ``min``/``max`` are unsigned
(u32, HIP ``atomicMin`` on ``uint32_t``); ``fround`` is ``rint`` (ties to even); the
transcendentals map to the ``*.approx.f32`` forms; atomics default to ``.device`` scope and
``.relaxed`` order; ``fence_acquire``/``fence_release``/``fence_acq_rel`` default to
``.device`` scope; ``wait`` is ``nop``. ``wave_ballot rD, p`` maps to ``ballot.b64`` and
therefore also writes ``rD+1`` (the high half of the W-bit mask; zero when W <= 32).
``badd``/``bsub``/``bmul``/``bma`` (and the packed ``badd2``/``bmul2``/``bma2``) are the
bf16 forms of ``hadd``... (``add.bf16`` on the low 16 bits of the registers).
``mma_load_a``/``mma_load_b rX, rAddr, rStride`` load the thread's implicit 4x4 f32 A/B
fragment (fragment slots f0/f1, thread scope ``m4n4k4``) from local memory at byte ``rAddr``
with a row stride of ``rStride`` bytes; ``mma_compute rX, rY, rZ`` is C = A x B + C (f2,
``fma`` in k order); ``mma_store_c rAddr, rStride, rX`` stores C; the ``rX`` fragment
operands are ignored, as the reference's backends do. ``sr_mma_supported`` = 1,
``sr_mma_m``/``sr_mma_n``/``sr_mma_k`` = 4 (spec §3.3).
Reference mnemonics without a WAVE 1.0 equivalent (``iclamp``, ``fclamp``, ``ffract``,
``fsat``, ``bitfind``, ``bfe``, ``bfi``, ``fcmp_ord``) are reported as unknown. The list was audited
against the mnemonic table of the reference assembler (``wave-asm/src/opcodes.rs``) and the
kernels of its ``tests/ci``: every other reference mnemonic has an alias here.
"""

from __future__ import annotations

from dataclasses import dataclass

from anywave.asm.syntax import Token
from anywave.binary.module import Arg, Instruction
from anywave.isa.table import BY_MNEMONIC, INSTRUCTIONS
from anywave.isa.types import Access, ArgKind, MemoryOrder, ScalarType, Scope

#: argument names of the flat-memory ABI
FLAT_BUFFER_NAME = "memory"
INIT_REG_PREFIX = "init_r"
CACHE_HINTS = (".cached", ".uncached", ".streaming")


@dataclass(frozen=True)
class Alias:
    """How one reference mnemonic maps onto native records.

    Attributes:
        native: candidate native mnemonics, tried in order; the first whose operands parse
            wins (``mov`` is ``mov.b32`` or ``mov.sr`` by its second operand).
        order: for each native operand, the index of the reference operand it comes from
            (None: same order).
        defaults: values of trailing native operands the reference text may leave out.
    """

    native: tuple[str, ...]
    order: tuple[int, ...] | None = None
    defaults: tuple[object, ...] = ()
    #: (native operand index, value) pairs set whatever the text says (the reference's
    #: implicit MMA fragments), and reference operand indices read only to be checked as
    #: registers (operands the reference ignores)
    fixed: tuple[tuple[int, object], ...] = ()
    ignored: tuple[int, ...] = ()


_ATOMIC_DEFAULTS = (Scope.DEVICE, MemoryOrder.RELAXED)


def _build() -> dict[str, Alias]:
    table: dict[str, Alias] = {}

    def add(name: str, *native: str, order: tuple[int, ...] | None = None,
            defaults: tuple[object, ...] = (), fixed: tuple[tuple[int, object], ...] = (),
            ignored: tuple[int, ...] = ()) -> None:
        for n in native:
            if n not in BY_MNEMONIC:  # pragma: no cover - guards the table against typos
                raise AssertionError(f"alias {name!r} names unknown native mnemonic {n!r}")
        table[name] = Alias(tuple(native), order, defaults, fixed, ignored)

    # data movement
    add("mov", "mov.b32", "mov.sr")
    add("mov_sr", "mov.sr")
    add("mov_imm", "movi.b32", "movi.f32")
    # integer (wrapping i32 forms)
    for ref, native in (("iadd", "add.i32"), ("isub", "sub.i32"), ("imul", "mul.i32"),
                        ("imul_hi", "mulhi.i32"), ("umul_hi", "mulhi.u32"), ("imad", "mad.i32"),
                        ("idiv", "div.i32"), ("imod", "rem.i32"), ("udiv", "div.u32"),
                        ("umod", "rem.u32"), ("ineg", "neg.i32"), ("iabs", "abs.i32"),
                        ("imin", "min.i32"), ("imax", "max.i32"), ("umin", "min.u32"),
                        ("umax", "max.u32")):
        add(ref, native)
    # float (f32 unless the prefix says otherwise)
    for ref, native in (("fadd", "add.f32"), ("fsub", "sub.f32"), ("fmul", "mul.f32"),
                        ("fma", "fma.f32"), ("fdiv", "div.f32"), ("fneg", "neg.f32"),
                        ("fabs", "abs.f32"), ("fmin", "min.f32"), ("fmax", "max.f32"),
                        ("fsqrt", "sqrt.f32"), ("ffloor", "floor.f32"), ("fceil", "ceil.f32"),
                        ("ftrunc", "trunc.f32"), ("fround", "rint.f32"),
                        ("frsqrt", "rsqrt.approx.f32"), ("frcp", "rcp.approx.f32"),
                        ("fsin", "sin.approx.f32"), ("fcos", "cos.approx.f32"),
                        ("fexp2", "ex2.approx.f32"), ("flog2", "lg2.approx.f32"),
                        ("ftanh", "tanh.approx.f32"),
                        ("hadd", "add.f16"), ("hsub", "sub.f16"), ("hmul", "mul.f16"),
                        ("hma", "fma.f16"), ("hadd2", "add.f16x2"), ("hmul2", "mul.f16x2"),
                        ("hma2", "fma.f16x2"),
                        # bf16 counterparts of the h- family (the reference's CI kernel
                        # vector_add_bf16.wave uses badd; the rest follow its h- naming)
                        ("badd", "add.bf16"), ("bsub", "sub.bf16"), ("bmul", "mul.bf16"),
                        ("bma", "fma.bf16"), ("badd2", "add.bf16x2"), ("bmul2", "mul.bf16x2"),
                        ("bma2", "fma.bf16x2"),
                        ("dadd", "add.f64"), ("dsub", "sub.f64"), ("dmul", "mul.f64"),
                        ("dma", "fma.f64"), ("ddiv", "div.f64"), ("dsqrt", "sqrt.f64")):
        add(ref, native)
    # bitwise
    for ref, native in (("and", "and.b32"), ("or", "or.b32"), ("xor", "xor.b32"),
                        ("not", "not.b32"), ("shl", "shl.b32"), ("shr", "shr.u32"),
                        ("sar", "shr.i32"), ("bitcount", "popc.b32"), ("bitrev", "brev.b32")):
        add(ref, native)
    # comparisons: icmp (i32), ucmp (u32), fcmp (f32), every relation the table has
    for prefix, t in (("icmp", "i32"), ("ucmp", "u32"), ("fcmp", "f32")):
        for d in INSTRUCTIONS:
            if d.op == "setp" and d.type is not None and d.type.spelling == t:
                add(f"{prefix}_{d.variant}", d.mnemonic)
    add("select", "selp.b32", order=(0, 2, 3, 1))  # select rD, p, a, b  ->  selp.b32 rD, a, b, p
    # conversions: cvt_DST_SRC -> cvt.DST.SRC for every conversion the table has
    for d in INSTRUCTIONS:
        if d.op == "cvt":
            add(d.mnemonic.replace(".", "_"), d.mnemonic)
    # memory: loads (rD, rAddr), stores (rAddr, rV) -- the address comes first in both stores
    loads = {"u8": "u8", "u16": "u16", "u32": "b32", "u64": "b64", "u128": "b128",
             "i8": "i8", "i16": "i16"}
    stores = {"u8": "b8", "u16": "b16", "u32": "b32", "u64": "b64", "u128": "b128"}
    for space in ("device", "local"):
        for w, t in loads.items():
            add(f"{space}_load_{w}", f"ld.{space}.{t}")
        for w, t in stores.items():
            add(f"{space}_store_{w}", f"st.{space}.{t}")
    # atomics: with a destination -> atom, without -> red
    for op, t in (("add", "u32"), ("sub", "u32"), ("min", "u32"), ("max", "u32"), ("and", "b32"),
                  ("or", "b32"), ("xor", "b32")):
        add(f"atomic_{op}", f"atom.device.{op}.{t}", f"red.device.{op}.{t}", defaults=_ATOMIC_DEFAULTS)
        add(f"local_atomic_{op}", f"atom.local.{op}.{t}", f"red.local.{op}.{t}")
    for name in ("exchange", "exch"):
        add(f"atomic_{name}", "atom.device.exch.b32", defaults=_ATOMIC_DEFAULTS)
        add(f"local_atomic_{name}", "atom.local.exch.b32")
    add("atomic_cas", "atom.device.cas.b32", defaults=_ATOMIC_DEFAULTS)
    add("local_atomic_cas", "atom.local.cas.b32")
    add("atomic_add_f32", "atom.device.add.f32", "red.device.add.f32", defaults=_ATOMIC_DEFAULTS)
    # wave operations
    for ref, native in (("wave_shuffle", "shfl.idx.b32"), ("wave_shuffle_up", "shfl.up.b32"),
                        ("wave_shuffle_down", "shfl.down.b32"), ("wave_shuffle_xor", "shfl.xor.b32"),
                        ("wave_broadcast", "bcast.b32"), ("wave_ballot", "ballot.b64"),
                        ("wave_any", "any.pred"), ("wave_all", "all.pred"),
                        ("wave_reduce_add", "wred.add.u32"), ("wave_reduce_min", "wred.min.i32"),
                        ("wave_reduce_max", "wred.max.i32"), ("wave_prefix_sum", "wscan.excl.add.u32")):
        add(ref, native)
    # synchronisation and control
    add("fence_acquire", "fence", defaults=(Scope.DEVICE, MemoryOrder.ACQUIRE))
    add("fence_release", "fence", defaults=(Scope.DEVICE, MemoryOrder.RELEASE))
    add("fence_acq_rel", "fence", defaults=(Scope.DEVICE, MemoryOrder.ACQ_REL))
    add("wait", "nop")
    add("return", "ret")
    # MMA: the reference's per-thread 4x4 f32 fragments A, B and C are implicit; they are
    # the thread-scope m4n4k4 slots f0, f1, f2 (C starts at +0.0, as every fragment does).
    # The register the reference names for the fragment is read and ignored, as there.
    add("mma_load_a", "mma.load.a.local.m4n4k4.f32", order=(0, 1, 2), fixed=((0, 0),), ignored=(0,))
    add("mma_load_b", "mma.load.b.local.m4n4k4.f32", order=(0, 1, 2), fixed=((0, 1),), ignored=(0,))
    add("mma_compute", "mma.mma.m4n4k4.f32.f32", order=(0, 1, 2, 0), fixed=((0, 2), (1, 0), (2, 1), (3, 2)),
        ignored=(0, 1, 2))
    add("mma_store_c", "mma.store.local.m4n4k4.f32", order=(0, 2, 1), fixed=((1, 2),), ignored=(2,))
    return table


#: reference mnemonic -> native mapping (see the module docstring for the choices made)
ALIASES: dict[str, Alias] = _build()


def lookup(mnemonic: str) -> Alias | None:
    """The alias for a reference mnemonic (``icmp.lt`` is read as ``icmp_lt``), or None."""
    alias = ALIASES.get(mnemonic)
    if alias is None and "." in mnemonic:
        alias = ALIASES.get(mnemonic.replace(".", "_"))
    return alias


def strip_cache_hints(mnemonic: str, operands: list[Token]) -> tuple[str, list[Token]]:
    """Drop ``.cached``/``.uncached``/``.streaming`` from a mnemonic suffix and the operands."""
    for hint in CACHE_HINTS:
        if mnemonic.endswith(hint) and mnemonic != hint:
            mnemonic = mnemonic[: -len(hint)]
            break
    kept = [t for t in operands if t.text not in CACHE_HINTS and "." + t.text not in CACHE_HINTS]
    return mnemonic, kept


def detect(has_args: bool, has_labels: bool, mnemonics: list[str]) -> bool:
    """True if a kernel without an explicit ``.dialect`` is a reference-dialect kernel."""
    if has_args:
        return False
    if has_labels:
        return True
    for m in mnemonics:
        stripped, _ = strip_cache_hints(m, [])
        if stripped not in BY_MNEMONIC and lookup(stripped) is not None:
            return True
    return False


def flat_args(registers: int) -> list[Arg]:
    """The flat-memory ABI: ``memory`` (u8 buffer, readwrite) then ``init_r0..`` (u32)."""
    return [Arg(FLAT_BUFFER_NAME, ArgKind.BUFFER, ScalarType.U8, Access.READWRITE)] + [
        Arg(f"{INIT_REG_PREFIX}{k}", ArgKind.SCALAR, ScalarType.U32, Access.READ) for k in range(registers)]


def flat_prologue(registers: int) -> list[Instruction]:
    """``ldarg.b32 rK, init_rK`` for every register (argument index K + 1)."""
    return [Instruction.make("ldarg.b32", k, k + 1) for k in range(registers)]
