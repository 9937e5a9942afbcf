"""The in-memory form of a WAVE module: kernels, their ABI, functions and instructions.

A :class:`Module` is what the assembler and compiler produce, what ``.wbin`` files store
(:mod:`anywave.binary.wbin`), and what the emulator and backends consume. Instruction
operands are plain values whose Python type follows the operand kind
(:data:`OPERAND_VALUE_TYPES`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from anywave.errors import SourceLoc
from anywave.isa.table import BY_MNEMONIC, InstrDef, Operand
from anywave.isa.types import Access, ArgKind, Capability, MemoryOrder, ScalarType, Scope, SpecialRegister

#: the base WAVE version (major, minor): the default of a :class:`Module`, and the version of every
#: module that uses no later instruction (docs/spec.md §1.4)
FORMAT_VERSION = (1, 0)
#: every WAVE version this toolchain reads and writes, oldest first. 1.1 adds ``barrier.wave``
#: (docs/spec.md §7.10); a module is written as the lowest version its instructions allow, so a
#: module without them keeps the bytes it had under 1.0.
FORMAT_VERSIONS = ((1, 0), (1, 1))
#: the newest version this toolchain implements
LATEST_VERSION = FORMAT_VERSIONS[-1]


@dataclass(frozen=True)
class Pred:
    """A source predicate operand or guard: ``pN`` or ``!pN``."""

    index: int
    negated: bool = False

    def __str__(self) -> str:
        return ("!" if self.negated else "") + f"p{self.index}"


@dataclass(frozen=True)
class DeviceAddr:
    """``buffer[rOffset + offset]``: byte ``r[reg] + offset`` of buffer argument ``buffer``.

    For the 64-bit form (``DADDR64``) ``reg`` names the low register of a pair."""

    buffer: int
    reg: int
    offset: int = 0


@dataclass(frozen=True)
class LocalAddr:
    """``[rOffset + offset]``: byte ``r[reg] + offset`` of the workgroup's local memory."""

    reg: int
    offset: int = 0


OperandValue = int | Pred | DeviceAddr | LocalAddr | SpecialRegister | Scope | MemoryOrder

#: the Python type of an operand's value, by operand kind
OPERAND_VALUE_TYPES: dict[Operand, type] = {
    Operand.RD: int, Operand.RS: int, Operand.RD64: int, Operand.RS64: int,
    Operand.RD128: int, Operand.RS128: int, Operand.PD: int, Operand.PS: Pred,
    Operand.IMM32: int, Operand.IMM64: int, Operand.SREG: SpecialRegister, Operand.ARG: int,
    Operand.DADDR: DeviceAddr, Operand.DADDR64: DeviceAddr, Operand.LADDR: LocalAddr,
    Operand.SCOPE: Scope, Operand.ORDER: MemoryOrder, Operand.FUNC: int,
    Operand.FD: int, Operand.FS: int,
}


@dataclass(frozen=True)
class Instruction:
    """One instruction: its table record, operand values in assembly order, an optional
    guard predicate (``@p0``/``@!p0``) and an optional source location (debug table)."""

    defn: InstrDef
    operands: tuple[OperandValue, ...] = ()
    guard: Pred | None = None
    loc: SourceLoc | None = None

    @property
    def mnemonic(self) -> str:
        return self.defn.mnemonic

    @classmethod
    def make(cls, mnemonic: str, *operands: OperandValue, guard: Pred | None = None,
             loc: SourceLoc | None = None) -> Instruction:
        """Build from a native mnemonic; raises KeyError for an unknown one."""
        return cls(BY_MNEMONIC[mnemonic], tuple(operands), guard, loc)

    def __eq__(self, other: object) -> bool:  # the location is metadata, not identity
        if not isinstance(other, Instruction):
            return NotImplemented
        return (self.defn is other.defn and self.operands == other.operands
                and self.guard == other.guard)

    def __hash__(self) -> int:
        return hash((self.defn.opcode, self.operands, self.guard))


@dataclass
class Arg:
    """One kernel argument of the ABI.

    ``type`` is the element type for buffers and the value type for scalars; scalars are
    always ``Access.READ``. ``constant`` (WAVE 1.1, docs/spec.md §12): a ``read`` buffer the
    target may place in constant/uniform memory; the launch's constant buffers total at most
    ``LIMITS.max_constant_bytes``. It changes no result."""

    name: str
    kind: ArgKind
    type: ScalarType
    access: Access = Access.READ
    constant: bool = False

    @property
    def is_buffer(self) -> bool:
        return self.kind is ArgKind.BUFFER


