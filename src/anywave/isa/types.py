"""WAVE value types, special registers, memory scopes/orders and capabilities.

Every enumeration here is part of the binary format: the integer values are what
``.wbin`` files store (docs/spec.md, "Binary encoding"), so existing values never change;
new members are appended.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class ScalarType(enum.IntEnum):
    """Element/value types. ``bits`` is the storage width; packed x2 types hold two halves."""

    B8 = 1
    U8 = 2
    I8 = 3
    B16 = 4
    U16 = 5
    I16 = 6
    B32 = 7
    U32 = 8
    I32 = 9
    B64 = 10
    U64 = 11
    I64 = 12
    F16 = 13
    BF16 = 14
    F32 = 15
    F64 = 16
    F16X2 = 17
    BF16X2 = 18
    B128 = 19
    PRED = 20

    @property
    def spelling(self) -> str:
        """The name used in mnemonics and `.arg` directives (``f32``, ``bf16x2`` ...)."""
        return self.name.lower()

    @property
    def bits(self) -> int:
        return _BITS[self]

    @property
    def nbytes(self) -> int:
        return max(1, self.bits // 8)

    @property
    def is_float(self) -> bool:
        return self in (ScalarType.F16, ScalarType.BF16, ScalarType.F32, ScalarType.F64,
                        ScalarType.F16X2, ScalarType.BF16X2)

    @property
    def is_signed(self) -> bool:
        return self in (ScalarType.I8, ScalarType.I16, ScalarType.I32, ScalarType.I64)

    @property
    def is_packed(self) -> bool:
        return self in (ScalarType.F16X2, ScalarType.BF16X2)

    @property
    def regs(self) -> int:
        """Number of consecutive 32-bit registers a value of this type occupies."""
        return max(1, self.bits // 32)

    @classmethod
    def parse(cls, text: str) -> ScalarType:
        try:
            return _BY_SPELLING[text.lower()]
        except KeyError:
            valid = ", ".join(sorted(_BY_SPELLING))
            raise ValueError(f"unknown type {text!r}; expected one of: {valid}") from None


_BITS = {
    ScalarType.B8: 8, ScalarType.U8: 8, ScalarType.I8: 8,
    ScalarType.B16: 16, ScalarType.U16: 16, ScalarType.I16: 16,
    ScalarType.B32: 32, ScalarType.U32: 32, ScalarType.I32: 32,
    ScalarType.B64: 64, ScalarType.U64: 64, ScalarType.I64: 64,
    ScalarType.F16: 16, ScalarType.BF16: 16, ScalarType.F32: 32, ScalarType.F64: 64,
    ScalarType.F16X2: 32, ScalarType.BF16X2: 32, ScalarType.B128: 128, ScalarType.PRED: 1,
}
_BY_SPELLING = {t.spelling: t for t in ScalarType}

#: Element types a buffer argument may declare (the ABI's ``elem`` field).
BUFFER_TYPES = (
    ScalarType.U8, ScalarType.I8, ScalarType.U16, ScalarType.I16, ScalarType.U32,
    ScalarType.I32, ScalarType.U64, ScalarType.I64, ScalarType.F16, ScalarType.BF16,
    ScalarType.F32, ScalarType.F64,
)
#: Types a scalar (by-value) argument may declare. 16-bit floats travel in the low half
#: of a 32-bit slot; 64-bit types occupy a register pair (``ldarg.b64``).
SCALAR_ARG_TYPES = (
    ScalarType.U32, ScalarType.I32, ScalarType.F32, ScalarType.F16, ScalarType.BF16,
    ScalarType.U64, ScalarType.I64, ScalarType.F64,
)


class SpecialRegister(enum.IntEnum):
    """Read-only per-thread values (docs/spec.md, "Special registers").

    The first sixteen keep the order of the reference WAVE toolchain so its programs'
    ``mov_sr`` operands mean the same thing.
    """

    THREAD_ID_X = 0
    THREAD_ID_Y = 1
    THREAD_ID_Z = 2
    WAVE_ID = 3
    LANE_ID = 4
    WORKGROUP_ID_X = 5
    WORKGROUP_ID_Y = 6
    WORKGROUP_ID_Z = 7
    WORKGROUP_SIZE_X = 8
    WORKGROUP_SIZE_Y = 9
    WORKGROUP_SIZE_Z = 10
    GRID_SIZE_X = 11  # in workgroups
    GRID_SIZE_Y = 12
    GRID_SIZE_Z = 13
    WAVE_WIDTH = 14
    NUM_WAVES = 15  # waves in this workgroup
    GLOBAL_ID_X = 16  # workgroup_id * workgroup_size + thread_id (u32, wrapping)
    GLOBAL_ID_Y = 17
    GLOBAL_ID_Z = 18
    THREAD_LINEAR_ID = 19  # x + y*sx + z*sx*sy within the workgroup
    # MMA queries (docs/spec.md §3.3, §8.14; the reference toolchain's names)
    MMA_SUPPORTED = 20  # 1: the target runs the MMA instructions (every conformant target with mma)
    MMA_M = 21  # the thread-scope fragment shape m4n4k4: 4, 4, 4
    MMA_N = 22
    MMA_K = 23

    @property
    def spelling(self) -> str:
        return "sr_" + self.name.lower()


class Scope(enum.IntEnum):
    """Memory-ordering scope: which threads an atomic or fence synchronises with."""

    WAVE = 0
    WORKGROUP = 1
    DEVICE = 2
    SYSTEM = 3

    @property
    def spelling(self) -> str:
        return "." + self.name.lower()


class MemoryOrder(enum.IntEnum):
    """C++/SPIR-V style memory orders for atomics and fences."""

    RELAXED = 0
    ACQUIRE = 1
    RELEASE = 2
    ACQ_REL = 3
    SEQ_CST = 4

    @property
    def spelling(self) -> str:
        return "." + self.name.lower()


class Capability(enum.IntFlag):
    """Optional features a kernel may use and a target may lack (docs/spec.md, "Capabilities")."""

    NONE = 0
    F16 = 1 << 0
    BF16 = 1 << 1
    F64 = 1 << 2
    INT64 = 1 << 3
    WAVE_OPS = 1 << 4
    ATOMIC_F32 = 1 << 5
    MMA = 1 << 6
    OFFSET64 = 1 << 7  # device addresses with a 64-bit offset register pair
    MMA_ACC = 1 << 8  # accumulator row/element operations and mma.group.bt (docs/spec.md §8.14)

    @classmethod
    def names(cls) -> dict[str, Capability]:
        return {m.name.lower(): m for m in cls if m.name and m is not cls.NONE}

    def spellings(self) -> list[str]:
        return [name for name, m in Capability.names().items() if m & self]


class ArgKind(enum.IntEnum):
    BUFFER = 0
    SCALAR = 1


class Access(enum.IntEnum):
    READ = 1
    WRITE = 2
    READWRITE = 3

    @property
    def spelling(self) -> str:
        return self.name.lower()


@dataclass(frozen=True)
class Limits:
    """Architectural limits every WAVE 1.0 binary must respect (docs/spec.md, "Limits")."""

    max_registers: int = 255
    num_predicates: int = 8
    wave_widths: tuple[int, ...] = (8, 16, 32, 64)
    #: minimum every conformant target provides; a target may report more
    min_local_memory: int = 32 * 1024
    min_max_workgroup_size: int = 256
    max_call_depth: int = 16
    max_control_nesting: int = 64
    #: instructions of a kernel with every call replaced by the callee's body, recursively
    #: (bounds what an inlining backend emits and the calls a launch makes without loops)
    max_inlined_instructions: int = 1 << 17
    #: bytes of a launch's constant buffers in all (WAVE 1.1, docs/spec.md §12): what every
    #: target's constant/uniform memory holds (CUDA's and OpenCL's minimum, 64 KiB)
    max_constant_bytes: int = 64 * 1024


LIMITS = Limits()