#: kernel flag: assembled from the reference toolchain's flat-memory dialect
KERNEL_FLAG_FLAT = 1 << 0
#: kernel flag: the producer (the compiler) established that the kernel's results do not
#: depend on the wave width W (docs/spec.md §14.3). Absent means "may depend on W", so
#: files written before the flag existed keep their (conservative) meaning.
KERNEL_FLAG_W_INVARIANT = 1 << 1

#: name of the hidden buffer argument (u32, readwrite) that ``aw.print`` records go to; it is
#: the kernel's last argument and the launch supplies it (see :mod:`anywave.compiler.debugprint`)
PRINT_ARG = "_aw_print"


@dataclass(frozen=True)
class PrintFormat:
    """One ``aw.print`` call site of a kernel: its format string (Python ``str.format``
    syntax, one ``{}`` field per value) and the ABI types of the values it records.

    Attributes:
        format: the format string as written in the kernel.
        types: value types, in order; each is stored as one 32-bit word (64-bit types: two).
        where: ``file:line`` of the call (for messages), or "".
    """

    format: str
    types: tuple[ScalarType, ...] = ()
    where: str = ""


@dataclass
class Kernel:
    """A kernel: its ABI and code.

    Attributes:
        name: entry-point name, unique in the module.
        args: ABI in launch order.
        registers: 32-bit GPRs used (r0 .. r{registers-1}), 1..255.
        local_memory: bytes of local memory per workgroup.
        workgroup_size: required (x, y, z), or None if any size is allowed.
        max_workgroup_size: largest x*y*z the kernel supports, or None.
        capabilities: capabilities the kernel uses.
        code: instructions of the body.
        flags: ``KERNEL_FLAG_*`` bits.
        prints: the ``aw.print`` call sites, by record index (the kernel's last argument is
            then the hidden :data:`PRINT_ARG` buffer).
    """

    name: str
    args: list[Arg] = field(default_factory=list)
    registers: int = 1
    local_memory: int = 0
    workgroup_size: tuple[int, int, int] | None = None
    max_workgroup_size: int | None = None
    capabilities: Capability = Capability.NONE
    code: list[Instruction] = field(default_factory=list)
    flags: int = 0
    prints: list[PrintFormat] = field(default_factory=list)

    def arg(self, name: str) -> Arg:
        for a in self.args:
            if a.name == name:
                return a
        raise KeyError(f"kernel {self.name!r} has no argument {name!r}; its arguments are "
                       f"{[a.name for a in self.args]}")


@dataclass
class Function:
    """A device function reached by ``call``. It runs on the caller's registers."""

    name: str
    code: list[Instruction] = field(default_factory=list)


@dataclass
class Module:
    """A WAVE module: kernels and the functions they call (``call`` operands index
    ``functions``)."""

    kernels: list[Kernel] = field(default_factory=list)
    functions: list[Function] = field(default_factory=list)
    version: tuple[int, int] = FORMAT_VERSION

    def kernel(self, name: str) -> Kernel:
        for k in self.kernels:
            if k.name == name:
                return k
        raise KeyError(f"module has no kernel {name!r}; its kernels are "
                       f"{[k.name for k in self.kernels]}")


def version_text(v: Sequence[int]) -> str:
    """``(1, 1)`` -> ``"1.1"``."""
    return ".".join(str(int(x)) for x in v)


def required_version(module: Module) -> tuple[int, int]:
    """The lowest WAVE version that has every instruction and argument kind of ``module``: the
    largest ``InstrDef.since`` of its kernels' and functions' instructions, 1.1 for a constant
    buffer argument, at least :data:`FORMAT_VERSION` (docs/spec.md §1.4). Instructions are read
    through ``defn``; anything else in a code list is skipped (unverified modules are walked
    safely)."""
    need = FORMAT_VERSION
    if any(getattr(a, "constant", False) for k in module.kernels for a in getattr(k, "args", ())):
        need = (1, 1)
    for body in [k.code for k in module.kernels] + [f.code for f in module.functions]:
        for ins in body:
            since = getattr(getattr(ins, "defn", None), "since", FORMAT_VERSION)
            if since > need:
                need = since
    return need


def version_problem(module: Module) -> str | None:
    """Why ``module.version`` cannot be written or read, or None: an unknown version, or one below
    :func:`required_version` (a module declaring 1.0 that uses a 1.1 instruction)."""
    v = tuple(module.version)
    if v not in FORMAT_VERSIONS:
        return (f"module format version {version_text(v)} is not supported; this toolchain implements "
                f"{', '.join(version_text(x) for x in FORMAT_VERSIONS)}")
    need = required_version(module)
    if v < need:
        first = next((ins.mnemonic for body in [k.code for k in module.kernels] + [f.code for f in module.functions]
                      for ins in body if getattr(getattr(ins, "defn", None), "since", FORMAT_VERSION) > v),
                     "a constant buffer argument")
        return (f"module declares WAVE {version_text(v)} but uses {first}, an instruction of WAVE "
                f"{version_text(need)} (docs/spec.md §1.4): declare .version {version_text(need)}")
    return None


def settle_version(module: Module) -> Module:
    """Set ``module.version`` to :func:`required_version` when it is lower (what a producer -- the
    compiler, the assembler without a ``.version`` directive -- does once a module is built);
    returns the module."""
    need = required_version(module)
    if tuple(module.version) < need:
        module.version = need
    return module


# ----------------------------------------------------------------------------- W-dependence

#: special registers whose value depends on W (docs/spec.md §2.4)
W_DEPENDENT_REGISTERS = frozenset({SpecialRegister.LANE_ID, SpecialRegister.WAVE_ID,
                                   SpecialRegister.WAVE_WIDTH, SpecialRegister.NUM_WAVES})


def kernel_bodies(module: Module, kernel: Kernel) -> list[tuple[str, list[Instruction]]]:
    """The code a kernel runs: ``(owner, code)`` for the kernel itself, then each function it
    reaches through ``call`` (directly or not), once each, in the order of
    :func:`reachable_functions`; owner reads ``kernel 'k'`` or ``function 'f'`` for messages."""
    bodies = [(f"kernel {kernel.name!r}", kernel.code)]
    for f in reachable_functions(module.functions, kernel.code):
        bodies.append((f"function {module.functions[f].name!r}", module.functions[f].code))
    return bodies


def reachable_functions(functions: Sequence[Any], code: Sequence[Any]) -> list[int]:
    """Indices into ``functions`` of every function that ``code`` reaches through ``call``,
    directly or not, once each (a call cycle ends the walk; it does not loop).

    The one reachable-code walk of the toolchain (the verifier, the assembler, ``anywave
    info`` and the backends' capability checks use it through :func:`kernel_bodies` or
    directly). ``functions`` are objects with a ``code`` sequence (``Function``, or the
    assembler's units); instructions are objects with ``defn`` and ``operands``. A ``call``
    that is malformed (not exactly one int operand) or names no function
    (``0 <= index < len(functions)``) is skipped, so unverified modules are walked safely.
    Order: the instructions are taken last first, each reached function's code pushed on
    the same stack (a fixed, deterministic order; sort the result for index order).
    """
    n = len(functions)
    seen: set[int] = set()
    out: list[int] = []
    stack = list(code)
    while stack:
        ins = stack.pop()
        if getattr(getattr(ins, "defn", None), "op", None) != "call":
            continue
        ops = getattr(ins, "operands", None)
        if not isinstance(ops, (tuple, list)) or len(ops) != 1:
            continue
        f = ops[0]
        if type(f) is int and 0 <= f < n and f not in seen:
            seen.add(f)
            out.append(f)
            stack += functions[f].code
    return out


def w_dependent_uses(module: Module, kernel: Kernel) -> list[str]:
    """The instructions through which ``kernel`` (and the functions it calls) can observe
    the wave width W (docs/spec.md §2.4): wave operations, ``mma`` and reads of
    ``sr_lane_id``/``sr_wave_id``/``sr_wave_width``/``sr_num_waves``. One line per distinct
    use (mnemonic, and source location when known); empty when the code cannot observe W."""
    from anywave.isa.table import Category, Flag

    out: dict[str, None] = {}
    seen: set[int] = set()
    bodies = [kernel.code]
    while bodies:
        for ins in bodies.pop():
            cat = ins.defn.category
            what = None
            if cat in (Category.WAVE, Category.MMA) or ins.defn.flags & Flag.WAVE_COLLECTIVE:
                what = ins.mnemonic
            elif any(isinstance(o, SpecialRegister) and o in W_DEPENDENT_REGISTERS for o in ins.operands):
                sr = next(o for o in ins.operands if isinstance(o, SpecialRegister))
                what = f"{ins.mnemonic} {sr.spelling}"
            elif ins.mnemonic == "call":
                f = next((o for o in ins.operands if isinstance(o, int)), None)
                if f is not None and f not in seen and 0 <= f < len(module.functions):
                    seen.add(f)
                    bodies.append(module.functions[f].code)
            if what is not None:
                where = f" ({ins.loc})" if ins.loc is not None else ""
                out[what + where] = None
    return list(out)


def w_invariant(module: Module, kernel: Kernel) -> bool:
    """Whether ``kernel``'s results are the same at every W: declared by its producer
    (:data:`KERNEL_FLAG_W_INVARIANT`, set by the compiler for kernels whose only
    W-observing code is the W-invariant library collectives) or evident from its code (no
    instruction of :func:`w_dependent_uses`)."""
    return bool(kernel.flags & KERNEL_FLAG_W_INVARIANT) or not w_dependent_uses(module, kernel)
